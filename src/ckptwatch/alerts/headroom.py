"""Timeout headroom per job and tier over its trailing window, and the window read from a lake.

Vocabulary (docs/concepts.md): a checkpoint's *barrier time* (``barrier_s``) is its
slowest rank. Per job and tier, over the trailing window of its last ``window`` checkpoints:

- the *tail* is the max (or p99, per setting) of the barrier times in the window;
- *headroom* = ``checkpoint_timeout_s`` − tail;
- the *level* is ``critical`` when tail ≥ critical × timeout, ``warning`` when
  tail ≥ warning × timeout;
- the *forecast* (:mod:`ckptwatch.alerts.forecast`) of the tail; a rising envelope that
  reaches the warning level or the timeout within the horizon makes the severity ``warning``.

A job whose newest record is older than its staleness horizon
(:meth:`ckptwatch.settings.JobAlertSettings.stale_horizon_s`: at least a day, a few checkpoint
intervals) is history: it is not assessed, and the reason says since when.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime
from typing import Literal

import duckdb
import numpy as np
import polars as pl

from ckptwatch.alerts.forecast import Forecast, forecast_tail, from_epoch, iso
from ckptwatch.alerts.levels import Severity, classify, levels
from ckptwatch.analysis.quantiles import quantiles
from ckptwatch.settings import AlertSettings, JobAlertSettings

#: The statistic of a window's barrier times that is "the tail" (``[alerts] tail``).
TailStat = Literal["max", "p99"]

CHECKPOINT_COLUMNS = ("job_id", "tier", "step", "end_ts", "barrier_s")
#: The trailing window of every job: its last ``$window`` checkpoints per tier that ended by
#: ``$as_of`` (null: all).
CHECKPOINTS_SQL = """
select job_id, tier, step, end_ts, barrier_s
from checkpoint_latency
where $as_of::timestamptz is null or end_ts <= $as_of::timestamptz
qualify row_number() over (partition by job_id, tier order by end_ts desc, step desc) <= $window
order by job_id, tier, end_ts, step
"""
JOBS_SQL = "select job_id, checkpoint_timeout_s, checkpoint_interval_s from stg_jobs"
#: The views ``load_window`` reads: all a connection for the alerts needs to build.
VIEWS = ("checkpoint_latency", "stg_jobs")


@dataclass(frozen=True)
class JobHeadroom:
    """One job and tier over its trailing window: the tail, the headroom, the forecast."""

    job_id: str
    tier: str
    n_checkpoints: int
    first_ts: datetime
    last_ts: datetime
    #: Median, p99 and max of the window's barrier times (over checkpoints; the p50 and p99 of
    #: ``job_latency`` over the same checkpoints: :func:`ckptwatch.analysis.quantiles.quantiles`).
    p50_s: float
    p99_s: float
    max_s: float
    #: The statistic the levels apply to (``max_s`` or ``p99_s``).
    tail_s: float
    tail_stat: TailStat
    timeout_s: float
    warning_s: float
    critical_s: float
    #: Step of the window's slowest checkpoint.
    worst_step: int
    forecast: Forecast

    @property
    def headroom_s(self) -> float:
        """Timeout minus tail: how much slower the tail may get before the watchdog fires."""
        return self.timeout_s - self.tail_s

    @property
    def level(self) -> Severity | None:
        """``critical``, ``warning`` or None from the tail alone."""
        return classify(self.tail_s, self.warning_s, self.critical_s)

    @property
    def severity(self) -> Severity | None:
        """The level, or ``warning`` when only the forecast warns."""
        return self.level or ("warning" if self.forecast.warns else None)


def duration_text(seconds: float) -> str:
    """A duration as a person reads it: "45 s", "12 min", "5.3 h", "9.2 days"."""
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 2 * 3600:
        return f"{seconds / 60:.0f} min"
    if seconds < 2 * 86400:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / 86400:.1f} days"


def job_intervals(jobs: pl.DataFrame) -> dict[str, float]:
    """job_id -> checkpoint_interval_s, where the jobs frame has one."""
    if "checkpoint_interval_s" not in jobs.columns:
        return {}
    return {str(j): float(v) for j, v in jobs.select("job_id", "checkpoint_interval_s")
            .iter_rows() if v is not None and v > 0}


def stale_reason(job_id: str, newest_s: float, settings: AlertSettings, intervals: dict[str,
                 float], now: datetime) -> str | None:
    """Why ``job_id`` is history (its newest record, ``newest_s`` epoch s, is older than its
    staleness horizon as of ``now``), or None while it is not."""
    horizon = settings.for_job(job_id).stale_horizon_s(intervals.get(job_id))
    age = now.timestamp() - newest_s
    if age <= horizon:
        return None
    return (f"stale: no record since {iso(from_epoch(newest_s))} ({duration_text(age)} ago; "
            f"its staleness horizon is {duration_text(horizon)})")


def assess_job(job_id: str, tier: str, end_epoch_s: np.ndarray, barrier_s: np.ndarray,
               steps: np.ndarray, timeout_s: float, cfg: JobAlertSettings,
               min_forecast_points: int) -> JobHeadroom:
    """Headroom and forecast of one job from its window (arrays sorted by end time)."""
    p50, p99 = (math.nan if v is None else v for v in quantiles(barrier_s.tolist(), (0.5, 0.99)))
    worst = int(np.argmax(barrier_s))
    mx = float(barrier_s[worst])
    lv = levels(cfg, timeout_s)
    if lv is None:
        raise ValueError(f"job {job_id}: no positive timeout to assess against ({timeout_s})")
    warning_s, critical_s = lv.warning_s, lv.critical_s
    tail_stat: TailStat = "max" if cfg.tail == "max" else "p99"
    return JobHeadroom(
        job_id=job_id, tier=tier, n_checkpoints=len(barrier_s),
        first_ts=from_epoch(float(end_epoch_s.min())),
        last_ts=from_epoch(float(end_epoch_s.max())),
        p50_s=p50, p99_s=p99, max_s=mx, tail_s=mx if tail_stat == "max" else p99,
        tail_stat=tail_stat, timeout_s=timeout_s, warning_s=warning_s, critical_s=critical_s,
        worst_step=int(steps[worst]),
        forecast=forecast_tail(end_epoch_s, barrier_s, warning_s=warning_s,
                               timeout_s=timeout_s, horizon_s=cfg.horizon_s,
                               min_points=min_forecast_points,
                               tail_s=mx if tail_stat == "max" else p99))


def headroom(checkpoints: pl.DataFrame, jobs: pl.DataFrame, settings: AlertSettings, *,
             now: datetime, newest: dict[str, float] | None = None
             ) -> tuple[list[JobHeadroom], dict[tuple[str, str], str]]:
    """Assess every (job, tier) of ``checkpoints``; also the ones skipped, with the reason.

    ``checkpoints``: job_id, tier, step, end_ts, barrier_s (any number of rows per job; the
    last ``window`` by end time are used). ``jobs``: job_id, checkpoint_timeout_s and,
    optionally, checkpoint_interval_s (the staleness horizon). ``newest``: job_id -> a newer
    record of the job than its checkpoints (an open checkpoint's, epoch s).
    """
    missing = [c for c in CHECKPOINT_COLUMNS if c not in checkpoints.columns]
    if missing:
        raise ValueError(f"checkpoints frame lacks column(s) {', '.join(missing)}")
    timeouts = {str(r["job_id"]): r["checkpoint_timeout_s"] for r in
                jobs.select("job_id", "checkpoint_timeout_s").iter_rows(named=True)}
    frame = (checkpoints
             .filter(pl.col("barrier_s").is_not_null() & pl.col("end_ts").is_not_null())
             .with_columns((pl.col("end_ts").dt.epoch("us") / 1e6).alias("_end"))
             .sort("job_id", "tier", "_end", "step"))
    intervals = job_intervals(jobs)
    latest = dict(newest or {})
    for job_id, end_s in frame.group_by("job_id").agg(pl.col("_end").max()).iter_rows():
        latest[str(job_id)] = max(float(end_s), latest.get(str(job_id), float("-inf")))
    out: list[JobHeadroom] = []
    skipped: dict[tuple[str, str], str] = {}
    for (job_id, tier), rows in frame.group_by("job_id", "tier", maintain_order=True):
        job_id, tier = str(job_id), str(tier)
        cfg = settings.for_job(job_id)
        rows = rows.tail(cfg.window)
        end = rows["_end"].to_numpy()
        timeout = timeouts.get(job_id)
        if not cfg.enabled:
            skipped[(job_id, tier)] = "alerting is disabled for this job in the settings"
        elif timeout is None or not timeout > 0:
            skipped[(job_id, tier)] = "the job has no checkpoint_timeout_s in the jobs table"
        elif stale := stale_reason(job_id, latest[job_id], settings, intervals, now):
            skipped[(job_id, tier)] = stale
        else:
            out.append(assess_job(job_id, tier, end, rows["barrier_s"].to_numpy(),
                                  rows["step"].to_numpy(), float(timeout), cfg,
                                  settings.min_forecast_points))
    return out, skipped


def newest_checkpoint_end(con: duckdb.DuckDBPyConnection) -> datetime | None:
    """When the newest checkpoint of a connected lake ended (None: no checkpoint): the time
    a replay of an old lake evaluates as of."""
    from ckptwatch.lake.query import run_sql

    end = run_sql(con, "select max(end_ts) as end_ts from checkpoint_latency")["end_ts"][0]
    return None if end is None else end


def load_window(con: duckdb.DuckDBPyConnection, settings: AlertSettings,
                as_of: datetime | None = None) -> tuple[pl.DataFrame, pl.DataFrame]:
    """(trailing-window checkpoints, job timeouts) from the marts of a connected lake.

    With ``as_of``, checkpoints that ended after it are left out (a replay as of that time).
    """
    from ckptwatch.lake.query import run_sql

    checkpoints = run_sql(con, CHECKPOINTS_SQL,
                          {"as_of": as_of, "window": settings.max_window()})
    jobs = run_sql(con, JOBS_SQL)
    return checkpoints, jobs
