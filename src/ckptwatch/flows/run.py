"""The nightly run without Prefect: pull, ingest, counter deltas, views, stalls, alerts, report,
and the policy that says when a finished run failed and with which exit status.

:func:`run_nightly` calls each step through :class:`NightlySteps`: the package functions below
(:data:`PLAIN_STEPS`), or the same functions wrapped as Prefect tasks by
:mod:`ckptwatch.flows.nightly` (names, retries). Nothing here imports Prefect, so the whole
run and its failure policy are tested without a server (``tests/flows/test_nightly_run.py``).
With a :class:`Spread` (the flow's ``--dask``) the counter deltas and the stalls run their
partitions there (a day's batches of parts, groups of stalled jobs), with the same findings.

The policy, in one place (the exit statuses are ``ckptwatch nightly``'s, :func:`exit_code`):

- a raw directory that is missing, not a directory or cannot be listed stops the run before
  any step (:class:`~ckptwatch.errors.RawDirError`, exit 2); an empty one is a run with nothing
  to ingest (the report covers the lake's newest day) that exits 1, as ``ckptwatch ingest``
  does on it;
- an error raised by the ingest, deltas, views, stalls or report step stops the run (exit 2);
- a file that could not be ingested is counted in the summary (``failed``), the run goes on
  (exit 1);
- alerts that could not be evaluated, or a sink that did not take them, cost neither the
  report nor the other sinks: the report is written (showing the failure), then the run fails
  with one line naming the sink (:class:`~ckptwatch.errors.AlertsUndeliveredError`, exit 1;
  its alerts stay pending for the next run);
- a Prometheus server that could not be read costs neither the ingest nor the report: the run
  goes on, then fails with the pull's one line (:class:`~ckptwatch.errors.PullError`, exit 2);
- every error text that reaches a log, the summary or the result is redacted of the settings'
  secrets;
- with a metrics file (``[nightly] metrics_file``, ``--metrics-file``), every run that gets past
  its arguments writes its findings and status there for node_exporter's textfile collector
  (:mod:`ckptwatch.flows.nightly_metrics`): a run that got to its report writes the report's
  facts and its exit status, a run that stopped writes its status (exit 2) only, and the last
  success moves only on exit 0. A file that cannot be written fails the finished run after its
  report (:class:`~ckptwatch.errors.MetricsFileError`, exit 2) and never hides the error of a
  run that stopped.
"""

from __future__ import annotations

import json
import logging
import resource
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any, Protocol

import duckdb

from ckptwatch.alerts.evaluate import AlertRun, run_alerts
from ckptwatch.alerts.headroom import newest_checkpoint_end
from ckptwatch.analysis.findings import (
    JobGroup,
    StallFindings,
    find_stalls,
    find_stalls_by_job,
)
from ckptwatch.errors import (
    AlertsUndeliveredError,
    CkptwatchError,
    ConfigError,
    MetricsFileError,
    PullError,
)
from ckptwatch.flows.nightly_metrics import write_metrics
from ckptwatch.ingest.discover import check_raw_dir
from ckptwatch.ingest.run import IngestReport, ingest, unused_metrics_lines
from ckptwatch.lake import derived
from ckptwatch.lake.query import connect, skipped_rows, view_files
from ckptwatch.progress import progress
from ckptwatch.pull.prometheus import PullReport, default_range, pull_prometheus
from ckptwatch.report.daily import ReportFiles, daily_report, nightly_settings
from ckptwatch.report.facts import nightly_days
from ckptwatch.settings import (
    IngestSettings,
    NightlySettings,
    Settings,
    metrics_file_path,
    redact,
)

#: DuckDB's memory cap in the nightly run unless told otherwise: the settings tree's
#: ``nightly.duckdb_memory`` default (``settings.NightlySettings``).
NIGHTLY_DUCKDB_MEMORY = NightlySettings().duckdb_memory

#: Where :func:`run_nightly` logs without a flow's logger.
LOG = logging.getLogger("ckptwatch.nightly")

Connection = duckdb.DuckDBPyConnection

#: The stalls step's job groups per worker thread of a :class:`Spread`: enough to even out
#: groups of unequal cost, few enough that each group's fixed cost (its connection, the day's
#: pinned views) stays small beside its jobs' (not one task per job on a 1,000-job day).
GROUPS_PER_WORKER = 2


