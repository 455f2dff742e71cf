"""Where a job's checkpoint tail is heading: a robust trend of barrier time over its window.

The forecast fits a robust trend (scikit-learn ``HuberRegressor``) to barrier time against
time over the window, lifts it by the :data:`TAIL_RESIDUAL_QUANTILE` quantile of the residuals
(the tail above the trend), and predicts when that envelope reaches the warning level and the
timeout. No forecast from fewer than ``min_points`` checkpoints, and none further ahead than
:data:`MAX_EXTRAPOLATION` times the time the window spans.

Also the two timestamp forms the alerts use: :func:`iso` (Alertmanager's) and
:func:`from_epoch`.
"""

from __future__ import annotations

import functools
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np

#: The forecast never extrapolates further than this many times the span of its window.
MAX_EXTRAPOLATION = 2.0
#: Quantile of the trend's residuals that lifts the trend to the tail envelope.
TAIL_RESIDUAL_QUANTILE = 0.9


def iso(ts: datetime) -> str:
    """RFC 3339 UTC timestamp with a ``Z``, to the second (Alertmanager's format)."""
    return ts.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def from_epoch(epoch_s: float) -> datetime:
    """The UTC time of ``epoch_s`` seconds since the epoch."""
    return datetime.fromtimestamp(epoch_s, UTC)


def _hours(seconds: float) -> str:
    return f"{seconds / 3600:.1f} h"


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
                  timeout_s: float, horizon_s: float, min_points: int = 6,
                  tail_s: float | None = None) -> Forecast:
    """Fit the trend of barrier time over time and predict the warning/timeout crossings.

    ``end_epoch_s`` are the checkpoints' end times (epoch seconds), ``barrier_s`` their
    barrier times. Crossing times are measured from the last checkpoint. ``tail_s``: the
    window's tail now; when it is past the warning level already, the note says so rather than
    that the (trend's) tail "stays below" it.
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
    last = from_epoch(float(t.max()))
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
        if tail_s is not None and tail_s >= warning_s and envelope < warning_s:
            note = (f"{trend}: the tail ({tail_s:.1f} s) is past the warning level "
                    f"{warning_s:.1f} s already, above the trend: a spike, not a rise; the "
                    f"trend stays below it for the next {_hours(horizon_h * 3600)}")
    return Forecast(
        n, slope, envelope,
        warning_at=None if x_warn is None else last + timedelta(hours=x_warn),
        timeout_at=None if x_timeout is None else last + timedelta(hours=x_timeout),
        horizon_s=horizon_h * 3600, note=note)
