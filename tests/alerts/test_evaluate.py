"""Alert evaluation: the issue's scenarios, the payload, causes, then runs and the CLI on a lake."""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import timedelta
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import pytest
from tests.alerts.alert_cases import EVERY_S, JOBS, T0, TIMEOUT_S, checkpoints

from ckptwatch.alerts.evaluate import ALERTNAME, evaluate, run_alerts
from ckptwatch.alerts.state import AlertState, state_path
from ckptwatch.cli.main import main
from ckptwatch.settings import AlertSettings, JobAlertSettings, Settings, settings_from_dict


def replay(barriers: Sequence[float] | np.ndarray, settings: AlertSettings,
           ) -> tuple[list[tuple[int, dict[str, Any]]], AlertState]:
    """Evaluate after every checkpoint, as a run every 10 minutes would: (index, alert) sent."""
    frame = checkpoints(barriers)
    state = AlertState()
    sent: list[tuple[int, dict[str, Any]]] = []
    for i in range(1, len(barriers) + 1):
        now = T0 + timedelta(seconds=EVERY_S * (i - 1) + 30)
        ev = evaluate(frame.head(i), JOBS, settings, state, now=now)
        state = ev.state
        sent += [(i - 1, a) for a in ev.due]
    return sent, state


def what(sent: list[tuple[int, dict[str, Any]]]) -> list[tuple[int, str, str]]:
    return [(i, a["status"], a["labels"]["severity"]) for i, a in sent]


def creeping(n: int = 160, seed: int = 3) -> np.ndarray:
    """A tail creeping from 40 s toward the 120 s timeout at 3 s/h, with noise."""
    rng = np.random.default_rng(seed)
    return 40 + 0.5 * np.arange(n) + rng.normal(0, 1.5, n)


# -- the scenarios --------------------------------------------------------------------


def test_creeping_tail_warns_before_it_crosses_and_goes_critical_near_the_timeout() -> None:
    barriers = creeping()
    sent, state = replay(barriers, AlertSettings())
    assert [s for _, s, _ in what(sent)] == ["firing", "resolved", "firing"]
    (i_warn, warn), (i_esc, resolved), (i_crit, crit) = sent
    # the warning comes from the forecast, while every barrier so far is below the warning level
    assert barriers[: i_warn + 1].max() < 0.7 * TIMEOUT_S
    assert warn["labels"] == {"alertname": ALERTNAME, "job_id": "j1", "tier": "pool",
                              "severity": "warning"}
    assert "forecast_warning_at" in warn["annotations"]
    assert "rising" in warn["annotations"]["summary"]
    # critical once the tail reaches 0.9 x timeout, before any checkpoint reaches the timeout
    assert crit["labels"]["severity"] == "critical" and i_esc == i_crit
    assert 0.9 * TIMEOUT_S <= barriers[: i_crit + 1].max() < TIMEOUT_S
    assert resolved["fingerprint"] == warn["fingerprint"]
    assert resolved["endsAt"] == crit["startsAt"]
    assert [r.severity for r in state.firing.values()] == ["critical"]


def test_healthy_job_raises_nothing() -> None:
    rng = np.random.default_rng(11)
    barriers = 40 + rng.normal(0, 3, 120)
    barriers[[30, 77]] = [70.0, 75.0]  # two stalls, below the warning level
    sent, state = replay(barriers, AlertSettings())
    assert sent == [] and state.firing == {}


def test_flapping_tail_is_sent_once_and_not_resolved() -> None:
    latest = AlertSettings(defaults=JobAlertSettings(window=1))  # the tail = latest checkpoint
    # 86 is above the warning level (84); 80 is inside the 6 s hysteresis band; 75 is clear of
    # it but never for 3 runs in a row
    sent, state = replay([50, 86, 80, 86, 75, 86, 80, 75, 86, 75, 75, 86], latest)
    assert what(sent) == [(1, "firing", "warning")]
    assert len(state.firing) == 1


def test_recovery_resolves_once_after_three_clear_runs() -> None:
    latest = AlertSettings(defaults=JobAlertSettings(window=1))
    sent, state = replay([50, 86, 60, 60, 60, 60, 60], latest)
    assert what(sent) == [(1, "firing", "warning"), (4, "resolved", "warning")]
    resolved = sent[1][1]
    assert resolved["endsAt"] == "2026-11-28T00:40:30Z"
    assert "has recovered" in resolved["annotations"]["summary"]
    assert state.firing == {}


def test_recovery_over_the_trailing_window() -> None:
    barriers = np.r_[np.full(25, 90.0), np.full(30, 40.0)]
    sent, _ = replay(barriers, AlertSettings())
    # the 90 s checkpoints leave the 20-checkpoint window 20 runs after the drop; 3 runs later
    assert what(sent) == [(0, "firing", "warning"), (25 + 19 + 2, "resolved", "warning")]


