"""Prefect flow: raw telemetry directory -> Parquet lake (discover -> parse -> write).

Tasks are thin wrappers over ``ckptwatch.ingest`` (``discover``, ``read``, ``write``); only I/O
tasks retry. Run once: ``ckptwatch ingest RAW --lake LAKE --flow`` or ``python
pipelines/ingest.py RAW LAKE`` (``--dask [ADDRESS]``: spread the files over a Dask cluster).
Scheduled runs come from ``prefect.yaml``.

Scale-out: with a Dask task runner (``ingest_flow.with_options(task_runner=dask_runner())``)
each file's parse and write is one task on a Dask worker; the flow process keeps the lake lock
for the whole run, hands out only files that are neither in the lake nor a second copy of
content earlier in the run (``content_key``), and waits for every task before it lets the
lock go. Each file is its own transaction (journal, parts, manifest), so workers in other
processes or hosts write safely; they must see the raw directory and the lake at the same
paths (one machine, or a shared file system). Without a Dask runner the flow runs the files
in order, one task per ``TASK_BATCHES`` batches of files (``ingest.run.ingest_files``, written
in batches of ``IngestSettings.batch_files`` as ``ckptwatch ingest`` writes them: one journal
entry and one round of fsyncs per batch).

The run's settings (``IngestSettings``: limits, batch sizes, workers) are the flow's
``limits`` parameter (``ckptwatch ingest --flow`` passes those it loaded; None: loaded at the
flow's start from the defaults and the ``CKPTWATCH_*`` variables); ``discover`` puts them on
each ``RawFile``, so that a task, on whatever worker, applies the run's.
"""

from __future__ import annotations

import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any

from prefect import Task, flow, get_run_logger, task
from prefect.cache_policies import NO_CACHE
from prefect.client.schemas.objects import TaskRun
from prefect.context import FlowRunContext
from prefect.futures import wait
from prefect.states import Failed, State
from pydantic import BeforeValidator, ValidationInfo, WithJsonSchema

from ckptwatch.errors import CkptwatchError, LakeError, MissingExtraError, RawDirError
from ckptwatch.ingest.discover import RawFile, check_raw_dir, discover
from ckptwatch.ingest.parallel import Parsing, workers_for
from ckptwatch.ingest.read import content_key, parse_file
from ckptwatch.ingest.run import IngestReport, ingest_files, run_stopped
from ckptwatch.ingest.write import FileResult, prepare_lake, write_file
from ckptwatch.lake.derived import Refresh, refresh
from ckptwatch.lake.store import Lake
from ckptwatch.progress import progress
from ckptwatch.settings import (
    IngestSettings,
    duckdb_memory_limit,
    duckdb_memory_setting,
    ingest_settings,
)
from ckptwatch.sources.base import safe_text

#: Errors a retry cannot change (a raw directory that is missing or cannot be read): a task
#: that raised one fails at once instead of after its retries.
PERMANENT_ERRORS: tuple[type[BaseException], ...] = (RawDirError,)


def _not_empty(value: object, info: ValidationInfo) -> object:
    """Refuse an empty path parameter, which ``Path`` would read as the worker's working
    directory: what a deployment stores when ``prefect deploy`` ran without its variables."""
    if isinstance(value, str) and not value.strip():
        name = info.field_name or "a path parameter"
        raise ValueError(f"{name} is empty: set CKPTWATCH_RAW and CKPTWATCH_LAKE where "
                         "`prefect deploy --all` runs (deploy/README.md), or run with "
                         f"--param {name}=/absolute/path")
    return value


#: A flow's path parameter: a ``Path`` that must not be empty (its JSON schema says so too,
#: so the server refuses ``prefect deployment run --param raw_dir=`` before any worker runs it).
FlowPath = Annotated[Path, BeforeValidator(_not_empty),
                     WithJsonSchema({"type": "string", "format": "path", "minLength": 1})]


def retry_unless_permanent(task: Task[Any, Any], task_run: TaskRun, state: State[Any]) -> bool:
    """A task's ``retry_condition_fn``: retry unless it failed with a ``PERMANENT_ERRORS``."""
    try:
        exc = state.result(raise_on_failure=False)
    except Exception:  # noqa: BLE001 - a result that cannot be read: retry as before
        return True
    return not isinstance(exc, PERMANENT_ERRORS)


def failed(exc: CkptwatchError) -> Any:
    """End the flow run Failed with ``exc``'s one line; the flow's caller gets ``exc`` raised.

    Returned as a state rather than raised: Prefect logs every exception raised inside a flow
    with its traceback, and these failures are one line each."""
    return Failed(message=str(exc), data=exc)


