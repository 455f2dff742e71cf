"""`ckptwatch alerts --lake LAKE [--format table|json] [--send]`: timeout-headroom alerts."""

from __future__ import annotations

import argparse
import json
import sys
from datetime import UTC, datetime
from pathlib import Path

from ckptwatch.settings import default_lake


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the ``alerts`` command."""
    p = sub.add_parser(
        "alerts", help="warn before a job's checkpoint tail reaches its timeout",
        description="For every job in the lake: the tail of its barrier time over the trailing "
        "window, the headroom to checkpoint_timeout_s, and a forecast of the tail. Prints the "
        "alerts due now in Alertmanager's format (CheckpointTailNearTimeout firing, and "
        "resolved when the tail has recovered; the watcher's CheckpointInFlightNearTimeout is "
        "left to it). A job whose newest record is older than its staleness horizon "
        "(max(stale_after_s, stale_intervals x its checkpoint interval): 1 day or 3 intervals "
        "by default) is not evaluated and its alerts resolve; --now looks at an old lake as of "
        "its own time. Without --send nothing is sent or recorded; with --send they go to the "
        "sinks of the config file (JSON Lines, webhook, Alertmanager) and the alert state in "
        "LAKE/_state/alerts.json records them, so a firing alert is not sent again on the "
        "next run. Exit 0, or 1 when a sink failed (its alerts are retried next run).")
    p.add_argument("--lake", type=Path, default=default_lake(),
                   help="lake directory (default: %(default)s; env CKPTWATCH_LAKE)")
    p.add_argument("--config", type=Path, default=None, metavar="FILE",
                   help="settings file (TOML; default: env CKPTWATCH_CONFIG, else built-in "
                   "defaults); see examples/ckptwatch.toml")
    p.add_argument("--format", choices=("table", "json"), default="table",
                   help="table: every job's headroom, then the alerts as read by a person; "
                   "json: the array of alerts that would be (or were) sent "
                   "(default: %(default)s)")
    p.add_argument("--send", action="store_true",
                   help="deliver the alerts to the configured sinks and record the state")
    p.add_argument("--now", type=_timestamp, default=None, metavar="TIME",
                   help="evaluate as of this ISO-8601 time, leaving out checkpoints that "
                   "ended after it (a replay; default: the current time, every checkpoint)")
    p.add_argument("--lock-wait", type=float, default=600.0, metavar="SECONDS",
                   help="with --send, how long to wait for another run holding the lake lock "
                   "(default: %(default)s)")
    p.set_defaults(func=run)


def _timestamp(text: str) -> datetime:
    try:
        ts = datetime.fromisoformat(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"not an ISO-8601 time: {text!r} (e.g. 2026-11-28T12:00:00Z)") from None
    return ts if ts.tzinfo else ts.replace(tzinfo=UTC)


def run(args: argparse.Namespace) -> int:
    """Evaluate, print, and with ``--send`` deliver and record."""
    from ckptwatch.alerts.evaluate import headroom_frame, run_alerts
    from ckptwatch.alerts.sinks import build_sinks, render_alert
    from ckptwatch.cli._render import render_table
    from ckptwatch.safetext import escape_controls, escape_json_controls, escape_lines
    from ckptwatch.settings import load_settings, redact

    settings = load_settings(args.config)
    # This command's own output is the stdout sink: don't print the alerts twice.
    sinks = build_sinks(settings, stdout=False)
    result = run_alerts(args.lake, settings, send=args.send, now=args.now, sinks=sinks,
                        lock_wait_s=args.lock_wait)
    ev = result.evaluation
    if args.format == "json":
        sys.stdout.write(escape_json_controls(json.dumps(result.alerts, indent=2)) + "\n")
    else:
        print(f"timeout headroom of {len(ev.jobs)} job(s), trailing window of up to "
              f"{settings.alerts.max_window()} checkpoints")
        print(render_table(headroom_frame(ev), float_precision=1))
        for (job_id, tier), reason in sorted(ev.skipped.items()):
            print(escape_controls(f"  not evaluated: {job_id} ({tier}): {reason}"))
        print()
        line = (f"{len(result.alerts)} alert(s) due (dry run: --send delivers them)"
                if not result.sent else result.summary(noun=" alert(s)"))
        due = {a["fingerprint"] for a in result.alerts}
        quiet = [r for fp, r in ev.state.firing.items() if fp not in due]
        if quiet:  # firing, sent before: not due again until resend_after_s
            line += (f"; {len(quiet)} firing alert(s) already sent "
                     f"(re-sent every {settings.alerts.resend_after_s:g} s while they hold)")
        print(escape_controls(line))
        for alert in result.alerts:
            print()
            print(escape_lines(render_alert(alert)))
    for failure in result.failures:
        print(escape_controls(f"ckptwatch alerts: {redact(str(failure), settings.secrets())} "
                              "(kept for the next run)"), file=sys.stderr)
    if result.sent and not sinks and result.alerts:
        print("ckptwatch alerts: note: no sink configured besides stdout ([sinks] in the "
              "config file)", file=sys.stderr)
    return 1 if result.failures else 0