def test_critical_lowers_to_warning_with_hysteresis() -> None:
    latest = AlertSettings(defaults=JobAlertSettings(window=1))
    sent, _ = replay([110, 104, 90, 90, 90], latest)
    # 104 is within 6 s of the 108 s critical level: no change; 90 x 3 runs: lowered
    assert what(sent) == [(0, "firing", "critical"), (4, "resolved", "critical"),
                          (4, "firing", "warning")]


def test_still_firing_alert_is_resent_only_to_refresh_its_expiry() -> None:
    settings = AlertSettings(defaults=JobAlertSettings(window=1), resend_after_s=3600,
                             firing_ttl_s=7200)
    sent, _ = replay([90] * 14, settings)  # 2 h 10 min of runs every 10 minutes
    assert [i for i, _ in sent] == [0, 6, 12]
    first = sent[0][1]
    assert first["startsAt"] == "2026-11-28T00:00:30Z"
    assert first["endsAt"] == "2026-11-28T02:00:30Z"  # now + firing_ttl_s
    assert sent[1][1]["startsAt"] == first["startsAt"]  # same alert, refreshed


# -- payload, causes, jobs that drop out ------------------------------------------------------


def test_payload_is_alertmanager_shaped() -> None:
    ev = evaluate(checkpoints([100.0] * 8), JOBS, AlertSettings(), now=T0 + timedelta(hours=2))
    (alert,) = ev.due
    assert set(alert) == {"labels", "annotations", "startsAt", "endsAt", "status",
                          "fingerprint"}
    assert alert["labels"]["severity"] == "warning"
    ann = alert["annotations"]
    assert {"summary", "p50_s", "p99_s", "max_s", "timeout_s", "headroom_s",
            "forecast"} <= set(ann)
    assert all(isinstance(v, str) for v in ann.values())  # Alertmanager: string -> string
    assert (ann["p99_s"], ann["max_s"], ann["timeout_s"], ann["headroom_s"]) == (
        "100.0", "100.0", "120.0", "20.0")
    assert ann["summary"] == (
        "Checkpoint tail of job j1 (pool) is 100.0 s (max of the last 8 checkpoints), 83% of its "
        "120.0 s timeout: 20.0 s of headroom left (warning at 84.0 s, critical at 108.0 s). "
        "Last checkpoint ended 2026-11-28T01:10:00Z; newest data 50 min old.")
    assert (ann["last_checkpoint_at"], ann["data_age_s"]) == ("2026-11-28T01:10:00Z", "3000")
    assert ann["runbook_url"] == "docs/alerts.md#checkpointtailneartimeout"
    assert ann["dashboard_url"] == "/d/ckptwatch-live/ckptwatch?var-job_id=j1&var-tier=pool"
    assert "top_cause" not in ann


def test_top_cause_only_when_a_provider_gives_one() -> None:
    frame = checkpoints([100.0] * 8)
    ev = evaluate(frame, JOBS, AlertSettings(), now=T0, causes={"j1": (500, "fabric_pause")})
    assert ev.due[0]["annotations"]["top_cause"] == "fabric_pause (step 500)"
    ev = evaluate(frame, JOBS, AlertSettings(), now=T0, causes={"other": (1, "gc")})
    assert "top_cause" not in ev.due[0]["annotations"]


def test_per_job_levels_and_jobs_that_drop_out() -> None:
    settings = settings_from_dict({"alerts": {"jobs": {"j1": {"warning": 0.5,
                                                              "critical": 0.6}}}}).alerts
    ev = evaluate(checkpoints([75.0] * 3), JOBS, settings, now=T0)
    assert [a["labels"]["severity"] for a in ev.due] == ["critical"]  # 75 >= 0.6 x 120
    gone = evaluate(checkpoints([75.0] * 3, job="j9"), JOBS, settings, ev.state, now=T0)
    (resolved,) = gone.due
    assert resolved["status"] == "resolved"
    assert resolved["annotations"]["summary"] == (
        "Alert on job j1 (pool) resolved: no checkpoints of this job and tier in the lake.")
    assert gone.skipped == {("j9", "pool"): "the job has no checkpoint_timeout_s in the jobs "
                            "table"}


def test_evaluate_does_not_mutate_the_previous_state() -> None:
    latest = AlertSettings(defaults=JobAlertSettings(window=1))
    first = evaluate(checkpoints([90.0]), JOBS, latest, now=T0)
    before = json.dumps(first.state.to_json(), sort_keys=True)
    evaluate(checkpoints([50.0]), JOBS, latest, first.state, now=T0 + timedelta(minutes=10))
    assert json.dumps(first.state.to_json(), sort_keys=True) == before


# -- the lake and the CLI -----------------------------------------------------------------


