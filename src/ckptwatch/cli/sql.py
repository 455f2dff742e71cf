"""`ckptwatch sql --lake LAKE "select …"`: DuckDB over the lake, every view by name."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ckptwatch.settings import default_lake


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the ``sql`` command."""
    p = sub.add_parser(
        "sql", help="run SQL over the lake (DuckDB; tables and marts as views)",
        description="Run one SQL query with DuckDB over the lake. Every lake table "
        "(checkpoint_writes, jobs, nvme_smart, fabric_counters, pool_metrics, topology, "
        "quarantine) and every view in sql/ (stg_*, marts) is available by name. "
        "Use --list to see them.")
    p.add_argument("query", nargs="?", help="SQL text, or - to read it from stdin")
    p.add_argument("--lake", type=Path, default=default_lake(),
                   help="lake directory (default: %(default)s; env CKPTWATCH_LAKE)")
    p.add_argument("--format", choices=("table", "csv", "json"), default="table",
                   help="output format (default: %(default)s)")
    p.add_argument("--list", action="store_true", help="list the views and exit")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Run the query and print the result."""
    from ckptwatch.cli._render import write_result
    from ckptwatch.errors import UsageError
    from ckptwatch.lake.query import connect, view_files, views_named_in

    if args.list:
        for f in view_files():
            print(f"{f.stem:<28} {f.parent.name}")
        return 0
    if not args.query:
        raise UsageError("no query given (pass SQL text, or - for stdin)")
    sql = sys.stdin.read() if args.query == "-" else args.query
    con = connect(args.lake, views=views_named_in(sql))  # only what the query names
    n_rows = write_result(con, sql, args.format, float_precision=3)  # streamed, no polars
    if args.format == "table":
        print(f"({n_rows} row{'s' if n_rows != 1 else ''})")
    return 0
