"""``--pool-format``: the simulated pool as Lustre, DAOS, SPDK and Storage Scale report it
(issue 44, item 6): the same day and truth as the long CSV, the targets under the system's
names, each tool's text laid out as the genuine samples in ``tests/fixtures/real/
pool_telemetry/``, read by the readers with nothing quarantined; Lustre with no GC signal at
all, its metadata on the MDT; one statistics clear a day, read as a counter reset."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from ckptwatch.ingest.run import IngestReport, ingest
from ckptwatch.simulate.config import POOL_FORMATS
from ckptwatch.simulate.evaluation import EvalReport
from ckptwatch.simulate.scenario import simulate
from ckptwatch.sources import load_all
from ckptwatch.sources.base import ToolContext, detect_tool
from ckptwatch.sources.lustre import parse_lctl

load_all()

SEED = 10
DAY = {"nodes": 4, "hours": 2.0}
REAL = Path(__file__).parents[1] / "fixtures" / "real" / "pool_telemetry"
#: A stats line of lctl: the name padded to 25 characters, a space, the count.
LCTL_STAT = re.compile(r"(?P<name>\S+) +(?P<n>\d+) samples \[(?P<unit>[^\]]+)\]( -?\d+){4}")


@pytest.fixture(scope="module")
def days(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The same seed with every pool format (4 nodes, 2 h: one stats clear)."""
    root = tmp_path_factory.mktemp("pool-formats")
    for fmt in POOL_FORMATS:
        simulate(root / fmt, SEED, pool_format=fmt, **DAY)  # type: ignore[arg-type]
    return {fmt: root / fmt for fmt in POOL_FORMATS}


@pytest.fixture(scope="module")
def lakes(days: dict[str, Path],
          tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Path, IngestReport]]:
    root = tmp_path_factory.mktemp("pool-lakes")
    return {fmt: (root / fmt, ingest(raw, root / fmt)) for fmt, raw in days.items()}


def _labels(raw: Path) -> dict[str, Any]:
    labels: dict[str, Any] = json.loads((raw / "labels.json").read_text())
    return labels


def _records(raw: Path) -> dict[str, pl.DataFrame]:
    out = {}
    for path in sorted((raw / "checkpoints").iterdir()):
        out[path.name] = (pl.read_csv(path, infer_schema_length=0) if path.suffix == ".csv"
                          else pl.read_ndjson(path))
    return out


