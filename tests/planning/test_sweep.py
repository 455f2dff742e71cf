"""Sweeps, flips of the best strategy, and the whole plan's JSON contract."""

from __future__ import annotations

from dataclasses import replace

import pytest

from ckptwatch.errors import PlanInputError
from ckptwatch.planning.cost import bills
from ckptwatch.planning.model import STRATEGIES, PlanInputs, evaluate, with_value
from ckptwatch.planning.sweep import make_plan, sweep, sweep2, sweep_values


def test_flip_in_pool_bandwidth_is_where_the_overheads_cross(essay_inputs: PlanInputs) -> None:
    sw = sweep(essay_inputs, "pool_bandwidth", 40e9, 4000e9, 25)
    assert sw.best[0] != "pool" and sw.best[-1] == "pool"
    pool_flips = [f for f in sw.flips if f.to == "pool"]
    assert len(pool_flips) == 1
    flip = pool_flips[0]
    below = {r.name: r.overhead_fraction for r in evaluate(
        replace(essay_inputs, pool_bandwidth_bytes_s=flip.value * 0.999))}
    above = {r.name: r.overhead_fraction for r in evaluate(
        replace(essay_inputs, pool_bandwidth_bytes_s=flip.value * 1.001))}
    assert min(below, key=below.__getitem__) == flip.from_
    assert min(above, key=above.__getitem__) == "pool"


def test_flip_in_job_size_is_an_integer(essay_inputs: PlanInputs) -> None:
    fixed_pool = replace(essay_inputs, pool_scale_exponent=0.0)
    sw = sweep(fixed_pool, "ranks", 8, 4096, 13)
    assert sw.flips, "small jobs should prefer a fixed pool, large ones local drives"
    for flip in sw.flips:
        assert flip.value == int(flip.value)
        before = evaluate(replace(fixed_pool, ranks=int(flip.value) - 1))
        at = evaluate(replace(fixed_pool, ranks=int(flip.value)))
        assert min(before, key=lambda r: r.overhead_fraction).name == flip.from_
        assert min(at, key=lambda r: r.overhead_fraction).name == flip.to


def test_sweep_values_log_and_linear() -> None:
    assert sweep_values(1.0, 100.0, 3) == pytest.approx((1.0, 10.0, 100.0))
    assert sweep_values(0.0, 1.0, 3) == pytest.approx((0.0, 0.5, 1.0))
    with pytest.raises(PlanInputError, match="LO < HI"):
        sweep_values(2.0, 1.0, 3)


def test_make_plan_json_contract(essay_inputs: PlanInputs) -> None:
    d = make_plan(essay_inputs, flips=False).to_dict()
    assert set(d) >= {"inputs", "strategies", "best", "flips"}
    assert [s["name"] for s in d["strategies"]] == list(STRATEGIES)
    for s in d["strategies"]:
        assert set(s) >= {"name", "checkpoint_s_p50", "checkpoint_s_p99", "mtbf_s", "restart_s",
                          "young_interval_s", "daly_interval_s", "optimal_interval_s",
                          "lost_work_per_failure_s", "overhead_fraction",
                          "lost_gpu_hours_per_year"}
    assert d["best"] in STRATEGIES
    assert d["flips"] == []


def test_sweeping_ranks_buys_the_pool_in_proportion(essay_inputs: PlanInputs) -> None:
    bigger = with_value(essay_inputs, "ranks", 2048)
    assert bigger.pool_bandwidth_bytes_s == pytest.approx(4 * essay_inputs.pool_bandwidth_bytes_s)
    fixed = with_value(replace(essay_inputs, pool_scale_exponent=0.0), "ranks", 2048)
    assert fixed.pool_bandwidth_bytes_s == essay_inputs.pool_bandwidth_bytes_s


def test_scale_flip_by_cost_local_then_pool(essay_inputs: PlanInputs) -> None:
    """The essay's split by scale: the pool's fixed cost is amortised over a large job, where
    local drives without a durable copy lose too much work; a small job stays local."""
    sw = sweep(essay_inputs, "ranks", 64, 16384, 9, "cost", ("local", "pool"))
    assert sw.best[0] == "local" and sw.best[-1] == "pool"
    assert len(sw.flips) == 1 and (sw.flips[0].from_, sw.flips[0].to) == ("local", "pool")
    n = int(sw.flips[0].value)

    def cost_gap(ranks: int) -> float:
        at = with_value(essay_inputs, "ranks", ranks)
        b = bills(evaluate(at), at)
        return b["pool"].total_usd_per_year - b["local"].total_usd_per_year

    assert cost_gap(n - 1) > 0 >= cost_gap(n)
    assert sw.total_usd is not None and sw.objective == "cost"


def test_sweep2_map_and_its_boundary_agree_with_the_grid(essay_inputs: PlanInputs) -> None:
    m = sweep2(essay_inputs, ("ranks", 64, 16384, 5), ("pool_fixed_cost", 1e5, 5e6, 3),
               "cost", ("local", "pool"))
    assert len(m.best) == 3 and all(len(row) == 5 for row in m.best)
    for row, y in zip(m.best, m.y_values, strict=True):
        assert row[0] == "local" and row[-1] == "pool"
        flips = [f for yy, f in m.boundary if yy == y]
        assert len(flips) == 1 and m.x_values[0] < flips[0].value < m.x_values[-1]
    # a dearer pool needs a bigger job to pay for itself: the boundary moves right
    values = [f.value for _, f in m.boundary]
    assert values == sorted(values) and values[0] < values[-1]
    d = m.to_dict()
    assert d["x"]["parameter"] == "ranks" and len(d["boundary"]) == 3
    with pytest.raises(PlanInputError, match="two different parameters"):
        sweep2(essay_inputs, ("ranks", 64, 128, 2), ("ranks", 64, 128, 2))


def test_plan_json_carries_the_bill_and_the_objective(essay_inputs: PlanInputs) -> None:
    d = make_plan(essay_inputs, flips=False, objective="cost", objective_reason="--objective",
                  ).to_dict()
    assert d["objective"] == "cost" and d["objective_reason"] == "--objective"
    for s in d["strategies"]:
        assert {"committed_usd_per_year", "per_unit_usd_per_year", "lost_work_usd_per_year",
                "timeout_usd_per_year", "total_usd_per_year"} <= set(s)
    best = min(d["strategies"], key=lambda s: s["total_usd_per_year"])
    assert d["best"] == best["name"]
    assert d["tails"]["pool"]["family"] == "pareto"
