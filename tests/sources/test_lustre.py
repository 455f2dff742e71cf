"""Lustre ``lctl get_param`` text -> pool_metrics rows: the genuine DDN / lustrefs-exporter
samples (tests/fixtures/real/pool_telemetry/PROVENANCE.md), each value below read off the
sample by hand; then the raw tree (``pool/<host>/<file>``), envelopes (source ``lctl``), bad
input, and the interval means the lake computes from two snapshots."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from ckptwatch.errors import RecordError
from ckptwatch.ingest.run import ingest
from ckptwatch.lake.query import connect, run_sql
from ckptwatch.lake.store import Lake
from ckptwatch.sources import load_all
from ckptwatch.sources.base import ToolContext, detect_tool
from ckptwatch.sources.envelope import LINE_REJECTS
from ckptwatch.sources.lustre import parse_lctl

REAL = Path(__file__).parents[1] / "fixtures" / "real" / "pool_telemetry" / "lustrefs_exporter_ddn"
SAMPLES = ["valid.txt", "valid_mds.txt", "2.14.0_ddn145_stats.txt", "brw_stats_with_data.txt",
           "jobstats_es01a-OST0001_lctl_stdout.txt"]
TS = datetime(2026, 11, 28, 12, 0, tzinfo=UTC)


def parse(text: str, node: str = "oss01", device: str | None = None) -> dict[
        tuple[str, str], dict[str, Any]]:
    """(target, metric) -> row (the last, where a dump lists a parameter twice)."""
    rows = parse_lctl(text, ToolContext(node=node, ts=TS, source="lctl", device=device))
    readings = {(r["target"], r["metric"], r["ts"]) for r in rows["pool_metrics"]}
    assert len(readings) == len(rows["pool_metrics"])  # one row per series and time
    return {(r["target"], r["metric"]): r for r in rows["pool_metrics"]}


def sample(name: str, **kw: Any) -> dict[tuple[str, str], dict[str, Any]]:
    return parse((REAL / name).read_text(), **kw)


def value(rows: dict[tuple[str, str], dict[str, Any]], target: str, metric: str) -> float:
    return float(rows[(target, metric)]["value"])


@pytest.mark.parametrize("name", SAMPLES)
def test_every_genuine_sample_is_recognised_as_lctl_output(name: str) -> None:
    load_all()
    assert detect_tool((REAL / name).read_text()) == "lctl"


def test_obdfilter_write_latency_and_md_stats_metadata_latency() -> None:
    rows = sample("valid.txt")
    ost = "ai400-OST0000"
    # write  25001 samples [usecs] 86 16684 41700926 74443748896
    assert value(rows, ost, "write_ops") == 25001
    assert value(rows, ost, "write_latency_us_total") == 41_700_926
    assert value(rows, ost, "write_latency_peak_ms") == 16.684
    # write_bytes  25001 samples [bytes] 98304 4194304 104857600000 …
    assert value(rows, ost, "write_bytes") == 104_857_600_000
    assert rows[(ost, "write_ops")]["pool"] == "ai400"
    # snapshot_time  1688603042.554414847 secs.nsecs
    assert rows[(ost, "write_ops")]["ts"] == datetime(2023, 7, 6, 0, 24, 2, 554415, tzinfo=UTC)
    # OST0001 printed no write line: no write since its start, written as zeros
    assert [value(rows, "ai400-OST0001", m) for m in (
        "write_ops", "write_latency_us_total", "write_bytes")] == [0, 0, 0]
    mdt = "ai400-MDT0000"
    # open  3 samples [usecs] 686 16407 18634 272034926
    assert value(rows, mdt, "metadata_ops_total.open") == 3
    assert value(rows, mdt, "metadata_latency_us_total.open") == 18_634
    assert value(rows, mdt, "metadata_latency_peak_ms.open") == 16.407
    # the aggregate: open 3 + close 3 + mknod 3 + getattr 23 + getxattr 2 + statfs 44863
    assert value(rows, mdt, "metadata_ops_total") == 44_897
    assert value(rows, mdt, "metadata_latency_us_total") == 18_634 + 399 + 18_582 + 629 + 47 \
        + 323_074


def test_oss_service_queue_depth_wait_and_write_latency_are_the_servers() -> None:
    rows = sample("valid.txt", node="oss01")
    # ost.OSS.ost_io.stats: req_qdepth 4690313 samples [reqs] 0 7 16886 22078
    assert value(rows, "oss01/ost_io", "queue_requests_total") == 4_690_313
    assert value(rows, "oss01/ost_io", "queue_depth_total") == 16_886
    # req_waittime 4690313 samples [usec] 4 20340 100079668 …; req_active … 30475809
    assert value(rows, "oss01/ost_io", "queue_wait_us_total") == 100_079_668
    assert value(rows, "oss01/ost_io", "active_requests_total") == 30_475_809
    # ost_write 2247452 samples [usec] 148 69989 4660586823 …
    assert value(rows, "oss01/ost_io", "write_ops") == 2_247_452
    assert value(rows, "oss01/ost_io", "write_latency_us_total") == 4_660_586_823
    assert rows[("oss01/ost_io", "queue_depth_total")]["pool"] == "lustre"
    # brw_stats, disk I/Os in flight (write): buckets 1..16, I/Os 17751, 17886, 5335, …
    assert value(rows, "ai400-OST0000", "queue_requests_total.disk") == 50_004
    assert value(rows, "ai400-OST0000", "queue_depth_total.disk") == (
        1 * 17751 + 2 * 17886 + 3 * 5335 + 4 * 5296 + 5 * 1722 + 6 * 1665 + 7 * 128 + 8 * 121
        + 9 * 30 + 10 * 31 + 11 * 12 + 12 * 11 + 13 * 7 + 14 * 7 + 15 * 1 + 16 * 1)


def test_mds_service_stats_and_a_value_on_the_name_line() -> None:
    rows = sample("valid_mds.txt", node="mds01")
    # mds.MDS.mdt.stats: req_qdepth 1502 samples [reqs] 0 1 2 2; req_waittime … 73117
    assert value(rows, "mds01/mdt", "queue_requests_total") == 1502
    assert value(rows, "mds01/mdt", "queue_depth_total") == 2
    assert value(rows, "mds01/mdt", "queue_wait_us_total") == 73_117
    assert value(rows, "mds01/mdt", "metadata_ops_total.mds_connect") == 18
    # md_stats: statfs 1691 samples [usecs] 0 92 15198 245368
    assert value(rows, "ai400x2-MDT0000", "metadata_latency_us_total.statfs") == 15_198
    # "ost.OSS.ost_io.stats=snapshot_time 1709915907.132154184 secs.nsecs": no request yet
    assert value(rows, "mds01/ost_io", "write_ops") == 0
    assert rows[("mds01/ost_io", "write_ops")]["ts"] == datetime(2024, 3, 8, 16, 38, 27, 132154,
                                                          tzinfo=UTC)


def test_lustre_2_14_service_and_md_stats() -> None:
    rows = sample("2.14.0_ddn145_stats.txt", node="mds01")
    # mds.MDS.mdt.stats: req_qdepth 171898 samples [reqs] 0 3 1602 2816
    assert value(rows, "mds01/mdt", "queue_requests_total") == 171_898
    assert value(rows, "mds01/mdt", "queue_depth_total") == 1602
    # mds_connect 11 + mds_get_root 1 + mds_statfs 2 (obd_ping and ost_set_info are not mds_*)
    assert value(rows, "mds01/mdt", "metadata_ops_total") == 14
    # mdt.fs-MDT0000.md_stats: getattr 7 samples [usecs] 11 65 338 18090
    assert value(rows, "fs-MDT0000", "metadata_latency_us_total.getattr") == 338
    assert rows[("fs-MDT0000", "metadata_ops_total")]["pool"] == "fs"
    # per-export stats (obdfilter.fs-OST0000.exports.*.stats) are not targets
    assert not [k for k in rows if "exports" in k[0]]


def test_a_bare_brw_stats_block_takes_its_target_from_the_device() -> None:
    text = (REAL / "brw_stats_with_data.txt").read_text()
    rows = parse(text, device="fs-OST0003")
    # disk I/Os in flight (write) 2704 + 3180 + 7370 + 17365 + 40726 + 44513 + 116; the
    # buckets are powers of two (1, 2, 4, … 64): ranges, so no depth sum is written
    assert rows.keys() == {("fs-OST0003", "queue_requests_total.disk")}
    assert value(rows, "fs-OST0003", "queue_requests_total.disk") == 115_974
    assert rows[("fs-OST0003", "queue_requests_total.disk")]["ts"] == datetime(
        2018, 8, 13, 11, 11, 52, 738773, tzinfo=UTC)
    with pytest.raises(RecordError, match="names no target"):
        parse(text)


def test_job_stats_are_per_job_qualified_by_the_job_id() -> None:
    rows = sample("jobstats_es01a-OST0001_lctl_stdout.txt")
    ost = "es01a-OST0001"
    job = "job=SLURM_JOB10:0:es18kxe-co-client"
    # write: { samples: 861, unit: usecs, min: 65, max: 34699, sum: 7304967, … }
    assert value(rows, ost, f"write_ops.{job}") == 861
    assert value(rows, ost, f"write_latency_us_total.{job}") == 7_304_967
    assert value(rows, ost, f"write_latency_peak_ms.{job}") == 34.699
    assert value(rows, ost, f"write_bytes.{job}") == 11_025_514_496
    # snapshot_time: 1723114647.887515895 secs.nsecs (each job's own)
    assert rows[(ost, f"write_ops.{job}")]["ts"] == datetime(2024, 8, 8, 10, 57, 27, 887516,
                                                             tzinfo=UTC)
    jobs = {m.split(".", 1)[1] for _, m in rows if m.startswith("write_ops.")}
    assert len(jobs) == 16 and "job=SLURM_JOB10" in jobs  # quoted and bare ids alike
    assert value(rows, ost, "write_ops.job=SLURM_JOB10") == 17


def test_mdt_job_stats_give_per_job_metadata_latency() -> None:
    text = """mdt.fs-MDT0000.job_stats=
