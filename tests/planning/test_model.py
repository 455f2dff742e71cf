"""The planning model: interval formulas, the wall-time model, strategies, the parameters."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest

from ckptwatch.errors import PlanInputError
from ckptwatch.planning.model import (
    NON_PARAMETER_FIELDS,
    PARAMETERS,
    PlanInputs,
    checkpoint_costs,
    daly_interval,
    daly_wall_time,
    evaluate,
    evaluate_strategy,
    lost_work_per_failure,
    optimal_interval,
    optimal_interval_lambert,
    two_level_wall_time,
    young_interval,
)

HOUR = 3600.0


# -- Young and Daly against hand-computed values ---------------------------------------------


def test_young_interval_hand_computed() -> None:
    # sqrt(2 * 50 * 10000) = sqrt(1e6) = 1000
    assert young_interval(50.0, 10_000.0) == pytest.approx(1000.0, rel=1e-12)
    # sqrt(2 * 60 * 360000) = sqrt(4.32e7) = 6572.670690...
    assert young_interval(60.0, 360_000.0) == pytest.approx(6572.670690062, rel=1e-9)


def test_daly_interval_hand_computed() -> None:
    # delta/2M = 0.0025, sqrt = 0.05: 1000 * (1 + 0.05/3 + 0.0025/9) - 50 = 966.9444...
    assert daly_interval(50.0, 10_000.0) == pytest.approx(966.944444444, rel=1e-9)
    # delta/2M = 0.25, sqrt = 0.5: sqrt(2*500*1000) * (1 + 1/6 + 1/36) - 500
    #   = 1000 * 1.19444... - 500 = 694.444...
    assert daly_interval(500.0, 1000.0) == pytest.approx(694.444444444, rel=1e-9)


@pytest.mark.parametrize("ratio", [2.0, 2.5, 10.0])
def test_daly_interval_is_mtbf_when_delta_at_least_2m(ratio: float) -> None:
    assert daly_interval(ratio * 1000.0, 1000.0) == 1000.0


def test_daly_wall_time_hand_computed() -> None:
    # M=1000, tau=100, delta=10, R=50: (1000/100) * e^0.05 * (e^0.11 - 1)
    #   = 10 * 1.0512711 * 0.1162781 = 1.2223977
    assert daly_wall_time(100.0, 10.0, 1000.0, 50.0) == pytest.approx(1.2223977, rel=1e-7)


# -- the numerical optimum ---------------------------------------------------------------------


@pytest.mark.parametrize(("delta", "mtbf", "restart"), [
    (60.0, 100 * HOUR, 300.0),
    (22.0, 78 * HOUR, 0.0),
    (600.0, 2 * HOUR, 120.0),
    (5000.0, 1000.0, 10.0),  # delta >= 2M
])
def test_optimal_interval_matches_brute_force_scan(delta: float, mtbf: float,
                                                   restart: float) -> None:
    taus = np.geomspace(1e-3 * mtbf, 3.0 * mtbf, 200_001)
    walls = (mtbf / taus) * math.exp(restart / mtbf) * np.expm1((taus + delta) / mtbf)
    brute = float(taus[np.argmin(walls)])
    found = optimal_interval(delta, mtbf, restart)
    assert found == pytest.approx(brute, rel=2e-4)
    assert daly_wall_time(found, delta, mtbf, restart) <= float(walls.min()) * (1 + 1e-12)
    assert found == pytest.approx(optimal_interval_lambert(delta, mtbf), rel=1e-6)


def test_daly_is_closer_to_the_optimum_than_young() -> None:
    delta, mtbf = 600.0, 2 * HOUR
    best = optimal_interval(delta, mtbf)
    assert abs(daly_interval(delta, mtbf) - best) < abs(young_interval(delta, mtbf) - best)
    assert daly_interval(delta, mtbf) == pytest.approx(best, rel=0.02)


def test_limit_delta_to_zero_all_intervals_agree_and_vanish() -> None:
    mtbf = 100 * HOUR
    for delta in (1e-2, 1e-4, 1e-6):
        young = young_interval(delta, mtbf)
        assert optimal_interval(delta, mtbf) / young == pytest.approx(1.0, abs=2e-3)
        assert daly_interval(delta, mtbf) / young == pytest.approx(1.0, abs=2e-3)
    assert young_interval(1e-6, mtbf) < 1.0
    assert optimal_interval(0.0, mtbf) == 0.0
    # free checkpoints: T -> 1 as tau -> 0 (no restart cost)
    assert daly_wall_time(1e-6, 0.0, mtbf) == pytest.approx(1.0, abs=1e-9)


def test_limit_delta_large_optimum_tends_to_mtbf() -> None:
    mtbf = 1000.0
    at_2m = optimal_interval(2 * mtbf, mtbf)
    at_50m = optimal_interval(50 * mtbf, mtbf)
    assert 0.9 * mtbf < at_2m < at_50m < mtbf
    assert at_50m == pytest.approx(mtbf, rel=1e-6)
    assert daly_interval(50 * mtbf, mtbf) == mtbf
    assert optimal_interval(1000 * mtbf, mtbf) == pytest.approx(mtbf, rel=1e-6)
    assert daly_wall_time(mtbf, 1000 * mtbf, mtbf) == math.inf


# -- the two-level model -----------------------------------------------------------------------


def test_two_level_with_k1_is_daly() -> None:
    for tau in (10.0, 500.0, 4000.0):
        got = float(two_level_wall_time(tau, 30.0, 5000.0, restart=200.0))
        assert got == pytest.approx(daly_wall_time(tau, 30.0, 5000.0, 200.0), rel=1e-12)
    # severe failures change nothing when both restarts match and k = 1
    got = float(two_level_wall_time(700.0, 30.0, 5000.0, restart=200.0, severe_fraction=0.4))
    assert got == pytest.approx(daly_wall_time(700.0, 30.0, 5000.0, 200.0), rel=1e-12)


def test_two_level_continuous_in_severe_fraction_at_zero() -> None:
    kw = {"k": 7.0, "delta_durable": 40.0, "restart": 60.0, "restart_severe": 200.0}
    at_zero = float(two_level_wall_time(300.0, 20.0, 4000.0, severe_fraction=0.0, **kw))
    tiny = float(two_level_wall_time(300.0, 20.0, 4000.0, severe_fraction=1e-9, **kw))
    assert tiny == pytest.approx(at_zero, rel=1e-7)
    assert tiny > at_zero


def _simulate(tau: float, delta: float, mtbf: float, k: int, d2: float, r1: float, r2: float,
              f: float, blocks: int, seed: int) -> float:
    """Monte Carlo of the two-level process the closed form describes."""
    rng = np.random.default_rng(seed)
    total = 0.0
    for _ in range(blocks):
        i = 0
        while i < k:
            length = tau + delta + (d2 if i == k - 1 else 0.0)
            t = rng.exponential(mtbf)
            if t >= length:
                total += length
                i += 1
                continue
            total += t
            severe = rng.random() < f
            restart = r2 if severe else r1
            while (t2 := rng.exponential(mtbf)) < restart:
                total += t2
            total += restart
            if severe:
                i = 0
    return total / (blocks * k * tau)


def test_two_level_closed_form_matches_monte_carlo() -> None:
    args = (100.0, 20.0, 500.0, 4, 30.0, 50.0, 120.0, 0.3)
    tau, delta, mtbf, k, d2, r1, r2, f = args
    closed = float(two_level_wall_time(tau, delta, mtbf, k=k, delta_durable=d2, restart=r1,
                                       restart_severe=r2, severe_fraction=f))
    simulated = _simulate(*args, blocks=6000, seed=7)
    assert closed == pytest.approx(simulated, rel=0.02)
    # and the simulation tells the severe failures apart: without them it is clearly lower
    assert simulated > float(two_level_wall_time(tau, delta, mtbf, k=k, delta_durable=d2,
                                                 restart=r1)) * 1.05


def test_tiered_k_and_interval_match_brute_force() -> None:
    inputs = PlanInputs(ranks=512, bytes_per_rank=8.8e12 / 512, pool_bandwidth_bytes_s=0.1e12,
                        fabric_slowdown=1.0, drive_loss_fraction=0.05, node_mtbf_s=2000 * HOUR)
    result = evaluate_strategy("tiered", inputs)
    assert result.durable_every_k is not None and result.durable_every_k > 1
    delta = result.checkpoint_cost_s
    d2 = inputs.fabric_slowdown * checkpoint_costs(inputs)["pool"].p50_s
    m = inputs.job_mtbf_s
    taus = np.geomspace(result.optimal_interval_s / 3, result.optimal_interval_s * 3, 4001)
    ks = np.arange(1, 80)
    walls = two_level_wall_time(taus[None, :], delta, m, k=ks[:, None], delta_durable=d2,
                                restart=inputs.restart_local_s,
                                restart_severe=inputs.restart_pool_s,
                                severe_fraction=inputs.drive_loss_fraction)
    i, j = np.unravel_index(int(np.argmin(walls)), walls.shape)
    assert result.durable_every_k == ks[i]
    assert result.optimal_interval_s == pytest.approx(taus[j], rel=2e-3)
    assert result.overhead_fraction == pytest.approx(1 - 1 / float(walls.min()), rel=1e-6)


def test_lost_work_per_failure_approaches_half_interval_plus_restart() -> None:
    tau, delta, mtbf, restart = 600.0, 10.0, 1e7, 120.0
    wall = daly_wall_time(tau, delta, mtbf, restart)
    lost = lost_work_per_failure(wall, delta / tau, mtbf)
    assert lost == pytest.approx((tau + delta) / 2 + restart, rel=1e-3)


# -- strategies --------------------------------------------------------------------------------


def test_essay_example_reproduces_the_22_s_nominal_checkpoint(essay_inputs: PlanInputs) -> None:
    assert essay_inputs.total_bytes == pytest.approx(8.8e12)
    assert essay_inputs.bytes_per_rank == pytest.approx(17.1875e9)
    pool = evaluate_strategy("pool", essay_inputs)
    assert pool.checkpoint_s_p50 == pytest.approx(22.0, rel=1e-12)
    assert pool.checkpoint_s_p99 == pytest.approx(22.0 * essay_inputs.tail_factor)


def test_essay_example_tail_factor_moves_interval_and_lost_work(
        essay_inputs: PlanInputs) -> None:
    nominal = replace(essay_inputs, tail_factor=1.0, fabric_slowdown=0.0)
    tail = replace(nominal, tail_factor=3.0)
    p1, p3 = evaluate_strategy("pool", nominal), evaluate_strategy("pool", tail)
    assert p1.checkpoint_cost_s == pytest.approx(22.0)
    assert p3.checkpoint_cost_s == pytest.approx(66.0)
    # interval ~ sqrt(delta): a 3x tail lengthens it by about sqrt(3)
    assert p3.optimal_interval_s / p1.optimal_interval_s == pytest.approx(math.sqrt(3), rel=0.02)
    assert p3.lost_work_per_failure_s > p1.lost_work_per_failure_s + 0.3 * (
        p3.optimal_interval_s - p1.optimal_interval_s)
    assert p3.overhead_fraction > 1.5 * p1.overhead_fraction
    # the essay: on a shared pool the optimal interval is longer than on local drives and the
    # cluster loses more work per failure
    replica = evaluate_strategy("local+replica", tail)
    assert p3.optimal_interval_s > replica.optimal_interval_s
    assert p3.lost_work_per_failure_s > replica.lost_work_per_failure_s


def test_strategy_checkpoint_times() -> None:
    inputs = PlanInputs(ranks=16, gpus_per_node=8, bytes_per_rank=10e9,
                        local_bandwidth_bytes_s=20e9, pool_bandwidth_bytes_s=100e9,
                        nic_bandwidth_bytes_s=40e9, tail_factor=2.0, local_tail_factor=1.5,
                        fabric_slowdown=0.5)
    costs = checkpoint_costs(inputs)
    # node: 80 GB; local 80/20 = 4 s; NIC 80/40 = 2 s; pool: 160/100 = 1.6 s but NIC-bound 2 s
    assert costs["local"].p50_s == pytest.approx(4.0)
    assert costs["local"].cost_s == pytest.approx(6.0)
    assert costs["local+replica"].p50_s == pytest.approx(4.0)
    assert costs["local+replica"].cost_s == pytest.approx(6.0 + 0.5 * 2.0)
    assert costs["pool"].p50_s == pytest.approx(2.0)
    assert costs["pool"].p99_s == pytest.approx(4.0)
    assert costs["pool"].cost_s == pytest.approx(4.0 + 0.5 * 2.0)


def test_drive_loss_hurts_local_only_without_a_durable_copy(essay_inputs: PlanInputs) -> None:
    safe = {r.name: r for r in evaluate(replace(essay_inputs, drive_loss_fraction=0.0))}
    lossy = {r.name: r for r in evaluate(replace(essay_inputs, drive_loss_fraction=0.5))}
    assert lossy["pool"].overhead_fraction == pytest.approx(safe["pool"].overhead_fraction)
    assert lossy["local"].lost_work_per_failure_s > 5 * safe["local"].lost_work_per_failure_s
    assert lossy["local"].overhead_fraction > lossy["tiered"].overhead_fraction
    assert lossy["local+replica"].overhead_fraction < lossy["local"].overhead_fraction


def test_result_fields_are_consistent(essay_inputs: PlanInputs) -> None:
    for r in evaluate(essay_inputs):
        assert r.checkpoint_s_p50 <= r.checkpoint_s_p99 <= r.checkpoint_cost_s
        assert r.mtbf_s == pytest.approx(5000 * HOUR / 64)
        assert r.young_interval_s == pytest.approx(young_interval(r.checkpoint_cost_s, r.mtbf_s))
        assert 0 < r.overhead_fraction < 1
        assert r.lost_gpu_hours_per_year == pytest.approx(r.overhead_fraction * 512 * 8760)
        assert r.lost_work_per_failure_s > r.restart_s


def test_invalid_input_names_the_flag_key() -> None:
    with pytest.raises(PlanInputError, match=r"pool_bandwidth_gb_s must be > 0"):
        PlanInputs(pool_bandwidth_bytes_s=0.0).validate()
    with pytest.raises(PlanInputError, match=r"drive_loss_fraction must be in \[0, 1\]"):
        PlanInputs(drive_loss_fraction=1.5).validate()


def test_every_parameter_maps_to_an_input_field() -> None:
    names = {f for f in PlanInputs.__dataclass_fields__} - NON_PARAMETER_FIELDS
    assert {p.field for p in PARAMETERS.values()} == names
    assert {"pool_bandwidth", "node_mtbf", "ranks", "bytes_per_rank",
            "drive_loss_fraction"} <= set(PARAMETERS)
