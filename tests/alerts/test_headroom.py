"""Headroom per job and tier: the tail statistic, the jobs left out and why, the lake's window."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import polars as pl
import pytest
from tests.alerts.alert_cases import JOBS, T0, checkpoints

from ckptwatch.alerts.evaluate import run_alerts
from ckptwatch.alerts.headroom import headroom
from ckptwatch.settings import AlertSettings, JobAlertSettings, Settings, settings_from_dict


def test_tail_is_the_max_or_the_p99_of_the_window() -> None:
    frame = checkpoints([40.0] * 99 + [100.0])
    (by_max,), _ = headroom(frame, JOBS, AlertSettings(defaults=JobAlertSettings(window=100)),
                            now=T0)
    assert (by_max.tail_stat, by_max.tail_s, by_max.headroom_s) == ("max", 100.0, 20.0)
    assert (by_max.level, by_max.worst_step) == ("warning", 10_000)
    p99 = AlertSettings(defaults=JobAlertSettings(window=100, tail="p99"))
    (by_p99,), _ = headroom(frame, JOBS, p99, now=T0)
    assert by_p99.tail_stat == "p99" and by_p99.tail_s == by_p99.p99_s < by_p99.max_s


def test_disabled_and_stale_jobs_are_skipped_with_the_reason() -> None:
    settings = settings_from_dict({"alerts": {"stale_after_s": 3600,
                                              "jobs": {"off": {"enabled": False}}}}).alerts
    frame = checkpoints([50.0] * 3, job="off").vstack(checkpoints([50.0] * 3))
    jobs = pl.DataFrame({"job_id": ["j1", "off"], "checkpoint_timeout_s": [120.0, 120.0]})
    assessed, skipped = headroom(frame, jobs, settings, now=T0 + timedelta(hours=2))
    assert assessed == []
    assert skipped == {
        ("off", "pool"): "alerting is disabled for this job in the settings",
        ("j1", "pool"): "stale: no record since 2026-11-28T00:20:00Z (100 min ago; its "
                        "staleness horizon is 60 min)"}


def test_staleness_is_on_by_default_and_scales_with_the_checkpoint_interval() -> None:
    frame = checkpoints([50.0] * 3)  # the last one ended 2026-11-28T00:20:00Z
    last = T0 + timedelta(minutes=20)
    assert len(headroom(frame, JOBS, AlertSettings(), now=last + timedelta(hours=23))[0]) == 1
    _, skipped = headroom(frame, JOBS, AlertSettings(), now=last + timedelta(hours=25))
    assert skipped[("j1", "pool")].startswith("stale: no record since 2026-11-28T00:20:00Z")
    # a checkpoint every 12 h: three intervals (36 h) outlast the day
    slow = JOBS.with_columns(pl.lit(12 * 3600.0).alias("checkpoint_interval_s"))
    assert len(headroom(frame, slow, AlertSettings(), now=last + timedelta(hours=35))[0]) == 1
    assert headroom(frame, slow, AlertSettings(), now=last + timedelta(hours=37))[0] == []
    # per job: exactly two hours
    exact = settings_from_dict({"alerts": {"jobs": {"j1": {
        "stale_after_s": 7200, "stale_intervals": 0}}}}).alerts
    assert headroom(frame, slow, exact, now=last + timedelta(hours=3))[0] == []
    # a newer record than the checkpoints (an open checkpoint's) keeps the job current
    recent = {"j1": (last + timedelta(hours=30)).timestamp()}
    assert len(headroom(frame, JOBS, AlertSettings(), now=last + timedelta(hours=31),
                        newest=recent)[0]) == 1


def test_a_frame_without_the_window_columns_is_refused() -> None:
    with pytest.raises(ValueError, match=r"checkpoints frame lacks column\(s\) barrier_s"):
        headroom(checkpoints([50.0]).drop("barrier_s"), JOBS, AlertSettings(), now=T0)


def test_now_replays_the_lake_as_of_that_time(alert_lake: Path) -> None:
    run = run_alerts(alert_lake, Settings(), send=False, sinks=[],
                     now=datetime(2026, 11, 28, 0, 35, tzinfo=UTC))
    # checkpoints start every 10 minutes from 00:00 and take 30 or 92 s: four ended by 00:35
    assert {h.job_id: h.n_checkpoints for h in run.evaluation.jobs} == {"cool": 4, "hot": 4}
