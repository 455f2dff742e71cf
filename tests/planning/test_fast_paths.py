"""The planning model's fast paths give the plain computation's numbers.

A daily report plans every job (a few thousand optimisations), so the model runs on plain
floats: the wall time at one point without numpy (``_WallTime``), each strategy's optimum
computed once per distinct input (``_optimum``), and a flip located from the two strategies it
is between. Each is pinned here to what it replaces: ``two_level_wall_time`` +
``with_timeouts``, and the optimisation done from scratch.
"""

from __future__ import annotations

import math
import random
from dataclasses import replace

import pytest
from scipy.optimize import minimize_scalar

from ckptwatch.planning import model
from ckptwatch.planning.model import (
    STRATEGIES,
    PlanInputs,
    evaluate,
    evaluate_strategy,
    two_level_wall_time,
    with_timeouts,
)
from ckptwatch.planning.sweep import sweep
from ckptwatch.planning.tails import timeout_probability


def test_scalar_wall_time_is_the_vectorised_one() -> None:
    rng = random.Random(18)
    cases = 0
    for _ in range(3000):
        mtbf = 10.0 ** rng.uniform(2.0, 7.0)
        point = model._WallTime(
            delta=10.0 ** rng.uniform(-1.0, 4.0), mtbf=mtbf,
            delta_durable=rng.choice([0.0, 10.0 ** rng.uniform(-1.0, 3.0)]),
            restart=rng.uniform(0.0, 900.0), restart_severe=rng.uniform(0.0, 2000.0),
            severe_fraction=rng.choice([0.0, 1.0, rng.random(), 1e-9]),
            q=rng.choice([0.0, 1.0, rng.random() * 0.1]), timeout_s=rng.uniform(0.0, 1200.0))
        # up to far past the MTBF, where exp overflows and the wall time is infinite
        tau = mtbf * 10.0 ** rng.uniform(-6.0, 3.5)
        k = rng.choice([1.0, 1.0 + rng.random() * 50.0, float(rng.randint(1, 10_000))])
        base = float(two_level_wall_time(
            tau, point.delta, mtbf, k=k, delta_durable=point.delta_durable,
            restart=point.restart, restart_severe=point.restart_severe,
            severe_fraction=point.severe_fraction))
        wall = float(with_timeouts(base, tau, point.q, point.timeout_s, point.restart))
        # math's exp/log (the scalar path) and numpy's (the vectorised one) may differ by a few
        # ulps, depending on the CPU's vector code: 1e-12 is thousands of ulps, still far
        # below any difference a formula change would make
        for got, want in ((point.base(tau, k), base), (point.wall(tau, k), wall)):
            assert got == pytest.approx(want, rel=1e-12) or got == want == math.inf
        cases += math.isinf(base)
    assert 0 < cases < 3000  # the overflow branch was exercised, and not only it


def _inputs(seed: int) -> PlanInputs:
    """Varied, valid inputs: job size, bandwidths, failures, tails and timeouts."""
    rng = random.Random(seed)
    return PlanInputs(
        ranks=rng.choice([8, 64, 512, 4096]), gpus_per_node=rng.choice([4, 8]),
        bytes_per_rank=10.0 ** rng.uniform(8.5, 11.0),
        pool_bandwidth_bytes_s=10.0 ** rng.uniform(10.0, 12.5),
        node_mtbf_s=10.0 ** rng.uniform(5.0, 8.0),
        drive_loss_fraction=rng.choice([0.0, rng.random(), 1.0]),
        fabric_slowdown=rng.uniform(0.0, 1.0), tail_factor=rng.uniform(1.0, 6.0),
        local_tail_factor=rng.uniform(1.0, 2.0),
        offnode_copy_interval_s=10.0 ** rng.uniform(3.0, 5.5),
        checkpoint_timeout_s=rng.choice([0.0, 120.0, 600.0]))


@pytest.mark.parametrize("seed", range(6))
def test_each_strategys_optimum_is_the_plain_optimisation(seed: int) -> None:
    """What the model did before its fast paths: numpy's wall time, scipy's Brent on log tau
    (the fixed-k strategies; ``tiered`` adds the k grid in front of the same Brent)."""
    inputs = _inputs(seed)
    mtbf, timeout = inputs.job_mtbf_s, inputs.checkpoint_timeout_s
    for name in ("local", "local+replica", "pool"):
        lv = model._levels(name, inputs)
        q = timeout_probability(inputs.tail("pool" if name == "pool" else "local"),
                                lv.cost.p50_s, timeout)

        def wall(tau: float, lv: model._Levels = lv, q: float = q) -> float:
            base = two_level_wall_time(
                tau, lv.cost.cost_s, mtbf, k=lv.k_of_tau(tau), delta_durable=lv.delta_durable,
                restart=lv.restart, restart_severe=lv.restart_severe,
                severe_fraction=lv.severe_fraction)
            return float(with_timeouts(base, tau, q, timeout, lv.restart))

        delta = lv.cost.cost_s

        lo, hi = model._interval_bounds(delta, mtbf)
        tau = math.exp(minimize_scalar(lambda u: wall(math.exp(u)),
                                       bounds=(math.log(lo), math.log(hi)), method="bounded",
                                       options={"xatol": 1e-9}).x)
        got = evaluate_strategy(name, inputs)
        # At a minimum the wall time is flat: wall times an ulp apart (math's exp against
        # numpy's, which differ by CPU) move Brent's argmin by ~sqrt(eps), so the interval is
        # held to 1e-6 and the wall time there, which a wrong optimum would change, to 1e-12.
        assert got.optimal_interval_s == pytest.approx(tau, rel=1e-6), name
        assert wall(got.optimal_interval_s) == pytest.approx(wall(tau), rel=1e-12), name
        assert got.overhead_fraction == pytest.approx(1.0 - 1.0 / wall(tau), rel=1e-12), name


def test_an_optimum_is_computed_once_and_is_the_same_fresh() -> None:
    inputs = _inputs(3)
    model._optimum.cache_clear()
    first = evaluate(inputs)
    assert model._optimum.cache_info().misses == len(STRATEGIES)
    model._optimum.cache_clear()
    assert evaluate(inputs) == first  # computed again from scratch: the same results
    # a sweep of the pool's bandwidth leaves local and local+replica as they are: each is
    # optimised once, not once per point
    model._optimum.cache_clear()
    sw = sweep(replace(inputs, checkpoint_timeout_s=0.0), "pool_bandwidth",
               inputs.pool_bandwidth_bytes_s / 10, inputs.pool_bandwidth_bytes_s * 10, 9)
    assert len(set(sw.overhead["local"])) == 1
    assert model._optimum.cache_info().hits >= 2 * (len(sw.values) - 1)


def test_evaluate_some_strategies_gives_their_full_results() -> None:
    inputs = _inputs(4)
    every = {r.name: r for r in evaluate(inputs)}
    assert evaluate(inputs, ("tiered", "pool")) == (every["tiered"], every["pool"])
