"""`ckptwatch demo`: the bundled sample through the Prefect ingest flow, then what it found."""

from __future__ import annotations

import argparse
from pathlib import Path

from ckptwatch.config import PROJECT_ROOT


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the ``demo`` command."""
    p = sub.add_parser(
        "demo", help="run the main job on the bundled sample data and print what it found",
        description="Ingest data/sample/ into a local lake through the Prefect flow (local "
        "ephemeral Prefect server, no external service), then print the summary.")
    p.add_argument("--raw", type=Path, default=PROJECT_ROOT / "data" / "sample",
                   help="raw directory (default: the bundled sample)")
    p.add_argument("--lake", type=Path, default=Path("data/lake"),
                   help="lake directory (default: %(default)s)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Run the nightly flow on the sample and summarise."""
    from ckptwatch.flows import load_flow_module
    from ckptwatch.summary import lake_overview, render_ingest

    print(f"ckptwatch demo: ingesting {args.raw} into {args.lake} through Prefect "
          "(local ephemeral server; the first start takes ~15 s)…", flush=True)
    report = load_flow_module("ingest").ingest_flow(args.raw, args.lake)
    print()
    print(render_ingest(report))
    print()
    print(lake_overview(args.lake))
    print()
    print(f"Next: ckptwatch sql --lake {args.lake} \"select * from checkpoint_latency "
          "order by barrier_s desc limit 5\"")
    return 1 if report.count("failed") else 0