#: Batches of files (``IngestSettings.batch_files`` each) one ingest task takes at most: each
#: task ends with its parse workers' pipeline drained, so fewer, larger tasks idle them less
#: (on the 512-node day 17 tasks of 64 files, 5 of 256); a retry redoes at most this many.
TASK_BATCHES = 4


@task(retries=2, retry_delay_seconds=5, retry_condition_fn=retry_unless_permanent,
      task_run_name="discover {raw_dir}", cache_policy=NO_CACHE)
def discover_files(raw_dir: Path, lake_root: Path | None = None,
                   limits: IngestSettings | None = None) -> tuple[list[RawFile], list[str]]:
    """List and recognise the raw files, never the lake's own (I/O: retried, but not for a
    folder that cannot be read), each carrying the run's ``limits``; also the notes (a lake
    skipped under the raw directory)."""
    notes: list[str] = []
    return discover(raw_dir, lake=lake_root, notes=notes,
                    limits=ingest_settings() if limits is None else limits), notes


@task(retries=2, retry_delay_seconds=5, task_run_name="ingest {n_files} file(s) from {first}",
      cache_policy=NO_CACHE)
def ingest_batch(lake_root: Path, raws: list[RawFile], known: frozenset[str],
                 ingested_ts: datetime, done: list[FileResult], n_files: int, first: str,
                 parsing: Parsing | None = None) -> tuple[list[FileResult], set[str]]:
    """Parse and write one batch of files (``ingest.run.ingest_files``: one journal entry and
    one round of fsyncs per batch); returns their results and the keys they ingested. I/O:
    retried; a retry starts from the same ``known`` and rewrites what the failed attempt
    committed under the same part names, so it neither loses nor doubles a row.
    ``parsing``: the run's parse workers (``ingest.parallel``), shared by its batches."""
    keys = set(known)
    results = list(done)
    ingest_files(Lake(lake_root), raws, keys, ingested_ts, results, parsing=parsing)
    return results[len(done):], keys - known


@task(task_run_name="key {raw.rel}", cache_policy=NO_CACHE)
def key_of(raw: RawFile) -> str | None:
    """The file's content key (read and hashed, not parsed)."""
    return content_key(raw)


@task(retries=2, retry_delay_seconds=5, task_run_name="ingest {raw.rel}", cache_policy=NO_CACHE)
def ingest_one(lake_root: Path, raw: RawFile, ingested_ts: datetime) -> FileResult:
    """Parse and write one file on a worker (I/O: retried; the journal makes retries safe)."""
    return write_file(Lake(lake_root), parse_file(raw), ingested_ts)


def dask_runner(address: str | None = None, n_workers: int = 2) -> Any:
    """A prefect-dask ``DaskTaskRunner``: the cluster at ``address``, or (``None`` or
    ``"local"``) a local cluster of ``n_workers`` single-threaded worker processes."""
    try:
        from prefect_dask import DaskTaskRunner
    except ImportError as exc:
        raise MissingExtraError("a Dask task runner needs prefect-dask, which is not "
                                "installed: run pip install -e '.[dask]' in the ckptwatch "
                                "checkout (make install does), or run without --dask") from exc

    if address and address != "local":
        return DaskTaskRunner(address=address)
    return DaskTaskRunner(cluster_kwargs={"n_workers": n_workers, "threads_per_worker": 1,
                                          "processes": True})


def _on_dask() -> bool:
    ctx = FlowRunContext.get()
    return ctx is not None and type(ctx.task_runner).__name__ == "DaskTaskRunner"


def _ingest_parallel(raw_files: list[RawFile], lake_root: Path, known: set[str],
                     now: datetime) -> list[FileResult]:
    """Files as tasks on the flow's task runner; results in file order, as a sequential run.

    Files already in the lake, and any later copy of content met earlier in the run, are
    skipped here (as the sequential run skips them) so that no two tasks write one file key.
    Every task has ended when this returns or raises (the caller holds the lake lock).
    """
    keys = [f.result() for f in key_of.map(raw_files)]
    seen = set(known)
    plan: list[Any] = []
    for raw, key in zip(raw_files, keys, strict=True):
        if raw.kind != "ignored" and key is not None and key in seen:
            plan.append(FileResult(safe_text(raw.rel), "skipped"))
            continue
        plan.append(ingest_one.submit(lake_root, raw, now))
        if raw.kind != "ignored" and key is not None:
            seen.add(key)
    wait([p for p in plan if not isinstance(p, FileResult)])
    results: list[FileResult] = []
    for raw, item in zip(raw_files, plan, strict=True):
        try:
            results.append(item if isinstance(item, FileResult) else item.result())
        except LakeError as exc:  # disk full, permission denied: stop with one line
            raise run_stopped(exc, raw, results) from exc
    return results


