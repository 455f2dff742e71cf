"""`ckptwatch watch RAW_DIR --lake LAKE`: warn while a checkpoint is still in flight."""

from __future__ import annotations

import argparse
import logging
import signal
import sys
import threading
import time
from pathlib import Path
from types import FrameType

from ckptwatch.cli._options import positive_float, tcp_port
from ckptwatch.settings import default_lake

DEFAULT_METRICS_PORT = 9464


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the ``watch`` command."""
    p = sub.add_parser(
        "watch", help="follow checkpoint files live; alert before an open checkpoint times out",
        description="Follow the checkpoint files under RAW_DIR/checkpoints/ as they grow "
        "(only the new bytes; offsets in LAKE/_state/watch.json, so a restart resumes). Every "
        "--interval: each job's oldest open checkpoint (ranks that wrote a start marker and "
        "no finished record) is held against its checkpoint_timeout_s with the warning and "
        "critical fractions of the alerts (per-job overrides included), together with the "
        "tail of its completed checkpoints; alerts (CheckpointInFlightNearTimeout for the open "
        "checkpoint, CheckpointTailNearTimeout for the tail) go to the config file's sinks "
        "with the same state as `ckptwatch alerts` (the nightly run and the watcher never "
        "send one twice). A checkpoint already past its timeout is reported once, as timed "
        "out; a job whose newest record is older than its staleness horizon is history (no "
        "alert, no live state, no metrics). The lake's tables are left to the nightly ingest. "
        "Stops on SIGTERM/SIGINT (exit 0, state saved). Exit 1 with --once when a sink "
        "failed; 2 on a usage or lake error.")
    p.add_argument("raw_dir", type=Path, metavar="RAW_DIR",
                   help="raw directory whose checkpoints/ the training jobs append to")
    p.add_argument("--lake", type=Path, default=default_lake(),
                   help="lake directory: its window, jobs and topology, and the state "
                   "(default: %(default)s; env CKPTWATCH_LAKE)")
    p.add_argument("--config", type=Path, default=None, metavar="FILE",
                   help="settings file (TOML; default: env CKPTWATCH_CONFIG, else built-in "
                   "defaults): [alerts] levels, [sinks]; see examples/ckptwatch.toml")
    p.add_argument("--interval", type=positive_float, default=10.0, metavar="S",
                   help="seconds between scans; an alert arrives within one interval of its "
                   "level being crossed (default: %(default)s)")
    out = p.add_mutually_exclusive_group()
    out.add_argument("--metrics-file", type=Path, default=None, metavar="PATH",
                     help="write Prometheus metrics to PATH after every scan (atomically; for "
                     "node_exporter's textfile collector, PATH ending .prom)")
    out.add_argument("--metrics-port", type=tcp_port, default=None, metavar="PORT",
                     help=f"serve Prometheus metrics on http://HOST:PORT/metrics (the "
                     f"systemd unit uses {DEFAULT_METRICS_PORT})")
    p.add_argument("--metrics-host", default="127.0.0.1", metavar="HOST",
                   help="address to serve metrics on (default: %(default)s; 0.0.0.0 for all)")
    p.add_argument("--once", action="store_true",
                   help="one scan, then exit (cron, tests)")
    p.add_argument("--no-send", dest="send", action="store_false",
                   help="follow and publish metrics, but send no alerts and leave the alert "
                   "state alone")
    p.add_argument("--no-evidence", dest="evidence", action="store_false",
                   help="do not attribute open checkpoints live (default: from half the "
                   "warning level on, the alert carries the top cause and its numbers from "
                   "the lake's and the raw directory's telemetry)")
    p.add_argument("--quiet", action="store_true",
                   help="warnings only (default: also one line per alert sent)")
    p.set_defaults(func=run)


class _Formatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(record.created))
        return f"{stamp} ckptwatch watch: {record.getMessage()}"


def _log_to_stderr(quiet: bool) -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(_Formatter())
    for name in ("ckptwatch.live", "ckptwatch.alerts"):
        lg = logging.getLogger(name)
        lg.handlers[:] = [handler]
        lg.setLevel(logging.WARNING if quiet else logging.INFO)
        lg.propagate = False


def run(args: argparse.Namespace) -> int:
    """Start, scan until a signal (or once), stop."""
    from dataclasses import replace

    from ckptwatch.errors import CkptwatchError
    from ckptwatch.live.watch import Watcher, state_path
    from ckptwatch.safetext import escape_controls
    from ckptwatch.settings import load_settings

    if not args.raw_dir.is_dir():
        raise CkptwatchError(f"raw directory {args.raw_dir} does not exist")
    _log_to_stderr(args.quiet)
    settings = load_settings(args.config)
    options = replace(settings.watch, interval_s=args.interval, metrics_file=args.metrics_file,
                      metrics_port=args.metrics_port, metrics_host=args.metrics_host,
                      send=args.send, evidence=args.evidence)
    watcher = Watcher(args.raw_dir, args.lake, settings, options)
    stop = threading.Event()

    def _stop(signum: int, frame: FrameType | None) -> None:
        stop.set()

    previous = {s: signal.signal(s, _stop) for s in (signal.SIGTERM, signal.SIGINT)}
    try:
        watcher.start()
        where = (f"; metrics on http://{watcher.server.host}:{watcher.server.port}/metrics"
                 if watcher.server else
                 f"; metrics in {args.metrics_file}" if args.metrics_file else "")
        if not args.once:
            logging.getLogger("ckptwatch.live").info(
                "%s", escape_controls(
                    f"following {args.raw_dir / 'checkpoints'} every {args.interval:g} s, "
                    f"state in {state_path(args.lake)}{where}"))
        code = watcher.run(stop, once=args.once)
    finally:
        watcher.stop()
        for s, handler in previous.items():
            signal.signal(s, handler)
    if stop.is_set() and not args.once:
        logging.getLogger("ckptwatch.live").info("stopped; state saved")
    return code
