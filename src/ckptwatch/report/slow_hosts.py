"""Chronic slow hosts: hosts whose ranks are consistently slower than the rest of their job's
checkpoints, from the ``slow_hosts`` mart (``sql/marts/slow_hosts.sql``, docs/slow-hosts.md).

One query, shared by ``ckptwatch slow-hosts``, the daily report and the post-mortem, so that
all three name the same hosts in the same order: most consistently slow first (named hosts,
then by the sign test's p-value, then how often among the slowest, then the excess).
"""

from __future__ import annotations

import duckdb
import polars as pl

from ckptwatch.lake.query import run_sql

#: The view the query reads (``connect(..., views=SLOW_HOSTS_VIEWS)`` builds only what it needs).
SLOW_HOSTS_VIEWS = ("slow_hosts",)


def slow_hosts(con: duckdb.DuckDBPyConnection, job: str | None = None, *,
               include_all: bool = False) -> pl.DataFrame:
    """Rows of ``slow_hosts`` (one per job and named host), most consistently slow first.

    ``job``: only that job. ``include_all``: every host compared, not only those named slow
    (``is_slow``).
    """
    return run_sql(con, """
        select *
        from slow_hosts
        where ($job is null or job_id = $job)
            and ($all or is_slow)
        order by
            is_slow desc,
            p_value,
            n_slowest desc,
            median_excess_pct desc nulls last,
            job_id,
            node
    """, {"job": job, "all": include_all})
