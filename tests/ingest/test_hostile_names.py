"""Names from files never shape a path: hostile node/device/job/target names are kept as data.

Node, device, port, job, pool and target names come from the input. In the lake they are only
ever column values: partition directories come from dates and part names from hashes
(``lake.PART_PATH``). So ``../../etc``, ``/etc/passwd``, NUL bytes or a 10 kB name are stored as
they are (text that is not UTF-8 is stored with the bad bytes escaped) in the right date
partition, and queries find them by value. Links that lead out of the raw directory are not
read, and a damaged journal cannot make a rollback delete outside the lake.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import polars as pl
import pytest

from ckptwatch.ingest.run import ingest
from ckptwatch.lake import derived
from ckptwatch.lake import store as lake_module
from ckptwatch.lake.query import connect, run_sql
from ckptwatch.lake.schema import TABLES
from ckptwatch.lake.store import PART_PATH, Lake

HOSTILE = [
    "../../etc", "../../../../../../etc/passwd", "/etc/passwd", "/", "..", ".", "a/b/../../c",
    "n0\x00evil", "x" * 256, "date=1999-01-01", "part-0000.parquet", "C:\\Windows\\x",
    "%2e%2e%2f%2e%2e", "line\nbreak", "tab\tname", " spaced ", "$(touch /tmp/pwned)",
    "'; drop table checkpoint_writes; --", "\u202eevil\u202c", "ノード", "*", "?", "[a-z]",
    "~root", "-rf",
]
#: (``"x" * 256``: the longest name ``max_field_chars`` admits; a longer one is quarantined,
#: ``tests/ingest/test_limits.py``.)
#: Text columns are trimmed of outer white space (``coerce.string_expr``); nothing else changes.
STORED = sorted(n.strip() for n in HOSTILE)
#: Names whose code points UTF-8 cannot store (a JSON "\ud800" escape): kept, escaped.
UNSTORABLE = {"bad\ud800name": "bad\\ud800name", "\udcff": "\\xff"}


@pytest.fixture
def written_paths(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[Path]]:
    """Every path the lake writes, recorded as the writes happen."""
    seen: list[Path] = []
    for name in ("atomic_write_table", "atomic_write_bytes"):
        real = getattr(lake_module, name)

        def spy(path: Path, data: object, _real=real) -> None:  # type: ignore[no-untyped-def]
            seen.append(Path(path))
            _real(path, data)

        monkeypatch.setattr(lake_module, name, spy)
    yield seen


def _checkpoint(name: str, rank: int) -> dict[str, object]:
    return {"job_id": name, "step": 1, "rank": rank, "node": name, "tier": "pool",
            "target": name, "start_time": "2026-11-28T10:00:00Z",
            "end_time": "2026-11-28T10:00:05Z", "bytes": 100}


def _raw_with_names(root: Path, names: list[str], *, json_only: bool = False) -> Path:
    """The same hostile names in every input shape: canonical JSONL, CSV, Parquet and
    envelopes (``json_only``: the JSON shapes, the only ones that can carry lone surrogates)."""
    raw = root / "raw"
    for d in ("checkpoints", "fabric", "pool", "smart/host"):
        (raw / d).mkdir(parents=True)
    (raw / "checkpoints" / "c.jsonl").write_text(
        "\n".join(json.dumps(_checkpoint(n, i)) for i, n in enumerate(names)) + "\n")
    envs = [{"node": n, "device": n, "port": n, "collected_at": "2026-11-28T10:00:00Z",
             "source": "ethtool", "output": "NIC statistics:\n     rx_bytes: 5\n"} for n in names]
    (raw / "smart" / "host" / "env.jsonl").write_text(
        "\n".join(json.dumps(e) for e in envs) + "\n")
    if json_only:
        return raw
    frame = pl.DataFrame({"ts": ["2026-11-28T10:00:00Z"] * len(names), "pool": names,
                          "target": names, "metric": ["gc_active"] * len(names),
                          "value": [1.0] * len(names)})
    frame.write_csv(raw / "pool" / "p.csv")
    fabric = pl.DataFrame({"ts": ["2026-11-28T10:00:00Z"] * len(names), "node": names,
                           "device": names, "port": names, "counter": names,
                           "value": [float(i) for i in range(len(names))]})
    fabric.write_parquet(raw / "fabric" / "f.parquet")
    return raw


def _assert_layout(lake: Path, dates: set[str]) -> None:
    """Only the lake's own layout exists: tables, date partitions, hashed part names."""
    for path in lake.rglob("*"):
        rel = path.relative_to(lake).as_posix()
        if rel.startswith("derived/"):  # the stored counter deltas (lake.derived): a table
            rel = rel.removeprefix("derived/")
        top = rel.split("/")[0]
        if path.is_dir():
            assert top in TABLES or top in ("_manifest", "_inflight", derived.DERIVED_DIR,
                                            derived.DELTAS, derived.SERIES, derived.STATE), rel
            if "/" in rel:
                assert rel.split("/", 1)[1] in {f"date={d}" for d in dates | {"1970-01-01"}}
        else:
            assert (PART_PATH.fullmatch(rel) or rel == ".lock"
                    or rel.endswith("/date=1970-01-01/part-schema.parquet")
                    or (top == "_manifest" and rel.endswith(".json"))), rel


