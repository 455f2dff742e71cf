"""``ckptwatch watch``: follow checkpoint files, warn while a checkpoint is still in flight.

Every ``interval_s`` one scan:

1. reads what the files under ``RAW_DIR/checkpoints/`` gained (:mod:`ckptwatch.live.follow`),
   parsed by the ingest's own loaders: start markers and finished records;
2. updates the open checkpoints (:mod:`ckptwatch.live.tracker`): completed ones join the
   across-checkpoint tail; one still open past its timeout stays open (it is reported as
   timed out, never as a tail) until it is given up (history, or the job moved on), and a
   checkpoint given up never joins the tail;
3. assesses the oldest open checkpoint of every job and tier against its timeout
   (:func:`ckptwatch.alerts.inflight.assess_inflight`; one first seen already past it is
   reported once, as timed out) and, with the tail of its completed checkpoints (the lake's
   window plus what completed live), evaluates and sends the in-flight and the tail alert
   of each job and tier through the same sinks and state as ``ckptwatch alerts``
   (:func:`ckptwatch.alerts.evaluate.send_alerts`): the nightly run and the watcher never
   send the same alert twice. A job whose newest record is older than its staleness horizon
   is history: it drops out of the live state and the metrics, and its alerts resolve;
4. updates the Prometheus metrics (:mod:`ckptwatch.live.metrics`) and saves its state.

The watcher does not write the lake's tables: the nightly ingest lands every record exactly
once, as it does without a watcher. Its own state (file offsets, open checkpoints, the
checkpoints completed live) is ``LAKE/_state/watch.json``, written atomically after each scan:
a restart resumes where it stopped and re-sends nothing. One watcher per lake
(``LAKE/.watch.lock``). The lake's window, the jobs and the topology are read again every
``refresh_s``; the jobs files of ``RAW_DIR/jobs/`` and ``RAW_DIR/topology.csv`` are read at
every refresh too, so a new job's timeout and a node's leaf switch are known before the
nightly ingest.
"""

from __future__ import annotations

import contextlib
import json
import logging
import threading
import time
from collections import deque
from collections.abc import Iterator
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, field, replace
from datetime import UTC, date, datetime, timedelta
from multiprocessing import get_context
from pathlib import Path
from typing import Any

import polars as pl

from ckptwatch.alerts.evaluate import AlertRun, send_alerts
from ckptwatch.alerts.headroom import CHECKPOINT_COLUMNS, VIEWS, load_window
from ckptwatch.alerts.inflight import InFlight, assess_inflight
from ckptwatch.alerts.sinks import Sink, build_sinks
from ckptwatch.errors import CkptwatchError, LakeError
from ckptwatch.lake.schema import CHECKPOINT_STARTS, CHECKPOINT_WRITES
from ckptwatch.lake.store import Lake, atomic_write_bytes
from ckptwatch.live.evidence import (
    BASELINE_DAYS,
    EvidenceRequest,
    RankState,
    live_evidence,
    telemetry_exists,
)
from ckptwatch.live.follow import Chunk, Cursor, Follower, parse_chunk
from ckptwatch.live.metrics import MetricsServer, WatchMetrics, write_textfile
from ckptwatch.live.tracker import Completed, Tracker
from ckptwatch.safetext import escape_controls
from ckptwatch.settings import AlertSettings, IngestSettings, Settings, WatchSettings
from ckptwatch.sources.base import Parsed

log = logging.getLogger(__name__)

STATE_FILE = Path("_state") / "watch.json"
STATE_VERSION = 1
WATCH_LOCK = ".watch.lock"
#: Days of the lake read for the tail window at each refresh.
LOOKBACK_DAYS = 7
WINDOW_SCHEMA: dict[str, pl.DataType] = {
    "job_id": pl.String(), "tier": pl.String(), "step": pl.Int64(),
    "end_ts": pl.Datetime("us", "UTC"), "barrier_s": pl.Float64()}


#: How the watcher runs (``ckptwatch watch``'s flags): the settings tree's ``watch`` branch.
WatchOptions = WatchSettings


@dataclass
class ScanReport:
    """What one scan did (for the log and the tests)."""

    at: datetime
    records: int = 0
    starts: int = 0
    rejected: int = 0
    completed: list[Completed] = field(default_factory=list)
    inflight: dict[tuple[str, str], InFlight] = field(default_factory=dict)
    alerts: AlertRun | None = None
    #: Why the alerts could not be evaluated this scan (the alert state's lock held too long,
    #: ...): a failure of the scan, as a sink's is.
    alerts_error: str | None = None
    bytes_read: int = 0
    notes: list[str] = field(default_factory=list)


