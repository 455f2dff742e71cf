"""Timeout headroom, its forecast, and the alerts they raise — evaluation, payloads, state.

Vocabulary (DESIGN.md, "Definitions"): a checkpoint's *barrier time* (``barrier_s``) is its
slowest rank. Per job and tier, over the trailing window of its last ``window`` checkpoints:

- the *tail* is the max (or p99, per setting) of the barrier times in the window;
- *headroom* = ``checkpoint_timeout_s`` − tail;
- the *level* is ``critical`` when tail ≥ critical × timeout, ``warning`` when
  tail ≥ warning × timeout;
- the *forecast* fits a robust trend (scikit-learn ``HuberRegressor``) to barrier time against
  time over the window, lifts it by the 90th percentile of the residuals (the tail above the
  trend), and predicts when that envelope reaches the warning level and the timeout. A rising
  envelope that gets there within the horizon raises a ``warning`` and says when. No forecast
  from fewer than ``min_forecast_points`` checkpoints, and none further ahead than twice the
  time the window spans.

One alert (``alertname`` :data:`ALERTNAME`) per job and tier; ``severity`` is one of its labels,
so a change of severity resolves the old alert and fires the new one. Hysteresis: a firing
alert is lowered or resolved only when the tail has been below its level minus
``resolve_margin`` × timeout (and, for a warning, the forecast no longer warns) for
``resolve_after`` consecutive evaluations. A firing alert is sent once, then again only every
``resend_after_s`` to keep Alertmanager's ``endsAt`` in the future; a resolution is sent once.

:func:`evaluate` is pure (frames + settings + previous state in, due alerts + new state out);
:func:`run_alerts` / :func:`evaluate_and_send` wire the lake, the state file
``LAKE/_state/alerts.json`` and the sinks.

Stall attribution plugs in through a :data:`CauseProvider`: given the DuckDB connection and the
window's checkpoints it returns ``{job_id: (step, cause)}`` for the worst recent stall of each
job it can explain; the alert then carries ``top_cause``.
"""

from __future__ import annotations

import functools
import hashlib
import json
import logging
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

import duckdb
import numpy as np
import polars as pl

from ckptwatch.alerts.sinks import Alert, Sink, SinkError, build_sinks, deliver
from ckptwatch.errors import LakeError
from ckptwatch.lake.store import Lake, atomic_write_bytes
from ckptwatch.settings import AlertSettings, JobAlertSettings, Settings

log = logging.getLogger(__name__)

ALERTNAME = "CheckpointTailNearTimeout"
STATE_FILE = Path("_state") / "alerts.json"
STATE_VERSION = 1
#: The forecast never extrapolates further than this many times the span of its window.
MAX_EXTRAPOLATION = 2.0
#: Quantile of the trend's residuals that lifts the trend to the tail envelope.
TAIL_RESIDUAL_QUANTILE = 0.9
SEVERITY_RANK = {None: 0, "warning": 1, "critical": 2}

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
JOBS_SQL = "select job_id, checkpoint_timeout_s from stg_jobs"

#: ``{job_id: (step, cause)}``: the worst recent stall of a job and its top attributed cause.
Causes = Mapping[str, tuple[int, str]]
#: The window's checkpoints -> :data:`Causes` (the nightly run passes
#: :meth:`ckptwatch.analysis.findings.StallFindings.top_causes`: stalls attributed once).
CauseProvider = Callable[[pl.DataFrame], Causes]


def iso(ts: datetime) -> str:
    """RFC 3339 UTC timestamp with a ``Z``, to the second (Alertmanager's format)."""
    return ts.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _utc(epoch_s: float) -> datetime:
    return datetime.fromtimestamp(epoch_s, UTC)


def _hours(seconds: float) -> str:
    return f"{seconds / 3600:.1f} h"


# -- forecast ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Forecast:
    """Where the tail is heading: the trend, and when it reaches the warning level/timeout."""

    n_points: int
    #: Slope of the robust trend, seconds of barrier time per hour (None: no fit).
    slope_s_per_h: float | None = None
    #: The tail envelope (trend + residual lift) at the last checkpoint.
    envelope_s: float | None = None
    #: Predicted crossing of the warning level, when within the horizon.
    warning_at: datetime | None = None
    #: Predicted crossing of the timeout, when within the horizon.
    timeout_at: datetime | None = None
    #: The horizon actually used (capped at MAX_EXTRAPOLATION × window span), seconds.
    horizon_s: float = 0.0
    #: One line for people: the trend and the crossings, or why there is no forecast.
    note: str = ""

    @property
    def warns(self) -> bool:
        """True when the tail is forecast to reach the warning level or the timeout in time."""
        return self.warning_at is not None or self.timeout_at is not None