@flow(name="ingest", flow_run_name="ingest {raw_dir}", log_prints=True)
def ingest_flow(raw_dir: FlowPath, lake_root: FlowPath, lock_wait_s: float = 600.0,
                limits: IngestSettings | None = None, derive: bool = False) -> IngestReport:
    """Ingest every new raw file under ``raw_dir`` into the lake at ``lake_root`` under
    ``limits`` (None: the defaults and the ``CKPTWATCH_*`` variables, loaded here).

    ``derive``: then store the counter deltas and signal statistics of every day the ingest
    made stale (``ckptwatch.lake.derived.refresh``), as the nightly run's deltas step does, so
    that a nightly run over a day ingested hourly (the ``ingest-on-demand`` deployment on a
    schedule) finds that work done. A failure there fails the run (the ingest stays committed).

    A raw directory that is missing or cannot be listed ends the run Failed with one line
    before anything is created (no lake skeleton) and without retries."""
    raw_dir, lake_root = Path(raw_dir), Path(lake_root)
    try:
        check_raw_dir(raw_dir)
    except RawDirError as exc:
        return failed(exc)
    logger = get_run_logger()
    t0 = time.monotonic()
    run = ingest_settings() if limits is None else limits
    with Lake(lake_root).lock(wait_s=lock_wait_s):
        lake, recovered = prepare_lake(lake_root)
        if recovered:
            logger.warning("rolled back %d file(s) left half-ingested by an earlier run",
                           recovered)
        try:
            files, notes = discover_files(raw_dir, lake_root, run)
        except RawDirError as exc:  # a folder under it cannot be read: one line, nothing read
            return failed(exc)
        known = lake.manifest_keys()
        now = datetime.now(UTC)
        results: list[FileResult] = []
        if _on_dask():
            results = _ingest_parallel(files, lake_root, known, now)
            files = []
        task_files = TASK_BATCHES * run.batch_files
        with Parsing(workers_for(files, run.workers)) as parsing:
            for start in range(0, len(files), task_files):
                raws = files[start:start + task_files]
                # A write failure raises run_stopped's one line (disk full, permission denied).
                batch, new_keys = ingest_batch(lake_root, raws, frozenset(known), now,
                                               results, len(raws), safe_text(raws[0].rel),
                                               parsing)
                results += batch
                known |= new_keys  # a second copy of this content later in the run is skipped
                logger.info("ingest: %d/%d files", len(results), len(files))
                progress("ingest", f"{len(results)}/{len(files)} files")
            notes += parsing.notes
    report = IngestReport(raw_dir, lake_root, results, recovered, time.monotonic() - t0,
                          notes=[safe_text(n) for n in notes])
    logger.info("ingest: %d ingested, %d skipped, %d quarantined records", report.count(
        "ingested"), report.count("skipped"), report.quarantined)
    if derive:
        try:
            done = derive_days(lake_root, lock_wait_s)
        except CkptwatchError as exc:  # the lake's derived rows: one line, the run Failed
            return failed(exc)
        report.notes.append(f"derived: counter deltas of {len(done.built)} day(s), signal "
                            f"statistics of {len(done.stats)} day(s) stored")
        logger.info("%s", report.notes[-1])
    return report


@task(retries=2, retry_delay_seconds=5, task_run_name="derive {lake_root}",
      cache_policy=NO_CACHE)
def derive_days(lake_root: Path, lock_wait_s: float) -> Refresh:
    """The derived rows of every stale day (``derived.refresh`` at the nightly's DuckDB cap:
    ``$CKPTWATCH_DUCKDB_MEMORY``, else the nightly's default)."""
    from ckptwatch.flows.run import NIGHTLY_DUCKDB_MEMORY  # the nightly's cap: one number

    cap = duckdb_memory_limit(duckdb_memory_setting(None, NIGHTLY_DUCKDB_MEMORY))
    return refresh(lake_root, memory_limit=cap, lock_wait_s=lock_wait_s)


def pop_dask_flag(args: list[str]) -> str | None:
    """Take a script's ``--dask [ADDRESS]`` out of ``args``: ``None`` without the flag,
    ``"local"`` without an address, else the scheduler address."""
    if "--dask" not in args:
        return None
    i = args.index("--dask")
    address = args[i + 1] if i + 1 < len(args) and not args[i + 1].startswith("-") else None
    del args[i:i + (2 if address else 1)]
    return address or "local"


def main(argv: list[str]) -> None:
    """``python pipelines/ingest.py RAW LAKE [--dask [ADDRESS]]``."""
    args = list(argv)
    dask = pop_dask_flag(args)
    run = ingest_flow.with_options(task_runner=dask_runner(dask)) if dask else ingest_flow
    run(Path(args[0]), Path(args[1]))


if __name__ == "__main__":
    main(sys.argv[1:])
