"""Prefect flow: the nightly run. Ingest the day's raw files, build the views, find and attribute
stalls, evaluate and send the timeout-headroom alerts, write the daily report.

The run and its failure policy are :func:`ckptwatch.flows.run.run_nightly`; this module only
wraps its steps as Prefect tasks (names, retries: only I/O steps retry), calls it, and ends the
flow run Failed with the one line of a run that failed after writing its report (an alert sink
that did not take its alerts, a Prometheus server that could not be read). Deployed by
``prefect.yaml`` (cron ``30 2 * * *`` UTC); ``ckptwatch nightly RAW --lake LAKE`` or
``python pipelines/nightly.py RAW LAKE`` runs it once. ``--dask [ADDRESS]`` (the ``dask``
parameter) runs the work of three steps as tasks on one Dask cluster (:class:`DaskSpread`):
the ingest subflow's files, as ``pipelines/ingest.py`` does; each stale day's counter-delta
batches (parts of disjoint host ranges); the stalls of groups of stalled jobs, each group on a
DuckDB connection of its own. The flow process plans them, gathers their results as a run
without Dask would (the same lake, stalls, alerts and report) and runs the views, alerts and
report steps itself.
Settings come from ``config`` or ``$CKPTWATCH_CONFIG`` (built-in defaults without either); the
alerts always go to a JSON Lines file too: ``[sinks] jsonl``, else ``LAKE/reports/alerts.jsonl``.
With a ``[prometheus]`` section that sets ``url``, the run first pulls the last
``nightly_since_s`` seconds (default 26 h) of SMART, fabric and pool history from that server
into the lake (``ckptwatch pull prometheus``; a range pulled before adds nothing), then ingests.
"""

from __future__ import annotations

import contextlib
import importlib
import sys
from collections.abc import Sequence
from datetime import date
from pathlib import Path
from typing import Any

from prefect import flow, get_run_logger, task
from prefect.cache_policies import NO_CACHE
from prefect.context import TaskRunContext
from prefect.futures import wait

from ckptwatch.analysis.findings import JobGroup, StallFindings, stalls_of_group
from ckptwatch.errors import CkptwatchError, RawDirError
from ckptwatch.flows import run
from ckptwatch.flows.ingest import FlowPath, dask_runner, failed, ingest_flow, pop_dask_flag
from ckptwatch.flows.run import NIGHTLY_DUCKDB_MEMORY, NightlySteps, exit_code, run_nightly
from ckptwatch.lake import derived
from ckptwatch.settings import load_settings

__all__ = ["NIGHTLY_DUCKDB_MEMORY", "PRELOADED_MODULES", "DaskSpread", "main", "nightly_flow",
           "preload"]

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


# The steps of ``flows.run`` as tasks. Only the steps that read or write through I/O that can
# fail for a moment retry (the server, the lake's files). The alerts step never does: a failed
# sink keeps its alerts pending in the alert state and the next run sends them, where a retry
# would only repeat the same attempt seconds later.
pull_from_prometheus = task(name="pull_from_prometheus", retries=2, retry_delay_seconds=30,
                            task_run_name="pull prometheus",
                            cache_policy=NO_CACHE)(run.pull_recent)
materialise_counter_deltas = task(name="materialise_counter_deltas", retries=2,
                                  retry_delay_seconds=5, task_run_name="counter deltas",
                                  cache_policy=NO_CACHE)(run.store_counter_deltas)
build_views = task(name="build_views", retries=2, retry_delay_seconds=5,
                   task_run_name="build views", cache_policy=NO_CACHE)(run.open_views)
check_lake = task(name="check_lake", task_run_name="check lake",
                  cache_policy=NO_CACHE)(run.check_lake)
detect_stalls = task(name="detect_stalls", task_run_name="stalls",
                     cache_policy=NO_CACHE)(run.detect_stalls)
evaluate_alerts = task(name="evaluate_alerts", task_run_name="alerts (send={send})",
                       cache_policy=NO_CACHE)(run.evaluate_alerts)
