"""Prefect flow: the nightly run. Ingest the day's raw files, build the views, find and attribute
stalls, evaluate and send the timeout-headroom alerts, write the daily report.

Every step is a package function wrapped in a thin task; only I/O tasks retry. Deployed by
``prefect.yaml`` (cron ``30 2 * * *`` UTC); ``ckptwatch nightly RAW --lake LAKE`` or
``python pipelines/nightly.py RAW LAKE`` runs it once. ``--dask [ADDRESS]`` (the ``dask``
parameter) spreads the ingest subflow's files over a Dask cluster, as ``pipelines/ingest.py``
does; the other steps run in the flow process either way.
Settings come from ``config`` or ``$CKPTWATCH_CONFIG`` (built-in defaults without either); the
alerts always go to a JSON Lines file too: ``[sinks] jsonl``, else ``LAKE/reports/alerts.jsonl``.

A failing alert sink never costs the report: the report is written (showing the failure), then
the flow run fails with one line naming the sink (its alerts stay pending for the next run).

With a ``[prometheus]`` section that sets ``url`` in the settings, the run first pulls the last
``nightly_since_s`` seconds (default 26 h) of SMART and fabric history from that server into
the lake (``ckptwatch pull prometheus``; a range pulled before adds nothing), then ingests. A
server that cannot be read costs neither the ingest nor the report: the run goes on, then fails
at the end with the pull's one-line error.
"""

from __future__ import annotations

import importlib
import resource
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any

import duckdb
from prefect import flow, get_run_logger, task
from prefect.cache_policies import NO_CACHE
from prefect.states import Failed

from ckptwatch.alerts.evaluate import AlertRun, run_alerts
from ckptwatch.alerts.headroom import newest_checkpoint_end
from ckptwatch.analysis.findings import StallFindings, find_stalls
from ckptwatch.errors import AlertsUndeliveredError, CkptwatchError
from ckptwatch.flows.ingest import dask_runner, ingest_flow, pop_dask_flag
from ckptwatch.ingest.run import IngestReport, unused_metrics_lines
from ckptwatch.lake import derived
from ckptwatch.lake.query import connect, skipped_rows, view_files
from ckptwatch.pull.prometheus import PullError, PullReport, default_range, pull_prometheus
from ckptwatch.report.daily import ReportFiles, daily_report, nightly_settings
from ckptwatch.report.facts import nightly_days
from ckptwatch.settings import Settings, duckdb_memory_setting, load_settings, redact

#: DuckDB's memory cap in the nightly run unless told otherwise (the run's peak RSS target is
#: 2 GiB: DuckDB stays well under the cap on a 512-node day, ~1.5 GB RSS in the stalls step).
NIGHTLY_DUCKDB_MEMORY = "3GB"



#: What the steps after the ingest import on first use (the alerts' forecast fit, the report's
#: plots and plans): ~1.3 CPU s, which ``preload`` spends while Prefect's local server boots
#: (on the other core) instead of inside the steps.
PRELOADED_MODULES = ("sklearn.linear_model", "sklearn.exceptions", "matplotlib.figure",
                     "matplotlib.dates", "matplotlib.backends.backend_agg", "scipy.optimize",
                     "scipy.special")


def preload() -> None:
    """Import ``PRELOADED_MODULES``: a command calls it after starting the local server and
    before waiting for it (``local_prefect.local_server``)."""
    for name in PRELOADED_MODULES:
        importlib.import_module(name)


def peak_rss_mb() -> dict[str, int]:
    """The peak resident set so far, in MB: of this process (``flow``: the flow and its
    threads, DuckDB included) and of its largest finished child (``workers``: a parse worker or
    Prefect's local server, counted once it has exited)."""
    own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux
    kids = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    return {"flow": round(own / 1024), "workers": round(kids / 1024)}


@contextmanager
def _timed(steps: dict[str, float], name: str,
           peaks: dict[str, dict[str, int]]) -> Iterator[None]:
    """Record the block's wall time as ``steps[name]`` (seconds, 0.1 s resolution) and the
    peak RSS so far when it ends as ``peaks[name]`` (``peak_rss_mb``: a peak is a running
    maximum, so the step where it rises is the step that set it)."""
    t0 = time.perf_counter()
    try:
        yield
    finally:
        steps[name] = round(time.perf_counter() - t0, 1)
        peaks[name] = peak_rss_mb()


