"""The barrier time's tail: how likely a checkpoint outlasts the job's timeout.

A synchronous checkpoint's barrier waits for the slowest rank; when it exceeds
``checkpoint_timeout_s`` the job is killed (a collective watchdog fires). The planning model
needs ``q = P(barrier > timeout)`` per checkpoint, for each strategy. A tail is kept relative to
the median (``u = barrier / p50``) so that it moves with the bandwidth when a sweep changes the
nominal checkpoint time.

Two families:

- ``pareto`` (the default from tail factors): a power-law tail above the median,
  ``P(u > x) = 0.5 * x**-alpha`` for ``x >= 1``. Through p50 and p99 (``tail factor`` = p99/p50)
  ``alpha = ln 50 / ln(tail factor)``. It is the extreme-value (generalised Pareto, shape
  ``1/alpha``) form of a stall process with correlated bursts: heavy enough that the essay's
  "tail stall that can outlast the job's own timeout" has a probability, where a lognormal
  through the same two quantiles gives practically none.
- ``lognormal``: ``ln u ~ Normal(0, sigma)``; through p99, ``sigma = ln(tail factor) / z_0.99``.

:func:`fit_tail` fits both to measured barrier times (lognormal by maximum likelihood on the
logs; Pareto by the Hill estimator on the checkpoints above the median) and keeps the one with
the smaller Kolmogorov-Smirnov distance; both goodness-of-fit figures are reported.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ckptwatch.errors import PlanInputError

#: Standard normal quantile at 0.99.
Z99 = 2.3263478740408408
FAMILIES = ("pareto", "lognormal")


@dataclass(frozen=True)
class BarrierTail:
    """Distribution of barrier time / median barrier time."""

    family: str
    #: ``pareto``: the tail index alpha; ``lognormal``: sigma of ln(barrier / p50).
    shape: float
    #: Where it came from: ``tail factor`` or ``fit to N checkpoints in LAKE``.
    source: str = "tail factor"
    #: Kolmogorov-Smirnov distance of the fit (None: not fitted).
    ks_distance: float | None = None
    #: KS p-value of the fit (approximate: the parameters were estimated from the same data).
    ks_p_value: float | None = None

    def survival(self, ratio: float) -> float:
        """``P(barrier / p50 > ratio)``."""
        if ratio <= 0.0:
            return 1.0
        if self.family == "pareto":
            if ratio < 1.0:
                # below the median the tail model does not apply; the timeout is never there
                return 1.0 - 0.5 * ratio
            if math.isinf(self.shape):
                return 0.0 if ratio > 1.0 else 0.5
            return 0.5 * ratio ** -self.shape
        if self.family == "lognormal":
            if self.shape == 0.0:
                return 0.0 if ratio > 1.0 else 1.0
            return 0.5 * math.erfc(math.log(ratio) / (self.shape * math.sqrt(2.0)))
        raise PlanInputError(f"unknown tail family {self.family!r}; use one of: "
                             f"{', '.join(FAMILIES)}")

    @property
    def tail_factor(self) -> float:
        """p99 / p50 of this tail."""
        if self.family == "pareto":
            return 1.0 if math.isinf(self.shape) else 50.0 ** (1.0 / self.shape)
        return math.exp(Z99 * self.shape)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready mapping."""
        return {"family": self.family,
                "shape": None if math.isinf(self.shape) else self.shape,
                "tail_factor": self.tail_factor, "source": self.source,
                "ks_distance": self.ks_distance, "ks_p_value": self.ks_p_value}


def tail_from_factor(tail_factor: float, family: str = "pareto") -> BarrierTail:
    """The tail through p50 and p99 = p50 * ``tail_factor``."""
    if tail_factor < 1.0:
        raise PlanInputError(f"tail factor must be >= 1 (it is p99/p50; got {tail_factor:g})")
    log_tf = math.log(tail_factor)
    if family == "pareto":
        return BarrierTail("pareto", math.inf if log_tf == 0.0 else math.log(50.0) / log_tf)
    if family == "lognormal":
        return BarrierTail("lognormal", log_tf / Z99)
    raise PlanInputError(f"unknown tail family {family!r}; use one of: {', '.join(FAMILIES)}")


def timeout_probability(tail: BarrierTail, p50_s: float, timeout_s: float) -> float:
    """``P(barrier > timeout)`` for a checkpoint of nominal (median) barrier ``p50_s``; 0 when
    the timeout is off (``timeout_s <= 0`` or infinite)."""
    if timeout_s <= 0.0 or math.isinf(timeout_s):
        return 0.0
    if p50_s <= 0.0:
        return 0.0
    return min(tail.survival(timeout_s / p50_s), 1.0)


@dataclass(frozen=True)
class TailFit:
    """Both families fitted to measured barrier times, and the better one."""

    n: int
    median_s: float
    candidates: tuple[BarrierTail, ...]
    best: BarrierTail

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready mapping."""
        return {"checkpoints": self.n, "median_s": self.median_s,
                "candidates": [c.to_dict() for c in self.candidates],
                "chosen": self.best.family}


def fit_tail(barrier_s: Sequence[float], *, origin: str) -> TailFit:
    """Fit the lognormal and the Pareto tail to barrier times (seconds); keep the one with the
    smaller KS distance. ``origin`` names the data in messages and in each tail's ``source``."""
    import numpy as np
    from scipy import stats

    x = np.asarray([v for v in barrier_s if v is not None and math.isfinite(v)], dtype=float)
    if len(x) < 5 or np.any(x <= 0.0):
        raise PlanInputError(
            f"{origin}: a tail fit needs at least 5 positive barrier times (got {len(x)}"
            f"{', some <= 0' if np.any(x <= 0.0) else ''}); plan without it or measure more "
            "checkpoints")
    median = float(np.median(x))
    u = x / median
    logs = np.log(u)
    source = f"fit to {len(x)} checkpoints in {origin}"
    sigma = float(np.sqrt(np.mean(logs ** 2)))  # MLE with the location fixed at the median
    lognormal = BarrierTail("lognormal", sigma, source)
    above = u[u > 1.0]
    hill = float(len(above) / np.sum(np.log(above))) if len(above) and np.sum(
        np.log(above)) > 0 else math.inf
    pareto = BarrierTail("pareto", hill, source)
    fitted = []
    for tail in (lognormal, pareto):
        # KS over the whole sample for the lognormal, over the tail (u >= 1) for the Pareto,
        # where that family is defined.
        if tail.family == "lognormal":
            sample, cdf = u, (lambda v, t=tail: 1.0 - np.vectorize(t.survival)(v))
        else:
            sample = u[u >= 1.0]
            def cdf(v: Any, t: BarrierTail = tail) -> Any:
                return 1.0 - 2.0 * np.vectorize(t.survival)(v)
        res = stats.ks_1samp(sample, cdf)
        fitted.append(BarrierTail(tail.family, tail.shape, source, float(res.statistic),
                                  float(res.pvalue)))
    best = min(fitted, key=lambda t: t.ks_distance or 0.0)
    return TailFit(len(x), median, tuple(fitted), best)