write_daily_report = task(name="write_daily_report", retries=2, retry_delay_seconds=5,
                          task_run_name="report", cache_policy=NO_CACHE)(run.write_daily_report)

# The partitions of the deltas and stalls steps, as tasks on a Dask worker (``DaskSpread``).
# Defined here, not wrapped as above: Dask pickles a task's function by its module and name.


@task(retries=2, retry_delay_seconds=5, task_run_name="counter deltas {batch.day} batch "
      "{batch.index}", cache_policy=NO_CACHE)
def counter_deltas_batch(batch: derived.DayBatch) -> Any:
    """One batch of a day's counter deltas (``derived.compute_batch``): its parts written, its
    last samples returned. I/O: retried (a retry rewrites the same parts)."""
    return derived.compute_batch(batch)


@task(task_run_name="stalls of {group.label}", cache_policy=NO_CACHE)
def stalls_of_jobs(group: JobGroup) -> StallFindings:
    """The stalls of a group of jobs with their causes (``findings.stalls_of_group``)."""
    return stalls_of_group(group)


class DaskSpread:
    """The nightly's partitions as tasks on a started Dask task runner (``run.Spread``): a
    day's counter-delta batches, the stalls' job groups. Counts what it ran
    (:meth:`summary`, the flow result's ``dask``)."""

    def __init__(self, runner: Any) -> None:
        self.runner = runner
        client = runner.client  # connects, or starts the local cluster
        #: The scheduler's address: the ingest subflow's runner reaches the same cluster.
        self.address: str = client.scheduler.address
        self._workers = max(1, sum(client.nthreads().values()))
        self.delta_days = 0
        self.delta_batches = 0
        self.groups: list[list[str]] = []

    @property
    def workers(self) -> int:
        """The cluster's worker threads when the run started."""
        return self._workers

    def _map(self, fn: Any, name: str, items: Sequence[Any]) -> list[Any]:
        # Submitted from inside a step's task run, whose context goes with each task to its
        # worker: without the step's parameters (its DuckDB connection, this object), which
        # neither pickle nor matter there.
        step = TaskRunContext.get()
        with step.model_copy(update={"parameters": {}}) if step else contextlib.nullcontext():
            futures = [self.runner.submit(fn, {name: item}) for item in items]
        wait(futures)  # every task has ended before the first error is raised
        return [f.result() for f in futures]

    def map_batches(self, batches: Sequence[derived.DayBatch]) -> list[Any]:
        """Each batch of one day as a ``counter_deltas_batch`` task."""
        out = self._map(counter_deltas_batch, "batch", batches)
        self.delta_days += 1
        self.delta_batches += len(batches)
        return out

    def map_groups(self, groups: Sequence[JobGroup]) -> list[StallFindings]:
        """Each job group as a ``stalls_of_jobs`` task."""
        out = self._map(stalls_of_jobs, "group", groups)
        self.groups += [list(g.jobs) for g in groups]
        return out

    def summary(self) -> dict[str, Any]:
        """Workers, the counter-delta days and batch tasks, the stalls' job groups."""
        return {"workers": self._workers, "delta_days": self.delta_days,
                "delta_batches": self.delta_batches, "stall_groups": list(self.groups)}