@functools.cache
def _blas_controller() -> Any:
    from threadpoolctl import ThreadpoolController

    return ThreadpoolController()


def forecast_tail(end_epoch_s: Sequence[float] | np.ndarray,
                  barrier_s: Sequence[float] | np.ndarray, *, warning_s: float,
                  timeout_s: float, horizon_s: float, min_points: int = 6) -> Forecast:
    """Fit the trend of barrier time over time and predict the warning/timeout crossings.

    ``end_epoch_s`` are the checkpoints' end times (epoch seconds), ``barrier_s`` their
    barrier times. Crossing times are measured from the last checkpoint.
    """
    t = np.asarray(end_epoch_s, dtype=float)
    y = np.asarray(barrier_s, dtype=float)
    n = len(y)
    if n < min_points:
        return Forecast(n, note=f"no forecast: {n} checkpoint(s) in the window, "
                        f"needs {min_points}")
    x_h = (t - t.max()) / 3600.0
    span_h = float(x_h.max() - x_h.min())
    if span_h <= 0:
        return Forecast(n, note="no forecast: the window's checkpoints share one end time")
    from sklearn.exceptions import ConvergenceWarning
    from sklearn.linear_model import HuberRegressor

    X = x_h.reshape(-1, 1)
    # One BLAS thread: on a 20-point fit, OpenBLAS's thread hand-offs cost ~50x the maths.
    with warnings.catch_warnings(), _blas_controller().limit(limits=1, user_api="blas"):
        warnings.simplefilter("ignore", ConvergenceWarning)
        model = HuberRegressor(epsilon=1.35, alpha=0.0, max_iter=1000).fit(X, y)
    slope = float(model.coef_[0])
    resid = y - model.predict(X)
    lift = max(0.0, float(np.quantile(resid, TAIL_RESIDUAL_QUANTILE)))
    envelope = float(model.intercept_) + lift
    horizon_h = min(horizon_s / 3600.0, MAX_EXTRAPOLATION * span_h)
    last = _utc(float(t.max()))
    trend = f"trend {slope:+.1f} s/h over {n} checkpoints, tail envelope {envelope:.1f} s"
    if slope <= 0:
        return Forecast(n, slope, envelope, horizon_s=horizon_h * 3600,
                        note=f"{trend}: not rising")

    def crossing(level: float) -> float | None:
        x = max(0.0, (level - envelope) / slope)
        return x if x <= horizon_h else None

    x_warn, x_timeout = crossing(warning_s), crossing(timeout_s)
    parts = []
    if x_warn is not None:
        parts.append(f"reaches the warning level {warning_s:.1f} s at "
                     f"{iso(last + timedelta(hours=x_warn))} ({_hours(x_warn * 3600)} after "
                     "the last checkpoint)" if envelope < warning_s else
                     f"is above the warning level {warning_s:.1f} s already")
    if x_timeout is not None:
        parts.append(f"reaches the {timeout_s:.1f} s timeout at "
                     f"{iso(last + timedelta(hours=x_timeout))} "
                     f"({_hours(x_timeout * 3600)} after the last checkpoint)")
    if parts:
        note = f"{trend}: " + "; ".join(parts)
    else:
        below = "the timeout" if envelope >= warning_s else f"the warning level {warning_s:.1f} s"
        note = f"{trend}: stays below {below} for the next {_hours(horizon_h * 3600)}"
    return Forecast(
        n, slope, envelope,
        warning_at=None if x_warn is None else last + timedelta(hours=x_warn),
        timeout_at=None if x_timeout is None else last + timedelta(hours=x_timeout),
        horizon_s=horizon_h * 3600, note=note)


# -- headroom per job -------------------------------------------------------------------------


@dataclass(frozen=True)
class JobHeadroom:
    """One job and tier over its trailing window: the tail, the headroom, the forecast."""

    job_id: str
    tier: str
    n_checkpoints: int
    first_ts: datetime
    last_ts: datetime
    #: Median, p99 and max of the window's barrier times (over checkpoints).
    p50_s: float
    p99_s: float
    max_s: float
    #: The statistic the levels apply to (``max_s`` or ``p99_s``).
    tail_s: float
    tail_stat: str
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
    def level(self) -> str | None:
        """``critical``, ``warning`` or None from the tail alone."""
        if self.tail_s >= self.critical_s:
            return "critical"
        if self.tail_s >= self.warning_s:
            return "warning"
        return None

    @property
    def severity(self) -> str | None:
        """The level, or ``warning`` when only the forecast warns."""
        return self.level or ("warning" if self.forecast.warns else None)