class Spread(Protocol):
    """Where the partitioned steps run their partitions, each on a DuckDB connection of its
    own (the flow's Dask task runner: ``ckptwatch.flows.nightly.DaskSpread``): the counter
    deltas a day's batches of parts (``derived.compute_batch``), the stalls groups of jobs
    (``findings.stalls_of_group``). Each map returns its results in order, once every
    partition has ended."""

    @property
    def workers(self) -> int:
        """How many partitions run at once."""
        ...

    def map_batches(self, batches: Sequence[derived.DayBatch]) -> Sequence[Any]:
        """``derived.compute_batch`` of each batch (a ``pyarrow.Table`` each)."""
        ...

    def map_groups(self, groups: Sequence[JobGroup]) -> Sequence[StallFindings]:
        """``findings.stalls_of_group`` of each group."""
        ...

    def summary(self) -> dict[str, Any]:
        """What ran there (the flow's result names it: ``dask``)."""
        ...


def peak_rss_mb() -> dict[str, int]:
    """The peak resident set so far, in MB: of this process (``flow``: the flow and its
    threads, DuckDB included) and of its largest finished child (``workers``: a parse worker or
    Prefect's local server, counted once it has exited)."""
    own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux
    kids = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    return {"flow": round(own / 1024), "workers": round(kids / 1024)}


@dataclass
class StepClock:
    """Each step's wall time (seconds, 0.1 s resolution) and the peak RSS when it ended
    (:func:`peak_rss_mb`: a running maximum, so the step where it rises is the step that set
    it), in the order the steps ran."""

    seconds: dict[str, float] = field(default_factory=dict)
    peak_rss_mb: dict[str, dict[str, int]] = field(default_factory=dict)

    @contextmanager
    def step(self, name: str) -> Iterator[None]:
        """Time the block as step ``name`` (recorded when it raises too)."""
        t0 = time.perf_counter()
        progress(name)
        try:
            yield
        finally:
            self.seconds[name] = round(time.perf_counter() - t0, 1)
            self.peak_rss_mb[name] = peak_rss_mb()
            progress(name, f"done in {self.seconds[name]:.1f} s")


# -- the steps ------------------------------------------------------------------------------


def pull_recent(lake_root: Path, settings: Settings, lock_wait_s: float) -> PullReport:
    """The last ``[prometheus] nightly_since_s`` seconds from ``[prometheus] url`` into the lake,
    as ``ckptwatch pull prometheus`` pulls them (SMART, fabric, and the pool series the
    ``[pool.prometheus]`` mapping names; a range pulled twice adds nothing)."""
    p = settings.prometheus
    assert p.url is not None
    since, until = default_range(datetime.now(UTC), p.nightly_since_s)
    return pull_prometheus(p.url, lake_root, p, since=since, until=until,
                           secrets=settings.secrets(), lock_wait_s=lock_wait_s,
                           limits=settings.ingest, pool=settings.pool.prometheus)


def ingest_raw(raw_dir: Path, lake_root: Path, lock_wait_s: float,
               limits: IngestSettings) -> IngestReport:
    """Every new raw file under ``raw_dir`` into the lake, under the run's ingest ``limits``
    (``ingest.run.ingest``)."""
    return ingest(raw_dir, lake_root, lock_wait_s=lock_wait_s, limits=limits)


def store_counter_deltas(lake_root: Path, memory_limit: str, lock_wait_s: float,
                         spread: Spread | None = None) -> int:
    """Store the counter deltas of every stale day (:mod:`ckptwatch.lake.derived`); returns the
    days built. Later steps read them instead of computing window functions over every counter
    sample. ``spread``: each day's batches run there, the days in order."""
    return len(derived.refresh(lake_root, memory_limit=memory_limit, lock_wait_s=lock_wait_s,
                               map_batches=spread.map_batches if spread else None).built)


def open_views(lake_root: Path, days: tuple[date, date], memory_limit: str) -> Connection:
    """Build every SQL view over the days the later steps read: a view that no longer binds
    fails here, by name, before any step depends on it. Only those days' files are opened, so
    the check does not grow with the days the lake keeps. The later steps read the lake
    through this connection (one build, not one per step); the caller closes it."""
    return connect(lake_root, days=days, memory_limit=memory_limit)