def _envelopes(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_every_pool_format_keeps_the_day_and_renames_only_the_targets(
        days: dict[str, Path]) -> None:
    base = _labels(days["csv"])
    base_records = _records(days["csv"])
    for fmt in POOL_FORMATS[1:]:
        labels = _labels(days[fmt])
        names = dict(zip(base["pool"]["targets"], labels["pool"]["targets"], strict=True))
        assert labels["pool"]["format"] == fmt and len(set(names.values())) == len(names)
        assert labels["stalls"] == base["stalls"] and labels["jobs"] == base["jobs"]
        for inc, old in zip(labels["incidents"], base["incidents"], strict=True):
            assert inc["scope"]["targets"] == [names[t] for t in old["scope"]["targets"]]
            assert {k: v for k, v in inc.items() if k != "scope"} == {
                k: v for k, v in old.items() if k != "scope"}
        for name, frame in _records(days[fmt]).items():
            renamed = base_records[name].with_columns(pl.col("target").replace(names))
            assert frame.equals(renamed), name
    assert {fmt: sorted(p.relative_to(days[fmt] / "pool").as_posix()
                        for p in (days[fmt] / "pool").rglob("*") if p.is_file())
            for fmt in POOL_FORMATS} == {
        "csv": ["pool_metrics.csv"],
        "lustre": ["mds01/lctl_get_param.txt", "oss01/lctl_get_param.txt"],
        "daos": ["daos-admin/dmg_pool_query.jsonl", "daos01/daos_metrics.jsonl"],
        "spdk": ["nvmf01/bdev_get_iostat.jsonl"],
        "gpfs": ["node001/mmpmon_fs_io_s.txt", "node002/mmpmon_fs_io_s.txt",
                 "node003/mmpmon_fs_io_s.txt", "node004/mmpmon_fs_io_s.txt",
                 "nsd01/mmdiag_waiters.jsonl", "nsd01/pool0_mmlsqos.txt",
                 "nsd02/mmdiag_waiters.jsonl"]}


def _lctl_lines(text: str, blocks: tuple[str, ...]) -> list[str]:
    """The lines of the parameters ``blocks`` (regular expressions) of an lctl dump."""
    out, keep = [], False
    for line in text.splitlines():
        if "=" in line and not line.startswith(" "):
            keep = any(re.fullmatch(b, line.split("=", 1)[0]) for b in blocks)
            continue
        if keep:
            out.append(line)
    return out


def test_lustre_is_lctl_get_param_as_the_genuine_dump_prints_it(days: dict[str, Path]) -> None:
    blocks = (r"obdfilter\.[^.]+\.stats", r"ost\.OSS\.ost_io\.stats", r"mdt\.[^.]+\.md_stats")
    genuine = _lctl_lines((REAL / "lustrefs_exporter_ddn" / "valid.txt").read_text(), blocks)
    units = {m["name"]: m["unit"] for m in map(LCTL_STAT.fullmatch, genuine) if m}
    oss = (days["lustre"] / "pool" / "oss01" / "lctl_get_param.txt").read_text()
    mds = (days["lustre"] / "pool" / "mds01" / "lctl_get_param.txt").read_text()
    ours = _lctl_lines(oss + mds, (*blocks, r"mds\.MDS\.mdt\.stats"))
    for line in genuine + ours:  # the value in column 27, after the name padded to 25
        assert line[25] == " " and line[26] != " " and " " not in line[:25].rstrip(), line
    seen = {m["name"]: m["unit"] for m in map(LCTL_STAT.fullmatch, ours) if m}
    assert {"write", "write_bytes", "req_qdepth", "ost_write", "open", "close"} <= set(seen)
    assert {k: v for k, v in seen.items() if k in units} == {
        k: units[k] for k in seen if k in units}
    assert all(LCTL_STAT.fullmatch(line) or line.split()[0] in (
        "snapshot_time", "start_time", "elapsed_time") for line in ours)
    # the metadata on the MDS only; no background work anywhere; OSTs as Lustre names them
    assert "md_stats" not in oss and "obdfilter" not in mds
    for text, node in ((oss, "oss01"), (mds, "mds01")):
        assert detect_tool(text) == "lctl"
        rows = parse_lctl(text, ToolContext(node=node, ts=datetime(2026, 11, 28, tzinfo=UTC),
                                            source="lctl"))
        assert set(rows) == {"pool_metrics"}
        metrics = {r["metric"].split(".")[0] for r in rows["pool_metrics"]}
        assert not metrics & {"background_active", "gc_active", "free_blocks_pct"}
    assert "pool0-OST0000" in oss and "pool0-MDT0000.md_stats=" in mds


def test_daos_spdk_and_gpfs_outputs_follow_the_genuine_samples(days: dict[str, Path]) -> None:
    # DAOS: daos_metrics -C, header and stats rows as the telemetry guide prints them
    header = (REAL / "daos" / "telemetry_guide_counters_csv.txt").read_text().splitlines()[1]
    latency = (REAL / "daos" / "telemetry_guide_io_latency_update_fetch_4MB_per_target.txt"
               ).read_text().splitlines()[2]
    [daos] = [e for e in _envelopes(days["daos"] / "pool" / "daos01" / "daos_metrics.jsonl")][:1]
    assert "source" not in daos and detect_tool(daos["output"]) == "daos-metrics"
    lines = daos["output"].splitlines()
    assert lines[0] == header.removesuffix(",description,units")
    ours = next(x for x in lines if "/io/latency/update/" in x)
    assert len(ours.split(",")) == len(latency.split(","))
    assert re.fullmatch(r"ID: 0/io/latency/update/1MB/tgt_\d+,\d+,\d+,\d+,\d+\.\d{6},\d+,\d+,"
                        r"\d+\.\d{6}", ours)
    # the object RPCs DFS's file operations become, as the object module registers them
    rpcs = [x for x in lines if "/io/ops/" in x]
    assert {x.split("/")[3] for x in rpcs} == {"key_query", "obj_punch", "obj_sync"}
    assert all(re.fullmatch(r"ID: 0/io/ops/[a-z_]+/latency/tgt_\d+,\d+,\d+,\d+,\d+\.\d{6},\d+,"
                            r"\d+,\d+\.\d{6}", x) for x in rpcs)
    query = _envelopes(days["daos"] / "pool" / "daos-admin" / "dmg_pool_query.jsonl")[0]
    assert detect_tool(query["output"]) == "dmg-pool-query"
    # SPDK: the JSON-RPC response, keys as the example response
    sample = json.loads((REAL / "spdk" / "bdev_get_iostat_example_response.json").read_text())
    [spdk] = _envelopes(days["spdk"] / "pool" / "nvmf01" / "bdev_get_iostat.jsonl")[:1]
    out = spdk["output"]
    assert "source" not in spdk and detect_tool(out) == "spdk-iostat"
    assert list(out) == list(sample) and list(out["result"]) == list(sample["result"])
    assert [list(b) for b in out["result"]["bdevs"]] == [list(sample["result"]["bdevs"][0])] * 2
    # GPFS: mmpmon keys in the sample's order, mmlsqos HEADER lines, mmdiag waiter fields
    keys = (REAL / "gpfs_exporter" / "mmpmon_fs_io_s_stdout.txt").read_text().split()[1:33:2]
    mmpmon = (days["gpfs"] / "pool" / "node001" / "mmpmon_fs_io_s.txt").read_text()
    assert all(line.split()[1::2] == keys for line in mmpmon.splitlines())
    qos_sample = (REAL / "gpfs_exporter" / "mmlsqos_stats_stdout.txt").read_text().split()
    qos = (days["gpfs"] / "pool" / "nsd01" / "pool0_mmlsqos.txt").read_text().split()
    assert [x for x in qos if ":HEADER:" in x][:4] == [x for x in qos_sample if ":HEADER:" in x]
    stats_fields = len(next(x for x in qos_sample if x.startswith("mmlsqos:stats:0")).split(":"))
    assert {len(x.split(":")) for x in qos if x.startswith("mmlsqos:stats:0")} == {stats_fields}
    waiters = (REAL / "gpfs_exporter" / "mmdiag_waiters_stdout.txt").read_text().splitlines()
    envs = _envelopes(days["gpfs"] / "pool" / "nsd01" / "mmdiag_waiters.jsonl")
    busy = next(e["output"] for e in envs if e["output"].count("\n") > 1)
    assert busy.splitlines()[0] == waiters[1]
    assert {len(x.split(":")) for x in busy.splitlines()} == {len(waiters[2].split(":"))}
    assert {detect_tool(e["output"]) for e in envs} == {"mmdiag-waiters"}


def _table(lake: Path, table: str) -> pl.DataFrame:
    return pl.read_parquet(lake / table / "**" / "*.parquet", hive_partitioning=False)


def test_each_format_ingests_under_the_names_the_records_use(
        days: dict[str, Path], lakes: dict[str, tuple[Path, IngestReport]]) -> None:
    for fmt, (lake, report) in lakes.items():
        assert report.quarantined == 0 and not [f for f in report.files if f.error], fmt
        writes = _table(lake, "checkpoint_writes")
        targets = set(writes.filter(pl.col("tier") == "pool")["target"].to_list())
        pool = _table(lake, "pool_metrics").with_columns(
            pl.col("metric").str.split(".").list.first().alias("base"))
        pooled = {t: set(g["base"].to_list())
                  for (t,), g in pool.group_by("target")}
        smart = set(_table(lake, "nvme_smart")["node"].to_list())
        labels = _labels(days[fmt])
        assert targets <= set(labels["pool"]["targets"]) and targets <= set(pooled), fmt
        signal = "gc_active" if fmt == "csv" else (
            "write_latency_max_ms" if fmt == "gpfs" else "write_latency_us_total")
        assert all(signal in pooled[t] for t in targets), fmt
        background = set(pool["base"].to_list()) & {"background_active", "gc_active"}
        if fmt == "lustre":  # no GC signal at all, and the metadata on the MDT
            assert not background and not smart & set(labels["pool"]["targets"])
            assert "metadata_latency_us_total" in pooled["pool0-MDT0000"]
            assert not any("metadata_latency_us_total" in pooled[t] for t in targets)
        elif fmt == "daos":  # the metadata RPCs' latency on every data target
            assert all("metadata_latency_us_total" in pooled[t] for t in targets)
            assert set(labels["pool"]["targets"]) <= smart
        else:
            assert set(labels["pool"]["targets"]) <= smart, fmt


def test_a_stats_clear_is_read_as_a_reset(days: dict[str, Path],
                                          lakes: dict[str, tuple[Path, IngestReport]]) -> None:
    """The cleared server's counters drop (the lake's rule for a reset: stg_counter_deltas),
    at the clear, and nobody else's do."""
    for fmt in ("lustre", "daos", "spdk", "gpfs"):
        pool = _labels(days[fmt])["pool"]
        [cleared] = pool["stats_cleared"]
        host = cleared["host"]
        own = {*pool.get("servers", {}).get(host, []),
               *([pool["metadata"]["target"]] if host == pool.get("metadata", {}).get("server")
                 else [])}
        counters = _table(lakes[fmt][0], "pool_metrics").filter(
            pl.col("metric").str.contains(r"^(write_ops|metadata_ops_total)$"))
        drops = counters.sort("ts").with_columns(
            (pl.col("value") < pl.col("value").shift(1).over("pool", "target", "metric"))
            .alias("drop")).filter(pl.col("drop"))
        # the server's targets, and its services (oss01/ost_io, daos01/engine0), or the node
        assert set(drops["target"].to_list()) == {
            t for t in counters["target"].to_list()
            if t in own or t == host or t.startswith(f"{host}/")}, fmt
        at = datetime.fromisoformat(cleared["at"].replace("Z", "+00:00"))
        assert all(0 <= (ts - at).total_seconds() <= 130 for ts in drops["ts"]), fmt


def test_evaluate_reports_a_row_per_pool_format() -> None:
    report = EvalReport(
        seeds=[1], truth=["gc", "gc", "metadata", "gc"] * 2,
        predicted=["gc", "gc", "metadata", "gc", "unknown", "gc", "metadata", "metadata"],
        scores=[0.9] * 8, families=["base"] * 8,
        pool_formats=["csv"] * 4 + ["lustre"] * 4, pool_gc=[True, False, False, True] * 2,
        true_causes=[["gc"], ["gc"], ["metadata"], ["gc", "metadata"]] * 2,
        detection_by_family={"base": [8, 0, 0]},
        detection_by_format={"csv": [4, 0, 0], "lustre": [4, 0, 0]})
    rows = {r["pool_format"]: r for r in report.per_pool_format().to_dicts()}
    assert rows["csv"]["macro_f1"] == 1.0 and rows["csv"]["stalls"] == 4
    # of the two pool-GC stalls, one left unknown, one given its second true cause: not wrong
    assert (rows["lustre"]["pool_gc"], rows["lustre"]["pool_gc_honest"],
            rows["lustre"]["pool_gc_wrong"], rows["lustre"]["unknown"]) == (2, 1, 0, 1)
    assert rows["lustre"]["macro_f1"] < 1.0 == rows["lustre"]["macro_f1_without_pool_gc"]
    assert rows["lustre"]["f1_gc"] == pytest.approx(0.5)  # 1 of 3 gc stalls found
    assert report.to_dict()["per_pool_format"][1]["pool_format"] == "lustre"


def test_the_pool_formats_flag_names_what_it_refuses() -> None:
    from ckptwatch.cli.evaluate import parse_pool_formats
    from ckptwatch.errors import UsageError

    assert parse_pool_formats("all") == POOL_FORMATS
    assert parse_pool_formats("lustre, csv,lustre") == ("lustre", "csv")
    with pytest.raises(UsageError, match=r"--pool-formats 'nfs': use all, or names from csv, "):
        parse_pool_formats("nfs")