def assess_job(job_id: str, tier: str, end_epoch_s: np.ndarray, barrier_s: np.ndarray,
               steps: np.ndarray, timeout_s: float, cfg: JobAlertSettings,
               min_forecast_points: int) -> JobHeadroom:
    """Headroom and forecast of one job from its window (arrays sorted by end time)."""
    p50, p99 = (float(v) for v in np.quantile(barrier_s, [0.5, 0.99]))
    worst = int(np.argmax(barrier_s))
    mx = float(barrier_s[worst])
    warning_s, critical_s = cfg.warning * timeout_s, cfg.critical * timeout_s
    return JobHeadroom(
        job_id=job_id, tier=tier, n_checkpoints=len(barrier_s),
        first_ts=_utc(float(end_epoch_s.min())), last_ts=_utc(float(end_epoch_s.max())),
        p50_s=p50, p99_s=p99, max_s=mx, tail_s=mx if cfg.tail == "max" else p99,
        tail_stat=cfg.tail, timeout_s=timeout_s, warning_s=warning_s, critical_s=critical_s,
        worst_step=int(steps[worst]),
        forecast=forecast_tail(end_epoch_s, barrier_s, warning_s=warning_s,
                               timeout_s=timeout_s, horizon_s=cfg.horizon_s,
                               min_points=min_forecast_points))


def headroom(checkpoints: pl.DataFrame, jobs: pl.DataFrame, settings: AlertSettings, *,
             now: datetime) -> tuple[list[JobHeadroom], dict[tuple[str, str], str]]:
    """Assess every (job, tier) of ``checkpoints``; also the ones skipped, with the reason.

    ``checkpoints``: job_id, tier, step, end_ts, barrier_s (any number of rows per job; the
    last ``window`` by end time are used). ``jobs``: job_id, checkpoint_timeout_s.
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
        elif (settings.stale_after_s is not None
              and now.timestamp() - float(end.max()) > settings.stale_after_s):
            skipped[(job_id, tier)] = (f"no checkpoint since {iso(_utc(float(end.max())))} "
                                       f"(stale_after_s {settings.stale_after_s:g})")
        else:
            out.append(assess_job(job_id, tier, end, rows["barrier_s"].to_numpy(),
                                  rows["step"].to_numpy(), float(timeout), cfg,
                                  settings.min_forecast_points))
    return out, skipped


# -- state ------------------------------------------------------------------------------------


def fingerprint(labels: Mapping[str, str]) -> str:
    """Stable id of an alert: a hash of its sorted labels."""
    text = "\x00".join(f"{k}={labels[k]}" for k in sorted(labels))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


@dataclass
class AlertRecord:
    """A firing alert as the state remembers it."""

    labels: dict[str, str]
    annotations: dict[str, str]
    starts_at: str
    #: Consecutive evaluations with the tail clear of this alert's level (hysteresis).
    ok_count: int = 0
    #: When this alert was last sent (handed to the sinks).
    sent_at: str | None = None

    @property
    def fingerprint(self) -> str:
        """The alert's fingerprint."""
        return fingerprint(self.labels)

    @property
    def key(self) -> tuple[str, str]:
        """(job_id, tier): one alert of this name per key."""
        return self.labels["job_id"], self.labels["tier"]

    @property
    def severity(self) -> str:
        """The severity label."""
        return self.labels["severity"]

    def to_json(self) -> dict[str, Any]:
        """JSON form for the state file."""
        return {"status": "firing", "labels": self.labels, "annotations": self.annotations,
                "startsAt": self.starts_at, "sent_at": self.sent_at, "ok_count": self.ok_count}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> AlertRecord:
        """Inverse of :meth:`to_json`."""
        return cls(labels=dict(data["labels"]), annotations=dict(data["annotations"]),
                   starts_at=str(data["startsAt"]), ok_count=int(data.get("ok_count", 0)),
                   sent_at=data.get("sent_at"))


