"""Reading one raw file: every kind has a reader, keys are content, each reader's rows."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import get_args

import pytest

from ckptwatch.ingest.discover import FileKind, discover
from ckptwatch.ingest.read import READERS, content_key, parse_file
from ckptwatch.ingest.run import ingest
from ckptwatch.lake.store import Lake
from ckptwatch.sources.smartctl import render_smartctl_json


def test_every_kind_of_raw_file_has_one_reader() -> None:
    assert set(READERS) == set(get_args(FileKind))


@pytest.fixture
def every_kind(raw_dir: Path, tmp_path: Path) -> Path:
    """The small raw directory plus one file of each other kind discover recognises."""
    (raw_dir / "README.md").write_text("about this data")
    (raw_dir / "notes.bin").write_bytes(b"\x00\x01binary blob")
    (raw_dir / "smart" / "n0").mkdir(parents=True)
    (raw_dir / "smart" / "n0" / "nvme0_20261128T000000Z.json").write_text(json.dumps(
        render_smartctl_json("M", "S", "F", "nvme0", {"temperature_c": 40})))
    (raw_dir / "smart" / "n0.jsonl").write_text(
        '{"node": "n0", "collected_at": "2026-11-28T00:00:00Z", "output": {}}\n')
    counters = (raw_dir / "fabric" / "n1" / "20261128T000000Z" / "class" / "infiniband"
                / "mlx5_0" / "ports" / "1" / "counters")
    counters.mkdir(parents=True)
    (counters / "port_xmit_wait").write_text("7\n")
    (raw_dir / "pool" / "bad.csv.gz").write_bytes(b"\x1f\x8b\x08\x00broken")
    (raw_dir / "checkpoints" / "run").mkdir()
    (raw_dir / "checkpoints" / "run" / "0_per_epoch_stats.json").write_text(json.dumps(
        {"1": {"save_ckpt1": {"start": "2026-07-14T12:15:00", "end": "2026-07-14T12:15:10",
                              "duration": 10.0, "throughput": 0.4}}}))
    (tmp_path / "outside.csv").write_text("secret\n")
    os.symlink(tmp_path / "outside.csv", raw_dir / "pool" / "link.csv")
    return raw_dir


def test_content_key_is_the_key_parse_file_gives(every_kind: Path) -> None:
    """The Dask flow skips files by ``content_key`` before handing them out: it must be the
    key the sequential run gives the same file, for every kind."""
    files = discover(every_kind)
    assert {f.kind for f in files} == set(get_args(FileKind))
    for raw in files:
        pf = parse_file(raw)
        assert pf.error is None, pf.error
        assert content_key(raw) == pf.key, raw.rel


def test_a_known_key_skips_the_parse(every_kind: Path) -> None:
    for raw in discover(every_kind):
        key = parse_file(raw).key
        again = parse_file(raw, {key})
        assert again.already and again.key == key, raw.rel
        assert again.parsed.frames == {} and again.parsed.rejects == []


def test_a_refused_file_is_never_read_and_says_why(every_kind: Path) -> None:
    [raw] = [f for f in discover(every_kind) if f.kind == "refused"]
    pf = parse_file(raw)
    assert pf.size_bytes == 0 and pf.parsed.frames == {}
    assert [r.reason for r in pf.parsed.rejects] == [raw.reason]
    assert raw.reason is not None and "outside the raw directory" in raw.reason


def test_gzip_files_are_read(raw_dir: Path, tmp_path: Path) -> None:
    import gzip

    src = raw_dir / "pool" / "pool.csv"
    (raw_dir / "pool" / "pool.csv.gz").write_bytes(gzip.compress(src.read_bytes().replace(
        b"pool0,t0", b"pool0,t7")))
    report = ingest(raw_dir, tmp_path / "lake")
    assert report.rows["pool_metrics"] == 4


def test_dlio_per_rank_stats_become_checkpoint_rows(tmp_path: Path) -> None:
    import json

    run = tmp_path / "raw" / "checkpoints" / "llama-run"
    run.mkdir(parents=True)
    (run / "summary.json").write_text(json.dumps({"num_accelerators": 4, "metric": {}}))
    for rank, dur in ((0, 10.0), (3, 12.5)):
        stats = {"1": {"start": "2026-07-14T12:15:00.000000", "end": "2026-07-14T12:20:00",
                       "save_ckpt1": {"start": "2026-07-14T12:15:00.000000",
                                      "end": f"2026-07-14T12:15:{dur:09.6f}",
                                      "duration": dur, "throughput": 4.0 / dur}}}
        (run / f"{rank}_per_epoch_stats.json").write_text(json.dumps(stats))
    (run / "dlio.log").write_text("log\n")
    report = ingest(tmp_path / "raw", tmp_path / "lake")
    assert report.count("ignored") == 2 and report.quarantined == 0
    cw = Lake(tmp_path / "lake").read("checkpoint_writes").sort("rank")
    assert cw["rank"].to_list() == [0, 3]
    assert cw["duration_s"].to_list() == [10.0, 12.5]
    assert cw["bytes"].to_list() == [1 << 30, 1 << 30]  # 4 GiB checkpoint over 4 ranks
    assert set(cw["job_id"]) == {"llama-run"} and set(cw["node"]) == {"unknown"}