@flow(name="nightly", flow_run_name="nightly {raw_dir}", log_prints=True)
def nightly_flow(raw_dir: FlowPath, lake_root: FlowPath, config: Path | None = None,
                 send: bool = True,
                 report_date: date | None = None, lock_wait_s: float = 600.0,
                 dask: str | None = None, lookback_days: int = 0,
                 duckdb_memory: str | None = None, replay: bool = False,
                 metrics_file: Path | None = None) -> dict[str, Any]:
    """Ingest, build views, stalls, alerts, report (``flows.run.run_nightly``, its steps as
    tasks); return paths and counts (``NightlyResult.to_dict``).

    ``report_date``: the day the report covers (default: the newest day with checkpoints).
    ``send=False`` evaluates the alerts without sending or recording them (a dry run).
    ``dask``: run the ingest's files, the counter deltas' batches and the stalls' job groups
    as tasks on a Dask cluster: ``"local"`` (a local cluster of 2 worker processes) or a
    scheduler address (``tcp://host:8786``); ``None``: all in this process. The result's
    ``dask`` says what ran there (workers, delta days and batches, the job groups).
    ``lookback_days``: the days before the report day that stalls, alerts and the report read
    too (stall baselines, the alerts' trailing checkpoints); older days are not opened, so the
    run's time and memory do not grow with the days the lake keeps.
    ``duckdb_memory``: DuckDB's memory cap for the steps after the ingest (e.g. ``"3GB"``;
    ``"none"``: DuckDB's default, 80 % of RAM); default: ``$CKPTWATCH_DUCKDB_MEMORY``, else
    ``NIGHTLY_DUCKDB_MEMORY`` (3GB; a 512-node day peaks at ~1.5 GB, ``steps_peak_rss_mb`` in
    the result says which step set it).
    ``replay``: evaluate the alerts as of the end of the newest checkpoint read, not the
    clock (an old scenario such as the bundled sample, whose jobs are otherwise history).
    ``metrics_file``: where the run writes its findings and status as Prometheus metrics for
    node_exporter's textfile collector (default: ``[nightly] metrics_file`` of the settings;
    neither: no file).
    """
    # ``dask`` is a string, not ``nightly_flow.with_options(task_runner=...)``: in Prefect 3
    # every flow run, a subflow too, enters its own flow's task runner (the parent's is not
    # inherited), and the steps are direct task calls. So the runner is started here and its
    # cluster (a local one started once for ``"local"``) serves both the ingest subflow (a
    # runner at the same address) and the deltas and stalls steps' partitions (DaskSpread).
    # A string is also what a deployment (``prefect.yaml`` parameters, the UI) can set, and
    # the flow run records it.
    args = (Path(raw_dir), Path(lake_root), config, send, report_date, lock_wait_s,
            lookback_days, duckdb_memory, replay, metrics_file)
    if not dask:
        return _nightly(*args, ingest=ingest_flow, spread=None)
    with dask_runner(dask) as runner:
        spread = DaskSpread(runner)
        return _nightly(*args, ingest=ingest_flow.with_options(
            task_runner=dask_runner(spread.address)), spread=spread)


def _nightly(raw_dir: Path, lake_root: Path, config: Path | None, send: bool,
             report_date: date | None, lock_wait_s: float, lookback_days: int,
             duckdb_memory: str | None, replay: bool, metrics_file: Path | None, *,
             ingest: Any, spread: DaskSpread | None) -> Any:
    """The flow's body: ``run_nightly`` with the steps as tasks (``ingest``: the subflow, on
    Dask or not; ``spread``: where the deltas' batches and the stalls' groups run)."""
    steps = NightlySteps(pull=pull_from_prometheus, ingest=ingest,
                         deltas=materialise_counter_deltas, views=build_views,
                         check=check_lake, stalls=detect_stalls, alerts=evaluate_alerts,
                         report=write_daily_report)
    try:
        result = run_nightly(raw_dir, lake_root, load_settings(config), send=send,
                             report_date=report_date, lock_wait_s=lock_wait_s,
                             lookback_days=lookback_days, duckdb_memory=duckdb_memory,
                             replay=replay, metrics_file=metrics_file, steps=steps,
                             log=get_run_logger(), spread=spread)
    except RawDirError as exc:  # missing or unreadable: nothing was created, nothing to retry
        return failed(exc)
    failure = result.failure()
    # a run that got to its report and failed after it: one line each (the run did all it could)
    return failed(failure) if failure else result.to_dict()


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
        raise SystemExit(exit_code(exc)) from None


if __name__ == "__main__":
    main(sys.argv[1:])
