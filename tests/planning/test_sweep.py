"""Sweeps, flips of the best strategy, and the whole plan's JSON contract."""

from __future__ import annotations

from dataclasses import replace

import pytest

from ckptwatch.errors import PlanInputError
from ckptwatch.planning.model import STRATEGIES, PlanInputs, evaluate
from ckptwatch.planning.sweep import make_plan, sweep, sweep_values


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
    sw = sweep(essay_inputs, "ranks", 8, 4096, 13)
    assert sw.flips, "small jobs should prefer the pool, large ones local drives"
    for flip in sw.flips:
        assert flip.value == int(flip.value)
        before = evaluate(replace(essay_inputs, ranks=int(flip.value) - 1))
        at = evaluate(replace(essay_inputs, ranks=int(flip.value)))
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