def check_lake(con: Connection) -> list[str]:
    """Rows of the read days that every analysis leaves out (stored by an older version)."""
    return skipped_rows(con)


def detect_stalls(lake_root: Path, con: Connection, days: tuple[date, date] | None = None,
                  memory_limit: str | None = None, spread: Spread | None = None
                  ) -> StallFindings:
    """Every stall of the days ``con`` reads (``days``, under ``memory_limit``) and its ranked
    causes (the trained model when one is built). ``spread``: ``con`` lists the stalled jobs,
    groups of them (:data:`GROUPS_PER_WORKER` per worker) are attributed there, each over the
    days on a connection of its own, and merged in the order of one run."""
    if spread is None:
        return find_stalls(lake_root, con=con)
    return find_stalls_by_job(lake_root, con, days=days, memory_limit=memory_limit,
                              n_groups=GROUPS_PER_WORKER * spread.workers,
                              map_groups=spread.map_groups)


def evaluate_alerts(lake_root: Path, settings: Settings, send: bool, lock_wait_s: float,
                    findings: StallFindings, con: Connection, replay: bool = False) -> AlertRun:
    """Timeout headroom of every job; with ``send``, deliver the due alerts and keep state. An
    alert's likely cause comes from ``findings`` (the stalls step's attribution), not a second
    one. ``replay``: as of the end of the newest checkpoint read, not the clock."""
    now = newest_checkpoint_end(con) if replay else None
    return run_alerts(lake_root, settings, send=send, cause_provider=findings.top_causes,
                      lock_wait_s=lock_wait_s, con=con, now=now)


def write_daily_report(lake_root: Path, day: date | None, findings: StallFindings,
                       settings: Settings, alert_run: AlertRun | None,
                       alerts_error: str | None, ingest: IngestReport, con: Connection,
                       memory_limit: str) -> ReportFiles:
    """Build, render and write the day's report."""
    _facts, files = daily_report(lake_root, day=day, findings=findings, settings=settings,
                                 alert_run=alert_run, alerts_error=alerts_error,
                                 ingest=ingest, con=con, memory_limit=memory_limit)
    return files


@dataclass(frozen=True)
class NightlySteps:
    """The steps :func:`run_nightly` calls, positionally, with the signatures of the plain
    functions above (which :data:`PLAIN_STEPS` holds)."""

    pull: Callable[[Path, Settings, float], PullReport]
    ingest: Callable[[Path, Path, float, IngestSettings], IngestReport]
    deltas: Callable[[Path, str, float, Spread | None], int]
    views: Callable[[Path, tuple[date, date], str], Connection]
    check: Callable[[Connection], list[str]]
    stalls: Callable[[Path, Connection, tuple[date, date], str, Spread | None],
                     StallFindings]
    alerts: Callable[[Path, Settings, bool, float, StallFindings, Connection, bool], AlertRun]
    report: Callable[[Path, date | None, StallFindings, Settings, AlertRun | None, str | None,
                      IngestReport, Connection, str], ReportFiles]


PLAIN_STEPS = NightlySteps(pull=pull_recent, ingest=ingest_raw, deltas=store_counter_deltas,
                           views=open_views, check=check_lake, stalls=detect_stalls,
                           alerts=evaluate_alerts, report=write_daily_report)


# -- the result and the policy --------------------------------------------------------------


