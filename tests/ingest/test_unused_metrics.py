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
        for s in (4, 14) for name in ("gc_active", "metadata_latency_ms", "ost_queue_len")))
    report = ingest(raw, tmp_path / "lake")
    assert report.count("ingested") == 2 and report.quarantined == 0
    assert report.rows == {"pool_metrics": 12}  # kept: a warning, not a rejection
    by_file = {u.file: u for u in report.unused_metrics}
    assert set(by_file) == {"pool/lustre.csv", "pool/pool_metrics.csv"}
    lustre = by_file["pool/lustre.csv"]
    assert (lustre.table, lustre.names, lustre.n_used) == (
        "pool_metrics", {"mdt_open_latency_ms": 3, "ost_gc": 3}, 0)
    assert by_file["pool/pool_metrics.csv"].names == {"ost_queue_len": 2}
    assert by_file["pool/pool_metrics.csv"].n_used == 2
    text = render_ingest(report)
    assert ("unused metric names: pool/lustre.csv: none of its 2 pool_metrics name(s) is read "
            "by the analysis, a misnamed feed?") in text
    assert ("unused metric names: pool_metrics: 3 name(s) no analysis reads, rows kept: "
            "mdt_open_latency_ms (3), ost_gc (3), ost_queue_len (2); in 2 file(s): "
            "pool/lustre.csv 2, pool/pool_metrics.csv 1") in text
    assert text.count("mdt_open_latency_ms") == 1  # each name listed once


def test_pool_vocabulary_names_are_mapped_and_only_the_others_are_named(
        tmp_path: Path) -> None:
    # the pool vocabulary (docs/formats.md): base name before the first dot, any qualifier
    raw = tmp_path / "raw"
    (raw / "pool").mkdir(parents=True)
    names = ("queue_depth", "write_latency_us_total.job=1234", "metadata_ops_total.open",
             "background_active.scrub", "ost_write_lat", "queue.depth")
    (raw / "pool" / "daos.csv").write_text(POOL_HEADER + "".join(
        f"2026-11-28T00:00:04Z,pool0,engine0/tgt_3,{name},1\n" for name in names))
    report = ingest(raw, tmp_path / "lake")
    (unused,) = report.unused_metrics
    assert (unused.names, unused.n_used) == ({"ost_write_lat": 1, "queue.depth": 1}, 4)
    assert ("pool_metrics: 2 name(s) no analysis reads, rows kept: ost_write_lat (1), "
            "queue.depth (1); in 1 file(s): pool/daos.csv 2") in render_ingest(report)


def test_a_rerun_ingesting_nothing_new_names_nothing(tmp_path: Path) -> None:
    raw = tmp_path / "raw"
    (raw / "pool").mkdir(parents=True)
    (raw / "pool" / "lustre.csv").write_text(
        POOL_HEADER + "2026-11-28T00:00:04Z,pool0,ost03,ost_gc,1\n")
    assert ingest(raw, tmp_path / "lake").unused_metrics
    again = ingest(raw, tmp_path / "lake")
    assert again.count("skipped") == 1 and again.unused_metrics == []
    assert "unused metric names" not in render_ingest(again)


def test_a_tools_own_unread_fields_are_kept_out_of_the_summary(tmp_path: Path) -> None:
    # smartctl always prints health fields no analysis reads: not a misnamed feed, so the
    # summary does not list them (report.json does); a canonical CSV's unread name is listed.
    import json

    raw = tmp_path / "raw"
    (raw / "smart").mkdir(parents=True)
    out = {"nvme_smart_health_information_log": {
        "critical_warning": 0, "available_spare": 100, "percentage_used": 3,
        "data_units_written": 1000, "host_writes": 50}}
    (raw / "smart" / "node001.jsonl").write_text("".join(json.dumps({
        "node": "node001", "device": "nvme0", "collected_at": f"2026-11-28T00:0{m}:00Z",
        "source": "smartctl", "output": out}) + "\n" for m in (0, 1)))
    (raw / "fabric").mkdir()
    (raw / "fabric" / "node002.csv").write_text(
        "ts,node,device,port,counter,value\n"
        "2026-11-28T00:00:00Z,node002,mlx5_0,1,my_pause_frames,3\n"
        "2026-11-28T00:00:00Z,node002,mlx5_0,1,port_xmit_wait,10\n")
    report = ingest(raw, tmp_path / "lake")
    by_file = {u.file: u for u in report.unused_metrics}
    tool = by_file["smart/node001.jsonl"]
    assert tool.tool_vocabulary and tool.n_used >= 1 and "critical_warning" in tool.names
    spelled = by_file["fabric/node002.csv"]
    assert not spelled.tool_vocabulary and spelled.names == {"my_pause_frames": 1}
    text = render_ingest(report)
    assert "my_pause_frames (1)" in text
    assert "critical_warning" not in text
