"""`ckptwatch demo`: the nightly flow on the bundled sample, then what it found."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ckptwatch.cli._options import add_verbose
from ckptwatch.safetext import escape_controls

#: The bundled sample scenario (``data/sample/README.md``): the same files, byte for byte.
SAMPLE_SEED, SAMPLE_NODES, SAMPLE_HOURS = 3, 8, 4.0


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the ``demo`` command."""
    p = sub.add_parser(
        "demo", help="run the main job on the bundled sample data and print what it found",
        description="Run the nightly Prefect flow (local ephemeral Prefect server, no external "
        "service) on data/sample/: ingest into a local lake, find and attribute stalls, "
        "evaluate alerts (to a JSON Lines file in the lake) as of the sample's newest "
        "checkpoint (its day is long past: as of today its jobs are history), write the daily "
        "report; then print what it found.")
    p.add_argument("--raw", type=Path, default=None,
                   help="raw directory (default: ./data/sample when it exists, as in a "
                   "checkout; else the sample scenario simulated into LAKE/../sample-raw)")
    p.add_argument("--lake", type=Path, default=Path("data/lake"),
                   help="lake directory (default: %(default)s)")
    add_verbose(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Run the nightly flow on the sample and summarise."""
    from ckptwatch.analysis.findings import find_stalls
    from ckptwatch.cli._render import lake_overview
    from ckptwatch.cli.nightly import render_result
    from ckptwatch.cli.stalls import render_stalls
    from ckptwatch.errors import AlertsUndeliveredError
    from ckptwatch.flows import local_prefect

    local_prefect.configure(args.verbose)  # before the first import of Prefect
    server = local_prefect.start_local_server(args.verbose)  # boots while the flow imports
    from ckptwatch.flows.nightly import nightly_flow, preload
    from ckptwatch.flows.run import exit_code

    preload()  # while the server boots

    if args.raw is None:
        args.raw = _sample_raw(args.lake)
    print(f"ckptwatch demo: the nightly flow on {args.raw} -> {args.lake} (its local Prefect "
          "server starts first: ~15 s the first time)…", flush=True)
    undelivered: AlertsUndeliveredError | None = None
    with local_prefect.local_server(server):
        try:
            # The sample's day is long past: its alerts as of its newest checkpoint.
            result = nightly_flow(args.raw, args.lake, replay=True)
        except AlertsUndeliveredError as exc:  # a sink of $CKPTWATCH_CONFIG: report, go on
            undelivered, result = exc, exc.result
    print()
    print(render_result(result, args.raw, args.lake))
    print()
    print(lake_overview(args.lake))
    print()
    print("stalls and their causes (top evidence line; `ckptwatch explain` for all of it)")
    print(render_stalls(find_stalls(args.lake)))
    print()
    print(f"Open the daily report: {result['report']}")
    print(f"Next: ckptwatch postmortem --lake {args.lake} --job JOB  (the job's worst stall, "
          "as a notebook exported to HTML)")
    if undelivered is not None:
        print(f"ckptwatch demo: {escape_controls(str(undelivered))}", file=sys.stderr)
    return exit_code(undelivered, result)


def _sample_raw(lake: Path) -> Path:
    """``./data/sample`` in a checkout; elsewhere (an installed wheel) the same scenario made
    by the simulator beside the lake (deterministic per seed: the same files)."""
    here = Path("data/sample")
    if (here / "labels.json").is_file():
        return here
    from ckptwatch.simulate.scenario import simulate

    raw = lake.parent / "sample-raw"
    if not (raw / "labels.json").is_file():
        print(f"ckptwatch demo: simulating the sample scenario into {raw}…", flush=True)
        simulate(raw, SAMPLE_SEED, SAMPLE_NODES, SAMPLE_HOURS)
    return raw