@dataclass(frozen=True)
class NightlyResult:
    """What one nightly run did: each step's own report, where the report went, the timings.

    :meth:`to_dict` is the flow's return value (the command's summary and ``bench`` read it);
    :meth:`failure` and :attr:`exit_code` are the run's verdict."""

    ingest: IngestReport
    findings: StallFindings
    files: ReportFiles
    clock: StepClock
    #: The views the run's connection built.
    views: int
    #: Days whose counter deltas the run stored.
    delta_days_built: int
    #: False: a dry run (alerts evaluated, nothing sent or recorded).
    send: bool
    #: The JSON Lines file the alerts go to (``[sinks] jsonl``, else beside the reports).
    alerts_file: Path | None
    alert_run: AlertRun | None = None
    #: Why the alerts could not be evaluated (redacted); None when they were.
    alerts_error: str | None = None
    #: The sinks that did not take their alerts, one line each (redacted).
    alert_failures: tuple[str, ...] = ()
    lake_warnings: tuple[str, ...] = ()
    pulled: PullReport | None = None
    #: Why the Prometheus pull failed (redacted); None when it ran or was not asked for.
    pull_error: str | None = None
    #: The metrics file the run wrote (or tried to), None without one.
    metrics_file: Path | None = None
    #: Why it could not be written (redacted); None when it was, or there is none.
    metrics_error: str | None = None
    #: What ran as partitions on a :class:`Spread` (``Spread.summary``); None: all here.
    spread: Mapping[str, Any] | None = None

    @property
    def alerts_summary(self) -> str:
        """The alerts in one line: counted per sink, or why they were not evaluated."""
        if self.alert_run is not None:
            return self.alert_run.summary()
        return f"not evaluated ({self.alerts_error})"

    def failure(self) -> CkptwatchError | None:
        """The error that fails this finished run, or None: alerts not delivered (they were
        not evaluated, or a sink did not take them) first, then a failed pull, then a metrics
        file not written. A file that could not be ingested fails the exit status only
        (:attr:`exit_code`)."""
        if self.alerts_error or self.alert_failures:
            problem = self.alerts_error or "; ".join(self.alert_failures)
            return AlertsUndeliveredError(
                f"alerts not delivered: {problem} — the report is written ({self.files.html}); "
                "undelivered alerts stay pending and are retried on the next run",
                self.to_dict())
        if self.pull_error:
            return PullError(f"{self.pull_error} — the ingest ran and the report is written "
                             f"({self.files.html}) without it; the next run pulls the range "
                             "again")
        if self.metrics_error:
            return MetricsFileError(f"{self.metrics_error} — the report is written "
                                    f"({self.files.html})")
        return None

    @property
    def exit_code(self) -> int:
        """The run's exit status (:func:`exit_code`)."""
        return exit_code(self.failure(), self.to_dict())

    def with_metrics(self, metrics_file: Path, secrets: Sequence[str] = ()) -> NightlyResult:
        """Write this run's metrics to ``metrics_file`` (the report's facts as ``report.json``
        holds them, the exit status, the files not ingested); the result names the file and,
        when it could not be written, why (redacted of ``secrets``: :meth:`failure`)."""
        out = replace(self, metrics_file=metrics_file, metrics_error=None)
        try:
            try:
                facts = json.loads(self.files.json.read_text(encoding="utf-8"))
            except (OSError, ValueError) as exc:
                raise MetricsFileError(f"cannot read the report {self.files.json} for the "
                                       f"metrics file {metrics_file}: {exc}") from exc
            write_metrics(metrics_file, facts, exit_code=out.exit_code,
                          files_failed=self.ingest.count("failed"), now=time.time())
        except CkptwatchError as exc:
            return replace(out, metrics_error=redact(str(exc), list(secrets)))
        return out

    def to_dict(self) -> dict[str, Any]:
        """The flow's result: counts, the alerts per sink, paths, seconds and peak RSS per
        step, warnings (keys as ``ckptwatch nightly`` and ``bench/run.py`` read them)."""
        run, findings = self.alert_run, self.findings
        return {
            "ingested": self.ingest.count("ingested"), "skipped": self.ingest.count("skipped"),
            "failed": self.ingest.count("failed"), "quarantined": self.ingest.quarantined,
            # every file the raw directory held (ignored ones too): 0 is an empty directory
            "raw_files": len(self.ingest.files),
            "failed_files": [{"file": f.rel, "reason": f.error or "failed"}
                             for f in self.ingest.files if f.status == "failed"],
            "views": self.views, "delta_days_built": self.delta_days_built,
            "stalls": len(findings.stalls), "stalls_by_cause": findings.by_cause(),
            # every timed-out checkpoint is a stall (stalls.sql): the count of those
            "stalls_timed_out": sum(1 for s in findings.stalls if s.timed_out),
            "alerts": len(run.alerts) if run else 0,
            # sent for real: not a dry run, and every sink took every alert handed to it
            "alerts_sent": bool(run and run.delivered),
            "alerts_dry_run": not self.send,
            "alerts_sinks": run.sinks if run else [],
            "alerts_delivery": [r.to_dict() for r in run.delivery] if run else [],
            "alerts_summary": self.alerts_summary,
            "alerts_file": str(self.alerts_file) if self.alerts_file else None,
            "report": str(self.files.html), "report_json": str(self.files.json),
            "latest": str(self.files.latest_html), "latest_kept": self.files.latest_kept,
            "steps_s": dict(self.clock.seconds),
            "steps_peak_rss_mb": dict(self.clock.peak_rss_mb),
            "lake_warnings": list(self.lake_warnings),
            "unused_metrics": unused_metrics_lines(self.ingest.unused_metrics),
            "pulled": self.pulled.rows if self.pulled else None,
            "pull_error": self.pull_error,
            "metrics_file": str(self.metrics_file) if self.metrics_file else None,
            "dask": dict(self.spread) if self.spread is not None else None,
        }


