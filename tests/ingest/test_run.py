"""Ingest end to end on small literal inputs: counts, idempotency, quarantine."""

from __future__ import annotations

from pathlib import Path

import polars as pl
from tests.conftest import lake_rows

from ckptwatch.ingest.run import ingest
from ckptwatch.lake.store import Lake


def test_clean_ingest_writes_every_table(raw_dir: Path, tmp_path: Path) -> None:
    report = ingest(raw_dir, tmp_path / "lake")
    assert report.rows == {"checkpoint_writes": 6, "jobs": 2, "topology": 2,
                           "pool_metrics": 2, "fabric_counters": 2}
    assert report.quarantined == 0
    cw = Lake(tmp_path / "lake").read("checkpoint_writes")
    r0 = cw.filter((pl.col("job_id") == "j1") & (pl.col("rank") == 0)).row(0, named=True)
    assert r0["duration_s"] == 20.5
    assert r0["source_file"] == "checkpoints/j1.jsonl"
    j2 = cw.filter(pl.col("job_id") == "j2").sort("rank")
    assert j2["duration_s"].to_list() == [5.0, 6.0]
    assert j2["start_ts"][0].isoformat() == "2025-11-28T00:00:00+00:00"


def test_reingest_adds_nothing(raw_dir: Path, tmp_path: Path) -> None:
    lake = tmp_path / "lake"
    ingest(raw_dir, lake)
    before = lake_rows(lake)
    again = ingest(raw_dir, lake)
    assert again.count("skipped") == len(again.files) - again.count("ignored")
    assert again.rows == {}
    assert lake_rows(lake) == before


def test_new_file_is_added_to_an_existing_lake(raw_dir: Path, tmp_path: Path) -> None:
    lake = tmp_path / "lake"
    ingest(raw_dir, lake)
    (raw_dir / "pool" / "later.csv").write_text(
        "ts,pool,target,metric,value\n2026-11-29T00:00:00Z,pool0,t1,free_blocks_pct,12\n")
    report = ingest(raw_dir, lake)
    assert report.rows == {"pool_metrics": 1}
    assert sorted(p.name for p in (lake / "pool_metrics").iterdir()) == [
        "date=1970-01-01", "date=2026-11-28", "date=2026-11-29"]


def test_bad_records_are_quarantined_with_reasons(bad_raw_dir: Path, tmp_path: Path) -> None:
    report = ingest(bad_raw_dir, tmp_path / "lake")
    assert report.rows["checkpoint_writes"] == 6
    q = Lake(tmp_path / "lake").read("quarantine").sort("source_file", "line")
    got = {(r["source_file"], r["line"]): r["reason"] for r in q.iter_rows(named=True)}
    assert got[("checkpoints/j1.jsonl", 5)].startswith("invalid JSON")
    assert got[("checkpoints/j1.jsonl", 6)] == "end_time before start_time"
    assert got[("checkpoints/j2.csv", 4)] == "bytes: 'lots' is not an integer"
    assert got[("notes.bin", None)].startswith("unrecognised file outside the known directories")
    assert report.quarantined == 4
    # the raw text is kept so the record can be repaired
    assert "lots" in q.filter(pl.col("line") == 4)["raw"][0]


def test_missing_required_column_rejects_the_file_and_says_which(tmp_path: Path) -> None:
    raw = tmp_path / "raw" / "checkpoints"
    raw.mkdir(parents=True)
    (raw / "x.csv").write_text("job_id,step,rank,node,tier,start_time,end_time\n"
                               "j,1,0,n,pool,1764288000,1764288001\n")
    report = ingest(tmp_path / "raw", tmp_path / "lake")
    q = Lake(tmp_path / "lake").read("quarantine")
    assert report.quarantined == 1
    assert q["reason"][0].startswith("missing required column(s) bytes for checkpoint_writes")


def test_tool_output_in_unknown_place_explains_the_fix(tmp_path: Path) -> None:
    raw = tmp_path / "raw" / "smart"
    raw.mkdir(parents=True)
    (raw / "orphan.txt").write_text("something else entirely\n")
    ingest(tmp_path / "raw", tmp_path / "lake")
    reason = Lake(tmp_path / "lake").read("quarantine")["reason"][0]
    assert "under smart/" in reason
