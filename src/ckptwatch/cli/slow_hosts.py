"""`ckptwatch slow-hosts --lake LAKE [--job J] [--format table|json]`: chronic slow hosts."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ckptwatch.settings import default_lake

#: Columns shown by ``--format table`` (json carries every column of the mart).
TABLE_COLUMNS = ("job_id", "node", "n_ranks", "n_checkpoints", "n_slowest", "n_above_median",
                 "median_excess_pct", "median_excess_s", "p_value", "is_slow")


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the ``slow-hosts`` command."""
    p = sub.add_parser(
        "slow-hosts", help="hosts consistently slower than the rest of their job's checkpoints",
        description="Per job and host, over the job's checkpoint saves: how often the host's "
        "slowest rank is among the checkpoint's slowest (at or above its rank p90: n_slowest), "
        "how often the host's median rank is above the checkpoint's median (n_above_median), "
        "by how much (median over checkpoints of the host's median minus the checkpoint's "
        "median, in %% and seconds), and a one-sided sign test p-value. A host is named slow "
        "when p <= 0.05, the median excess is at least 2 %% and it took part in at least 5 "
        "checkpoints (docs/slow-hosts.md), so a host a few percent slow is named even when no "
        "checkpoint is a stall. Ranks on node 'unknown' are no host. Most consistently slow "
        "first.")
    p.add_argument("--lake", type=Path, default=default_lake(),
                   help="lake directory (default: %(default)s; env CKPTWATCH_LAKE)")
    p.add_argument("--job", metavar="JOB_ID", help="only this job")
    p.add_argument("--format", choices=("table", "json"), default="table",
                   help="output format (default: %(default)s); json is a list of objects "
                   "carrying every column of the mart")
    p.add_argument("--all", action="store_true",
                   help="list every host compared, not only those named slow")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Print the slow hosts; exit 0 (also when none is named: that is an answer)."""
    from ckptwatch.cli._render import render_table, write_data
    from ckptwatch.lake.query import connect
    from ckptwatch.report.slow_hosts import SLOW_HOSTS_VIEWS, slow_hosts
    from ckptwatch.safetext import escape_controls

    con = connect(args.lake, views=SLOW_HOSTS_VIEWS)
    try:
        df = slow_hosts(con, args.job, include_all=args.all)
    finally:
        con.close()
    if args.format == "json":
        write_data(df, "json")
        return 0
    if df.is_empty():
        what = f"job {args.job}" if args.job else "any job"
        print(escape_controls(f"no {'hosts compared' if args.all else 'slow hosts'} for {what} "
                              f"in {args.lake} (a host is compared over checkpoints with ranks "
                              "on at least two named hosts)"))
        return 0
    print(render_table(df.select(TABLE_COLUMNS), digits={"p_value": 4}))
    n = int(df["is_slow"].sum())
    print(f"({n} slow host{'s' if n != 1 else ''}; excess = the host's median rank over the "
          "checkpoint's median, median over checkpoints; p = one-sided sign test)",
          file=sys.stdout)
    return 0