def exit_code(failure: BaseException | None, summary: Mapping[str, Any] | None = None) -> int:
    """A nightly run's exit status: 1 when alerts were not delivered (the report is written),
    2 for any other error (the run stopped, or its pull failed); else 1 when a file could not
    be ingested (``summary["failed"]``) or the raw directory held none
    (``summary["raw_files"]``), 0 when all went well."""
    if isinstance(failure, AlertsUndeliveredError):
        return 1
    if failure is not None:
        return 2
    if summary and summary.get("raw_files") == 0:
        return 1  # as `ckptwatch ingest` on it: an empty raw directory is a feed that stopped
    return 1 if summary and summary["failed"] else 0


# -- the run --------------------------------------------------------------------------------


Log = logging.Logger | logging.LoggerAdapter[Any]


def record_failed_run(metrics_file: Path | None, error: BaseException, log: Log = LOG) -> None:
    """Write a stopped run's status to ``metrics_file`` (None: nothing): its exit status
    (:func:`exit_code`), the last success kept. A file that cannot be written is logged, never
    raised: the run's own error is the one to report."""
    if metrics_file is None:
        return
    try:
        write_metrics(metrics_file, None, exit_code=exit_code(error), files_failed=None,
                      now=time.time())
    except CkptwatchError as exc:
        log.warning("nightly: %s", exc)


def run_nightly(raw_dir: Path, lake_root: Path, settings: Settings, *, send: bool = True,
                report_date: date | None = None, lock_wait_s: float = 600.0,
                lookback_days: int = 0, duckdb_memory: str | None = None,
                replay: bool = False, metrics_file: Path | None = None,
                steps: NightlySteps = PLAIN_STEPS, log: Log = LOG,
                spread: Spread | None = None) -> NightlyResult:
    """Pull (with ``[prometheus] url``), ingest, counter deltas, views, stalls, alerts, report;
    then the metrics file.

    Raises what stops the run (see the module's policy); returns the result of a run that got
    to its report, whose :meth:`NightlyResult.failure` may still fail it. ``settings``: the
    loaded settings, the ingest limits and the DuckDB cap included (the alerts also go to
    ``LAKE/reports/alerts.jsonl`` unless they name a JSON Lines file). ``report_date``: the
    day the report covers (default: the newest day with checkpoints). ``lookback_days``: the
    days before it that stalls, alerts and the report read too; older days are not opened.
    ``duckdb_memory``: DuckDB's cap for the steps after the ingest (default:
    ``settings.nightly.duckdb_memory``: ``$CKPTWATCH_DUCKDB_MEMORY``, else
    :data:`NIGHTLY_DUCKDB_MEMORY`). ``replay``: evaluate the alerts as of the newest
    checkpoint read, not the clock. ``metrics_file``: where the findings and the run's status
    go as Prometheus metrics (default: ``settings.nightly.metrics_file``; None: nowhere).
    ``spread``: the counter deltas' batches and the stalls' job groups run there (the flow's
    Dask task runner); None: here.
    """
    if metrics_file is not None:  # the settings' is checked as they load
        try:
            metrics_file = metrics_file_path(str(metrics_file), Path.cwd())
        except ValueError as exc:
            raise ConfigError(f"metrics file {exc}") from None
    metrics_file = metrics_file or settings.nightly.metrics_file
    try:
        result = _run(Path(raw_dir), Path(lake_root), settings, send=send,
                      report_date=report_date, lock_wait_s=lock_wait_s,
                      lookback_days=lookback_days, duckdb_memory=duckdb_memory, replay=replay,
                      steps=steps, log=log, spread=spread)
    except Exception as exc:  # recorded as a failed run, then raised as it was
        record_failed_run(metrics_file, exc, log)
        raise
    if metrics_file is None:
        return result
    result = result.with_metrics(Path(metrics_file), settings.secrets())
    if result.metrics_error is None:
        log.info("nightly: metrics written to %s", metrics_file)
    return result


