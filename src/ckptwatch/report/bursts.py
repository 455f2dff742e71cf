"""Correlated bursts on a shared pool, for people: the ``pool_bursts`` mart's bursts and, per
pool and day, the demand against the pool's capacity and the stall seconds spent saturated
(``pool_demand``). ``ckptwatch bursts`` prints them; every number comes from the two marts.
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Any

from ckptwatch.lake.query import run_sql

if TYPE_CHECKING:
    import duckdb
    import polars as pl

#: The views a bursts connection builds.
BURSTS_VIEWS = ("pool_demand", "pool_bursts")

#: Per pool and day: the seconds written, the peak demand against the capacity, the seconds at
#: or above saturation, the stall seconds among them, the bursts.
_DAYS_SQL = """
with
demand as (
    select * from pool_demand where $pool is null or pool = $pool
),

bursts as (
    select pool, cast(start_ts as date) as day, count(*) as n_bursts
    from pool_bursts
    where $pool is null or pool = $pool
    group by pool, day
),

days as (
    select
        pool,
        cast(second_ts as date) as day,
        count(*) as written_s,
        max(n_jobs) as peak_jobs,
        max(demand_bps) as peak_demand_bps,
        any_value(capacity_bps) as capacity_bps,
        any_value(capacity_source) as capacity_source,
        max(utilisation) as peak_utilisation,
        count(*) filter (where is_saturated) as saturated_s,
        count(*) filter (where is_stalled) as stalled_s,
        count(*) filter (where is_stalled_saturated) as stalled_saturated_s,
    from demand
    group by pool, day
)

select days.*, coalesce(bursts.n_bursts, 0) as n_bursts
from days
left join bursts using (pool, day)
order by pool, day
"""

_BURSTS_SQL = """
select * from pool_bursts
where $pool is null or pool = $pool
order by pool, start_ts
"""


def pool_days(con: duckdb.DuckDBPyConnection, pool: str | None = None) -> pl.DataFrame:
    """Per pool and day: demand against capacity, saturated and stalled seconds, bursts."""
    return run_sql(con, _DAYS_SQL, {"pool": pool})


def pool_bursts(con: duckdb.DuckDBPyConnection, pool: str | None = None) -> pl.DataFrame:
    """The bursts (``pool_bursts``), by pool and time."""
    return run_sql(con, _BURSTS_SQL, {"pool": pool})


def jobs_text(jobs: list[dict[str, object]]) -> str:
    """``job-A 61%, job-B 39%`` from a burst's jobs (most bytes first)."""
    return ", ".join(f"{j['job_id']} {float(j['share']):.0%}" for j in jobs)  # type: ignore[arg-type]


#: The day's demand per pool and minute, for the report's chart: the minute's peak demand,
#: whether any second of it was saturated or written by a stalled checkpoint.
_MINUTES_SQL = """
select
    pool,
    time_bucket(interval 1 minute, second_ts) as minute,
    max(demand_bps) as peak_demand_bps,
    max(n_jobs) as peak_jobs,
    any_value(capacity_bps) as capacity_bps,
    bool_or(is_saturated) as saturated,
    bool_or(is_stalled) as stalled,
from pool_demand
where second_ts >= $t0 and second_ts < $t1
group by pool, minute
order by pool, minute
"""


def day_facts(con: duckdb.DuckDBPyConnection, t0: datetime, t1: datetime) -> dict[str, Any]:
    """The daily report's ``pools`` facts over [t0, t1): per pool the day's demand against
    capacity (``days``), the bursts that began in it, and the demand per minute (the chart).
    ``pool_demand`` is computed once for the three (pinned)."""
    from ckptwatch.lake import signalstats  # the store (pyarrow): only for the report
    from ckptwatch.lake.seam import pinned_views

    with pinned_views(con, ("pool_demand",), stored=signalstats.stored(con)):
        days = pool_days(con)
        bursts = pool_bursts(con)
        minutes = run_sql(con, _MINUTES_SQL, {"t0": t0, "t1": t1})
    day = t0.date()
    return {
        "days": [d for d in days.to_dicts() if d["day"] == day],
        "bursts": [b for b in bursts.to_dicts() if t0 <= b["start_ts"] < t1],
        "minutes": minutes.to_dicts(),
    }
