"""Checkpoint latency from the SQL marts: per checkpoint, per job, per tier; stragglers; signals.

Every number comes from a view in ``sql/marts/`` (the SQL files are the source of truth); these
functions only select and filter, with values passed as query parameters. They take an open
connection from :func:`ckptwatch.lake.query.connect`, so a notebook builds the views once::

    con = connect("data/lake")
    checkpoint_latency(con, job="llama-70b").sort("barrier_s", descending=True).head()

Quantiles are exact (``quantile_cont``). ``checkpoint_latency``'s p50/p99 are over the ranks of
one checkpoint; ``job_latency``'s and ``tier_latency``'s barrier p50/p99 are over checkpoints.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Literal

import duckdb
import polars as pl

from ckptwatch.analysis.detection import DetectionSettings
from ckptwatch.errors import QueryError
from ckptwatch.lake.query import run_sql

By = Literal["checkpoint", "job", "tier"]
BY_CHOICES: tuple[By, ...] = ("checkpoint", "job", "tier")



def checkpoint_latency(con: duckdb.DuckDBPyConnection, job: str | None = None,
                       tier: str | None = None) -> pl.DataFrame:
    """One row per checkpoint (job_id, step): rank p50/p90/p99/p99.9/max, barrier, bandwidth."""
    return run_sql(con, """
        select *
        from checkpoint_latency
        where ($job is null or job_id = $job)
            and ($tier is null or tier = $tier)
        order by job_id, step
    """, {"job": job, "tier": tier})


def job_latency(con: duckdb.DuckDBPyConnection, job: str | None = None,
                tier: str | None = None) -> pl.DataFrame:
    """One row per (job, tier): barrier p50/p90/p99/max over checkpoints, trend, headroom."""
    return run_sql(con, """
        select *
        from job_latency
        where ($job is null or job_id = $job)
            and ($tier is null or tier = $tier)
        order by job_id, tier
    """, {"job": job, "tier": tier})


def tier_latency(con: duckdb.DuckDBPyConnection, job: str | None = None,
                 tier: str | None = None) -> pl.DataFrame:
    """One row per tier: barrier p50/p90/p99/max over every checkpoint written to it.

    With ``job``, the same figures over that job's checkpoints only (job_latency's numbers).
    """
    if job is not None:
        return job_latency(con, job=job, tier=tier)
    return run_sql(con, """
        select *
        from tier_latency
        where ($tier is null or tier = $tier)
        order by tier
    """, {"tier": tier})


def latency(con: duckdb.DuckDBPyConnection, by: By = "checkpoint", job: str | None = None,
            tier: str | None = None) -> pl.DataFrame:
    """The latency mart for ``by`` (checkpoint | job | tier), optionally for one job or tier."""
    if by == "checkpoint":
        return checkpoint_latency(con, job=job, tier=tier)
    if by == "job":
        return job_latency(con, job=job, tier=tier)
    if by == "tier":
        return tier_latency(con, job=job, tier=tier)
    raise QueryError(f"unknown grouping {by!r}: use one of {', '.join(BY_CHOICES)}")


def set_straggler_thresholds(con: duckdb.DuckDBPyConnection, factor: float | None = None,
                             min_excess_s: float | None = None) -> None:
    """Set the session's straggler rule: duration >= factor x p50 and >= p50 + min_excess_s
    (``None``: the default of :class:`~ckptwatch.analysis.detection.DetectionSettings`)."""
    base = DetectionSettings()
    replace(base, straggler_factor=base.straggler_factor if factor is None else factor,
            straggler_min_excess_s=base.straggler_min_excess_s if min_excess_s is None
            else min_excess_s).apply(con)


def stragglers(con: duckdb.DuckDBPyConnection, job: str | None = None,
               step: int | None = None) -> pl.DataFrame:
    """Ranks far above their checkpoint's p50, slowest first, with node, leaf and target."""
    return run_sql(con, """
        select *
        from stragglers
        where ($job is null or job_id = $job)
            and ($step is null or step = $step)
        order by job_id, step, slowness_order
    """, {"job": job, "step": step})


def counter_windows(con: duckdb.DuckDBPyConnection, job: str, step: int | None = None,
                    family: str | None = None) -> pl.DataFrame:
    """Fabric / SMART / pool signals over each checkpoint window of ``job`` (see the mart)."""
    return run_sql(con, """
        select *
        from counter_windows
        where job_id = $job
            and ($step is null or step = $step)
            and ($family is null or family = $family)
        order by step, family, signal, host, device, port
    """, {"job": job, "step": step, "family": family})
