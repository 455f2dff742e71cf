"""One alert per job and tier from the tail and the open checkpoint together."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import polars as pl

from ckptwatch.alerts.evaluate import evaluate
from ckptwatch.alerts.inflight import InFlight, OpenRank
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
    assert alert["labels"]["severity"] == "warning"
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
