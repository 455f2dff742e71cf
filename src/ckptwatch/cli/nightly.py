"""`ckptwatch nightly RAW_DIR --lake LAKE`: the nightly flow once, now (ingest -> report)."""

from __future__ import annotations

import argparse
import sys
from datetime import date
from pathlib import Path
from typing import Any

from ckptwatch.cli._options import add_dask, add_lock_wait, add_verbose
from ckptwatch.safetext import escape_controls
from ckptwatch.settings import default_lake


def _day(text: str) -> date:
    try:
        return date.fromisoformat(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a date: {text!r} (use YYYY-MM-DD)") from None


def _metrics_file(text: str) -> Path:
    from ckptwatch.settings import metrics_file_path

    try:
        return metrics_file_path(text, Path.cwd())
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the ``nightly`` command."""
    p = sub.add_parser(
        "nightly", help="run the nightly flow now: ingest, stalls, alerts, daily report",
        description="Run the nightly Prefect flow once (a local Prefect server, started and "
        "stopped by the command; its first start takes ~15 s; Prefect's state is kept in "
        "$XDG_CACHE_HOME/ckptwatch/prefect or ~/.cache/ckptwatch/prefect unless PREFECT_HOME "
        "is set): ingest new raw files from RAW_DIR, build the views, find "
        "and attribute stalls, evaluate the timeout-headroom alerts and send them, and write "
        "the daily report to LAKE/reports/<date>/report.html and report.json (copied to "
        "LAKE/reports/latest/ unless the day has no checkpoints or latest/ holds a newer "
        "day). Alerts also go to a JSON Lines file: [sinks] jsonl of the "
        "config, else LAKE/reports/alerts.jsonl. The summary counts the alerts each sink took. "
        "Progress: a line per step on stderr (rewritten in place on a terminal). "
        "Exit 0; 1 when a file could not be ingested (the summary names it and why), RAW_DIR "
        "holds no file at all, or an alert sink failed (the report is "
        "written all the same; the sink's alerts are retried on the next run); 2 when the run "
        "could not proceed.")
    p.add_argument("raw_dir", type=Path, metavar="RAW_DIR", help="raw telemetry directory")
    p.add_argument("--lake", type=Path, default=default_lake(),
                   help="lake directory (default: %(default)s; env CKPTWATCH_LAKE)")
    p.add_argument("--config", type=Path, default=None, metavar="FILE",
                   help="settings file (TOML; default: env CKPTWATCH_CONFIG, else built-in "
                   "defaults); see examples/ckptwatch.toml")
    p.add_argument("--no-send", dest="send", action="store_false",
                   help="evaluate the alerts but send and record nothing (a dry run: the "
                   "summary names the sinks a sending run would deliver them to)")
    p.add_argument("--date", type=_day, default=None, metavar="YYYY-MM-DD",
                   help="the UTC day the report covers (default: the newest day with "
                   "checkpoints in the lake)")
    p.add_argument("--lookback-days", type=int, default=0, metavar="N",
                   help="days before the report day that stalls, alerts and the report read "
                   "too (stall baselines, the alerts' trailing checkpoints); older days are not "
                   "opened, so the run does not grow with the lake (default: %(default)s)")
    p.add_argument("--duckdb-memory", default=None, metavar="SIZE",
                   help="DuckDB's memory cap for the steps after the ingest (e.g. 3GB; none: "
                   "80%% of RAM); DuckDB spills to a temp directory beyond it (default: "
                   "$CKPTWATCH_DUCKDB_MEMORY, else 3GB)")
    p.add_argument("--metrics-file", type=_metrics_file, default=None, metavar="FILE",
                   help="write the run's findings (stalls by cause, timed-out checkpoints, "
                   "headroom per job, barrier p50/p99 per tier) and status (last run, last "
                   "success, exit status) as Prometheus metrics to FILE, a *.prom file in "
                   "node_exporter's textfile directory, replaced atomically; a failed run "
                   "writes its status and keeps the last success (default: [nightly] "
                   "metrics_file of the config, else none)")
    add_lock_wait(p)
    add_dask(p, "run the ingest's files, each stale day's counter-delta batches and the "
             "stalls of groups of jobs as tasks on a Dask cluster, each task a DuckDB "
             "connection of its own under --duckdb-memory (the views, alerts and report run "
             "here; the same findings)")
    add_verbose(p)
    p.set_defaults(func=run)


#: Failed files the summary names (the rest are counted; report.json lists them all).
MAX_FAILED_SHOWN = 10


def render_result(result: dict[str, Any], raw_dir: Path, lake: Path) -> str:
    """The run's summary for a person: what it read, found, sent, and where the report is."""
    causes = ", ".join(f"{c} {n}" for c, n in sorted(result["stalls_by_cause"].items(),
                                                     key=lambda cn: -cn[1]))
    alerts = result["alerts_summary"]
    if result["alerts_file"]:  # named as written only when the run sends
        alerts += (f"; JSON Lines file (written when sent): {result['alerts_file']}"
                   if result["alerts_dry_run"] else f"; JSON Lines: {result['alerts_file']}")
    lines = [
        f"nightly {raw_dir} -> {lake}",
        f"  ingest: {result['ingested']} file(s) ingested, {result['skipped']} already in the "
        f"lake, {result['failed']} failed; {result['quarantined']} record(s) quarantined",
        f"  stalls: {result['stalls']}" + (f" ({causes})" if causes else "")
        + (f"; {result['stalls_timed_out']} timed out" if result.get("stalls_timed_out") else ""),
        f"  alerts: {escape_controls(alerts)}",
        f"  report: {result['report']}",
        f"          {result['report_json']}  ({_latest(result)})",
    ]
    if result.get("dask"):
        d = result["dask"]
        lines.append(f"  dask: {d['workers']} worker(s); counter deltas: {d['delta_batches']} "
                     f"batch task(s) over {d['delta_days']} day(s); stalls: "
                     f"{len(d['stall_groups'])} job group(s)")
    if result.get("metrics_file"):
        lines.append(f"  metrics: {escape_controls(result['metrics_file'])}")
    failed = result.get("failed_files", [])
    lines += [f"  FAILED {escape_controls(f['file'])}: {escape_controls(f['reason'])}"
              for f in failed[:MAX_FAILED_SHOWN]]
    if len(failed) > MAX_FAILED_SHOWN:
        lines.append(f"  … {len(failed) - MAX_FAILED_SHOWN} more failed file(s) in "
                     f"{result['report_json']}")
    lines += [f"  warning: {w}" for w in result.get("lake_warnings", [])]
    lines += [f"  unused metric names: {escape_controls(u)}"
              for u in result.get("unused_metrics", [])]
    return "\n".join(lines)


def _latest(result: dict[str, Any]) -> str:
    """Where ``reports/latest`` stands after the run."""
    kept = result.get("latest_kept")
    return f"latest: {result['latest']}" if not kept else f"latest/ not replaced: {kept}"


def run(args: argparse.Namespace) -> int:
    """Run the flow, showing its steps as they go, and print the summary and the report's
    path."""
    from ckptwatch.cli._progress import Progress
    from ckptwatch.errors import AlertsUndeliveredError, CkptwatchError, RawDirError
    from ckptwatch.flows import local_prefect
    from ckptwatch.lake.store import Lake
    from ckptwatch.settings import load_settings

    # What cannot change fails here, in one line, before Prefect starts.
    settings = load_settings(args.config)
    try:
        if not args.raw_dir.is_dir():  # the flow's first step also refuses one it cannot list
            raise RawDirError(f"raw directory {args.raw_dir} does not exist or is not a "
                              "directory")
        Lake(args.lake)._check_root()
    except CkptwatchError as exc:  # a failed run all the same, for the metrics file
        from ckptwatch.flows.run import record_failed_run  # here: the flow's imports are heavy

        record_failed_run(args.metrics_file or settings.nightly.metrics_file, exc)
        raise
    local_prefect.configure(args.verbose)  # before the first import of Prefect
    with Progress("nightly") as progress:
        progress.stage("starting the local flow server", "~15 s the first time")
        server = local_prefect.start_local_server(args.verbose)  # boots while the flow imports
        from ckptwatch.flows.ingest import dask_runner
        from ckptwatch.flows.nightly import nightly_flow, preload
        from ckptwatch.flows.run import exit_code

        if args.dask:
            dask_runner(args.dask)  # no prefect-dask: fail here, before Prefect starts
        preload()  # while the server boots
        progress.stage("waiting for the local flow server")
        try:
            with local_prefect.local_server(server), progress.hook():
                result = nightly_flow(args.raw_dir, args.lake, config=args.config,
                                      send=args.send, report_date=args.date,
                                      lock_wait_s=args.lock_wait, dask=args.dask,
                                      lookback_days=args.lookback_days,
                                      duckdb_memory=args.duckdb_memory,
                                      metrics_file=args.metrics_file)
        except AlertsUndeliveredError as exc:
            progress.close()
            print(render_result(exc.result, args.raw_dir, args.lake))
            print(f"ckptwatch nightly: {escape_controls(str(exc))}", file=sys.stderr)
            return exit_code(exc)
    print(render_result(result, args.raw_dir, args.lake))
    if result.get("raw_files") == 0:
        print(f"ckptwatch nightly: no raw files found under {escape_controls(str(args.raw_dir))}"
              " (expected checkpoints/, jobs/, smart/, fabric/, pool/ or topology.csv; see "
              "docs/formats.md)", file=sys.stderr)
    return exit_code(None, result)
