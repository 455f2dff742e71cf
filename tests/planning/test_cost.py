"""The yearly bill: each term against a hand computation on a small case, and the objective."""

from __future__ import annotations

from dataclasses import replace

import pytest

from ckptwatch.planning.cost import best_by, bill, bills, scores
from ckptwatch.planning.model import PlanInputs, evaluate, evaluate_strategy


@pytest.fixture
def small_inputs() -> PlanInputs:
    """16 ranks on 2 nodes, 1 GB per rank; round prices so the bill can be added up by hand."""
    return PlanInputs(ranks=16, gpus_per_node=8, bytes_per_rank=1e9,
                      pool_bandwidth_bytes_s=100e9, gpu_hour_usd=2.0, pool_fixed_usd=100_000.0,
                      pool_staff_usd_per_year=10_000.0, amortisation_years=4.0,
                      pool_usd_per_tb=200.0, pool_usd_per_gb_s=1_000.0, local_usd_per_tb=50.0,
                      retained_checkpoints=3)


def test_committed_cost_is_the_pools_fixed_cost_amortised_plus_staff(
        small_inputs: PlanInputs) -> None:
    results = {r.name: r for r in evaluate(small_inputs)}
    # 100,000 / 4 years + 10,000 a year
    assert bill(results["pool"], small_inputs).committed_usd_per_year == pytest.approx(35_000.0)
    assert bill(results["tiered"], small_inputs).committed_usd_per_year == pytest.approx(
        35_000.0)
    assert bill(results["local"], small_inputs).committed_usd_per_year == 0.0
    assert bill(results["local+replica"], small_inputs).committed_usd_per_year == 0.0


def test_per_unit_cost_is_drives_on_every_node_and_pool_capacity_and_bandwidth(
        small_inputs: PlanInputs) -> None:
    results = {r.name: r for r in evaluate(small_inputs)}
    # local: 2 nodes x 8 GB x 3 checkpoints = 0.048 TB x 50 USD = 2.4 USD, over 4 years
    local = 2 * 8e9 * 3 / 1e12 * 50.0 / 4.0
    # pool: 16 GB x 3 = 0.048 TB x 200 USD = 9.6 USD, plus 100 GB/s x 1,000 USD, over 4 years
    pool = (16e9 * 3 / 1e12 * 200.0 + 100 * 1_000.0) / 4.0
    assert bill(results["local"], small_inputs).per_unit_usd_per_year == pytest.approx(local)
    assert bill(results["local+replica"], small_inputs).per_unit_usd_per_year == pytest.approx(
        2 * local)
    assert bill(results["pool"], small_inputs).per_unit_usd_per_year == pytest.approx(pool)
    assert bill(results["tiered"], small_inputs).per_unit_usd_per_year == pytest.approx(
        local + pool)


def test_lost_work_and_timeout_cost_are_gpu_hours_at_the_price(small_inputs: PlanInputs) -> None:
    # A pool so slow that its checkpoints reach the timeout: both terms are non-zero.
    slow = replace(small_inputs, pool_bandwidth_bytes_s=0.1e9, checkpoint_timeout_s=400.0)
    r = evaluate_strategy("pool", slow)
    assert r.timeout_fraction > 0.0
    b = bill(r, slow)
    gpu_year_usd = 16 * 8760 * 2.0
    assert b.lost_work_usd_per_year == pytest.approx(
        (r.overhead_fraction - r.timeout_fraction) * gpu_year_usd)
    assert b.timeout_usd_per_year == pytest.approx(r.timeout_fraction * gpu_year_usd)
    assert b.lost_work_usd_per_year + b.timeout_usd_per_year == pytest.approx(
        r.lost_gpu_hours_per_year * 2.0)
    assert b.total_usd_per_year == pytest.approx(
        b.committed_usd_per_year + b.per_unit_usd_per_year + b.lost_work_usd_per_year
        + b.timeout_usd_per_year)
    d = b.to_dict()
    assert set(d) == {"committed_usd_per_year", "per_unit_usd_per_year",
                      "lost_work_usd_per_year", "timeout_usd_per_year", "total_usd_per_year"}


def test_objective_cost_and_overhead_can_disagree(essay_inputs: PlanInputs) -> None:
    # A pool fast enough to have the least overhead still loses on cost once its fixed cost
    # and bandwidth are paid for.
    fast = replace(essay_inputs, pool_bandwidth_bytes_s=4000e9)
    results = evaluate(fast)
    assert best_by(results, fast, "overhead") == "pool"
    assert best_by(results, fast, "cost") != "pool"
    sc = scores(results, fast, "cost")
    assert sc == {n: b.total_usd_per_year for n, b in bills(results, fast).items()}