@dataclass
class AlertState:
    """What the previous runs left: firing alerts, and alerts a sink has yet to receive."""

    firing: dict[str, AlertRecord] = field(default_factory=dict)
    #: sink name -> fingerprint -> alert that sink failed to receive (sent again next run).
    pending: dict[str, dict[str, Alert]] = field(default_factory=dict)
    evaluated_at: str | None = None

    def to_json(self) -> dict[str, Any]:
        """JSON form for the state file."""
        return {"version": STATE_VERSION, "evaluated_at": self.evaluated_at,
                "alerts": {fp: r.to_json() for fp, r in sorted(self.firing.items())},
                "pending": self.pending}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> AlertState:
        """Inverse of :meth:`to_json`."""
        if data.get("version") != STATE_VERSION:
            raise ValueError(f"state version {data.get('version')!r}, expected {STATE_VERSION}")
        firing = {fp: AlertRecord.from_json(r) for fp, r in data.get("alerts", {}).items()}
        return cls(firing=firing, pending={k: dict(v) for k, v in data.get("pending", {}).items()},
                   evaluated_at=data.get("evaluated_at"))


def state_path(lake_root: Path | str) -> Path:
    """``LAKE/_state/alerts.json``."""
    return Lake(lake_root).root / STATE_FILE


def load_state(lake_root: Path | str) -> AlertState:
    """The alert state of a lake (empty when there is none yet)."""
    path = state_path(lake_root)
    try:
        return AlertState.from_json(json.loads(path.read_text()))
    except FileNotFoundError:
        return AlertState()
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise LakeError(f"corrupt alert state {path}: {exc}; move it aside to start afresh "
                        "(alerts still firing will be sent again)") from None


def save_state(lake_root: Path | str, state: AlertState) -> None:
    """Write the alert state atomically."""
    data = json.dumps(state.to_json(), indent=1, sort_keys=True).encode()
    atomic_write_bytes(state_path(lake_root), data)


# -- evaluation -------------------------------------------------------------------------------


@dataclass
class Evaluation:
    """One evaluation: every job's headroom, the alerts due now, the state after sending."""

    jobs: list[JobHeadroom]
    skipped: dict[tuple[str, str], str]
    due: list[Alert]
    state: AlertState


def _pct(part: float, whole: float) -> str:
    return f"{100 * part / whole:.0f}%"


def _annotations(h: JobHeadroom, severity: str | None, causes: Causes | None,
                 resolved: str | None = None) -> dict[str, str]:
    tail = f"{h.tail_s:.1f} s ({h.tail_stat} of the last {h.n_checkpoints} checkpoints)"
    if resolved is not None:
        summary = (f"Checkpoint tail of job {h.job_id} ({h.tier}) {resolved}: {tail}, "
                   f"{_pct(h.tail_s, h.timeout_s)} of its {h.timeout_s:.1f} s timeout, "
                   f"{h.headroom_s:.1f} s of headroom.")
    elif h.level is None and severity == "warning":
        when = h.forecast.warning_at or h.forecast.timeout_at
        what = "the warning level" if h.forecast.warning_at else "the timeout"
        summary = (f"Checkpoint tail of job {h.job_id} ({h.tier}) is rising: {tail}, "
                   f"{_pct(h.tail_s, h.timeout_s)} of its {h.timeout_s:.1f} s timeout; "
                   f"forecast to reach {what} at {iso(when) if when else '?'}.")
    else:
        summary = (f"Checkpoint tail of job {h.job_id} ({h.tier}) is {tail}, "
                   f"{_pct(h.tail_s, h.timeout_s)} of its {h.timeout_s:.1f} s timeout: "
                   f"{h.headroom_s:.1f} s of headroom left (warning at {h.warning_s:.1f} s, "
                   f"critical at {h.critical_s:.1f} s).")
    ann = {
        "summary": summary,
        "p50_s": f"{h.p50_s:.1f}", "p99_s": f"{h.p99_s:.1f}", "max_s": f"{h.max_s:.1f}",
        "timeout_s": f"{h.timeout_s:.1f}", "headroom_s": f"{h.headroom_s:.1f}",
        "warning_s": f"{h.warning_s:.1f}", "critical_s": f"{h.critical_s:.1f}",
        "window": f"{h.n_checkpoints} checkpoints, {iso(h.first_ts)} .. {iso(h.last_ts)}",
        "worst_step": str(h.worst_step),
        "forecast": h.forecast.note,
    }
    if h.forecast.warning_at is not None:
        ann["forecast_warning_at"] = iso(h.forecast.warning_at)
    if h.forecast.timeout_at is not None:
        ann["forecast_timeout_at"] = iso(h.forecast.timeout_at)
    if causes and h.job_id in causes:
        step, cause = causes[h.job_id]
        ann["top_cause"] = f"{cause} (step {step})"
    return ann