def test_hostile_names_are_data_in_the_right_partition(tmp_path: Path,
                                                       written_paths: list[Path]) -> None:
    raw = _raw_with_names(tmp_path, HOSTILE)
    before = sorted(p.name for p in tmp_path.iterdir())
    report = ingest(raw, tmp_path / "lake")
    assert report.quarantined == 0, [f for f in report.files if f.quarantined]
    n = len(HOSTILE)
    assert report.rows["checkpoint_writes"] == n and report.rows["pool_metrics"] == n
    # every write landed inside the lake, under a name the lake chose
    lake_root = (tmp_path / "lake").resolve()
    assert written_paths and all(p.resolve().is_relative_to(lake_root) for p in written_paths)
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([*before, "lake"])
    _assert_layout(tmp_path / "lake", {"2026-11-28"})
    lake = Lake(tmp_path / "lake")
    cw = lake.read("checkpoint_writes")
    for col in ("node", "job_id", "target"):  # exact values, 10 kB and NUL included
        assert sorted(cw[col]) == STORED, col
    fabric = lake.read("fabric_counters")
    for col in ("node", "device", "port", "counter"):
        assert set(STORED) <= set(fabric[col]), col
    assert sorted(lake.read("pool_metrics")["pool"]) == STORED


def test_queries_find_hostile_names_by_value(tmp_path: Path) -> None:
    raw = _raw_with_names(tmp_path, HOSTILE)
    ingest(raw, tmp_path / "lake")
    con = connect(tmp_path / "lake")
    for name in STORED:
        got = run_sql(con, "select count(*) as n from stg_checkpoint_writes where node = ? "
                           "and job_id = ?", [name, name])
        assert got["n"][0] == 1, name[:40]
    total = run_sql(con, "select count(distinct node) as n from checkpoint_writes")
    assert total["n"][0] == len(HOSTILE)
    con.close()


def test_unstorable_text_is_kept_escaped(tmp_path: Path) -> None:
    raw = _raw_with_names(tmp_path, list(UNSTORABLE), json_only=True)
    report = ingest(raw, tmp_path / "lake")
    assert report.quarantined == 0
    lake = Lake(tmp_path / "lake")
    assert sorted(lake.read("checkpoint_writes")["node"]) == sorted(UNSTORABLE.values())
    assert set(UNSTORABLE.values()) <= set(lake.read("fabric_counters")["device"])


def test_hostile_directory_and_file_names(tmp_path: Path) -> None:
    """Names the file system allows (newlines, 255 bytes, bytes that are not UTF-8) become the
    ``source_file`` and ``node`` values, escaped where needed; nothing crashes."""
    raw = tmp_path / "raw"
    weird_node = os.fsdecode(b"node\xff\n-rf " + b"y" * 200)
    (raw / "smart" / weird_node).mkdir(parents=True)
    (raw / "smart" / weird_node / "eth0_20261128T100000Z.txt").write_text(
        "NIC statistics:\n     rx_bytes: 5\n")
    (raw / "pool").mkdir()
    long_name = "p" * 250 + ".csv"
    (raw / "pool" / long_name).write_text(
        "ts,pool,target,metric,value\n2026-11-28T10:00:00Z,p,t,gc_active,1\n")
    (raw / "pool" / os.fsdecode(b"\xfe;rm -rf ~.csv")).write_text(
        "ts,pool,target,metric,value\n2026-11-28T10:00:00Z,p,t2,gc_active,1\n")
    report = ingest(raw, tmp_path / "lake")
    assert report.rows == {"fabric_counters": 1, "pool_metrics": 2}
    lake = Lake(tmp_path / "lake")
    assert lake.read("fabric_counters")["node"].to_list() == [
        "node\\xff\n-rf " + "y" * 200]
    assert sorted(lake.read("pool_metrics")["source_file"]) == sorted(
        ["pool/\\xfe;rm -rf ~.csv", f"pool/{long_name}"])
    _assert_layout(tmp_path / "lake", {"2026-11-28"})
    assert ingest(raw, tmp_path / "lake").count("skipped") == 3  # the keys are stable


