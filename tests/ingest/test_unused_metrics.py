"""Ingest names the fabric / SMART / pool metric names no analysis reads (a misnamed feed is
seen on day one): counted per file, each name listed once; the rows are kept."""

from __future__ import annotations

from pathlib import Path

from ckptwatch.cli._render import render_ingest
from ckptwatch.ingest.run import ingest

POOL_HEADER = "ts,pool,target,metric,value\n"


def test_a_pool_csv_of_names_no_signal_reads_is_listed_and_kept(tmp_path: Path) -> None:
    raw = tmp_path / "raw"
    (raw / "pool").mkdir(parents=True)
    (raw / "pool" / "lustre.csv").write_text(POOL_HEADER + "".join(
        f"2026-11-28T00:00:{s:02d}Z,pool0,ost03,{name},1.5\n"
        for s in (4, 14, 24) for name in ("mdt_open_latency_ms", "ost_gc")))
    (raw / "pool" / "pool_metrics.csv").write_text(POOL_HEADER + "".join(
        f"2026-11-28T00:00:{s:02d}Z,pool0,ost03,{name},1\n"
        for s in (4, 14) for name in ("gc_active", "metadata_latency_ms", "queue_depth")))
    report = ingest(raw, tmp_path / "lake")
    assert report.count("ingested") == 2 and report.quarantined == 0
    assert report.rows == {"pool_metrics": 12}  # kept: a warning, not a rejection
    by_file = {u.file: u for u in report.unused_metrics}
    assert set(by_file) == {"pool/lustre.csv", "pool/pool_metrics.csv"}
    lustre = by_file["pool/lustre.csv"]
    assert (lustre.table, lustre.names, lustre.n_used) == (
        "pool_metrics", {"mdt_open_latency_ms": 3, "ost_gc": 3}, 0)
    assert by_file["pool/pool_metrics.csv"].names == {"queue_depth": 2}
    assert by_file["pool/pool_metrics.csv"].n_used == 2
    text = render_ingest(report)
    assert ("unused metric names: pool/lustre.csv: none of its 2 pool_metrics name(s) is read "
            "by the analysis, a misnamed feed?") in text
    assert ("unused metric names: pool_metrics: 3 name(s) no analysis reads, rows kept: "
            "mdt_open_latency_ms (3), ost_gc (3), queue_depth (2); in 2 file(s): "
            "pool/lustre.csv 2, pool/pool_metrics.csv 1") in text
    assert text.count("mdt_open_latency_ms") == 1  # each name listed once


def test_a_rerun_ingesting_nothing_new_names_nothing(tmp_path: Path) -> None:
    raw = tmp_path / "raw"
    (raw / "pool").mkdir(parents=True)
    (raw / "pool" / "lustre.csv").write_text(
        POOL_HEADER + "2026-11-28T00:00:04Z,pool0,ost03,ost_gc,1\n")
    assert ingest(raw, tmp_path / "lake").unused_metrics
    again = ingest(raw, tmp_path / "lake")
    assert again.count("skipped") == 1 and again.unused_metrics == []
    assert "unused metric names" not in render_ingest(again)