def _holds(severity: str, h: JobHeadroom, margin_s: float) -> bool:
    """Is the tail still within the hysteresis band of ``severity``?"""
    if severity == "critical":
        return h.tail_s >= h.critical_s - margin_s
    return h.tail_s >= h.warning_s - margin_s or h.forecast.warns


def _target(h: JobHeadroom, rec: AlertRecord | None,
            settings: AlertSettings) -> tuple[str | None, int]:
    """(severity the alert should have now, consecutive-clear count) — with hysteresis."""
    raw = h.severity
    cur = rec.severity if rec else None
    if SEVERITY_RANK[raw] >= SEVERITY_RANK[cur]:
        return raw, 0
    assert rec is not None and cur is not None
    margin_s = settings.resolve_margin * h.timeout_s
    candidate = next((s for s in ("critical", "warning")
                      if SEVERITY_RANK[s] <= SEVERITY_RANK[cur] and _holds(s, h, margin_s)),
                     None)
    if candidate == cur:
        return cur, 0
    ok = rec.ok_count + 1
    return (candidate, 0) if ok >= settings.resolve_after else (cur, ok)


def _alert(rec: AlertRecord, status: str, ends_at: datetime) -> Alert:
    return {"labels": dict(rec.labels), "annotations": dict(rec.annotations),
            "startsAt": rec.starts_at, "endsAt": iso(ends_at), "status": status,
            "fingerprint": rec.fingerprint}


def evaluate(checkpoints: pl.DataFrame, jobs: pl.DataFrame, settings: AlertSettings,
             state: AlertState | None = None, *, now: datetime,
             causes: Causes | None = None) -> Evaluation:
    """Evaluate every job against its levels and forecast; return due alerts and new state.

    Pure: nothing is read or written. ``state`` is the previous run's (None: first run).
    The returned state assumes the due alerts get sent; the caller adds what a sink missed
    to its ``pending``. ``causes`` (from a :data:`CauseProvider`) adds ``top_cause``.
    """
    if now.tzinfo is None:
        raise ValueError("now must be timezone-aware")
    prev = state or AlertState()
    assessed, skipped = headroom(checkpoints, jobs, settings, now=now)
    by_key = {rec.key: replace(rec) for rec in prev.firing.values()}  # don't mutate the input
    firing: dict[str, AlertRecord] = {}
    due: list[Alert] = []
    ttl = timedelta(seconds=settings.firing_ttl_s)
    stamp = iso(now)

    for h in assessed:
        rec = by_key.pop((h.job_id, h.tier), None)
        target, ok = _target(h, rec, settings)
        if rec is not None and target == rec.severity:  # still firing, same alert
            rec.annotations = _annotations(h, target, causes)
            rec.ok_count = ok
            last = datetime.fromisoformat(rec.sent_at) if rec.sent_at else None
            if last is None or (now - last).total_seconds() >= settings.resend_after_s:
                rec.sent_at = stamp
                due.append(_alert(rec, "firing", now + ttl))
            firing[rec.fingerprint] = rec
            continue
        if rec is not None:  # severity changed or recovered: resolve the old alert
            why = "has recovered" if target is None else f"is now {target}"
            rec.annotations = _annotations(h, None, causes, resolved=why)
            due.append(_alert(rec, "resolved", now))
        if target is not None:
            labels = {"alertname": ALERTNAME, "job_id": h.job_id, "tier": h.tier,
                      "severity": target}
            new = AlertRecord(labels=labels, annotations=_annotations(h, target, causes),
                              starts_at=stamp, sent_at=stamp)
            due.append(_alert(new, "firing", now + ttl))
            firing[new.fingerprint] = new

    for key, rec in sorted(by_key.items()):  # firing alerts of jobs no longer assessed
        reason = skipped.get(key, "no checkpoints of this job and tier in the lake")
        rec.annotations = {**rec.annotations,
                           "summary": f"Alert on job {key[0]} ({key[1]}) resolved: {reason}."}
        due.append(_alert(rec, "resolved", now))

    pending = {sink: dict(alerts) for sink, alerts in prev.pending.items()}
    new_state = AlertState(firing=firing, pending=pending, evaluated_at=stamp)
    return Evaluation(jobs=assessed, skipped=skipped, due=due, state=new_state)