def _run(raw_dir: Path, lake_root: Path, settings: Settings, *, send: bool,
         report_date: date | None, lock_wait_s: float, lookback_days: int,
         duckdb_memory: str | None, replay: bool, steps: NightlySteps,
         log: Log, spread: Spread | None = None) -> NightlyResult:
    """:func:`run_nightly` up to its result, without the metrics file."""
    check_raw_dir(raw_dir)
    settings = nightly_settings(settings, lake_root)
    secrets = settings.secrets()
    clock = StepClock()
    pulled: PullReport | None = None
    pull_error: str | None = None
    if settings.prometheus.url:
        with clock.step("pull"):
            try:
                pulled = steps.pull(lake_root, settings, lock_wait_s)
                log.info("nightly: pulled %s from %s", pulled.rows or "no new rows", pulled.url)
            except CkptwatchError as exc:  # the server: ingest and report anyway, fail after
                pull_error = redact(str(exc), secrets)
                log.warning("nightly: pull failed: %s", pull_error)
    with clock.step("ingest"):
        ingested = steps.ingest(raw_dir, lake_root, lock_wait_s, settings.ingest)
    # Unattended at night on a shared machine: DuckDB capped (it spills beyond the cap).
    limit = duckdb_memory or settings.nightly.duckdb_memory
    with clock.step("deltas"):
        n_delta_days = steps.deltas(lake_root, limit, lock_wait_s, spread)
    days = nightly_days(lake_root, report_date, lookback_days)
    log.info("nightly: reading %s to %s", days[0], days[1])
    with clock.step("views"):
        con = steps.views(lake_root, days, limit)
    try:  # the later steps read the days through this one connection
        lake_warnings = steps.check(con)
        for warning in lake_warnings:
            log.info("nightly: warning: %s", warning)
        with clock.step("stalls"):
            findings = steps.stalls(lake_root, con, days, limit, spread)
        alert_run: AlertRun | None = None
        alerts_error: str | None = None
        with clock.step("alerts"):
            try:
                alert_run = steps.alerts(lake_root, settings, send, lock_wait_s, findings, con,
                                         replay)
            except CkptwatchError as exc:  # e.g. the lake lock: report anyway, fail after
                alerts_error = redact(str(exc), secrets)
        with clock.step("report"):
            files = steps.report(lake_root, days[1], findings, settings, alert_run,
                                 alerts_error, ingested, con, limit)
    finally:
        con.close()
    result = NightlyResult(
        ingest=ingested, findings=findings, files=files, clock=clock,
        views=len(view_files()), delta_days_built=n_delta_days, send=send,
        alerts_file=settings.sinks.jsonl, alert_run=alert_run, alerts_error=alerts_error,
        alert_failures=tuple(redact(str(f), secrets)
                             for f in (alert_run.failures if alert_run else [])),
        lake_warnings=tuple(lake_warnings), pulled=pulled, pull_error=pull_error,
        spread=spread.summary() if spread is not None else None)
    log.info("nightly: %d files ingested, %d stalls, alerts: %s; report %s",
             ingested.count("ingested"), len(findings.stalls), result.alerts_summary, files.html)
    log.info("nightly: seconds per step: %s",
             ", ".join(f"{name} {s:.1f}" for name, s in clock.seconds.items()))
    log.info("nightly: peak RSS (MB) when each step ended, this process/largest child: %s",
             ", ".join(f"{name} {p['flow']}/{p['workers']}"
                       for name, p in clock.peak_rss_mb.items()))
    return result
