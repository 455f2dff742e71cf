"""The stagger plans of a lake's pools: ``pool_job_schedules`` read, ``planning.stagger`` run
per pool (the one place its inputs are measured is the mart)."""

from __future__ import annotations

from pathlib import Path

from ckptwatch.errors import QueryError
from ckptwatch.lake.query import connect, run_sql
from ckptwatch.planning.stagger import JobSchedule, StaggerPlan, stagger
from ckptwatch.settings import Settings

#: The views a stagger plan reads.
STAGGER_VIEWS = ("pool_job_schedules",)


def stagger_plans(lake_root: Path | str, settings: Settings, *,
                  pool: str | None = None) -> list[StaggerPlan]:
    """One plan per pool of the lake (or ``pool`` only) with two or more jobs on it."""
    con = connect(lake_root, views=STAGGER_VIEWS)
    try:
        settings.pool.apply(con)
        rows = run_sql(con, "select * from pool_job_schedules where $pool is null "
                            "or pool = $pool order by pool, job_id", {"pool": pool}).to_dicts()
    finally:
        con.close()
    plans = []
    for name in sorted({r["pool"] for r in rows}):
        mine = [r for r in rows if r["pool"] == name]
        if len(mine) < 2:
            continue
        if mine[0]["capacity_bps"] is None:  # no second of demand measured: nothing to judge
            raise QueryError(f"pool {name}: no write bandwidth known or measurable from the "
                             "lake; set [pool] write_bandwidth_gbs in the config")
        jobs = [JobSchedule(r["job_id"], float(r["interval_s"]), float(r["duration_s"]),
                            float(r["bytes"]), r["last_start_ts"].timestamp(),
                            r["barrier_p50_s"], r["barrier_p99_s"],
                            float(r["jitter_s"] or 0.0)) for r in mine]
        plans.append(stagger(name, jobs, float(mine[0]["capacity_bps"]),
                             str(mine[0]["capacity_source"])))
    return plans