def _crossing_label(f: Forecast) -> str:
    if f.warning_at is not None:
        return f"warning level {iso(f.warning_at)}"
    if f.timeout_at is not None:
        return f"timeout {iso(f.timeout_at)}"
    return "-" if f.slope_s_per_h is not None else "n/a"


def headroom_frame(ev: Evaluation) -> pl.DataFrame:
    """Every assessed job as a table (the CLI's table format)."""
    severity = {r.key: r.severity for r in ev.state.firing.values()}
    rows = [{
        "job_id": h.job_id, "tier": h.tier, "n": h.n_checkpoints, "p50_s": h.p50_s,
        "p99_s": h.p99_s, "max_s": h.max_s, "timeout_s": h.timeout_s,
        "headroom_s": h.headroom_s, "level": h.level or "ok",
        "alert": severity.get((h.job_id, h.tier), "-"),
        "trend_s_per_h": h.forecast.slope_s_per_h,
        "forecast": _crossing_label(h.forecast),
    } for h in ev.jobs]
    schema = {"job_id": pl.String, "tier": pl.String, "n": pl.Int64, "p50_s": pl.Float64,
              "p99_s": pl.Float64, "max_s": pl.Float64, "timeout_s": pl.Float64,
              "headroom_s": pl.Float64, "level": pl.String, "alert": pl.String,
              "trend_s_per_h": pl.Float64, "forecast": pl.String}
    return pl.DataFrame(rows, schema=schema)


# -- the lake and the sinks -------------------------------------------------------------------


@dataclass
class AlertRun:
    """One run over a lake: the evaluation, what was (or would be) sent, sink failures."""

    evaluation: Evaluation
    alerts: list[Alert]
    failures: list[SinkError]
    sent: bool


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


def _would_send(due: Sequence[Alert], pending: Mapping[str, Mapping[str, Alert]],
                sinks: Sequence[Sink]) -> list[Alert]:
    out = {(a["fingerprint"], a["status"]): a for a in due}
    due_fps = {a["fingerprint"] for a in due}
    for sink in sinks:
        for fp, a in pending.get(sink.name, {}).items():
            if fp not in due_fps:
                out.setdefault((fp, a["status"]), a)
    return list(out.values())


def run_alerts(lake_root: Path | str, settings: Settings, *, send: bool,
               now: datetime | None = None, sinks: Sequence[Sink] | None = None,
               cause_provider: CauseProvider | None = None,
               lock_wait_s: float = 600.0,
               days: tuple[date, date] | None = None,
               memory_limit: str | None = None) -> AlertRun:
    """Evaluate the lake's jobs; with ``send``, deliver due alerts and record the state.

    ``now`` (default: the current time) given explicitly evaluates as of that time: checkpoints
    that ended later are left out. Without ``send`` nothing is written: ``alerts`` are those a
    send would deliver now. With
    ``send`` the lake lock is held from reading the state to writing it; a sink that fails keeps
    its alerts pending in the state for the next run and is listed in ``failures``.
    ``sinks`` defaults to those the settings configure. ``days``: read only those days of the
    lake (see ``query.connect``; the nightly run passes its report day and lookback).
    """
    from ckptwatch.lake.query import connect

    as_of = now  # an explicit time is a replay: leave out checkpoints that ended after it
    now = now or datetime.now(UTC)
    sinks = build_sinks(settings) if sinks is None else list(sinks)
    con = connect(lake_root, days=days, memory_limit=memory_limit)
    try:
        checkpoints, jobs = load_window(con, settings.alerts, as_of)
    finally:
        con.close()
    causes = cause_provider(checkpoints) if cause_provider else None
    if not send:
        ev = evaluate(checkpoints, jobs, settings.alerts, load_state(lake_root), now=now,
                      causes=causes)
        return AlertRun(ev, _would_send(ev.due, ev.state.pending, sinks), [], sent=False)
    with Lake(lake_root).lock(lock_wait_s):
        ev = evaluate(checkpoints, jobs, settings.alerts, load_state(lake_root), now=now,
                      causes=causes)
        delivery = deliver(ev.due, sinks, ev.state.pending)
        ev.state.pending = delivery.pending
        save_state(lake_root, ev.state)
    log.info("alerts: %d job(s) evaluated, %d alert(s) sent, %d sink failure(s)",
             len(ev.jobs), len(delivery.alerts), len(delivery.failures))
    return AlertRun(ev, delivery.alerts, delivery.failures, sent=True)