JOBS_SCHEMA: dict[str, pl.DataType] = {
    "job_id": pl.String(), "n_ranks": pl.Int64(), "checkpoint_timeout_s": pl.Float64(),
    "checkpoint_interval_s": pl.Float64()}


def lake_context(lake_root: str, days: tuple[date, date], alerts: AlertSettings
                 ) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]], list[tuple[Any, ...]]]:
    """(the alerts' window of checkpoints, the jobs, node -> leaf switch) from the lake, as
    plain rows. The watcher runs it in a short-lived child process: DuckDB's peak over a big
    lake (+270 MB at 4096 ranks) is then never the watcher's own."""
    from ckptwatch.lake.query import connect, run_sql

    con = connect(lake_root, days=days, views=(*VIEWS, "stg_topology"))
    try:
        window, _ = load_window(con, alerts)
        jobs = run_sql(con, "select job_id, n_ranks, checkpoint_timeout_s, "
                       "checkpoint_interval_s from stg_jobs")
        topo = run_sql(con, "select distinct node, leaf_switch from stg_topology")
    finally:
        con.close()
    window = window.select(pl.col(c).cast(WINDOW_SCHEMA[c]) for c in CHECKPOINT_COLUMNS)
    return window.rows(), jobs.cast(JOBS_SCHEMA).rows(), topo.rows()  # type: ignore[arg-type]


#: Bytes of JSON Lines parsed at once: the loaders' fixed cost is ~40 ms a call, so a
#: checkpoint's finish burst over 512 node files, parsed file by file, would cost ~20 s a scan;
#: larger batches cost memory while catching up a backlog (8 MiB: ~320 MB for 40 MB behind).
BATCH_BYTES = 2 << 20


def _parse_batches(chunks: list[Chunk],
                   limits: IngestSettings) -> Iterator[tuple[Parsed, list[Chunk]]]:
    """The scan's chunks parsed in as few calls as possible: JSON Lines chunks joined into
    batches of up to ``BATCH_BYTES`` (each chunk is whole lines), CSV and Parquet one by one.
    A duplicate rank across two files of one batch is a reject like any other: the caller then
    re-reads that batch's chunks one by one to name the file and line."""
    batch: list[Chunk] = []
    size = 0

    def flush() -> Iterator[tuple[Parsed, list[Chunk]]]:
        if batch:
            joined = Chunk(f"{len(batch)} files", ".jsonl", b"".join(c.data for c in batch), 1)
            yield (parse_chunk(joined, limits) if len(batch) > 1
                   else parse_chunk(batch[0], limits)), list(batch)

    for chunk in chunks:
        if chunk.suffix not in (".jsonl", ".ndjson", ".json"):
            yield parse_chunk(chunk, limits), [chunk]
            continue
        if size + len(chunk.data) > BATCH_BYTES:
            yield from flush()
            batch, size = [], 0
        batch.append(chunk)
        size += len(chunk.data)
    yield from flush()


def state_path(lake_root: Path) -> Path:
    """``LAKE/_state/watch.json``."""
    return Lake(lake_root).root / STATE_FILE


