"""The daily report: its facts (the documented JSON keys, a day without checkpoints) and files."""

from __future__ import annotations

import json
from datetime import date
from pathlib import Path
from typing import Any

from ckptwatch.analysis.attribution import LABELS
from ckptwatch.analysis.findings import StallFindings
from ckptwatch.lake.query import connect
from ckptwatch.planning.model import STRATEGIES
from ckptwatch.report.daily import ReportFiles
from ckptwatch.report.facts import REPORT_VERSION, build_report
from ckptwatch.report.html import render_html
from ckptwatch.settings import Settings

TOP_KEYS = {"report_version", "ckptwatch_version", "generated_at", "date", "window", "lake",
            "attribution", "summary", "jobs", "stalls", "headroom", "headroom_skipped",
            "alerts", "plans", "data", "slow_hosts"}
JOB_KEYS = {"job_id", "tier", "n_ranks", "timeout_s", "warning_s", "critical_s",
            "n_checkpoints", "barrier_p50_s", "barrier_p99_s", "barrier_max_s", "worst_step",
            "n_stalls", "n_timed_out", "checkpoints", "stalls"}
CHECKPOINT_KEYS = {"step", "start_ts", "end_ts", "p50_s", "p99_s", "barrier_s", "baseline_s",
                   "is_stall", "n_unfinished", "timed_out"}
STALL_KEYS = {"job_id", "step", "tier", "start_ts", "end_ts", "barrier_s", "baseline_s",
              "ratio_to_baseline", "p50_s", "p99_s", "n_ranks", "n_slow", "cause", "score",
              "evidence", "causes", "postmortem", "n_unfinished", "timed_out",
              "barrier_is_lower_bound", "never_finished"}
HEADROOM_KEYS = {"job_id", "tier", "n_checkpoints", "p50_s", "p99_s", "max_s", "tail_stat",
                 "tail_s", "timeout_s", "headroom_s", "warning_s", "critical_s", "level",
                 "alert", "trend_s_per_h", "forecast", "forecast_warning_at",
                 "forecast_timeout_at"}
ALERTS_KEYS = {"evaluated", "sent", "sinks", "jsonl", "alerts", "firing", "failures", "error"}
PLAN_KEYS = {"job_id", "tier", "error", "command", "measured", "best", "current", "flips",
             "tail_flip"}
DATA_KEYS = {"rows", "quarantined", "quarantine_by_file", "quarantine_query", "days", "ingest"}


def test_report_json_has_the_documented_keys(written: tuple[dict[str, Any], ReportFiles]) -> None:
    facts, files = written
    assert json.loads(files.json.read_text()) == facts
    assert set(facts) == TOP_KEYS and facts["report_version"] == REPORT_VERSION
    assert facts["date"] == "2026-11-28"  # the newest day with checkpoints
    assert set(facts["alerts"]) == ALERTS_KEYS and set(facts["data"]) == DATA_KEYS
    for job in facts["jobs"]:
        assert set(job) == JOB_KEYS
        assert all(set(c) == CHECKPOINT_KEYS for c in job["checkpoints"])
        assert job["barrier_max_s"] == max(c["barrier_s"] for c in job["checkpoints"])
        assert job["n_stalls"] == len(job["stalls"]) == sum(c["is_stall"]
                                                            for c in job["checkpoints"])
        assert job["warning_s"] < job["critical_s"] < job["timeout_s"]
    for s in facts["stalls"]:
        assert set(s) == STALL_KEYS and s["cause"] in LABELS and s["evidence"]
    assert {(h["job_id"], h["tier"]) for h in facts["headroom"]} == {
        (j["job_id"], j["tier"]) for j in facts["jobs"]}
    assert all(set(h) == HEADROOM_KEYS for h in facts["headroom"])
    assert len(facts["plans"]) == 4
    for p in facts["plans"]:
        assert set(p) == PLAN_KEYS and p["error"] is None
        assert p["best"]["name"] in STRATEGIES and p["best"]["optimal_interval_s"] > 0
        assert p["best"]["overhead_fraction"] <= p["current"]["overhead_fraction"]
    alerts = facts["alerts"]
    assert alerts["evaluated"] and not alerts["sent"] and alerts["alerts"]
    assert alerts["jsonl"].endswith("reports/alerts.jsonl")
    assert facts["data"]["rows"]["checkpoint_writes"] == 1440
    assert "from quarantine" in facts["data"]["quarantine_query"]


def test_a_day_without_checkpoints_and_alerts_that_could_not_run(
        sample_lake: Path, findings: StallFindings) -> None:
    con = connect(sample_lake)
    facts = build_report(con, sample_lake, day=date(2026, 1, 1), findings=findings,
                         settings=Settings(), alerts_error="lake locked by another run",
                         plans=False)
    con.close()
    assert (facts["jobs"], facts["stalls"], facts["plans"]) == ([], [], [])
    assert facts["alerts"]["error"] == "lake locked by another run"
    page = render_html(facts)
    assert "No checkpoints on this day." in page and "No stalls on this day." in page
    assert "Alerts were not evaluated:</b> lake locked by another run" in page


def test_report_files_and_latest_copy(written: tuple[dict[str, Any], ReportFiles],
                                      sample_lake: Path) -> None:
    _facts, files = written
    day = sample_lake / "reports" / "2026-11-28"
    assert (files.html, files.json) == (day / "report.html", day / "report.json")
    assert files.latest_html.read_bytes() == files.html.read_bytes()
    assert files.latest_json.read_bytes() == files.json.read_bytes()