@task(retries=2, retry_delay_seconds=30, task_run_name="pull prometheus",
      cache_policy=NO_CACHE)
def pull_from_prometheus(lake_root: Path, settings: Settings, lock_wait_s: float) -> PullReport:
    """The last ``[prometheus] nightly_since_s`` seconds from ``[prometheus] url`` (reads a
    server: retried; a range pulled twice adds nothing)."""
    p = settings.prometheus
    assert p.url is not None
    since, until = default_range(datetime.now(UTC), p.nightly_since_s)
    return pull_prometheus(p.url, lake_root, p, since=since, until=until,
                           secrets=settings.secrets(), lock_wait_s=lock_wait_s)


@task(retries=2, retry_delay_seconds=5, task_run_name="build views", cache_policy=NO_CACHE)
def build_views(lake_root: Path, days: tuple[date, date],
                memory_limit: str) -> duckdb.DuckDBPyConnection:
    """Build every SQL view over the days the later steps read (reads the lake: retried): a
    view that no longer binds fails here, by name, before any step depends on it. Only those
    days' files are opened, so the check does not grow with the days the lake keeps. The
    connection is the one the later steps read the lake through (the caller closes it): one
    build instead of one per step (3.7 -> 1.8 s on a 512-node day)."""
    return connect(lake_root, days=days, memory_limit=memory_limit)


@task(retries=2, retry_delay_seconds=5, task_run_name="counter deltas", cache_policy=NO_CACHE)
def materialise_counter_deltas(lake_root: Path, memory_limit: str, lock_wait_s: float) -> int:
    """Store the counter deltas of every stale day (:mod:`ckptwatch.lake.derived`; reads and
    writes the lake: retried); returns the days built. Later steps read them instead of
    computing window functions over every counter sample."""
    return len(derived.refresh(lake_root, memory_limit=memory_limit,
                               lock_wait_s=lock_wait_s).built)


@task(task_run_name="check lake", cache_policy=NO_CACHE)
def check_lake(con: duckdb.DuckDBPyConnection) -> list[str]:
    """Rows of the read days that every analysis leaves out (stored by an older version)."""
    return skipped_rows(con)


@task(task_run_name="stalls", cache_policy=NO_CACHE)
def detect_stalls(lake_root: Path, con: duckdb.DuckDBPyConnection) -> StallFindings:
    """Every stall of the days ``con`` reads and its ranked causes (the trained model when one
    is built)."""
    return find_stalls(lake_root, con=con)


@task(task_run_name="alerts (send={send})", cache_policy=NO_CACHE)
def evaluate_alerts(lake_root: Path, settings: Settings, send: bool,
                    lock_wait_s: float, findings: StallFindings,
                    con: duckdb.DuckDBPyConnection, replay: bool = False) -> AlertRun:
    """Timeout headroom of every job; with ``send``, deliver the due alerts and keep state.

    Not retried: a failed sink keeps its alerts pending in the alert state, and the next run
    sends them (a retry here would only repeat the same attempt seconds later). An alert's
    likely cause comes from ``findings`` (the stalls step's attribution), not a second one.
    """
    now = newest_checkpoint_end(con) if replay else None
    return run_alerts(lake_root, settings, send=send, cause_provider=findings.top_causes,
                      lock_wait_s=lock_wait_s, con=con, now=now)


@task(retries=2, retry_delay_seconds=5, task_run_name="report", cache_policy=NO_CACHE)
def write_daily_report(lake_root: Path, day: date | None, findings: StallFindings,
                       settings: Settings, alert_run: AlertRun | None,
                       alerts_error: str | None, ingest: IngestReport,
                       con: duckdb.DuckDBPyConnection, memory_limit: str) -> ReportFiles:
    """Build, render and write the day's report (writes files: retried)."""
    _facts, files = daily_report(lake_root, day=day, findings=findings, settings=settings,
                                 alert_run=alert_run, alerts_error=alerts_error,
                                 ingest=ingest, con=con, memory_limit=memory_limit)
    return files


