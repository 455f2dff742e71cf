"""`ckptwatch latency --lake LAKE [--by checkpoint|job|tier]`: p50 vs the tail, from the marts."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ckptwatch.settings import default_lake

#: Columns shown by ``--format table`` (csv and json carry every column of the mart).
TABLE_COLUMNS: dict[str, tuple[str, ...]] = {
    "checkpoint": ("job_id", "step", "tier", "n_ranks", "n_unfinished", "p50_s", "p90_s",
                   "p99_s", "max_s", "barrier_s", "timed_out", "timeout_reason",
                   "p99_over_p50", "bandwidth_gb_per_s", "write_p50_s", "fsync_p50_s"),
    "job": ("job_id", "tier", "n_checkpoints", "n_timed_out", "rank_p50_s", "barrier_p50_s",
            "barrier_p99_s", "barrier_max_s", "barrier_trend_s_per_h", "timeout_s",
            "headroom_s"),
    "tier": ("tier", "n_jobs", "n_checkpoints", "rank_p50_s", "rank_p99_s", "barrier_p50_s",
             "barrier_p99_s", "barrier_max_s"),
}


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the ``latency`` command."""
    p = sub.add_parser(
        "latency", help="checkpoint latency: p50 vs p99 per checkpoint, job or tier",
        description="Checkpoint latency from the SQL marts (exact quantiles). --by checkpoint: "
        "per (job, step), p50/p90/p99/max over that checkpoint's ranks and the barrier time "
        "(the slowest rank). --by job: per (job, tier), p50/p99/max of the barrier time over "
        "the job's checkpoints, its trend and the headroom to the checkpoint timeout. --by "
        "tier: the same over every checkpoint of each tier. Times in seconds. A checkpoint "
        "whose ranks wrote start markers counts them (n_started); ranks that never finished "
        "(n_unfinished) make its barrier a lower bound (barrier_is_lower_bound). timed_out and "
        "timeout_reason say whether and why a checkpoint timed out: 'status' (a rank's record "
        "says timeout; n_timed_out counts those ranks), 'unfinished' (ranks still open at the "
        "job's checkpoint timeout) or 'barrier' (the barrier reached the timeout); --by job "
        "counts the timed-out checkpoints (n_timed_out).")
    p.add_argument("--lake", type=Path, default=default_lake(),
                   help="lake directory (default: %(default)s; env CKPTWATCH_LAKE)")
    p.add_argument("--by", choices=("checkpoint", "job", "tier"), default="checkpoint",
                   help="one row per checkpoint, per job or per tier (default: %(default)s)")
    p.add_argument("--job", metavar="JOB_ID", help="only this job")
    p.add_argument("--tier", choices=("local", "pool"), help="only this tier")
    p.add_argument("--format", choices=("table", "json", "csv"), default="table",
                   help="output format (default: %(default)s); json and csv carry every "
                   "column of the mart")
    p.add_argument("--limit", type=int, default=0, metavar="N",
                   help="print at most N rows (default: all)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Print the latency mart; exit 0, or 1 when the lake holds no checkpoint for the filter."""
    import polars as pl

    from ckptwatch.analysis.latency import latency
    from ckptwatch.cli._render import render_table, write_data
    from ckptwatch.lake.query import connect
    from ckptwatch.safetext import escape_controls

    con = connect(args.lake)
    try:
        df = latency(con, by=args.by, job=args.job, tier=args.tier)
    finally:
        con.close()
    if args.limit > 0:
        df = df.head(args.limit)
    if args.format in ("csv", "json"):
        write_data(df, args.format)
    else:
        if args.by == "checkpoint":
            df = df.with_columns(
                pl.col("step").cast(pl.Utf8),
                (pl.col("effective_bandwidth_bytes_per_s") / 1e9).alias("bandwidth_gb_per_s"))
        print(render_table(df.select(TABLE_COLUMNS[args.by]), float_precision=2))
        print(f"({df.height} row{'s' if df.height != 1 else ''}; seconds; p50/p99 over "
              + ("the finished ranks of each checkpoint, barrier = slowest rank, at least "
                 "barrier_s when ranks are unfinished)" if args.by == "checkpoint"
                 else "checkpoints of the barrier time)"))
    if df.is_empty():
        what = f"job {args.job}" if args.job else "any job"
        print(escape_controls(f"ckptwatch latency: no checkpoints for {what} in {args.lake}"),
              file=sys.stderr)
        return 1
    return 0