job_stats:
- job_id:          1234
  snapshot_time:   1764331200.5 secs.nsecs
  open:            { samples:           4, unit: usecs, min: 10, max: 900, sum: 1000, sumsq: 1 }
  close:           { samples:           4, unit: usecs, min: 1, max: 5, sum: 12, sumsq: 1 }
  write_bytes:     { samples:           9, unit: bytes, min: 1, max: 5, sum: 99, sumsq: 1 }
"""
    rows = parse(text)
    assert value(rows, "fs-MDT0000", "metadata_ops_total.job=1234") == 8
    assert value(rows, "fs-MDT0000", "metadata_latency_us_total.job=1234") == 1012
    assert value(rows, "fs-MDT0000", "metadata_latency_peak_ms.job=1234") == 0.9


@pytest.mark.parametrize(("text", "reason"), [
    ("obdfilter.fs-OST0000.stats=\nsnapshot_time 1764331200.1 secs.nsecs\n"
     "write 12 samples [usecs] 1 x 3 4\n",
     "line 3: obdfilter.fs-OST0000.stats: 'write 12 samples [usecs] 1 x 3 4' is not a stats "
     "line"),
    ("obdfilter.fs-OST0000.job_stats=\njob_stats:\n  write: { samples: 1 }\n",
     "line 3: obdfilter.fs-OST0000.job_stats: 'write: { samples: 1 }' comes before any"),
    ("obdfilter.scratch.stats=\nwrite 1 samples [usecs] 1 1 1 1\n",
     "line 1: obdfilter.scratch.stats: 'scratch' is not a Lustre target name"),
])
def test_a_malformed_block_is_rejected_naming_its_line_and_the_others_are_kept(
        text: str, reason: str) -> None:
    good = "obdfilter.fs-OST0001.stats=\nsnapshot_time 1764331200.1 secs.nsecs\n"
    result = parse_lctl(text + good, ToolContext(node="oss01", ts=TS, source="lctl"))
    (bad,) = result[LINE_REJECTS]
    assert bad["reason"].startswith(reason)
    assert bad["raw"].startswith(text.split("\n", 1)[0])
    assert {r["target"] for r in result["pool_metrics"]} == {"fs-OST0001"}


def snapshot(t: float, ops: int, usecs: int) -> str:
    return (f"obdfilter.fs-OST0002.stats=\nsnapshot_time {t:.9f} secs.nsecs\n"
            f"write_bytes {ops} samples [bytes] 4096 4194304 {ops * 4096} 1\n"
            f"write {ops} samples [usecs] 50 90000 {usecs} 1\n")


def test_raw_tree_and_envelopes_reach_the_lake_and_bad_output_is_quarantined(
        tmp_path: Path) -> None:
    raw = tmp_path / "raw"
    (raw / "pool" / "oss01").mkdir(parents=True)
    (raw / "pool" / "oss01" / "lctl_get_param.txt").write_text((REAL / "valid.txt").read_text())
    t0 = 1764331200.0  # 2025-11-28T12:00:00Z
    (raw / "pool" / "oss02").mkdir()
    (raw / "pool" / "oss02" / "lctl.jsonl").write_text("".join(json.dumps({
        "collected_at": "2025-11-28T12:00:00Z", "source": "lctl", "output": out}) + "\n"
        for out in (snapshot(t0, 1000, 2_000_000), snapshot(t0 + 60, 1250, 5_000_000))))
    (raw / "pool" / "oss03").mkdir()
    (raw / "pool" / "oss03" / "stats.txt").write_text(
        "obdfilter.fs-OST0009.stats=\nsnapshot_time 1764331200.1 secs.nsecs\n"
        "write 12 samples [usecs] 1 2\n" + snapshot(t0, 10, 1000).replace("0002", "0008"))
    report = ingest(raw, tmp_path / "lake")
    by_file = {f.rel: f for f in report.files}
    assert by_file["pool/oss01/lctl_get_param.txt"].rows == {"pool_metrics": 41}
    assert by_file["pool/oss02/lctl.jsonl"].rows == {"pool_metrics": 8}  # 4 names, twice
    # the malformed parameter is quarantined, the file's other parameter kept; the run went on
    assert (by_file["pool/oss03/stats.txt"].quarantined,
            by_file["pool/oss03/stats.txt"].rows) == (1, {"pool_metrics": 4})
    (reason,) = Lake(tmp_path / "lake").read("quarantine")["reason"].to_list()
    assert reason.startswith("line 3: obdfilter.fs-OST0009.stats: 'write 12 samples [usecs] 1 "
                             "2' is not a stats line")
    con = connect(tmp_path / "lake", views=("int_pool_interval_means",))
    try:
        means = run_sql(con, "select target, signal, samples, value from "
                             "int_pool_interval_means where target = 'fs-OST0002'").to_dicts()
    finally:
        con.close()
    # 250 writes in 60 s took 3 000 000 µs: 12 ms each
    assert means == [{"target": "fs-OST0002", "signal": "write_latency_ms", "samples": 250.0,
                      "value": 12.0}]
    # the reader's names are the vocabulary: none is listed as unmapped
    assert not [u for u in report.unused_metrics if u.file.startswith("pool/oss0")]


def test_an_envelope_with_a_malformed_parameter_keeps_the_others_and_its_line() -> None:
    from ckptwatch.sources.envelope import read_envelopes

    good = snapshot(1764331200.0, 10, 1000)
    bad = "mdt.fs-MDT0000.md_stats=\nopen 3 samples [usecs] 1 x\n"
    lines = [json.dumps({"node": "mds01", "collected_at": "2025-11-28T12:00:00Z",
                         "source": "lctl", "output": out}) for out in (good, bad + good)]
    parsed = read_envelopes("\n".join(lines).encode(), file_label="pool/mds01/lctl.jsonl")
    assert parsed.rows("pool_metrics") == 8
    assert [(r.line, r.reason) for r in parsed.rejects] == [
        (2, "line 2: mdt.fs-MDT0000.md_stats: 'open 3 samples [usecs] 1 x' is not a stats line "
            "('<name> <count> samples [<unit>] <min> <max> <sum> …')")]