@flow(name="nightly", flow_run_name="nightly {raw_dir}", log_prints=True)
def nightly_flow(raw_dir: Path, lake_root: Path, config: Path | None = None, send: bool = True,
                 report_date: date | None = None, lock_wait_s: float = 600.0,
                 dask: str | None = None, lookback_days: int = 0,
                 duckdb_memory: str | None = None, replay: bool = False) -> dict[str, Any]:
    """Ingest, build views, stalls, alerts, report; return paths and counts.

    ``report_date``: the day the report covers (default: the newest day with checkpoints).
    ``send=False`` evaluates the alerts without sending or recording them (a dry run).
    ``dask``: run the ingest on a Dask task runner: ``"local"`` (a local cluster of 2 worker
    processes) or a scheduler address (``tcp://host:8786``); ``None``: one file at a time.
    ``lookback_days``: the days before the report day that stalls, alerts and the report read
    too (stall baselines, the alerts' trailing checkpoints); older days are not opened, so the
    run's time and memory do not grow with the days the lake keeps.
    ``duckdb_memory``: DuckDB's memory cap for the steps after the ingest (e.g. ``"3GB"``;
    ``"none"``: DuckDB's default, 80 % of RAM); default: ``$CKPTWATCH_DUCKDB_MEMORY``, else
    ``NIGHTLY_DUCKDB_MEMORY`` (3GB; a 512-node day peaks at ~1.5 GB, ``steps_peak_rss_mb`` in
    the result says which step set it).
    ``replay``: evaluate the alerts as of the end of the newest checkpoint read, not the
    clock (an old scenario such as the bundled sample, whose jobs are otherwise history).
    """
    logger = get_run_logger()
    raw_dir, lake_root = Path(raw_dir), Path(lake_root)
    settings = nightly_settings(load_settings(config), lake_root)
    # The runner reaches the ingest subflow as a string parameter, not through
    # ``nightly_flow.with_options(task_runner=...)``: in Prefect 3 every flow run, a subflow
    # too, enters its own flow's task runner (the parent's is not inherited), and the steps
    # below are direct task calls that never use the nightly flow's runner, so a runner given
    # to this flow would only start an idle cluster. A string is also what a deployment
    # (``prefect.yaml`` parameters, the UI) can set, and the flow run records it.
    run_ingest = ingest_flow.with_options(task_runner=dask_runner(dask)) if dask else ingest_flow
    steps: dict[str, float] = {}  # seconds per step, in the result and the log
    peaks: dict[str, dict[str, int]] = {}  # peak RSS (MB) when each step ends, in the result
    pulled: PullReport | None = None
    pull_error: str | None = None
    if settings.prometheus.url:
        with _timed(steps, "pull", peaks):
            try:
                pulled = pull_from_prometheus(lake_root, settings, lock_wait_s)
                logger.info("nightly: pulled %s from %s", pulled.rows or "no new rows",
                            pulled.url)
            except CkptwatchError as exc:  # the server: ingest and report anyway, fail below
                pull_error = redact(str(exc), settings.secrets())
                logger.warning("nightly: pull failed: %s", pull_error)
    with _timed(steps, "ingest", peaks):
        ingest = run_ingest(raw_dir, lake_root, lock_wait_s=lock_wait_s)
    # Unattended at night on a shared machine: DuckDB capped (it spills beyond the cap).
    limit = duckdb_memory_setting(duckdb_memory, NIGHTLY_DUCKDB_MEMORY)
    with _timed(steps, "deltas", peaks):
        n_delta_days = materialise_counter_deltas(lake_root, limit, lock_wait_s)
    days = nightly_days(lake_root, report_date, lookback_days)
    logger.info("nightly: reading %s to %s", days[0], days[1])
    with _timed(steps, "views", peaks):
        con = build_views(lake_root, days, limit)
    try:  # the later steps read the days through this one connection
        lake_warnings = check_lake(con)
        for warning in lake_warnings:
            logger.info("nightly: warning: %s", warning)
        with _timed(steps, "stalls", peaks):
            findings = detect_stalls(lake_root, con)
        alert_run: AlertRun | None = None
        alerts_error: str | None = None
        with _timed(steps, "alerts", peaks):
            try:
                alert_run = evaluate_alerts(lake_root, settings, send, lock_wait_s, findings,
                                            con, replay)
            except CkptwatchError as exc:  # e.g. the lake lock: report anyway, fail below
                alerts_error = redact(str(exc), settings.secrets())
        with _timed(steps, "report", peaks):
            files = write_daily_report(lake_root, days[1], findings, settings, alert_run,
                                       alerts_error, ingest, con, limit)
    finally:
        con.close()
    n_views = len(view_files())
    causes = findings.by_cause()
    result: dict[str, Any] = {
        "ingested": ingest.count("ingested"), "skipped": ingest.count("skipped"),
        "failed": ingest.count("failed"), "quarantined": ingest.quarantined,
        "views": n_views, "delta_days_built": n_delta_days,
        "stalls": len(findings.stalls), "stalls_by_cause": causes,
        # every timed-out checkpoint is a stall (stalls.sql): the count of those
        "stalls_timed_out": sum(1 for s in findings.stalls if s.timed_out),
        "alerts": len(alert_run.alerts) if alert_run else 0,
        # sent for real: not a dry run, and every sink took every alert handed to it
        "alerts_sent": bool(alert_run and alert_run.delivered),
        "alerts_dry_run": not send,
        "alerts_sinks": alert_run.sinks if alert_run else [],
        "alerts_delivery": [r.to_dict() for r in alert_run.delivery] if alert_run else [],
        "alerts_summary": (alert_run.summary() if alert_run
                           else f"not evaluated ({alerts_error})"),
        "alerts_file": str(settings.sinks.jsonl) if settings.sinks.jsonl else None,
        "report": str(files.html), "report_json": str(files.json),
        "latest": str(files.latest_html), "latest_kept": files.latest_kept,
        "steps_s": steps,
        "steps_peak_rss_mb": peaks,
        "lake_warnings": lake_warnings,
        "unused_metrics": unused_metrics_lines(ingest.unused_metrics),
        "pulled": pulled.rows if pulled else None,
        "pull_error": pull_error,
    }
    logger.info("nightly: %d files ingested, %d stalls, alerts: %s; report %s",
                result["ingested"], result["stalls"], result["alerts_summary"], files.html)
    logger.info("nightly: seconds per step: %s",
                ", ".join(f"{name} {s:.1f}" for name, s in steps.items()))
    logger.info("nightly: peak RSS (MB) when each step ended, this process/largest child: %s",
                ", ".join(f"{name} {p['flow']}/{p['workers']}" for name, p in peaks.items()))
    failures = [redact(str(f), settings.secrets()) for f in alert_run.failures] \
        if alert_run else []
    if alerts_error or failures:
        problem = alerts_error or "; ".join(failures)
        return _failed(AlertsUndeliveredError(
            f"alerts not delivered: {problem} — the report is written ({files.html}); "
            "undelivered alerts stay pending and are retried on the next run", result))
    if pull_error:
        return _failed(PullError(f"{pull_error} — the ingest ran and the report is written "
                                 f"({files.html}) without it; the next run pulls the range "
                                 "again"))
    return result


def _failed(exc: CkptwatchError) -> Any:
    """End the flow run Failed with ``exc``, which the flow's caller gets raised.

    Returned as a state rather than raised: Prefect logs every exception raised inside a flow
    with its traceback, and these failures are one line each (the run did all it could).
    """
    return Failed(message=str(exc), data=exc)


def main(argv: list[str]) -> None:
    """``python pipelines/nightly.py RAW LAKE [--dask [ADDRESS]]``: a failure is one line on
    stderr and exit status 1 (an alert sink failed, the report is written) or 2."""
    from ckptwatch.flows.local_prefect import one_line_failures

    args = list(argv)
    dask = pop_dask_flag(args)
    one_line_failures()
    try:
        nightly_flow(Path(args[0]), Path(args[1]), dask=dask)
    except CkptwatchError as exc:
        print(f"nightly: {exc}", file=sys.stderr)
        raise SystemExit(1 if isinstance(exc, AlertsUndeliveredError) else 2) from None


if __name__ == "__main__":
    main(sys.argv[1:])
