"""Where the verdict flips: sweeps of one parameter, the flips of the best strategy, the plan.

A flip is a value of one parameter at which the best strategy (smallest overhead, see
:mod:`ckptwatch.planning.model`) changes, all other inputs held. :func:`sweep` evaluates every
strategy on a grid and locates each change of the best one with Brent's method (integer
bisection for integer parameters); :func:`default_flips` scans the parameters that usually
decide; :func:`make_plan` puts the strategies, the verdict and its flips together.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ckptwatch.errors import PlanInputError
from ckptwatch.planning.model import (
    PARAMETERS,
    STRATEGIES,
    PlanInputs,
    StrategyResult,
    best_strategy,
    evaluate,
    finite_or_none,
    parameter,
    with_value,
)

if TYPE_CHECKING:
    from ckptwatch.planning.measure import LakeMeasurement

# --------------------------------------------------------------------------------------------
# Flips and sweeps


@dataclass(frozen=True)
class Flip:
    """Where the best strategy changes as one parameter grows past ``value`` (SI units)."""

    parameter: str
    value: float
    from_: str
    to: str

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready mapping: ``parameter, value, from, to`` plus the SI unit and a display."""
        p = parameter(self.parameter)
        return {"parameter": self.parameter, "value": self.value, "from": self.from_,
                "to": self.to, "unit": p.si_unit, "display": p.describe(self.value)}


@dataclass(frozen=True)
class Sweep:
    """Overhead of every strategy along one parameter (values in SI units)."""

    parameter: str
    values: tuple[float, ...]
    overhead: dict[str, tuple[float, ...]]
    best: tuple[str, ...]
    flips: tuple[Flip, ...]
    log_scale: bool

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready mapping."""
        p = parameter(self.parameter)
        return {
            "parameter": self.parameter, "unit": p.si_unit, "values": list(self.values),
            "overhead_fraction": {k: [finite_or_none(x) for x in v]
                                  for k, v in self.overhead.items()},
            "best": list(self.best),
        }


def sweep_values(lo: float, hi: float, n: int, *, integer: bool = False) -> tuple[float, ...]:
    """``n`` points from lo to hi: geometric when ``lo > 0`` and ``hi / lo >= 10``, else even."""
    if not (math.isfinite(lo) and math.isfinite(hi)) or hi <= lo:
        raise PlanInputError(f"sweep range must have LO < HI (got {lo:g}:{hi:g})")
    if n < 2:
        raise PlanInputError(f"a sweep needs at least 2 points (got {n})")
    import numpy as np

    grid = np.geomspace(lo, hi, n) if _is_log(lo, hi) else np.linspace(lo, hi, n)
    if integer:
        return tuple(float(v) for v in np.unique(np.round(grid)))
    return tuple(float(v) for v in grid)


def _is_log(lo: float, hi: float) -> bool:
    return lo > 0 and hi / lo >= 10.0


def _overheads(inputs: PlanInputs, name: str, value: float) -> dict[str, float]:
    results = evaluate(with_value(inputs, name, value))
    return {r.name: r.overhead_fraction for r in results}


def _argbest(ov: Mapping[str, float]) -> str:
    return min(STRATEGIES, key=lambda s: ov[s])


def _refine_flip(inputs: PlanInputs, name: str, lo: float, hi: float, a: str, b: str,
                 integer: bool, depth: int = 0) -> list[Flip]:
    """Flips between lo (best ``a``) and hi (best ``b``): root of overhead_a - overhead_b."""
    from scipy.optimize import brentq

    if integer:
        lo_i, hi_i = int(round(lo)), int(round(hi))
        while hi_i - lo_i > 1:
            mid = (lo_i + hi_i) // 2
            bm = _argbest(_overheads(inputs, name, mid))
            if bm == a:
                lo_i = mid
            elif bm == b:
                hi_i = mid
            elif depth < 8:
                return (_refine_flip(inputs, name, lo_i, mid, a, bm, True, depth + 1)
                        + _refine_flip(inputs, name, mid, hi_i, bm, b, True, depth + 1))
            else:
                break
        return [Flip(name, float(hi_i), a, b)]

    def gap(x: float) -> float:
        ov = _overheads(inputs, name, x)
        return ov[a] - ov[b]

    root = float(brentq(gap, lo, hi, xtol=1e-12, rtol=1e-9))
    ov = _overheads(inputs, name, root)
    third = _argbest(ov)
    if third not in (a, b) and ov[third] < min(ov[a], ov[b]) - 1e-12 and depth < 8:
        return (_refine_flip(inputs, name, lo, root, a, third, False, depth + 1)
                + _refine_flip(inputs, name, root, hi, third, b, False, depth + 1))
    return [Flip(name, root, a, b)]


def sweep(inputs: PlanInputs, name: str, lo: float, hi: float, n: int = 41) -> Sweep:
    """Overhead of every strategy for ``n`` values of one parameter in [lo, hi] (SI units),
    and every flip of the best strategy in that range, located with Brent's method."""
    p = parameter(name)
    values = sweep_values(lo, hi, n, integer=p.integer)
    for end in (values[0], values[-1]):
        try:
            with_value(inputs, p.name, end).validate()
        except PlanInputError as exc:
            raise PlanInputError(f"the sweep of {p.name} leaves the valid range: {exc}") from exc
    rows = [_overheads(inputs, p.name, v) for v in values]
    best = tuple(_argbest(ov) for ov in rows)
    flips: list[Flip] = []
    for i in range(len(values) - 1):
        if best[i] != best[i + 1]:
            flips += _refine_flip(inputs, p.name, values[i], values[i + 1], best[i],
                                  best[i + 1], p.integer)
    overhead = {s: tuple(ov[s] for ov in rows) for s in STRATEGIES}
    return Sweep(p.name, values, overhead, best, tuple(flips), _is_log(lo, hi))


