"""`ckptwatch ingest RAW_DIR --lake LAKE`: raw telemetry files into the Parquet lake."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ckptwatch.cli._options import add_dask, add_lock_wait
from ckptwatch.settings import default_lake


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the ``ingest`` command."""
    p = sub.add_parser(
        "ingest", help="ingest a raw telemetry directory into the lake",
        description="Read every new file under RAW_DIR (checkpoints/, jobs/, smart/, fabric/, "
        "pool/, topology.csv; recognised by place and content) into the Parquet lake. Files "
        "already ingested (same content) are skipped. Bad records go to the quarantine table "
        "with file, line and reason; the run goes on. Exit 0 when the run completed (even with "
        "quarantined records), 1 when some file could not be read, 2 when the run could not "
        "proceed.")
    p.add_argument("raw_dir", type=Path, metavar="RAW_DIR", help="raw telemetry directory")
    p.add_argument("--lake", type=Path, default=default_lake(),
                   help="lake directory (default: %(default)s; env CKPTWATCH_LAKE)")
    p.add_argument("--flow", action="store_true",
                   help="run through the Prefect ingest flow (local ephemeral server) "
                   "instead of in-process")
    add_dask(p, "run the Prefect ingest flow (implies --flow) with the files spread over a "
             "Dask cluster")
    add_lock_wait(p)
    p.add_argument("--quiet", action="store_true", help="no progress on stderr")
    p.set_defaults(func=run)


def _progress(i: int, n: int, rel: str) -> None:
    if sys.stderr.isatty() or i == n or i % 100 == 0:
        end = "\n" if i == n or not sys.stderr.isatty() else "\r"
        print(f"  [{i}/{n}] {rel[:70]:<70}", end=end, file=sys.stderr, flush=True)


def run(args: argparse.Namespace) -> int:
    """Ingest and print the summary."""
    from ckptwatch.cli._render import render_ingest

    if args.flow or args.dask:
        from ckptwatch.flows.ingest import dask_runner, ingest_flow

        flow = ingest_flow
        if args.dask:
            flow = flow.with_options(task_runner=dask_runner(args.dask))
        report = flow(args.raw_dir, args.lake, lock_wait_s=args.lock_wait)
    else:
        from ckptwatch.ingest.run import ingest

        report = ingest(args.raw_dir, args.lake, lock_wait_s=args.lock_wait,
                        progress=None if args.quiet else _progress)
    print(render_ingest(report))
    return 1 if report.count("failed") else 0