class Watcher:
    """One watcher over a raw directory and a lake; :meth:`scan` once, or :meth:`run`."""

    def __init__(self, raw_dir: Path, lake_root: Path, settings: Settings,
                 options: WatchOptions | None = None, *, sinks: list[Sink] | None = None,
                 clock: Any = time.time) -> None:
        self.raw_dir = raw_dir
        self.lake_root = lake_root
        self.settings = settings
        self.options = options or WatchOptions()
        self.sinks = build_sinks(settings) if sinks is None else sinks
        self.clock = clock
        opts = self.options
        self.tracker = Tracker(settle_s=opts.settle_s if opts.settle_s is not None
                               else 3 * opts.interval_s)
        self.follower = Follower(raw_dir / "checkpoints", max_bytes=opts.max_bytes_per_scan,
                                 max_record_bytes=opts.max_record_bytes)
        self.metrics = WatchMetrics(interval_s=opts.interval_s)
        self.server: MetricsServer | None = None
        #: (job, tier) -> the checkpoints completed live (step, end_s, barrier_s).
        self.live: dict[tuple[str, str], deque[tuple[int, float, float]]] = {}
        self._window = pl.DataFrame(schema=WINDOW_SCHEMA)
        self.timeouts: dict[str, float] = {}
        self.intervals: dict[str, float] = {}
        self.n_ranks: dict[str, int] = {}
        self.leaves: dict[str, str] = {}
        self._refreshed_s = float("-inf")
        self._lock_cm: contextlib.ExitStack | None = None
        #: Something the state holds changed since it was last saved.
        self._dirty = False
        #: (job, tier, step) -> the live evidence line of an open checkpoint, and the stage
        #: (0 from ``evidence_at`` x the warning level on, 1 critical) it was last asked at.
        self._evidence: dict[tuple[str, str, int], str] = {}
        self._asked: dict[tuple[str, str, int], int] = {}
        self._pending: tuple[tuple[str, str, int], Future[str | None]] | None = None
        #: Wait for an evidence asked for in this scan (``--once``: there is no next scan).
        self._wait_evidence = False

    # -- lifecycle ------------------------------------------------------------------
    def start(self) -> None:
        """Take the watcher's lock, load the state, start the metrics server."""
        lake = Lake(self.lake_root)
        if not lake.exists():
            with lake.lock():
                lake.init()
        stack = contextlib.ExitStack()
        stack.enter_context(lake.lock(0, name=WATCH_LOCK, what="another watcher"))
        self._lock_cm = stack
        self._load_state()
        if self.options.metrics_port is not None:
            self.server = MetricsServer(self.metrics, self.options.metrics_host,
                                        self.options.metrics_port)
            self.server.start()

    def stop(self) -> None:
        """Save the state, stop the server, release the lock."""
        try:
            self._save_state()
        finally:
            if self.server is not None:
                self.server.stop()
                self.server = None
            if self._lock_cm is not None:
                self._lock_cm.close()
                self._lock_cm = None

    def run(self, stop: threading.Event, *, once: bool = False) -> int:
        """Scan every interval until ``stop`` is set (or once); returns the exit code."""
        failures = 0
        self._wait_evidence = once
        while True:
            began = time.monotonic()
            report = self.scan()
            if report.alerts_error or (report.alerts is not None and report.alerts.failures):
                failures += 1
            if once or stop.is_set():
                break
            stop.wait(max(self.options.interval_s - (time.monotonic() - began), 0.0))
            if stop.is_set():
                break
        return 1 if once and failures else 0

    # -- state ----------------------------------------------------------------------
    def _load_state(self) -> None:
        path = state_path(self.lake_root)
        try:
            data = json.loads(path.read_text())
        except FileNotFoundError:
            return
        except (OSError, ValueError) as exc:
            raise LakeError(f"corrupt watcher state {path}: {exc}; move it aside to start "
                            "afresh (files are then read again from their start)") from None
        if data.get("version") != STATE_VERSION:
            raise LakeError(f"watcher state {path}: version {data.get('version')!r}, expected "
                            f"{STATE_VERSION}; move it aside to start afresh")
        self.follower.cursors = {k: Cursor.from_json(v)
                                 for k, v in data.get("cursors", {}).items()}
        self.tracker.load(data.get("tracker", {}))
        for item in data.get("live", []):
            key = (str(item["job_id"]), str(item["tier"]))
            done = ((int(a), float(b), float(c)) for a, b, c in item["checkpoints"])
            self.live[key] = deque(done, maxlen=self.settings.alerts.max_window())

    def _save_state(self) -> None:
        if not self._dirty:
            return
        data = {"version": STATE_VERSION,
                "cursors": {k: c.to_json() for k, c in sorted(self.follower.cursors.items())},
                "tracker": self.tracker.to_json(),
                "live": [{"job_id": j, "tier": t, "checkpoints": [list(x) for x in q]}
                         for (j, t), q in sorted(self.live.items())]}
        atomic_write_bytes(state_path(self.lake_root), json.dumps(data, separators=(",", ":"))
                           .encode())
        self._dirty = False

    # -- context from the lake ------------------------------------------------------
    def _refresh(self, now: datetime) -> None:
        days = ((now - timedelta(days=LOOKBACK_DAYS)).date(), now.date())
        try:
            with ProcessPoolExecutor(1, mp_context=get_context("spawn")) as pool:
                window, jobs, topo = pool.submit(
                    lake_context, str(self.lake_root), days, self.settings.alerts).result()
        except CkptwatchError as exc:
            log.warning("cannot read the lake's window (%s); alerts use what was read live",
                        escape_controls(str(exc)))
            return
        except (OSError, BrokenProcessPool) as exc:
            log.warning("cannot read the lake's window (the reader process failed: %s); alerts "
                        "use what was read live", escape_controls(str(exc)))
            return
        self._window = pl.DataFrame(window, schema=WINDOW_SCHEMA, orient="row")
        self._jobs(pl.DataFrame(jobs, schema=JOBS_SCHEMA, orient="row"))
        self._jobs(self._raw_jobs())
        self.leaves = {str(n): str(leaf) for n, leaf in topo}
        raw_topology = self._raw_frames("topology", [self.raw_dir / "topology.csv",
                                                     *self._under("topology")])
        if raw_topology is not None:
            for node, leaf in raw_topology.select("node", "leaf_switch").iter_rows():
                self.leaves.setdefault(str(node), str(leaf))

    def _jobs(self, jobs: pl.DataFrame) -> None:
        if "checkpoint_interval_s" not in jobs.columns:
            jobs = jobs.with_columns(pl.lit(None, pl.Float64).alias("checkpoint_interval_s"))
        for job_id, n, timeout, interval in jobs.select(
                "job_id", "n_ranks", "checkpoint_timeout_s", "checkpoint_interval_s").iter_rows():
            if timeout is not None and timeout > 0:
                self.timeouts[str(job_id)] = float(timeout)
            if interval is not None and interval > 0:
                self.intervals[str(job_id)] = float(interval)
            if n is not None and n > 0:
                self.n_ranks[str(job_id)] = int(n)

    def horizon_s(self, job_id: str) -> float:
        """The job's staleness horizon (settings and its checkpoint interval)."""
        return self.settings.alerts.for_job(job_id).stale_horizon_s(self.intervals.get(job_id))

    def _under(self, place: str) -> list[Path]:
        root = self.raw_dir / place
        return sorted(root.rglob("*")) if root.is_dir() else []

    def _raw_frames(self, table: str, paths: list[Path]) -> pl.DataFrame | None:
        """The rows of ``table`` in these raw files, read as the ingest reads them."""
        from ckptwatch.ingest.discover import classify
        from ckptwatch.ingest.read import parse_file

        frames = []
        for path in paths:
            if not path.is_file() or path.is_symlink():
                continue
            parsed = parse_file(classify(path, path.relative_to(self.raw_dir).as_posix()))
            frames += parsed.parsed.frames.get(table, [])
        return pl.concat(frames, how="diagonal_relaxed") if frames else None

    def _raw_jobs(self) -> pl.DataFrame:
        """The jobs files of ``RAW_DIR/jobs/``: a new job's timeout before the nightly ingest."""
        jobs = self._raw_frames("jobs", self._under("jobs"))
        return pl.DataFrame(schema=JOBS_SCHEMA) if jobs is None else jobs

    # -- one scan ---------------------------------------------------------------------
    def scan(self) -> ScanReport:
        """Read, track, assess, alert, publish, save: one interval's work."""
        began = time.monotonic()
        now_s = float(self.clock())
        if now_s - self._refreshed_s >= self.options.refresh_s:
            self._refresh(datetime.fromtimestamp(now_s, UTC))
            self._refreshed_s = now_s
        n_files = len(self.follower.cursors)
        self._read(report := ScanReport(at=datetime.fromtimestamp(now_s, UTC)), now_s)
        # Ages are measured after the read: a slow read must not make a checkpoint look younger.
        now_s = max(now_s, float(self.clock()))
        now = report.at = datetime.fromtimestamp(now_s, UTC)
        self._dirty |= bool(report.bytes_read or report.notes
                            or n_files != len(self.follower.cursors))
        for done in self.tracker.settle(now_s, self.n_ranks, self.timeouts, self.horizon_s):
            self._dirty = True
            report.completed.append(done)
            if done.given_up is not None:  # its age is no barrier time: not in the tail
                log.info("step %d of job %s (%s): %d of %d ranks never finished; no longer "
                         "followed (%s)", done.step, escape_controls(done.job_id),
                         escape_controls(done.tier), done.n_unfinished, done.n_ranks,
                         done.given_up)
                continue
            key = (done.job_id, done.tier)
            q = self.live.setdefault(key, deque(maxlen=self.settings.alerts.max_window()))
            q.append((done.step, done.end_s, done.barrier_s))
            self.metrics.set_last_barrier(done.job_id, done.tier, done.barrier_s)
        self._forget_stale(now_s, report.completed)
        report.inflight = assess_inflight(self.tracker.open_checkpoints(self.leaves),
                                          self.timeouts, self.n_ranks, self.settings.alerts,
                                          now_s=now_s)
        if self.options.evidence:
            self._attach_evidence(report, now_s)
        self._publish(report, now_s)
        if self.options.send:
            report.alerts = self._alert(report, now)
        self._save_state()
        self.metrics.mark_scan(now_s, time.monotonic() - began)
        if self.options.metrics_file is not None:
            write_textfile(self.options.metrics_file, self.metrics.render())
        return report

    def _forget_stale(self, now_s: float, completed: list[Completed]) -> None:
        """Jobs whose newest record is past their staleness horizon leave the live state and
        the metrics (their alerts resolve in the evaluation); ``completed``: this scan's."""
        newest: dict[str, float] = {}
        for (job_id, _), q in self.live.items():
            for _, end_s, _ in q:
                newest[job_id] = max(end_s, newest.get(job_id, end_s))
        for ck in self.tracker.tracked.values():
            newest[ck.job_id] = max(ck.last_record_s, newest.get(ck.job_id, float("-inf")))
        stale = {j for j, t in newest.items() if now_s - t > self.horizon_s(j)}
        for key in [k for k in self.live if k[0] in stale]:
            del self.live[key]
            self.metrics.forget_job(*key)
            self._dirty = True
        for c in completed:  # history given up: its ranks' durations were observed
            if c.given_up is not None and (c.job_id in stale or c.job_id not in newest):
                self.metrics.forget_job(c.job_id, c.tier)

    def _read(self, report: ScanReport, now_s: float) -> None:
        result = self.follower.scan()
        report.bytes_read = result.bytes_read
        report.notes += result.notes
        for note in result.notes:
            log.warning("%s", note)
        for parsed, chunks in _parse_batches(result.chunks, self.settings.ingest):
            if parsed.rejects:
                for chunk in chunks:  # one by one: say which file and line
                    self._warn_rejects(report, chunk, parse_chunk(chunk, self.settings.ingest))
            for frame in parsed.frames.get(CHECKPOINT_STARTS.name, []):
                report.starts += self.tracker.add_starts(frame, now_s)
            for frame in parsed.frames.get(CHECKPOINT_WRITES.name, []):
                report.records += frame.height
                for job_id, tier, seconds in self.tracker.add_writes(frame, now_s):
                    self.metrics.observe_duration(job_id, tier, seconds)

    @staticmethod
    def _warn_rejects(report: ScanReport, chunk: Chunk, parsed: Parsed) -> None:
        if not parsed.rejects:
            return
        first = parsed.rejects[0]
        line = "" if first.line is None else f" line {chunk.first_line + first.line - 1}"
        total = parsed.capped.total
        log.warning("%s%s: %s%s (the nightly ingest quarantines it)",
                    escape_controls(chunk.rel), line, escape_controls(first.reason),
                    f"; {total - 1} more record(s) rejected" if total > 1 else "")
        report.rejected += total

    def _publish(self, report: ScanReport, now_s: float) -> None:
        keys = set(self.tracker.jobs()) | set(self.live) | set(report.inflight)
        for job_id, tier in sorted(keys):
            f = report.inflight.get((job_id, tier))
            self.metrics.set_job(job_id, tier, inflight_s=f.age_s if f else 0.0,
                                 timeout_s=self.timeouts.get(job_id),
                                 unfinished_ranks=f.n_open if f else 0)

    # -- live evidence ------------------------------------------------------------------
    def _attach_evidence(self, report: ScanReport, now_s: float) -> None:
        """Collect a finished evidence, ask for one where a checkpoint reached a new stage
        (one at a time, in a child process: the scan never waits for it), and put what is
        known into the in-flight assessments."""
        self._collect_evidence(wait=False)
        open_keys = {(f.job_id, f.tier, f.step) for f in report.inflight.values()}
        for key in [k for k in self._asked if k not in open_keys]:
            self._asked.pop(key, None)
            self._evidence.pop(key, None)
        for f in sorted(report.inflight.values(), key=lambda f: -f.age_s):
            if f.warning_s is None:
                continue
            # Twice at most per checkpoint (one is a full attribution in a child process):
            # early, so the warning carries it, and at the critical level, with what arrived
            # since.
            stage = (1 if f.level == "critical"
                     else 0 if f.age_s >= self.options.evidence_at * f.warning_s else None)
            key = (f.job_id, f.tier, f.step)
            if stage is None or self._asked.get(key, -1) >= stage or self._pending is not None:
                continue
            request = self._evidence_request(key, now_s)
            if request is None:
                continue
            self._asked[key] = stage
            if not telemetry_exists(self.lake_root, self.raw_dir,
                                    request.start_s - BASELINE_DAYS * 86400.0):
                continue  # nothing to attribute with: no child process
            pool = ProcessPoolExecutor(1, mp_context=get_context("spawn"))
            try:
                self._pending = (key, pool.submit(
                    live_evidence, str(self.lake_root), str(self.raw_dir), request,
                    max_bytes=self.options.evidence_max_bytes))
            finally:
                pool.shutdown(wait=False)
            if self._wait_evidence:
                self._collect_evidence(wait=True)
        for k, f in list(report.inflight.items()):
            text = self._evidence.get((f.job_id, f.tier, f.step))
            if text:
                report.inflight[k] = replace(f, evidence=text)

    def _collect_evidence(self, *, wait: bool) -> None:
        if self._pending is None or not (wait or self._pending[1].done()):
            return
        key, future = self._pending
        self._pending = None
        try:
            text = future.result()
        except (CkptwatchError, OSError, BrokenProcessPool) as exc:
            log.warning("no live evidence for step %d of job %s: %s", key[2],
                        escape_controls(key[0]), escape_controls(str(exc)))
            return
        except Exception as exc:  # noqa: BLE001 - the child's error must not stop the watcher
            log.warning("no live evidence for step %d of job %s: %s: %s", key[2],
                        escape_controls(key[0]), type(exc).__name__,
                        escape_controls(str(exc)))
            return
        if text and text != self._evidence.get(key):
            log.info("live evidence for step %d of job %s: %s", key[2], escape_controls(key[0]),
                     escape_controls(text))
            self._evidence[key] = text

    def _evidence_request(self, key: tuple[str, str, int], now_s: float
                          ) -> EvidenceRequest | None:
        job_id, tier, step = key
        ck = self.tracker.tracked.get((job_id, step))
        if ck is None or not ck.started:
            return None
        ranks = []
        for rank in sorted(set(ck.started) | set(ck.finished)):
            node, target, start = ck.started.get(rank, (None, None, None))
            done = ck.finished.get(rank)
            ranks.append(RankState(rank, node, target, start,
                                   None if done is None else done[0],
                                   None if done is None else done[1]))
        # its baseline is stalls.sql's, computed in the evidence's own connection
        return EvidenceRequest(job_id, tier, step, ck.first_start_s, now_s, tuple(ranks))

    def _checkpoints(self) -> pl.DataFrame:
        """The lake's window plus the checkpoints completed live (live wins for a step)."""
        rows = [{"job_id": j, "tier": t, "step": step,
                 "end_ts": datetime.fromtimestamp(end, UTC), "barrier_s": barrier}
                for (j, t), q in self.live.items() for step, end, barrier in q]
        live = pl.DataFrame(rows, schema=self._window.schema)
        if not live.height:
            return self._window
        lake = self._window.join(live.select("job_id", "step"), on=["job_id", "step"],
                                 how="anti")
        return pl.concat([lake, live])

    def _alert(self, report: ScanReport, now: datetime) -> AlertRun | None:
        jobs = pl.DataFrame({"job_id": list(self.timeouts),
                             "checkpoint_timeout_s": list(self.timeouts.values()),
                             "checkpoint_interval_s": [self.intervals.get(j)
                                                       for j in self.timeouts]},
                            schema={"job_id": pl.String, "checkpoint_timeout_s": pl.Float64,
                                    "checkpoint_interval_s": pl.Float64})
        try:
            run = send_alerts(self.lake_root, self._checkpoints(), jobs, self.settings,
                              self.sinks, now=now, inflight=report.inflight,
                              lock_wait_s=self.options.interval_s)
        except CkptwatchError as exc:
            report.alerts_error = str(exc)
            log.warning("alerts not evaluated this scan: %s", escape_controls(str(exc)))
            return None
        for failure in run.failures:
            log.warning("%s (kept for the next scan)", escape_controls(str(failure)))
        for alert in run.alerts:  # "sent" only in the round's line, where every sink took it
            log.info("%s: %s", alert["status"],
                     escape_controls(alert["annotations"].get("summary", "")))
        if run.alerts:
            (log.warning if run.failures else log.info)("alerts: %s",
                                                        run.summary(" alert(s)"))
        return run

