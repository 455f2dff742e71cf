"""Closing the loop: a stagger plan measured on a day of colliding pool jobs, applied back to the
simulator (each job's checkpoints started later by its advised delay), gives fewer saturation
stalls and a lower barrier p99, measured the same way as before (issue 45, item 7)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from ckptwatch.ingest.run import ingest
from ckptwatch.lake.query import connect, run_sql
from ckptwatch.planning.stagger_lake import stagger_plans
from ckptwatch.settings import Settings
from ckptwatch.simulate.evaluation import family_options
from ckptwatch.simulate.scenario import simulate

SEED = 3103


def _day(root: Path, offsets: tuple[tuple[str, float], ...] = ()) -> dict[str, Any]:
    """A 2-hour day of pool jobs launched together (their checkpoints collide by themselves;
    bursts only, no other incident), ingested: its saturation stalls and each pool job's
    barrier p99 from the lake."""
    opts = {**family_options("burst", SEED), "incidents_per_hour": 0.0, "bursts_per_hour": 1.0,
            "aligned_phases": True, "phase_offsets": offsets}
    simulate(root / "raw", SEED, 8, 2.0, **opts)
    assert ingest(root / "raw", root / "lake").quarantined == 0
    labels = json.loads((root / "raw" / "labels.json").read_text())
    con = connect(root / "lake", views=("checkpoint_latency", "pool_bursts"))
    try:
        p99 = dict(run_sql(con, "select job_id, quantile_cont(barrier_s, 0.99) "
                                "from checkpoint_latency where tier = 'pool' "
                                "group by job_id").rows())
        # what `ckptwatch bursts` lists: the jobs' collisions on the pool
        bursts = run_sql(con, "select count(*) from pool_bursts").item()
    finally:
        con.close()
    return {"saturation": sum(s["causes"][0] == "saturation" for s in labels["stalls"]),
            "p99": p99, "bursts": bursts, "lake": root / "lake"}


def test_the_stagger_plan_applied_back_spreads_the_bursts(tmp_path: Path) -> None:
    before = _day(tmp_path / "before")
    assert before["saturation"] >= 2  # the colliding jobs' bursts stalled checkpoints
    assert before["bursts"] >= before["saturation"] // 2  # and `bursts` lists the collisions
    [plan] = stagger_plans(before["lake"], Settings())
    offsets = tuple((j.job_id, j.delay_s) for j in plan.jobs if j.delay_s)
    assert offsets and plan.peak_after_bps < plan.peak_before_bps
    after = _day(tmp_path / "after", offsets)
    # the jobs apart: no collision left for the other tenants to push over the capacity
    assert after["saturation"] < before["saturation"]
    assert after["bursts"] < before["bursts"]
    assert set(after["p99"]) == set(before["p99"])
    for job, p99 in before["p99"].items():
        assert after["p99"][job] < p99, job
    # the plan's own peak prediction: the staggered demand under the pool's capacity
    assert plan.peak_after_bps <= plan.capacity_bps


@pytest.mark.parametrize("text", ["job-1", "=5", "job-1=abc"])
def test_a_phase_offset_is_job_equals_seconds(text: str) -> None:
    import argparse

    from ckptwatch.cli.simulate import _offset

    with pytest.raises(argparse.ArgumentTypeError, match="is not JOB=SECONDS"):
        _offset(text)
    assert _offset("job-1=250.5") == ("job-1", 250.5)


def test_an_offset_for_a_job_the_day_does_not_have_is_an_error(tmp_path: Path) -> None:
    from ckptwatch.errors import SimulationConfigError

    with pytest.raises(SimulationConfigError, match=r"--phase-offset: no job job-typo in this "
                       r"scenario \(its jobs: job-"):
        simulate(tmp_path / "raw", SEED, 8, 1.0, phase_offsets=(("job-typo", 30.0),))
    assert not (tmp_path / "raw").exists()  # nothing left behind to block the next run
