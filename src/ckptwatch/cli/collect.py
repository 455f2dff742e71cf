"""`ckptwatch collect --out DIR`: append this node's SMART and fabric counters as envelopes."""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from pathlib import Path
from types import FrameType

from ckptwatch.cli._options import positive_float

TOOL_NAMES = ("smartctl", "nvme", "ethtool", "sysfs")


def _tools(text: str) -> tuple[str, ...]:
    names = [t.strip() for t in text.split(",") if t.strip()]
    unknown = sorted(set(names) - set(TOOL_NAMES))
    if unknown or not names:
        raise argparse.ArgumentTypeError(
            f"unknown tool(s) {', '.join(unknown) or '(none given)'}; choose from "
            f"{','.join(TOOL_NAMES)}")
    return tuple(names)


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the ``collect`` command."""
    p = sub.add_parser(
        "collect", help="append this node's SMART and fabric counters to a raw directory",
        description="Run smartctl (each NVMe device from `smartctl --scan -j`), nvme-cli "
        "(smart-log and the OCP log where the drive has it), ethtool -S (interfaces of RDMA "
        "devices with an Ethernet port) and read the InfiniBand/RoCE sysfs counters, then "
        "append one JSON Lines envelope per device to OUT/smart/<node>-<UTC date>.jsonl and "
        "OUT/fabric/<node>-<UTC date>.jsonl. A missing tool, a permission problem or a timeout "
        "is reported once on stderr and skipped. Runs one round with --once, else a round every "
        "--interval seconds until SIGTERM/SIGINT (which end it after the current round). See "
        "docs/collecting.md for the systemd timer and the cron line.")
    p.add_argument("--out", type=Path, required=True, metavar="DIR",
                   help="raw directory to append to (smart/ and fabric/ are created in it)")
    p.add_argument("--interval", type=positive_float, default=60.0, metavar="SECONDS",
                   help="seconds between rounds, aligned to multiples of it (default: "
                   "%(default)s; ignored with --once)")
    p.add_argument("--once", action="store_true",
                   help="run one round and exit (for a systemd timer or cron)")
    p.add_argument("--node", default=None,
                   help="node name written into every envelope and file name (default: this "
                   "host's name, socket.gethostname(), as the checkpoint recorder uses)")
    p.add_argument("--sysfs-root", type=Path, default=Path("/sys"), metavar="DIR",
                   help="sysfs mount to read class/infiniband and class/nvme from "
                   "(default: %(default)s)")
    p.add_argument("--tools", type=_tools, default=TOOL_NAMES, metavar="LIST",
                   help="comma-separated subset of smartctl,nvme,ethtool,sysfs (default: all)")
    p.add_argument("--timeout", type=positive_float, default=20.0, metavar="SECONDS",
                   help="timeout of each tool call (default: %(default)s)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Collect until told to stop (or once)."""
    from ckptwatch.collect.collector import Collector, RoundResult, run_loop

    collector = Collector(args.out, node=args.node, sysfs_root=args.sysfs_root,
                          tools=args.tools, timeout_s=args.timeout)
    stop = threading.Event()

    def _stop(signum: int, frame: FrameType | None) -> None:
        stop.set()

    previous = {s: signal.signal(s, _stop) for s in (signal.SIGTERM, signal.SIGINT)}

    def _report(result: RoundResult) -> None:
        if args.once:
            print(f"collected {result.count('smart')} SMART and {result.count('fabric')} "
                  f"fabric envelope(s) for {collector.node} into {args.out}")
            for path, n in sorted(result.files.items()):
                print(f"  {path}: +{n}")
        sys.stdout.flush()

    collected = 0

    def _count(result: RoundResult) -> None:
        nonlocal collected
        collected += len(result.envelopes)
        _report(result)

    try:
        run_loop(collector, interval_s=args.interval, stop=stop, once=args.once,
                 on_round=_count)
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    if args.once and not collected:
        print(f"ckptwatch collect: nothing collected: none of {', '.join(args.tools)} gave an "
              "output on this node (see the warnings above; --tools picks the tools)",
              file=sys.stderr)
        return 1
    return 0
