"""The daily report (facts, HTML, files) and the nightly flow that writes it."""

from __future__ import annotations

import html
import json
import shutil
from collections.abc import Iterator
from datetime import date
from pathlib import Path
from typing import Any

import pytest
from tests.conftest import PROJECT_ROOT

from ckptwatch.alerts.evaluate import run_alerts
from ckptwatch.analysis.attribution import LABELS
from ckptwatch.analysis.findings import StallFindings, find_stalls
from ckptwatch.ingest.run import ingest
from ckptwatch.lake.query import connect, run_sql
from ckptwatch.planning.model import STRATEGIES
from ckptwatch.report.daily import (
    REPORT_VERSION,
    ReportFiles,
    build_report,
    daily_report,
    nightly_settings,
    render_html,
)
from ckptwatch.settings import Settings, settings_from_dict

SAMPLE = PROJECT_ROOT / "data" / "sample"
TOP_KEYS = {"report_version", "ckptwatch_version", "generated_at", "date", "window", "lake",
            "attribution", "summary", "jobs", "stalls", "headroom", "headroom_skipped",
            "alerts", "plans", "data"}
JOB_KEYS = {"job_id", "tier", "n_ranks", "timeout_s", "warning_s", "critical_s",
            "n_checkpoints", "barrier_p50_s", "barrier_p99_s", "barrier_max_s", "worst_step",
            "n_stalls", "checkpoints", "stalls"}
CHECKPOINT_KEYS = {"step", "start_ts", "end_ts", "p50_s", "p99_s", "barrier_s", "baseline_s",
                   "is_stall"}
STALL_KEYS = {"job_id", "step", "tier", "start_ts", "end_ts", "barrier_s", "baseline_s",
              "ratio_to_baseline", "p50_s", "p99_s", "n_ranks", "n_slow", "cause", "score",
              "evidence", "causes", "postmortem"}
HEADROOM_KEYS = {"job_id", "tier", "n_checkpoints", "p50_s", "p99_s", "max_s", "tail_stat",
                 "tail_s", "timeout_s", "headroom_s", "warning_s", "critical_s", "level",
                 "alert", "trend_s_per_h", "forecast", "forecast_warning_at",
                 "forecast_timeout_at"}
ALERTS_KEYS = {"evaluated", "sent", "sinks", "jsonl", "alerts", "firing", "failures", "error"}
PLAN_KEYS = {"job_id", "tier", "error", "command", "measured", "best", "current", "flips",
             "tail_flip"}
DATA_KEYS = {"rows", "quarantined", "quarantine_by_file", "quarantine_query", "days", "ingest"}


@pytest.fixture(scope="module")
def rules_only() -> Iterator[None]:
    """No trained model and no config file from the environment: deterministic attribution."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("CKPTWATCH_MODEL", "/nonexistent/attribution.joblib")
        mp.delenv("CKPTWATCH_CONFIG", raising=False)
        yield


@pytest.fixture(scope="module")
def sample_lake(tmp_path_factory: pytest.TempPathFactory, rules_only: None) -> Path:
    """data/sample ingested into a fresh lake, once for this module."""
    lake = tmp_path_factory.mktemp("report") / "lake"
    ingest(SAMPLE, lake)
    return lake


@pytest.fixture(scope="module")
def findings(sample_lake: Path) -> StallFindings:
    """The sample's stalls and causes."""
    return find_stalls(sample_lake)


@pytest.fixture(scope="module")
def written(sample_lake: Path, findings: StallFindings) -> tuple[dict[str, Any], ReportFiles]:
    """The sample's report (alerts evaluated as a dry run), written into the lake."""
    settings = nightly_settings(Settings(), sample_lake)
    run = run_alerts(sample_lake, settings, send=False, cause_provider=findings.top_causes)
    return daily_report(sample_lake, day=None, findings=findings, settings=settings,
                        alert_run=run)


def _sample_jobs(lake: Path) -> list[str]:
    con = connect(lake)
    jobs = run_sql(con, "select distinct job_id from checkpoint_latency order by 1")
    con.close()
    return list(jobs["job_id"])


def test_report_html_shows_every_job_stall_cause_and_figure(
        written: tuple[dict[str, Any], ReportFiles], findings: StallFindings,
        sample_lake: Path) -> None:
    facts, files = written
    page = files.html.read_text()
    jobs = _sample_jobs(sample_lake)
    assert len(jobs) == 4 and all(j in page for j in jobs)
    assert page.count("data:image/png;base64,") == len(jobs)  # one figure per job
    assert len(findings.stalls) == 8  # the sample's labelled stalls
    stalls = [s.to_dict() for s in findings.stalls]
    for s in stalls:
        assert f"--job {s['job_id']} --step {s['step']}" in page  # its row and post-mortem
        assert f">{s['cause']} {s['causes'][0]['score']:.2f}</span>" in page  # cause badge
        assert html.escape(s["causes"][0]["evidence"][0]) in page
    assert {s["cause"] for s in stalls} == set(LABELS)  # every cause, unknown too
    assert "<script" not in page and 'href="http' not in page  # self-contained, offline
    assert "Timeout headroom and alerts" in page and "CheckpointTailNearTimeout" in page
    assert "best strategy" in page and "local+replica" in page
    assert facts["summary"]["stalls"] == 8


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


