"""`ckptwatch ingest RAW_DIR --lake LAKE`: raw telemetry files into the Parquet lake."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ckptwatch.cli._options import add_dask, add_lock_wait, add_verbose
from ckptwatch.settings import INGEST_LIMIT_ENV, default_lake, ingest_settings


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the ``ingest`` command."""
    p = sub.add_parser(
        "ingest", help="ingest a raw telemetry directory into the lake",
        description="Read every new file under RAW_DIR (checkpoints/, jobs/, smart/, fabric/, "
        "pool/, topology.csv; recognised by place and content) into the Parquet lake. Files "
        "already ingested (same content) are skipped. Bad records go to the quarantine table "
        "with file, line and reason; the run goes on. Exit 0 when the run completed (even with "
        "quarantined records), 1 when some file could not be read or RAW_DIR holds no file at "
        "all, 2 when the run could not proceed.")
    p.add_argument("raw_dir", type=Path, metavar="RAW_DIR", help="raw telemetry directory")
    p.add_argument("--lake", type=Path, default=default_lake(),
                   help="lake directory (default: %(default)s; env CKPTWATCH_LAKE)")
    p.add_argument("--flow", action="store_true",
                   help="run through the Prefect ingest flow (a local Prefect server the "
                   "command starts and stops) instead of in-process")
    add_dask(p, "run the Prefect ingest flow (implies --flow) with the files spread over a "
             "Dask cluster")
    add_lock_wait(p)
    p.add_argument("--workers", default=None, metavar="N|auto",
                   help="processes that parse the files beside this one: auto (default: "
                   "several for a run of 128 MiB or more, else none) or a number, 1 to parse "
                   "in this process (env CKPTWATCH_INGEST_WORKERS)")
    _add_limits(p)
    p.add_argument("--quiet", action="store_true", help="no progress on stderr")
    add_verbose(p)
    p.set_defaults(func=run)


#: The ``--max-*`` flags: (flag, limit, help). Each overrides its ``CKPTWATCH_MAX_*`` variable.
LIMIT_FLAGS = (
    ("--max-record-bytes", "max_record_bytes", "longest line or whole-file record, bytes "
     "(default 1 MiB); a longer one is quarantined"),
    ("--max-field-chars", "max_field_chars", "longest job_id, node, device, target, port, pool, "
     "counter or metric name, characters (default 256); a longer one is quarantined"),
    ("--max-decompressed-ratio", "max_decompressed_ratio", "a .gz is read up to this many "
     "times its size (default 64); beyond, the file is failed"),
    ("--max-file-bytes", "max_file_bytes", "no file is read beyond this many (decompressed) "
     "bytes (default 4 GiB); beyond, the file is failed"),
    ("--max-quarantine-rows", "max_quarantine_rows", "quarantine rows kept per file (default "
     "1000); beyond, the rest is counted and the file is failed"),
)


def _add_limits(p: argparse.ArgumentParser) -> None:
    for flag, name, text in LIMIT_FLAGS:
        var = INGEST_LIMIT_ENV[name]
        p.add_argument(flag, type=int, default=None, metavar="N", help=f"{text} (env {var})")


def _progress(i: int, n: int, rel: str) -> None:
    if sys.stderr.isatty() or i == n or i % 100 == 0:
        end = "\n" if i == n or not sys.stderr.isatty() else "\r"
        print(f"  [{i}/{n}] {rel[:70]:<70}", end=end, file=sys.stderr, flush=True)


def run(args: argparse.Namespace) -> int:
    """Ingest and print the summary."""
    from ckptwatch.cli._render import render_ingest

    # The run's settings, loaded once (defaults, CKPTWATCH_* variables, flags) and passed down;
    # a bad value is one line, before any work.
    limits = ingest_settings(workers=args.workers,
                             **{name: getattr(args, name) for _, name, _ in LIMIT_FLAGS})
    if args.flow or args.dask:
        from ckptwatch.cli._progress import Progress
        from ckptwatch.flows import local_prefect

        local_prefect.configure(args.verbose)  # before the first import of Prefect
        with Progress("ingest", quiet=args.quiet) as progress:
            progress.stage("starting the local flow server", "~15 s the first time")
            server = local_prefect.start_local_server(args.verbose)  # boots while flow imports
            from ckptwatch.flows.ingest import dask_runner, ingest_flow

            flow = ingest_flow
            if args.dask:
                flow = flow.with_options(task_runner=dask_runner(args.dask))
            progress.stage("waiting for the local flow server")
            with local_prefect.local_server(server), progress.hook():
                progress.stage("ingest")
                report = flow(args.raw_dir, args.lake, lock_wait_s=args.lock_wait,
                              limits=limits)
    else:
        from ckptwatch.ingest.run import ingest

        report = ingest(args.raw_dir, args.lake, lock_wait_s=args.lock_wait,
                        progress=None if args.quiet else _progress, limits=limits)
    print(render_ingest(report))
    for note in getattr(report, "notes", []):  # the run's own notes (a lake skipped)
        print(f"  note: {note}")
    if not report.files:
        print(f"ckptwatch ingest: no raw files found under {report.raw_dir} (expected "
              "checkpoints/, jobs/, smart/, fabric/, pool/ or topology.csv; see docs/formats.md)",
              file=sys.stderr)
        return 1
    return 1 if report.count("failed") else 0
