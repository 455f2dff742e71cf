"""The two alerts of a job and tier: the open checkpoint's (in flight) and the tail's."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import polars as pl

from ckptwatch.alerts.evaluate import evaluate
from ckptwatch.alerts.inflight import InFlight, OpenRank
from ckptwatch.alerts.names import INFLIGHT_ALERT, TAIL_ALERT
from ckptwatch.alerts.state import fingerprint, load_state, state_path
from ckptwatch.settings import AlertSettings

NOW = datetime(2026, 12, 1, 12, tzinfo=UTC)
SETTINGS = AlertSettings()
JOBS = pl.DataFrame({"job_id": ["j"], "checkpoint_timeout_s": [60.0]})


def history(barrier_s: float = 5.0) -> pl.DataFrame:
    return pl.DataFrame({"job_id": ["j"] * 6, "tier": ["pool"] * 6, "step": list(range(6)),
                         "end_ts": [NOW - timedelta(minutes=10 * (6 - i)) for i in range(6)],
                         "barrier_s": [barrier_s] * 6})


def open_for(age_s: float) -> dict[tuple[str, str], InFlight]:
    f = InFlight(job_id="j", tier="pool", step=9, started_at=NOW - timedelta(seconds=age_s),
                 age_s=age_s, timeout_s=60.0, warning_s=42.0, critical_s=54.0, n_started=8,
                 n_finished=6, n_expected=8,
                 open_ranks=(OpenRank(5, "node017", "pool0-tgt07", "leaf03"),
                             OpenRank(6, "node017", "pool0-tgt07", "leaf03")))
    return {f.key: f}


def test_an_open_checkpoint_raises_the_alert_the_tail_would_not() -> None:
    ev = evaluate(history(), JOBS, SETTINGS, now=NOW, inflight=open_for(30))
    assert ev.due == []
    ev = evaluate(history(), JOBS, SETTINGS, ev.state, now=NOW, inflight=open_for(43))
    (alert,) = ev.due
    assert alert["labels"] == {"alertname": INFLIGHT_ALERT, "job_id": "j", "tier": "pool",
                               "severity": "warning"}
    summary = alert["annotations"]["summary"]
    assert "2 of 8 ranks still open (ranks 5, 6 on node017 (leaf03), target pool0-tgt07)" \
        in summary
    assert "17.0 s until the 60.0 s timeout" in summary
    ev2 = evaluate(history(), JOBS, SETTINGS, ev.state, now=NOW, inflight=open_for(55))
    assert [(a["status"], a["labels"]["severity"]) for a in ev2.due] == [
        ("resolved", "warning"), ("firing", "critical")]
    # Completed: resolved at once (no hysteresis for an open checkpoint that closed).
    ev3 = evaluate(history(), JOBS, SETTINGS, ev2.state, now=NOW, inflight={})
    assert [(a["status"], a["labels"]["severity"]) for a in ev3.due] == [
        ("resolved", "critical")]
    assert "has completed" in ev3.due[0]["annotations"]["summary"]


def test_a_run_that_does_not_follow_open_checkpoints_leaves_the_watchers_alert() -> None:
    ev = evaluate(history(), JOBS, SETTINGS, now=NOW, inflight=open_for(56))
    nightly = evaluate(history(), JOBS, SETTINGS, ev.state, now=NOW)  # inflight unknown
    assert nightly.due == []
    assert [r.severity for r in nightly.state.firing.values()] == ["critical"]


def test_headroom_never_reads_minus_zero() -> None:
    ev = evaluate(history(60.0), JOBS, SETTINGS, now=NOW)
    (alert,) = ev.due
    assert alert["annotations"]["headroom_s"] == "0.0"
    assert "-0.0" not in alert["annotations"]["summary"]
    past = evaluate(history(61.5), JOBS, SETTINGS, now=NOW).due[0]["annotations"]["summary"]
    assert "1.5 s past the timeout" in past


def test_an_already_critical_tail_is_not_forecast_to_stay_below_the_warning() -> None:
    frame = history(5.0).with_columns(
        pl.when(pl.col("step") == 5).then(58.0).otherwise(pl.col("barrier_s")).alias("barrier_s"))
    (alert,) = evaluate(frame, JOBS, SETTINGS, now=NOW).due
    note = alert["annotations"]["forecast"]
    assert alert["labels"]["severity"] == "critical"
    assert "past the warning level" in note and "stays below the warning" not in note


def names(due: list[dict[str, object]]) -> list[tuple[str, str, str]]:
    return [(a["labels"]["alertname"], a["status"], a["labels"]["severity"])  # type: ignore[index]
            for a in due]


def test_the_tail_and_the_open_checkpoint_are_two_alerts() -> None:
    ev = evaluate(history(50.0), JOBS, SETTINGS, now=NOW, inflight=open_for(55))
    assert names(ev.due) == [(TAIL_ALERT, "firing", "warning"),
                             (INFLIGHT_ALERT, "firing", "critical")]
    assert len({a["fingerprint"] for a in ev.due}) == 2
    # the nightly run: the tail recovers (hysteresis: three runs), the in-flight alert stays
    state = ev.state
    for _ in range(3):
        nightly = evaluate(history(5.0), JOBS, SETTINGS, state, now=NOW)
        state = nightly.state
    assert names(nightly.due) == [(TAIL_ALERT, "resolved", "warning")]
    assert [r.alertname for r in state.firing.values()] == [INFLIGHT_ALERT]


def test_an_open_checkpoint_crossing_its_timeout_is_sent_again_as_timed_out() -> None:
    ev = evaluate(history(), JOBS, SETTINGS, now=NOW, inflight=open_for(55))
    assert "5.0 s until the 60.0 s timeout" in ev.due[0]["annotations"]["summary"]
    ev = evaluate(history(), JOBS, SETTINGS, ev.state, now=NOW, inflight=open_for(61))
    (alert,) = ev.due  # the same alert (same fingerprint), its news: timed out
    assert (alert["status"], alert["annotations"]["timed_out"]) == ("firing", "true")
    assert alert["annotations"]["summary"].startswith(
        "Checkpoint step 9 of job j (pool) timed out: open 61 s, past its 60.0 s timeout by "
        "1.0 s; 2 of 8 ranks still open")
    assert evaluate(history(), JOBS, SETTINGS, ev.state, now=NOW,
                    inflight=open_for(90)).due == []


def test_every_alert_says_how_old_its_data_is_and_links_its_runbook() -> None:
    (alert,) = evaluate(history(), JOBS, SETTINGS, now=NOW, inflight=open_for(43)).due
    ann = alert["annotations"]
    assert ann["last_checkpoint_at"] == "2026-12-01T11:50:00Z"
    assert ann["data_age_s"] == "43"  # the open checkpoint's start markers
    assert "Last checkpoint ended 2026-12-01T11:50:00Z; newest data 43 s old." in ann["summary"]
    assert ann["runbook_url"] == "docs/alerts.md#checkpointinflightneartimeout"
    custom = AlertSettings(runbook_url="https://wiki.example/ckpt#{anchor}", dashboard_url="")
    (alert,) = evaluate(history(), JOBS, custom, now=NOW, inflight=open_for(43)).due
    assert alert["annotations"]["runbook_url"] == (
        "https://wiki.example/ckpt#checkpointinflightneartimeout")
    assert "dashboard_url" not in alert["annotations"]
    heading = {line.removeprefix("### ") for line in
               (Path(__file__).parents[2] / "docs" / "alerts.md").read_text().splitlines()
               if line.startswith("### ")}
    assert {TAIL_ALERT, INFLIGHT_ALERT} <= heading  # the anchors the runbook_url points to


def test_a_stale_job_resolves_its_alerts_even_from_a_run_that_does_not_watch() -> None:
    ev = evaluate(history(50.0), JOBS, SETTINGS, now=NOW, inflight=open_for(56))
    later = NOW + timedelta(days=2)
    nightly = evaluate(history(50.0), JOBS, SETTINGS, ev.state, now=later)
    assert sorted(names(nightly.due)) == [(INFLIGHT_ALERT, "resolved", "critical"),
                                          (TAIL_ALERT, "resolved", "warning")]
    assert nightly.state.firing == {}
    assert all("stale: no record since 2026-12-01T11:59:04Z (2.0 days ago; its staleness "
               "horizon is 24.0 h)" in a["annotations"]["summary"] for a in nightly.due)
    assert evaluate(history(50.0), JOBS, SETTINGS, nightly.state, now=later).due == []


def test_state_of_the_old_single_alert_migrates_without_resending(tmp_path: Path) -> None:
    old_inflight = {"alertname": TAIL_ALERT, "job_id": "j", "tier": "pool",
                    "severity": "critical"}
    old_tail = {"alertname": TAIL_ALERT, "job_id": "j", "tier": "pool", "severity": "warning"}
    sent = (NOW - timedelta(minutes=5)).strftime("%Y-%m-%dT%H:%M:%SZ")

    def record(labels: dict[str, str], basis: str) -> dict[str, object]:
        return {"status": "firing", "labels": labels, "annotations": {"summary": "s", "step": "9"},
                "startsAt": sent, "sent_at": sent, "ok_count": 0, "basis": basis}

    path = state_path(tmp_path)
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps({"version": 1, "evaluated_at": sent, "pending": {}, "alerts": {
        fingerprint(old_inflight): record(old_inflight, "inflight"),
        fingerprint(old_tail): record(old_tail, "tail")}}))
    state = load_state(tmp_path)
    new_inflight = {**old_inflight, "alertname": INFLIGHT_ALERT}
    assert set(state.firing) == {fingerprint(new_inflight), fingerprint(old_tail)}
    assert state.firing[fingerprint(new_inflight)].replaces == old_inflight
    assert state.firing[fingerprint(old_tail)].replaces is None
    # still open at critical: the watcher sends nothing (it was sent 5 minutes ago)
    ev = evaluate(history(), JOBS, SETTINGS, state, now=NOW, inflight=open_for(56))
    assert ev.due == []
    assert ev.state.to_json()["version"] == 2
    # it completes: resolved under its name, and under the name it was sent with
    done = evaluate(history(), JOBS, SETTINGS, ev.state, now=NOW, inflight={})
    assert [(a["fingerprint"], a["status"]) for a in done.due] == [
        (fingerprint(new_inflight), "resolved"), (fingerprint(old_inflight), "resolved")]


def test_an_open_pool_checkpoint_names_the_others_in_flight_on_the_pool() -> None:
    from ckptwatch.alerts.inflight import OpenCheckpoint, assess_inflight

    now_s = NOW.timestamp()

    def ck(job: str, tier: str, step: int, age: float, n_open: int) -> OpenCheckpoint:
        return OpenCheckpoint(job, tier, step, now_s - age, n_open + 2, 2,
                              tuple(OpenRank(r, f"n{r}") for r in range(n_open)))

    found = assess_inflight(
        [ck("j", "pool", 9, 43, 2), ck("job-B", "pool", 300, 130, 512),
         ck("job-B", "pool", 301, 10, 4), ck("job-C", "pool", 12, 20, 1),
         ck("job-D", "local", 5, 50, 3)],
        {"j": 60.0, "job-B": 600.0}, {}, SETTINGS, now_s=now_s)
    # each other job's open pool checkpoints, longest open first; a local job is not on the pool
    assert found[("j", "pool")].also_in_flight == (
        "job-B step 300 (512 ranks open, 130 s)", "job-C step 12 (1 rank open, 20 s)",
        "job-B step 301 (4 ranks open, 10 s)")
    assert found[("job-D", "local")].also_in_flight == ()
    (alert,) = evaluate(history(), JOBS, SETTINGS, now=NOW,
                        inflight={("j", "pool"): found[("j", "pool")]}).due
    ann = alert["annotations"]
    assert ann["also_in_flight"].startswith("job-B step 300 (512 ranks open, 130 s); job-C")
    assert ann["summary"].endswith(
        "Also in flight on the pool: job-B step 300 (512 ranks open, 130 s); job-C step 12 "
        "(1 rank open, 20 s); job-B step 301 (4 ranks open, 10 s).")