def test_report_files_and_latest_copy(written: tuple[dict[str, Any], ReportFiles],
                                      sample_lake: Path) -> None:
    _facts, files = written
    day = sample_lake / "reports" / "2026-11-28"
    assert (files.html, files.json) == (day / "report.html", day / "report.json")
    assert files.latest_html.read_bytes() == files.html.read_bytes()
    assert files.latest_json.read_bytes() == files.json.read_bytes()


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


def test_nightly_settings_send_alerts_to_the_lake_unless_configured(tmp_path: Path) -> None:
    assert nightly_settings(Settings(), tmp_path).sinks.jsonl == (
        tmp_path / "reports" / "alerts.jsonl")
    own = settings_from_dict({"sinks": {"jsonl": "mine.jsonl"}}, base_dir=tmp_path)
    assert nightly_settings(own, tmp_path / "lake").sinks.jsonl == tmp_path / "mine.jsonl"


# -- the nightly flow under Prefect's test harness --------------------------------------------


def _alertmanager_alert(a: dict[str, Any]) -> None:
    assert set(a["labels"]) == {"alertname", "job_id", "tier", "severity"}
    assert a["labels"]["alertname"] == "CheckpointTailNearTimeout"
    assert a["labels"]["severity"] in ("warning", "critical")
    assert {"summary", "p50_s", "p99_s", "timeout_s", "headroom_s"} <= set(a["annotations"])
    assert a["status"] == "firing" and a["startsAt"].endswith("Z") and a["endsAt"].endswith("Z")


@pytest.mark.prefect
def test_nightly_flow_on_the_sample_writes_report_and_alert_file(
        prefect_harness: None, rules_only: None, tmp_path: Path) -> None:
    from ckptwatch.flows.nightly import nightly_flow

    raw = tmp_path / "raw"
    shutil.copytree(SAMPLE, raw)
    lake = tmp_path / "lake"
    out = nightly_flow(raw, lake)
    assert (out["ingested"], out["failed"], out["stalls"]) == (27, 0, 8)
    assert out["alerts_sent"] and out["alerts"] == 3
    report = Path(out["report"])
    assert report == lake / "reports" / "2026-11-28" / "report.html"
    facts = json.loads(Path(out["report_json"]).read_text())
    assert facts["summary"]["stalls"] == 8 and facts["alerts"]["sent"]
    assert facts["data"]["ingest"]["ingested"] == 27
    assert "job-98372" in report.read_text()
    assert Path(out["latest"]).read_bytes() == report.read_bytes()
    lines = (lake / "reports" / "alerts.jsonl").read_text().splitlines()
    alerts = [json.loads(line) for line in lines]
    assert len(alerts) == 3 and {a["labels"]["job_id"] for a in alerts} == {
        "job-45972", "job-82866", "job-98372"}
    for a in alerts:
        _alertmanager_alert(a)


@pytest.mark.prefect
def test_nightly_flow_writes_the_report_then_fails_on_a_sink(
        prefect_harness: None, rules_only: None, raw_dir: Path, tmp_path: Path) -> None:
    from ckptwatch.flows.nightly import nightly_flow
    from ckptwatch.report.daily import AlertsUndeliveredError

    (tmp_path / "blocked").mkdir()  # a directory where the JSON Lines file should be
    config = tmp_path / "ckptwatch.toml"  # low levels: the small raw dir's jobs alert
    config.write_text(f'[alerts]\nwarning = 0.01\ncritical = 0.02\n[sinks]\nstdout = false\n'
                      f'jsonl = "{tmp_path / "blocked"}"\n')
    with pytest.raises(AlertsUndeliveredError, match=r"alerts not delivered: jsonl: cannot "
                       r"append alerts .* the report is written \(.*report.html\)") as err:
        nightly_flow(raw_dir, tmp_path / "lake", config=config)
    # j1 alerts; j2's checkpoints are a year older (epoch 1764288000 = 2025-11-28), outside the
    # days the nightly run reads (the report day; lookback_days=0)
    assert err.value.result["alerts"] == 1 and err.value.result["ingested"] == 6
    report = Path(err.value.result["report"])
    assert "Sink failed:</b> jsonl: cannot append alerts" in report.read_text()
