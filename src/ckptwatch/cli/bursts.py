"""`ckptwatch bursts --lake LAKE [--pool P] [--format table|json]`: correlated checkpoint
bursts on shared pools."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from ckptwatch.settings import default_lake


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the ``bursts`` command."""
    p = sub.add_parser(
        "bursts", help="jobs checkpointing onto one pool at once: demand against capacity",
        description="Per shared pool and day: the write demand the checkpoint ranks put on it "
        "(summed per second from the rank records), its peak against the pool's write "
        "bandwidth ([pool] write_bandwidth_gbs in the config, else estimated from the lake: "
        "the capacity column says which), the seconds at or above 90 %% of it (saturated), the "
        "seconds a stalled checkpoint was being written and how many of those were saturated; "
        "then each burst: a period in which two or more jobs wrote to the pool, its jobs and "
        "their shares of the bytes (docs/bursts.md).")
    p.add_argument("--lake", type=Path, default=default_lake(),
                   help="lake directory (default: %(default)s; env CKPTWATCH_LAKE)")
    p.add_argument("--pool", metavar="POOL", help="only this pool")
    p.add_argument("--format", choices=("table", "json"), default="table",
                   help="output format (default: %(default)s); json is an object with 'days' "
                   "and 'bursts', every column of the marts")
    p.add_argument("--config", type=Path, default=None, metavar="FILE",
                   help="config file for [pool] write_bandwidth_gbs (default: "
                   "$CKPTWATCH_CONFIG, else none)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Print the pools' days and bursts; exit 0 (none is an answer too)."""
    import polars as pl

    from ckptwatch.cli._render import render_table
    from ckptwatch.lake.query import connect
    from ckptwatch.report.bursts import BURSTS_VIEWS, jobs_text, pool_bursts, pool_days
    from ckptwatch.safetext import escape_controls, escape_json_controls
    from ckptwatch.settings import load_settings

    settings = load_settings(args.config)
    con = connect(args.lake, views=BURSTS_VIEWS)
    try:
        settings.pool.apply(con)
        days = pool_days(con, args.pool)
        bursts = pool_bursts(con, args.pool)
    finally:
        con.close()
    if args.format == "json":
        text = json.dumps({"days": json.loads(days.write_json()),
                           "bursts": json.loads(bursts.write_json())})
        sys.stdout.write(escape_json_controls(text) + "\n")
        return 0
    where = f"pool {args.pool}" if args.pool else "any pool"
    if days.is_empty():
        print(escape_controls(f"no checkpoint wrote to {where} in {args.lake} (tier 'pool' "
                              "records with bytes and a duration)"))
        return 0
    gb = 1e9
    print(render_table(days.select(
        "pool", "day", "written_s", "peak_jobs",
        (pl.col("peak_demand_bps") / gb).alias("peak_GB/s"),
        (pl.col("capacity_bps") / gb).alias("capacity_GB/s"),
        pl.col("capacity_source").alias("capacity"),
        (pl.col("peak_utilisation") * 100).alias("peak_%"),
        "saturated_s", "stalled_s", "stalled_saturated_s", "n_bursts")))
    if bursts.is_empty():
        print(escape_controls(f"no burst on {where}: no two jobs wrote to one pool at once"))
        return 0
    print()
    print(render_table(bursts.select(
        "pool", "start_ts", "duration_s", "n_jobs", "peak_ranks",
        (pl.col("bytes") / 1e12).alias("TB"),
        (pl.col("peak_demand_bps") / gb).alias("peak_GB/s"),
        (pl.col("peak_utilisation") * 100).alias("peak_%"),
        "saturated_s", "stalled_saturated_s",
        pl.col("jobs").map_elements(jobs_text, return_dtype=pl.String).alias("jobs"))))
    print(f"({bursts.height} burst{'s' if bursts.height != 1 else ''}; capacity: "
          "configured = [pool] write_bandwidth_gbs, telemetry / records = the most the pool "
          "was seen to take, so saturation against an estimate means at its own observed peak)")
    return 0
