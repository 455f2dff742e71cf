"""Where the verdict flips: sweeps of one parameter, the flips of the best strategy, the plan.

A flip is a value of one parameter at which the best strategy (smallest overhead, or smallest
yearly bill with ``objective="cost"``; see :mod:`ckptwatch.planning.cost`) changes, all other
inputs held. :func:`sweep` evaluates every strategy on a grid and locates each change of the
best one with Brent's method (integer bisection for integer parameters); :func:`default_flips`
scans the parameters that usually decide; :func:`sweep2` maps the best strategy over two
parameters; :func:`make_plan` puts the strategies, their bills, the verdict and its flips
together.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ckptwatch.errors import PlanInputError
from ckptwatch.planning.cost import Bill, best_by, bills, scores
from ckptwatch.planning.model import (
    PARAMETERS,
    STRATEGIES,
    PlanInputs,
    StrategyResult,
    evaluate,
    finite_or_none,
    parameter,
    with_value,
)

if TYPE_CHECKING:
    from ckptwatch.planning.failures import FailureEstimate
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
    #: Total yearly bill of every strategy along the sweep, USD a year.
    total_usd: dict[str, tuple[float, ...]] | None = None
    objective: str = "overhead"

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready mapping."""
        p = parameter(self.parameter)
        return {
            "parameter": self.parameter, "unit": p.si_unit, "values": list(self.values),
            "overhead_fraction": {k: [finite_or_none(x) for x in v]
                                  for k, v in self.overhead.items()},
            "total_usd_per_year": None if self.total_usd is None else {
                k: [finite_or_none(x) for x in v] for k, v in self.total_usd.items()},
            "best": list(self.best),
            "objective": self.objective,
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


def _scores(inputs: PlanInputs, name: str, value: float,
            objective: str = "overhead", among: tuple[str, ...] = STRATEGIES
            ) -> dict[str, float]:
    changed = with_value(inputs, name, value)
    return scores(evaluate(changed, [s for s in STRATEGIES if s in among]), changed, objective)


def _both(inputs: PlanInputs, name: str, value: float) -> tuple[dict[str, float],
                                                                 dict[str, float]]:
    changed = with_value(inputs, name, value)
    results = evaluate(changed)
    return scores(results, changed, "overhead"), scores(results, changed, "cost")


def _argbest(ov: Mapping[str, float]) -> str:
    return min((s for s in STRATEGIES if s in ov), key=lambda s: ov[s])


def check_strategies(among: tuple[str, ...]) -> tuple[str, ...]:
    """``among`` in STRATEGIES order; PlanInputError naming an unknown one."""
    unknown = [s for s in among if s not in STRATEGIES]
    if unknown or not among:
        raise PlanInputError(f"--strategies: unknown strategy {', '.join(unknown) or '(none)'};"
                             f" use a comma-separated subset of: {', '.join(STRATEGIES)}")
    return tuple(s for s in STRATEGIES if s in among)


def _refine_flip(inputs: PlanInputs, name: str, lo: float, hi: float, a: str, b: str,
                 integer: bool, depth: int = 0, objective: str = "overhead",
                 among: tuple[str, ...] = STRATEGIES) -> list[Flip]:
    """Flips between lo (best ``a``) and hi (best ``b``): root of overhead_a - overhead_b."""
    from scipy.optimize import brentq

    if integer:
        lo_i, hi_i = int(round(lo)), int(round(hi))
        while hi_i - lo_i > 1:
            mid = (lo_i + hi_i) // 2
            bm = _argbest(_scores(inputs, name, mid, objective, among))
            if bm == a:
                lo_i = mid
            elif bm == b:
                hi_i = mid
            elif depth < 8:
                return (_refine_flip(inputs, name, lo_i, mid, a, bm, True, depth + 1,
                                     objective, among)
                        + _refine_flip(inputs, name, mid, hi_i, bm, b, True, depth + 1,
                                       objective, among))
            else:
                break
        return [Flip(name, float(hi_i), a, b)]

    def gap(x: float) -> float:  # only a and b: each strategy's score is its own
        ov = _scores(inputs, name, x, objective, (a, b))
        return ov[a] - ov[b]

    root = float(brentq(gap, lo, hi, xtol=1e-12, rtol=1e-9))
    ov = _scores(inputs, name, root, objective, among)
    third = _argbest(ov)
    if third not in (a, b) and ov[third] < min(ov[a], ov[b]) * (1 - 1e-12) and depth < 8:
        return (_refine_flip(inputs, name, lo, root, a, third, False, depth + 1, objective,
                             among)
                + _refine_flip(inputs, name, root, hi, third, b, False, depth + 1, objective,
                               among))
    return [Flip(name, root, a, b)]


def sweep(inputs: PlanInputs, name: str, lo: float, hi: float, n: int = 41,
          objective: str = "overhead", among: tuple[str, ...] = STRATEGIES) -> Sweep:
    """Overhead and yearly bill of every strategy for ``n`` values of one parameter in
    [lo, hi] (SI units), and every flip of the best strategy (by ``objective``) in that range,
    located with Brent's method. Sweeping ``ranks`` buys the pool as
    :func:`~ckptwatch.planning.model.with_value` says."""
    p = parameter(name)
    values = sweep_values(lo, hi, n, integer=p.integer)
    for end in (values[0], values[-1]):
        try:
            with_value(inputs, p.name, end).validate()
        except PlanInputError as exc:
            raise PlanInputError(f"the sweep of {p.name} leaves the valid range: {exc}") from exc
    both = [_both(inputs, p.name, v) for v in values]
    rows = [{k: v for k, v in (ov if objective == "overhead" else usd).items() if k in among}
            for ov, usd in both]
    best = tuple(_argbest(ov) for ov in rows)
    flips: list[Flip] = []
    for i in range(len(values) - 1):
        if best[i] != best[i + 1]:
            flips += _refine_flip(inputs, p.name, values[i], values[i + 1], best[i],
                                  best[i + 1], p.integer, objective=objective, among=among)
    overhead = {s: tuple(ov[s] for ov, _ in both) for s in STRATEGIES}
    total = {s: tuple(usd[s] for _, usd in both) for s in STRATEGIES}
    return Sweep(p.name, values, overhead, best, tuple(flips), _is_log(lo, hi), total,
                 objective)


#: Parameters scanned for flips when no sweep is asked for: (name, low factor, high factor)
#: around the current value, or absolute bounds for fractions.
DEFAULT_FLIP_SCANS: tuple[tuple[str, float, float], ...] = (
    ("pool_bandwidth", 0.1, 10.0),
    ("node_mtbf", 0.1, 10.0),
    ("ranks", 1 / 16, 16.0),
    ("bytes_per_rank", 0.1, 10.0),
    ("drive_loss_fraction", 0.0, 1.0),
)


def default_flips(inputs: PlanInputs, n: int = 17, objective: str = "overhead",
                  among: tuple[str, ...] = STRATEGIES) -> tuple[Flip, ...]:
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
        flips += sweep(inputs, name, lo, hi, n, objective, among).flips
    return tuple(flips)


@dataclass(frozen=True)
class Sweep2:
    """The best strategy over a grid of two parameters (values in SI units)."""

    x: str
    y: str
    x_values: tuple[float, ...]
    y_values: tuple[float, ...]
    #: ``best[j][i]``: best strategy at ``(x_values[i], y_values[j])``.
    best: tuple[tuple[str, ...], ...]
    objective: str
    among: tuple[str, ...] = STRATEGIES
    #: The flip boundary: for each y value, the x values where the best strategy changes
    #: (located like :func:`sweep`'s flips), as ``(y, Flip)``.
    boundary: tuple[tuple[float, Flip], ...] = ()

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready mapping (``best`` is row-major: one row per y value)."""
        px, py = parameter(self.x), parameter(self.y)
        return {"x": {"parameter": self.x, "unit": px.si_unit, "values": list(self.x_values)},
                "y": {"parameter": self.y, "unit": py.si_unit, "values": list(self.y_values)},
                "best": [list(row) for row in self.best], "objective": self.objective,
                "strategies": list(self.among),
                "boundary": [{"y": y, **f.to_dict()} for y, f in self.boundary]}


def sweep2(inputs: PlanInputs, x: tuple[str, float, float, int],
           y: tuple[str, float, float, int], objective: str = "overhead",
           among: tuple[str, ...] = STRATEGIES) -> Sweep2:
    """The best strategy (by ``objective``) on an ``n_x`` x ``n_y`` grid of two parameters,
    each ``(name, lo, hi, n)`` in SI units, all other inputs held."""
    px, py = parameter(x[0]), parameter(y[0])
    if px.name == py.name:
        raise PlanInputError(f"--sweep2 needs two different parameters (got {px.name} twice)")
    xs = sweep_values(x[1], x[2], x[3], integer=px.integer)
    ys = sweep_values(y[1], y[2], y[3], integer=py.integer)
    for xv in (xs[0], xs[-1]):
        for yv in (ys[0], ys[-1]):
            try:
                with_value(with_value(inputs, px.name, xv), py.name, yv).validate()
            except PlanInputError as exc:
                raise PlanInputError(f"--sweep2 leaves the valid range: {exc}") from exc
    grid = []
    boundary: list[tuple[float, Flip]] = []
    for yv in ys:
        at_y = with_value(inputs, py.name, yv)
        row = tuple(_argbest(_scores(at_y, px.name, xv, objective, among)) for xv in xs)
        grid.append(row)
        for i in range(len(xs) - 1):
            if row[i] != row[i + 1]:
                boundary += [(yv, f) for f in _refine_flip(
                    at_y, px.name, xs[i], xs[i + 1], row[i], row[i + 1], px.integer,
                    objective=objective, among=among)]
    return Sweep2(px.name, py.name, xs, ys, tuple(grid), objective, among, tuple(boundary))


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
    objective: str = "overhead"
    #: Why this objective: ``"--objective"``, ``"prices given"`` or ``"no prices given"``.
    objective_reason: str = "no prices given"
    bills: dict[str, Bill] | None = None
    failures: FailureEstimate | None = None
    sweep2: Sweep2 | None = None
    #: The strategies ``best`` and the flips choose among (``--strategies``).
    among: tuple[str, ...] = STRATEGIES

    def strategy(self, name: str) -> StrategyResult:
        """The result of one strategy by name."""
        return next(s for s in self.strategies if s.name == name)

    def to_dict(self) -> dict[str, Any]:
        """The JSON contract: inputs, strategies, best, flips (+ derived, measured, sweep)."""
        bill_of = self.bills or bills(self.strategies, self.inputs)
        out: dict[str, Any] = {
            "inputs": self.inputs.to_dict(),
            "strategies": [{**s.to_dict(), **bill_of[s.name].to_dict()}
                           for s in self.strategies],
            "best": self.best,
            "objective": self.objective,
            "objective_reason": self.objective_reason,
            "compared": list(self.among),
            "flips": [f.to_dict() for f in self.flips],
            "derived": self.inputs.derived(),
            "tails": {"pool": self.inputs.tail("pool").to_dict(),
                      "local": self.inputs.tail("local").to_dict()},
            "failures": None if self.failures is None else self.failures.to_dict(),
            "measured": None if self.measurement is None else self.measurement.to_dict(),
        }
        if self.sweep is not None:
            out["sweep"] = self.sweep.to_dict()
        if self.sweep2 is not None:
            out["sweep2"] = self.sweep2.to_dict()
        return out


def make_plan(inputs: PlanInputs, *, sweep_spec: tuple[str, float, float, int] | None = None,
              flips: bool = True, measurement: LakeMeasurement | None = None,
              objective: str = "overhead", objective_reason: str = "no prices given",
              failures: FailureEstimate | None = None,
              sweep2_spec: tuple[tuple[str, float, float, int],
                                 tuple[str, float, float, int]] | None = None,
              among: tuple[str, ...] = STRATEGIES) -> Plan:
    """Evaluate every strategy and its bill; with ``sweep_spec`` (name, lo, hi, n; SI) sweep
    that parameter and report its flips, otherwise (if ``flips``) scan the default parameters
    for flips; with ``sweep2_spec`` map the best strategy over two parameters. ``best`` and
    the flips follow ``objective`` (``cost`` or ``overhead``), among the strategies ``among``
    (every strategy is still evaluated and reported)."""
    among = check_strategies(among)
    results = evaluate(inputs)
    sw = None
    if sweep_spec is not None:
        name, lo, hi, n = sweep_spec
        sw = sweep(inputs, name, lo, hi, n, objective, among)
        found = sw.flips
    else:
        found = default_flips(inputs, objective=objective, among=among) if flips else ()
    sw2 = (None if sweep2_spec is None
           else sweep2(inputs, *sweep2_spec, objective=objective, among=among))
    chosen = [r for r in results if r.name in among]
    return Plan(inputs, results, best_by(chosen, inputs, objective), found, measurement, sw,
                objective, objective_reason, bills(results, inputs), failures, sw2, among)