#: Parameters scanned for flips when no sweep is asked for: (name, low factor, high factor)
#: around the current value, or absolute bounds for fractions.
DEFAULT_FLIP_SCANS: tuple[tuple[str, float, float], ...] = (
    ("pool_bandwidth", 0.1, 10.0),
    ("node_mtbf", 0.1, 10.0),
    ("ranks", 1 / 16, 16.0),
    ("bytes_per_rank", 0.1, 10.0),
    ("drive_loss_fraction", 0.0, 1.0),
)


def default_flips(inputs: PlanInputs, n: int = 17) -> tuple[Flip, ...]:
    """Flips of the five key parameters over :data:`DEFAULT_FLIP_SCANS` (one at a time)."""
    flips: list[Flip] = []
    for name, lo_f, hi_f in DEFAULT_FLIP_SCANS:
        p = PARAMETERS[name]
        if name == "drive_loss_fraction":
            lo, hi = lo_f, hi_f
        else:
            current = float(getattr(inputs, p.field))
            lo, hi = current * lo_f, current * hi_f
            if p.integer:
                lo, hi = max(1.0, math.floor(lo)), math.ceil(hi)
        flips += sweep(inputs, name, lo, hi, n).flips
    return tuple(flips)


# --------------------------------------------------------------------------------------------
# The whole plan


@dataclass(frozen=True)
class Plan:
    """Inputs, every strategy, the best one and where the verdict flips."""

    inputs: PlanInputs
    strategies: tuple[StrategyResult, ...]
    best: str
    flips: tuple[Flip, ...]
    measurement: LakeMeasurement | None = None
    sweep: Sweep | None = None

    def strategy(self, name: str) -> StrategyResult:
        """The result of one strategy by name."""
        return next(s for s in self.strategies if s.name == name)

    def to_dict(self) -> dict[str, Any]:
        """The JSON contract: inputs, strategies, best, flips (+ derived, measured, sweep)."""
        out: dict[str, Any] = {
            "inputs": self.inputs.to_dict(),
            "strategies": [s.to_dict() for s in self.strategies],
            "best": self.best,
            "flips": [f.to_dict() for f in self.flips],
            "derived": self.inputs.derived(),
            "measured": None if self.measurement is None else self.measurement.to_dict(),
        }
        if self.sweep is not None:
            out["sweep"] = self.sweep.to_dict()
        return out


def make_plan(inputs: PlanInputs, *, sweep_spec: tuple[str, float, float, int] | None = None,
              flips: bool = True, measurement: LakeMeasurement | None = None) -> Plan:
    """Evaluate every strategy; with ``sweep_spec`` (name, lo, hi, n; SI) sweep that parameter
    and report its flips, otherwise (if ``flips``) scan the default parameters for flips."""
    results = evaluate(inputs)
    sw = None
    if sweep_spec is not None:
        name, lo, hi, n = sweep_spec
        sw = sweep(inputs, name, lo, hi, n)
        found = sw.flips
    else:
        found = default_flips(inputs) if flips else ()
    return Plan(inputs, results, best_strategy(results), found, measurement, sw)
