"""The daily report: its facts (the documented JSON keys, a day without checkpoints) and files."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from tests.sql_seed import seed

from ckptwatch.analysis.attribution import LABELS
from ckptwatch.analysis.findings import StallFindings
from ckptwatch.lake.query import connect
from ckptwatch.lake.store import Lake
from ckptwatch.planning.measure import calibrate, measure_from_lake
from ckptwatch.planning.model import STRATEGIES, PlanInputs
from ckptwatch.planning.sweep import make_plan
from ckptwatch.report.daily import ReportFiles
from ckptwatch.report.facts import REPORT_VERSION, _plan_verdicts, build_report, plan_verdict
from ckptwatch.report.html import render_html
from ckptwatch.settings import Settings

TOP_KEYS = {"report_version", "ckptwatch_version", "generated_at", "date", "window", "lake",
            "attribution", "summary", "jobs", "tiers", "stalls", "headroom",
            "headroom_skipped", "alerts", "plans", "data", "slow_hosts", "pools"}
JOB_KEYS = {"job_id", "tier", "n_ranks", "timeout_s", "warning_s", "critical_s",
            "n_checkpoints", "barrier_p50_s", "barrier_p99_s", "barrier_max_s", "worst_step",
            "n_stalls", "n_timed_out", "checkpoints", "stalls"}
TIER_KEYS = {"tier", "n_jobs", "n_checkpoints", "barrier_p50_s", "barrier_p99_s",
             "barrier_max_s", "n_timed_out"}
CHECKPOINT_KEYS = {"step", "start_ts", "end_ts", "p50_s", "p99_s", "barrier_s", "baseline_s",
                   "is_stall", "n_unfinished", "timed_out", "timeout_reason", "n_timed_out"}
STALL_KEYS = {"job_id", "step", "tier", "start_ts", "end_ts", "barrier_s", "baseline_s",
              "ratio_to_baseline", "p50_s", "p99_s", "n_ranks", "n_slow", "cause", "score",
              "evidence", "causes", "postmortem", "n_unfinished", "timed_out",
              "timeout_reason", "n_timed_out", "why_timed_out",
              "barrier_is_lower_bound", "never_finished", "telemetry", "missing_telemetry"}
HEADROOM_KEYS = {"job_id", "tier", "n_checkpoints", "p50_s", "p99_s", "max_s", "tail_stat",
                 "tail_s", "timeout_s", "headroom_s", "warning_s", "critical_s", "level",
                 "alert", "trend_s_per_h", "forecast", "forecast_warning_at",
                 "forecast_timeout_at"}
ALERTS_KEYS = {"evaluated", "sent", "dry_run", "sinks", "jsonl", "alerts", "firing", "failures",
               "error", "delivery", "summary"}
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
    # per tier, over every job's checkpoints of the day
    assert [t["tier"] for t in facts["tiers"]] == sorted({j["tier"] for j in facts["jobs"]})
    for tier in facts["tiers"]:
        mine = [j for j in facts["jobs"] if j["tier"] == tier["tier"]]
        assert set(tier) == TIER_KEYS and tier["n_jobs"] == len(mine)
        assert tier["n_checkpoints"] == sum(j["n_checkpoints"] for j in mine)
        assert tier["n_timed_out"] == sum(j["n_timed_out"] for j in mine)
        assert tier["barrier_max_s"] == max(j["barrier_max_s"] for j in mine)
        assert tier["barrier_p50_s"] <= tier["barrier_p99_s"] <= tier["barrier_max_s"]
    assert {(h["job_id"], h["tier"]) for h in facts["headroom"]} == {
        (j["job_id"], j["tier"]) for j in facts["jobs"]}
    assert all(set(h) == HEADROOM_KEYS for h in facts["headroom"])
    # the shared pool's day: demand against capacity, its bursts, the chart's minutes
    [pool_day] = facts["pools"]["days"]
    assert (pool_day["pool"], pool_day["day"]) == ("pool0", facts["date"])
    assert pool_day["n_bursts"] == len(facts["pools"]["bursts"]) >= 1
    assert pool_day["stalled_saturated_s"] <= min(pool_day["stalled_s"], pool_day["saturated_s"])
    assert all(b["n_jobs"] >= 2 for b in facts["pools"]["bursts"])
    assert max(m["peak_demand_bps"] for m in facts["pools"]["minutes"]) == pytest.approx(
        pool_day["peak_demand_bps"])
    assert len(facts["plans"]) == 4
    for p in facts["plans"]:
        assert set(p) == PLAN_KEYS and p["error"] is None
        assert p["best"]["name"] in STRATEGIES and p["best"]["optimal_interval_s"] > 0
        assert p["best"]["overhead_fraction"] <= p["current"]["overhead_fraction"]
    alerts = facts["alerts"]
    assert alerts["evaluated"] and not alerts["sent"] and alerts["dry_run"] and alerts["alerts"]
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


def test_plan_verdicts_of_every_job_at_once_are_each_jobs_verdict(tmp_path: Path) -> None:
    """The report measures all its jobs in one pass, with the measured restores (the
    ``checkpoint_loads`` table) that ``ckptwatch plan --from-lake`` uses: each verdict is the
    one job's own, and a job without writes says so."""
    Lake(tmp_path).init()
    start = datetime(2026, 11, 28, tzinfo=UTC)
    writes = [{"job_id": job, "step": step, "rank": rank, "node": f"n{rank // 4}",
               "tier": tier, "start_ts": start, "end_ts": start + timedelta(seconds=d),
               "duration_s": d, "bytes": 2_000_000_000, "status": "ok"}
              for job, tier in (("j1", "pool"), ("j2", "local"))
              for step, barrier in enumerate([20.0, 22.0, 24.0, 26.0, 100.0])
              for rank in range(8) for d in [barrier if rank == 3 else 10.0]]
    loads = [{"job_id": "j1", "step": step, "rank": 0, "node": "n0", "tier": "pool",
              "start_ts": start, "end_ts": start + timedelta(seconds=d), "duration_s": d,
              "bytes": 2_000_000_000} for step, d in ((1, 30.0), (2, 50.0))]
    seed(tmp_path, "checkpoint_writes", writes)
    seed(tmp_path, "checkpoint_writes", [{**w, "job_id": "j3"} for w in writes[:8]], part="j3")
    seed(tmp_path, "checkpoint_loads", loads)
    seed(tmp_path, "jobs", [{"job_id": j, "n_ranks": 8, "checkpoint_timeout_s": 600.0}
                            for j in ("j1", "j2")])
    verdicts = _plan_verdicts(tmp_path, ["j1", "j2", "j9", "j3"], None)
    assert verdicts == [plan_verdict(tmp_path, j) for j in ("j1", "j2", "j9", "j3")]
    assert "job 'j9' has no checkpoint writes" in verdicts[2]["error"]
    # no timeout in the lake: no plan on a default one (as `plan --from-lake` says)
    assert "job 'j3' has no checkpoint_timeout_s in the lake's jobs table" in verdicts[3]["error"]
    assert verdicts[0]["measured"]["timeout_s"] == 600.0
    m = measure_from_lake(tmp_path, "j1")
    assert m.restore_s == 40.0  # the median restore: the pool's restart cost
    plan = make_plan(calibrate(PlanInputs(), m), measurement=m)
    configured = make_plan(calibrate(PlanInputs(), replace(m, restore_s=None)))
    pool = verdicts[0]["current"]
    assert pool["optimal_interval_s"] == plan.strategy("pool").optimal_interval_s
    assert pool["optimal_interval_s"] != configured.strategy("pool").optimal_interval_s
