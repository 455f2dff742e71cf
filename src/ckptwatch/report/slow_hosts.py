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


def describe_slow_host(row: dict[str, object]) -> str:
    """One line for a person: ``node17 (job j1): among the slowest in 10 of 10 checkpoints,
    median +6.1 % (+2.84 s) over the checkpoint's median, p = 0.001``."""
    pct = row.get("median_excess_pct")
    pct_text = f"{float(pct):+.1f} %" if isinstance(pct, int | float) else "n/a"
    excess_s = row.get("median_excess_s")
    s_text = f"{float(excess_s):+.2f} s" if isinstance(excess_s, int | float) else "n/a"
    p_value = row.get("p_value")
    p_text = f"{float(p_value):.2g}" if isinstance(p_value, int | float) else "n/a"
    return (f"{row['node']} (job {row['job_id']}): among the slowest in {row['n_slowest']} of "
            f"{row['n_checkpoints']} checkpoints, median {pct_text} ({s_text}) over the "
            f"checkpoint's median, above it in {row['n_above_median']}; p = {p_text}")
