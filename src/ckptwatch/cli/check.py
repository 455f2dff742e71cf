"""`ckptwatch check RAW [--format table|json] [--ignore FAMILY]`: which families arrived per
host and day, and which names fail to join (``ckptwatch.ingest.check``). Exit 1 when a
family is missing, a join fails or a file cannot be read; 0 otherwise."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the ``check`` command."""
    from ckptwatch.ingest.check import FAMILIES

    p = sub.add_parser(
        "check", help="what a raw directory holds per host and day, and what fails to join",
        description="Read a raw directory as the ingest would (nothing is written) and report "
        "which families (checkpoints, jobs, SMART, fabric, pool, topology) arrived per host "
        "and day, and which names fail to join: a rank's node without SMART, fabric "
        "counters or a topology row, a pool target without telemetry, a local target's "
        "device SMART does not list, a job without metadata. Exit 1 when a family is "
        "missing, a join fails or a file cannot be read. See docs/onboarding.md.")
    p.add_argument("raw_dir", type=Path, metavar="RAW", help="the raw directory")
    p.add_argument("--format", choices=("table", "json"), default="table",
                   help="table: the host × day grid and the problems; json: the same as an "
                   "object (default: %(default)s)")
    p.add_argument("--ignore", action="append", default=[], metavar="FAMILY",
                   help=f"do not require FAMILY ({', '.join(FAMILIES)}; repeat or "
                   "comma-separate), e.g. fabric on a site without fabric counters")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Print the report; exit 1 when it names a problem."""
    from ckptwatch.ingest.check import check_raw, render_table, summary_line
    from ckptwatch.safetext import escape_controls

    ignore = [f.strip() for item in args.ignore for f in item.split(",") if f.strip()]
    try:
        report = check_raw(args.raw_dir, ignore=ignore)
    except ValueError as exc:
        print(f"ckptwatch check: error: --ignore: {exc}", file=sys.stderr)
        return 2
    if args.format == "json":
        print(json.dumps(report.as_dict(), indent=2))
        if not report.ok:
            print(escape_controls(summary_line(report)), file=sys.stderr)
    else:
        print("\n".join(escape_controls(line) for line in render_table(report)))
    return 0 if report.ok else 1
