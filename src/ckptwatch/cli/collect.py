"""`ckptwatch collect --out DIR`: append this node's SMART and fabric counters, and a pool
server's own statistics, as envelopes."""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from pathlib import Path
from types import FrameType

from ckptwatch.cli._options import positive_float

NODE_TOOL_NAMES = ("smartctl", "nvme", "ethtool", "sysfs")
POOL_TOOL_NAMES = ("lctl", "daos_metrics", "spdk", "mmpmon", "mmlsqos", "mmdiag")
TOOL_NAMES = NODE_TOOL_NAMES + POOL_TOOL_NAMES


def _tools(text: str) -> tuple[str, ...]:
    names = [t.strip() for t in text.split(",") if t.strip()]
    unknown = sorted(set(names) - set(TOOL_NAMES))
    if unknown or not names:
        raise argparse.ArgumentTypeError(
            f"unknown tool(s) {', '.join(unknown) or '(none given)'}; choose from "
            f"{','.join(TOOL_NAMES)}")
    return tuple(names)


def _names(text: str) -> tuple[str, ...]:
    names = tuple(t.strip() for t in text.split(",") if t.strip())
    if not names:
        raise argparse.ArgumentTypeError("give at least one name")
    return names


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the ``collect`` command."""
    p = sub.add_parser(
        "collect", help="append this node's SMART and fabric counters (and a pool server's "
        "statistics) to a raw directory",
        description="Run smartctl (each NVMe device from `smartctl --scan -j`), nvme-cli "
        "(smart-log and the OCP log where the drive has it), ethtool -S (interfaces of RDMA "
        "devices with an Ethernet port) and read the InfiniBand/RoCE sysfs counters, then "
        "append one JSON Lines envelope per device to OUT/smart/<node>-<UTC date>.jsonl and "
        "OUT/fabric/<node>-<UTC date>.jsonl. A missing tool, a permission problem or a timeout "
        "is reported once on stderr and skipped. On a pool server it also runs what the host "
        "has of lctl get_param (Lustre OSS/MDS), daos_metrics, the SPDK target's "
        "bdev_get_iostat (JSON-RPC on --spdk-socket), mmpmon, mmlsqos and mmdiag --waiters "
        "(Storage Scale) into OUT/pool/<node>-<UTC date>.jsonl: a pool tool the host lacks is "
        "one note; one it has that fails is an error (with --once: exit status 1; a node "
        "tool that is missing or denied and nothing collected is exit 1 too, a node with no "
        "NVMe drive and no RDMA port is exit 0 with a note). Runs one "
        "round with --once, else a round every --interval seconds until SIGTERM/SIGINT (which "
        "end it after the current round). See docs/collecting.md for the systemd timer, the "
        "cron line and each pool system.")
    p.add_argument("--out", type=Path, required=True, metavar="DIR",
                   help="raw directory to append to (smart/, fabric/ and pool/ are created in "
                   "it)")
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
                   help=f"comma-separated subset of {','.join(TOOL_NAMES)} (default: all; "
                   "the pool tools run where the host has them)")
    p.add_argument("--spdk-socket", type=Path, default=Path("/var/tmp/spdk.sock"),
                   metavar="PATH", help="the SPDK target's JSON-RPC socket (default: "
                   "%(default)s; the spdk tool runs where it exists)")
    p.add_argument("--gpfs-fs", type=_names, default=None, metavar="LIST",
                   help="comma-separated Storage Scale file systems mmlsqos queries "
                   "(default: those mmpmon reports mounted on this host)")
    p.add_argument("--timeout", type=positive_float, default=20.0, metavar="SECONDS",
                   help="timeout of each tool call (default: %(default)s)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Collect until told to stop (or once)."""
    from ckptwatch.collect.collector import Collector, RoundResult, run_loop
    from ckptwatch.errors import UsageError

    if args.out.exists() and not args.out.is_dir():  # else a round with nothing new succeeds
        raise UsageError(f"--out {args.out} is a file, not a directory: name the raw directory "
                         "(it is created if missing)")
    collector = Collector(args.out, node=args.node, sysfs_root=args.sysfs_root,
                          tools=args.tools, timeout_s=args.timeout,
                          spdk_socket=args.spdk_socket, gpfs_filesystems=args.gpfs_fs,
                          interval_s=args.interval)
    stop = threading.Event()

    def _stop(signum: int, frame: FrameType | None) -> None:
        stop.set()

    previous = {s: signal.signal(s, _stop) for s in (signal.SIGTERM, signal.SIGINT)}

    pool_selected = any(t in POOL_TOOL_NAMES for t in args.tools)
    node_tools = [t for t in args.tools if t in NODE_TOOL_NAMES]

    def _report(result: RoundResult) -> None:
        if args.once:
            counts = (f"{result.count('smart')} SMART, {result.count('fabric')} fabric and "
                      f"{result.count('pool')} pool" if pool_selected else
                      f"{result.count('smart')} SMART and {result.count('fabric')} fabric")
            print(f"collected {counts} envelope(s) for {collector.node} into {args.out}")
            for path, n in sorted(result.files.items()):
                print(f"  {path}: +{n}")
        sys.stdout.flush()

    collected = 0
    failures: list[str] = []

    def _count(result: RoundResult) -> None:
        nonlocal collected
        collected += len(result.envelopes)
        failures.extend(result.failures)
        _report(result)

    try:
        run_loop(collector, interval_s=args.interval, stop=stop, once=args.once,
                 on_round=_count)
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    if args.once and failures:
        tools = ", ".join(dict.fromkeys(f.split(":", 1)[0] for f in failures))
        print(f"ckptwatch collect: failed: {tools} (see the errors above); {collected} "
              "envelope(s) of the other tools written", file=sys.stderr)
        return 1
    warned = [t for t in node_tools if t in collector.warned]
    if args.once and not collected and warned:
        print(f"ckptwatch collect: nothing collected: none of {', '.join(node_tools)} gave an "
              f"output on this node (see the warnings above about {', '.join(warned)}; "
              "--tools picks the tools)", file=sys.stderr)
        return 1
    if args.once and not collected and node_tools:
        # The tools ran and found no drive or port: a node without NVMe or InfiniBand/RoCE,
        # not a failure (a timer would otherwise fail every round there).
        print(f"ckptwatch collect: nothing to collect on {collector.node}: "
              f"{', '.join(node_tools)} found no NVMe drive and no RDMA port",
              file=sys.stderr)
    return 0
