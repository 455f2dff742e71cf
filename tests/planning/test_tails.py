"""Barrier-time tails: through the tail factor, fitted, and the timeout term vs Monte Carlo."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest

from ckptwatch.errors import PlanInputError
from ckptwatch.planning.model import (
    SECONDS_PER_YEAR,
    PlanInputs,
    daly_wall_time,
    evaluate_strategy,
    with_timeouts,
)
from ckptwatch.planning.tails import BarrierTail, fit_tail, tail_from_factor, timeout_probability


@pytest.mark.parametrize("family", ["pareto", "lognormal"])
def test_tail_through_the_tail_factor_has_p99_at_p50_times_the_factor(family: str) -> None:
    tail = tail_from_factor(3.0, family)
    assert tail.survival(1.0) == pytest.approx(0.5)
    assert tail.survival(3.0) == pytest.approx(0.01)
    assert tail.tail_factor == pytest.approx(3.0)


def test_pareto_tail_reaches_a_timeout_the_lognormal_does_not() -> None:
    # The essay: 22 s nominal on a 0.4 TB/s pool, p99 3x, a 600 s timeout.
    pareto = timeout_probability(tail_from_factor(3.0, "pareto"), 22.0, 600.0)
    lognormal = timeout_probability(tail_from_factor(3.0, "lognormal"), 22.0, 600.0)
    alpha = math.log(50.0) / math.log(3.0)
    assert pareto == pytest.approx(0.5 * (600.0 / 22.0) ** -alpha)
    assert pareto > 1e-6
    assert pareto > 1e6 * lognormal
    assert timeout_probability(tail_from_factor(3.0), 22.0, 0.0) == 0.0  # no timeout
    assert timeout_probability(tail_from_factor(1.0), 22.0, 600.0) == 0.0  # no tail


def test_fit_recovers_a_lognormal_and_a_pareto_sample() -> None:
    rng = np.random.default_rng(7)
    lognormal = 20.0 * np.exp(rng.normal(0.0, 0.5, 400))
    fit = fit_tail(lognormal.tolist(), origin="sample")
    assert fit.best.family == "lognormal"
    ln = next(c for c in fit.candidates if c.family == "lognormal")
    assert ln.shape == pytest.approx(0.5, rel=0.1)
    assert ln.ks_distance is not None and ln.ks_distance < 0.1
    # Pareto above the median (index 2), mirrored below it
    u = rng.uniform(size=400)
    body = 20.0 * np.where(u < 0.5, 2.0 * u + 1e-3, (2.0 * (1.0 - u)) ** -0.5)
    pfit = fit_tail(body.tolist(), origin="sample")
    pa = next(c for c in pfit.candidates if c.family == "pareto")
    assert pa.shape == pytest.approx(2.0, rel=0.2)
    assert pfit.best.family == "pareto"


def test_fit_needs_five_positive_barriers() -> None:
    with pytest.raises(PlanInputError, match=r"lake X: a tail fit needs at least 5"):
        fit_tail([10.0, 11.0, 12.0], origin="lake X")


def _simulate(tau: float, delta: float, mtbf: float, restart: float, q: float,
              timeout: float, segments: int, rng: np.random.Generator) -> tuple[float, int]:
    """The failure process with timeouts, as the model states it: exponential failures at any
    time except during a timeout's wait and restart; a failure costs a restart (itself exposed)
    and the segment's work so far; a checkpoint times out with probability q, costing the
    timeout and a restart, and the segment is redone. Returns (wall time, timeouts)."""
    wall, timeouts = 0.0, 0
    length = tau + delta
    for _ in range(segments):
        while True:
            # get through tau + delta under exponential failures (Daly's segment)
            while True:
                f = rng.exponential(mtbf)
                if f >= length:
                    wall += length
                    break
                wall += f
                while True:  # restart, exposed to failures
                    g = rng.exponential(mtbf)
                    if g >= restart:
                        wall += restart
                        break
                    wall += g
            if rng.uniform() >= q:
                break
            timeouts += 1
            wall += timeout + restart
    return wall, timeouts


def test_timeout_term_matches_monte_carlo() -> None:
    tau, delta, mtbf, restart, q, timeout = 1000.0, 100.0, 4000.0, 200.0, 0.1, 600.0
    segments = 20_000
    wall, timeouts = _simulate(tau, delta, mtbf, restart, q, timeout, segments,
                               np.random.default_rng(20))
    t_model = float(with_timeouts(daly_wall_time(tau, delta, mtbf, restart), tau, q, timeout,
                                  restart))
    assert wall / (segments * tau) == pytest.approx(t_model, rel=0.02)
    # timeouts per wall second: q / (1 - q) per segment over T' tau seconds per segment
    assert timeouts / wall == pytest.approx(q / (1 - q) / (t_model * tau), rel=0.05)


def test_strategy_timeouts_follow_the_tail(essay_inputs: PlanInputs) -> None:
    slow = replace(essay_inputs, pool_bandwidth_bytes_s=40e9)  # 220 s nominal
    r = evaluate_strategy("pool", slow)
    alpha = math.log(50.0) / math.log(3.0)
    q = 0.5 * (600.0 / 220.0) ** -alpha
    assert r.timeout_probability == pytest.approx(q)
    assert r.timeouts_per_year > 1.0
    off = evaluate_strategy("pool", replace(slow, checkpoint_timeout_s=0.0))
    assert off.timeout_probability == 0.0 and off.timeouts_per_year == 0.0
    assert r.overhead_fraction > off.overhead_fraction
    # timeouts per year = q/(1-q) per segment over the wall time of a segment
    wall_per_work = 1.0 / (1.0 - r.overhead_fraction)
    assert r.timeouts_per_year == pytest.approx(
        q / (1 - q) / (wall_per_work * r.optimal_interval_s) * SECONDS_PER_YEAR)
    measured_tail = BarrierTail("lognormal", 0.05)
    thin = evaluate_strategy("pool", replace(slow, pool_tail=measured_tail))
    assert thin.timeout_probability < 1e-12