def test_dates_alone_shape_partitions(tmp_path: Path) -> None:
    """A name that looks like a partition stays a value; the record's date decides."""
    raw = tmp_path / "raw" / "checkpoints"
    raw.mkdir(parents=True)
    rows = [{**_checkpoint("date=1999-01-01/../../x", 0),
             "start_time": "2026-03-01T23:59:59-05:00", "end_time": "2026-03-02T05:00:01Z"},
            {**_checkpoint("date=1999-01-01/../../x", 1)}]
    (raw / "c.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    ingest(tmp_path / "raw", tmp_path / "lake")
    parts = sorted(p.name for p in (tmp_path / "lake" / "checkpoint_writes").iterdir())
    assert parts == ["date=1970-01-01", "date=2026-03-02", "date=2026-11-28"]
    _assert_layout(tmp_path / "lake", {"2026-03-02", "2026-11-28"})


def test_links_out_of_the_raw_dir_are_not_read(tmp_path: Path) -> None:
    secret = tmp_path / "secret.csv"
    secret.write_text("ts,pool,target,metric,value\n2026-11-28T10:00:00Z,TOPSECRET,t,m,1\n")
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (outside / "x.csv").write_text(secret.read_text())
    raw = tmp_path / "raw" / "pool"
    raw.mkdir(parents=True)
    (raw / "link.csv").symlink_to(secret)
    (raw / "dirlink").symlink_to(outside)
    (raw / "inside.csv").write_text(secret.read_text().replace("TOPSECRET", "ok"))
    (raw / "alias.csv").symlink_to(raw / "inside.csv")  # a link inside the raw dir is read
    os.mkfifo(raw / "pipe.csv")  # reading it would block the run forever
    report = ingest(tmp_path / "raw", tmp_path / "lake", lock_wait_s=5)
    lake = Lake(tmp_path / "lake")
    assert lake.read("pool_metrics")["pool"].to_list() == ["ok"]  # alias.csv is a copy
    status = {f.rel: f.status for f in report.files}
    assert (status["pool/alias.csv"], status["pool/inside.csv"]) == ("ingested", "skipped")
    q = lake.read("quarantine").sort("source_file")
    assert q.select("source_file", "reason").rows() == [
        ("pool/dirlink", f"symbolic link to '{outside}', outside the raw directory: not read "
                         "(copy the file in if it is telemetry)"),
        ("pool/link.csv", f"symbolic link to '{secret}', outside the raw directory: not read "
                          "(copy the file in if it is telemetry)"),
        ("pool/pipe.csv", "not a regular file (a FIFO, socket or device): not read"),
    ]
    for table in TABLES:
        for col, dtype in lake.read(table).schema.items():
            if dtype == pl.String:
                assert not lake.read(table)[col].str.contains("TOPSECRET").any()


def test_damaged_journal_cannot_delete_outside_the_lake(tmp_path: Path) -> None:
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me")
    lake = Lake(tmp_path / "lake")
    lake.init()
    inside = tmp_path / "lake" / "pool_metrics" / "date=2026-11-28"
    inside.mkdir(parents=True)
    part = inside / "part-0123456789abcdef-0123456789ab.parquet"
    part.write_bytes(b"half")
    (tmp_path / "lake" / "_inflight" / "k.json").write_text(json.dumps({"key": "k", "parts": [
        "../victim.txt", str(victim), "pool_metrics/../../victim.txt", 7, None,
        "pool_metrics/date=2026-11-28/part-0123456789abcdef-0123456789ab.parquet"]}))
    assert lake.recover() == 1
    assert victim.read_text() == "keep me"
    assert not part.exists()
    assert not list((tmp_path / "lake" / "_inflight").iterdir())