def test_cli_dry_run_prints_the_alerts_and_writes_nothing(
        alert_lake: Path, capsys: pytest.CaptureFixture[str]) -> None:
    capsys.readouterr()
    rc = main(["alerts", "--lake", str(alert_lake), "--format", "json",
               "--now", "2026-11-28T02:00:00Z"])
    alerts = json.loads(capsys.readouterr().out)
    assert rc == 0
    assert [(a["labels"]["job_id"], a["labels"]["severity"], a["status"]) for a in alerts] == [
        ("hot", "warning", "firing")]
    assert alerts[0]["annotations"]["max_s"] == "92.0"
    assert alerts[0]["startsAt"] == "2026-11-28T02:00:00Z"
    assert not state_path(alert_lake).exists()


def test_cli_send_records_state_so_the_next_run_sends_nothing(
        alert_lake: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = tmp_path / "ckptwatch.toml"
    config.write_text('[sinks]\njsonl = "out/alerts.jsonl"\n')
    args = ["alerts", "--lake", str(alert_lake), "--config", str(config), "--format", "json",
            "--send", "--now", "2026-11-28T02:00:00Z"]
    capsys.readouterr()
    assert main(args) == 0
    sent = json.loads(capsys.readouterr().out)
    assert len(sent) == 1
    received = [json.loads(line) for line in
                (tmp_path / "out" / "alerts.jsonl").read_text().splitlines()]
    assert received == sent
    state = json.loads(state_path(alert_lake).read_text())
    (record,) = state["alerts"].values()
    assert (record["status"], record["startsAt"], record["sent_at"], record["ok_count"]) == (
        "firing", "2026-11-28T02:00:00Z", "2026-11-28T02:00:00Z", 0)
    assert state["pending"] == {}
    # the next run: still firing, nothing sent
    assert main(args[:-1] + ["2026-11-28T03:00:00Z"]) == 0
    assert json.loads(capsys.readouterr().out) == []
    assert len((tmp_path / "out" / "alerts.jsonl").read_text().splitlines()) == 1


def test_cli_table_shows_every_job_and_the_alert(
        alert_lake: Path, capsys: pytest.CaptureFixture[str]) -> None:
    capsys.readouterr()
    assert main(["alerts", "--lake", str(alert_lake), "--now", "2026-11-28T02:00:00Z"]) == 0
    out = capsys.readouterr().out
    assert "timeout headroom of 2 job(s)" in out
    assert "| cool   | pool | 10 | 30.0  | 30.0  | 30.0  | 120.0     | 90.0" in out
    assert "1 alert(s) due (dry run: --send delivers them)" in out
    assert "[FIRING:warning] CheckpointTailNearTimeout job_id=hot tier=pool" in out


def test_cause_provider_gets_the_window_and_feeds_top_cause(alert_lake: Path) -> None:
    seen: list[pl.DataFrame] = []

    def provider(window: pl.DataFrame) -> dict[str, tuple[int, str]]:
        seen.append(window)
        return {"hot": (700, "gc")}

    run = run_alerts(alert_lake, Settings(), send=False, now=T0 + timedelta(hours=2), sinks=[],
                     cause_provider=provider)
    assert seen[0].columns == ["job_id", "tier", "step", "end_ts", "barrier_s"]
    assert run.alerts[0]["annotations"]["top_cause"] == "gc (step 700)"


def test_alerts_command_has_help(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["alerts", "--help"])
    assert exc.value.code == 0
    out = capsys.readouterr().out
    assert "--send" in out and "--format {table,json}" in out and "--config FILE" in out


def test_a_lake_whose_jobs_ended_ten_days_ago_fires_nothing_by_default(
        alert_lake: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = tmp_path / "ckptwatch.toml"
    config.write_text('[sinks]\njsonl = "out/alerts.jsonl"\n')
    later = "2026-12-08T02:00:00Z"  # the lake's checkpoints ended on 2026-11-28
    capsys.readouterr()
    assert main(["alerts", "--lake", str(alert_lake), "--now", later]) == 0
    out = capsys.readouterr().out
    assert "0 alert(s) due" in out
    assert ("not evaluated: hot (pool): stale: no record since 2026-11-28T01:31:32Z (10.0 days "
            "ago; its staleness horizon is 24.0 h)") in out
    # an alert sent while the job ran is resolved once, saying why
    send = ["alerts", "--lake", str(alert_lake), "--config", str(config), "--format", "json",
            "--send", "--now"]
    assert main([*send, "2026-11-28T02:00:00Z"]) == 0
    assert [a["status"] for a in json.loads(capsys.readouterr().out)] == ["firing"]
    assert main([*send, later]) == 0
    (resolved,) = json.loads(capsys.readouterr().out)
    assert (resolved["status"], resolved["labels"]["job_id"]) == ("resolved", "hot")
    assert "resolved: stale: no record since 2026-11-28T01:31:32Z" in (
        resolved["annotations"]["summary"])
    assert main([*send, later]) == 0
    assert json.loads(capsys.readouterr().out) == []
