"""Training-side recorder: per-rank checkpoint timings as the input contract's JSON Lines.

Runs inside training processes, so it uses the standard library only (no polars, no pyarrow,
no torch). Two records per rank per checkpoint, with exactly the fields of the README's "Input"
section (checkpoint records): a **start marker** when the rank begins, and the finished record
when it ends::

    from ckptwatch.collect.recorder import CheckpointRecorder

    rec = CheckpointRecorder("/var/log/ckptwatch/checkpoints", tier="pool", target="pool0-t7")
    with rec.checkpoint(step) as ck:
        with ck.phase("open"):
            f = open(path, "wb")
        with ck.phase("write"):
            f.write(blob)
            ck.add_bytes(len(blob))
        with ck.phase("fsync"):
            os.fsync(f.fileno())
        with ck.phase("close"):
            f.close()

Entering ``rec.checkpoint(step)`` appends the start marker at once (``rec.started(step)`` does
the same for code that times its own writes): ``status = "started"``, ``job_id, step, rank,
node, tier, start_time`` and ``target`` (null when unknown), no ``end_time``, no ``bytes``, no
phases. Any records still buffered go out with it, in the same append: a marker that waits in a
buffer would say nothing while the checkpoint hangs. A rank whose marker has no finished record
is *unfinished*: ``ckptwatch watch`` warns while it is open, and the batch views count it.

Leaving the block appends the finished record. A body that raises gives a record with
``status = "error"`` (the exception propagates).

Appends are crash-tolerant and safe with many writers: each flush opens the file with
``O_APPEND``, takes an exclusive ``flock``, starts on a new line if the file does not end with
one (a writer killed mid-line leaves at most one truncated line, which the ingest quarantines),
writes whole lines and fsyncs. Records are buffered (``flush_every``) and flushed at ``close()``
and at interpreter exit; a forked child never flushes its parent's buffer.

Given a directory, the recorder writes ``<dir>/<job_id>-<node>-<YYYY-MM-DD>.jsonl`` (UTC date of
each record's start): files of past days are complete and can be shipped to the raw directory's
``checkpoints/``.
"""

from __future__ import annotations

import atexit
import json
import os
import re
import socket
import sys
import threading
import time
import weakref
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from types import TracebackType
from typing import Any

try:  # POSIX only; without it appends are still O_APPEND whole-buffer writes.
    import fcntl as _fcntl
except ImportError:  # pragma: no cover - Windows
    _fcntl = None  # type: ignore[assignment]

#: The phases of one rank's checkpoint write and their record columns.
PHASES: dict[str, str] = {"open": "open_s", "write": "write_s", "fsync": "fsync_s",
                          "close": "close_s"}
TIERS = ("local", "pool")
STATUSES = ("ok", "error", "timeout")
#: The status of a start marker (``lake.schema.STARTED``; a row of ``checkpoint_starts``).
STARTED = "started"
#: The record's keys, in the order they are written (README "Input": checkpoint records).
FIELDS = ("job_id", "step", "rank", "node", "tier", "start_time", "end_time", "bytes", "target",
          "open_s", "write_s", "fsync_s", "close_s", "status")
#: A start marker's keys, in the order they are written (no end_time, bytes or phases).
MARKER_FIELDS = ("job_id", "step", "rank", "node", "tier", "start_time", "target", "status")

#: Environment variables that name the global rank, most specific first (torchrun/torch
#: elastic, Slurm, Open MPI, MPICH/Intel MPI, then a single-node LOCAL_RANK).
RANK_ENV = ("RANK", "SLURM_PROCID", "OMPI_COMM_WORLD_RANK", "PMI_RANK", "LOCAL_RANK")
#: Environment variables that name the job (ours first, then schedulers and torch elastic).
JOB_ENV = ("CKPTWATCH_JOB_ID", "SLURM_JOB_ID", "PBS_JOBID", "LSB_JOBID", "FLUX_JOB_ID",
           "TORCHELASTIC_RUN_ID")


def default_rank(environ: Mapping[str, str] | None = None) -> int:
    """The global rank from the launcher's environment (``RANK``, ``SLURM_PROCID``, …), else 0."""
    env = os.environ if environ is None else environ
    for name in RANK_ENV:
        value = env.get(name, "").strip()
        if value.isdigit():
            return int(value)
    return 0


def default_job_id(environ: Mapping[str, str] | None = None) -> str | None:
    """The job id from ``CKPTWATCH_JOB_ID`` or the scheduler (``SLURM_JOB_ID``, …), else None."""
    env = os.environ if environ is None else environ
    for name in JOB_ENV:
        value = env.get(name, "").strip()
        if value and value.lower() != "none":  # torch elastic's default run id is "none"
            return value
    return None


def default_node() -> str:
    """This host's name as ``socket.gethostname()`` gives it (``ckptwatch collect`` uses the same,
    so checkpoint records join the node's SMART and fabric data)."""
    return socket.gethostname()


def iso_time(value: datetime | float | int | str) -> str:
    """ISO-8601 with offset: a datetime (naive = UTC), epoch seconds, or an ISO string as is."""
    if isinstance(value, str):
        datetime.fromisoformat(value.replace("Z", "+00:00"))  # validates
        return value
    if isinstance(value, datetime):
        ts = value if value.tzinfo else value.replace(tzinfo=UTC)
    else:
        ts = datetime.fromtimestamp(float(value), tz=UTC)
    return ts.isoformat(timespec="microseconds")


def _epoch(value: datetime | float | int | str) -> float:
    if isinstance(value, str):
        value = datetime.fromisoformat(value.replace("Z", "+00:00"))
    if isinstance(value, datetime):
        return (value if value.tzinfo else value.replace(tzinfo=UTC)).timestamp()
    return float(value)


# --------------------------------------------------------------------------- appends


def append_lines(path: str | os.PathLike[str], lines: Sequence[str], *,
                 fsync: bool = True) -> None:
    """Append whole lines to ``path`` atomically with respect to other writers.

    Each line is one JSON document without a newline; ``"\\n"`` is added. Under an exclusive
    ``flock`` the file's last byte is checked: when an earlier writer died mid-line, a newline is
    written first so that only that truncated line is lost. The data goes out in as few
    ``write()`` calls as the kernel allows (a partial write is continued under the lock), then
    ``fsync`` (and the directory's fsync when the file was created).
    """
    if not lines:
        return
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    created = not target.exists()
    payload = "".join(f"{line}\n" for line in lines).encode("utf-8")
    fd = os.open(target, os.O_RDWR | os.O_APPEND | os.O_CREAT | getattr(os, "O_CLOEXEC", 0),
                 0o644)
    try:
        if _fcntl is not None:
            _fcntl.flock(fd, _fcntl.LOCK_EX)
        try:
            size = os.fstat(fd).st_size
            if size and os.pread(fd, 1, size - 1) != b"\n":
                payload = b"\n" + payload
            view = memoryview(payload)
            while view:
                written = os.write(fd, view)
                view = view[written:]
            if fsync:
                os.fsync(fd)
        finally:
            if _fcntl is not None:
                _fcntl.flock(fd, _fcntl.LOCK_UN)
    finally:
        os.close(fd)
    if created and fsync:
        try:
            dfd = os.open(target.parent, os.O_RDONLY)
        except OSError:
            return
        try:
            os.fsync(dfd)
        except OSError:
            pass  # some file systems refuse fsync on a directory; the data itself is synced
        finally:
            os.close(dfd)


def dumps_record(record: Mapping[str, Any]) -> str:
    """One record as a JSON line (no newline; non-ASCII escaped, so no raw newline can occur)."""
    return json.dumps(record, separators=(",", ":"), allow_nan=False)


def write_records(path: str | os.PathLike[str], records: Iterable[Mapping[str, Any]], *,
                  fsync: bool = True) -> int:
    """Append records (finished ones and start markers, e.g. from
    ``recorder_adapters.parse_megatron_log``) to ``path``.

    Each record is validated as ``CheckpointRecorder.record`` does. Returns the count written.
    """
    lines = [dumps_record(validate_record(dict(r))) for r in records]
    append_lines(path, lines, fsync=fsync)
    return len(lines)


def validate_record(record: dict[str, Any]) -> dict[str, Any]:
    """Check one record against the input contract; returns it with keys in ``FIELDS`` order
    (a start marker, ``status = "started"``: in ``MARKER_FIELDS`` order, without
    ``end_time``, ``bytes`` and phases, which it must not have).

    Raises ValueError naming the field (a bug in the calling code should fail where it is, not
    become a quarantined line the next night).
    """
    unknown = sorted(set(record) - set(FIELDS))
    if unknown:
        raise ValueError(f"unknown record field(s): {', '.join(unknown)} (known: "
                         f"{', '.join(FIELDS)})")
    for name in ("job_id", "node"):
        value = record.get(name)
        if not isinstance(value, str) or not value.strip():
            raise ValueError(f"{name} must be a non-empty string, got {value!r}")
    status = record.setdefault("status", "ok")
    marker = status == STARTED
    for name in ("step", "rank") if marker else ("step", "rank", "bytes"):
        value = record.get(name)
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise ValueError(f"{name} must be an integer >= 0, got {value!r}")
    if record.get("tier") not in TIERS:
        raise ValueError(f"tier must be one of {', '.join(TIERS)}, got {record.get('tier')!r}")
    if not marker and status not in STATUSES:
        raise ValueError(f"status must be one of {', '.join(STATUSES)} (or {STARTED} for a "
                         f"start marker), got {status!r}")
    target = record.get("target")
    if target is not None and not isinstance(target, str):
        raise ValueError(f"target must be a string or None, got {target!r}")
    if marker:
        extra = [name for name in FIELDS if name not in MARKER_FIELDS
                 and record.get(name) is not None]
        if extra:
            raise ValueError(f"a start marker (status {STARTED!r}) has no {', '.join(extra)}: "
                             "those belong to the finished record that follows it")
        if "start_time" not in record:
            raise ValueError("start_time is required")
        record["start_time"] = iso_time(record["start_time"])
        return {name: record.get(name) for name in MARKER_FIELDS}
    for name in ("start_time", "end_time"):
        if name not in record:
            raise ValueError(f"{name} is required")
        record[name] = iso_time(record[name])
    if _epoch(record["end_time"]) < _epoch(record["start_time"]):
        raise ValueError(f"end_time {record['end_time']} is before start_time "
                         f"{record['start_time']}")
    for column in PHASES.values():
        value = record.get(column)
        if value is not None:
            if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
                raise ValueError(f"{column} must be seconds >= 0 or None, got {value!r}")
            record[column] = round(float(value), 6)
    return {name: record.get(name) for name in FIELDS}


# --------------------------------------------------------------------------- recorder


class Checkpoint:
    """One rank's checkpoint in progress; made by ``CheckpointRecorder.checkpoint``."""

    def __init__(self, recorder: CheckpointRecorder, step: int, *, tier: str,
                 target: str | None) -> None:
        self.recorder = recorder
        self.step = step
        self.tier = tier
        self.target = target
        self.bytes = 0
        #: Set to ``"timeout"`` (or ``"error"``) to record that outcome without raising.
        self.status = "ok"
        self.phases: dict[str, float] = {}
        self.record: dict[str, Any] | None = None
        #: The start marker written on entering.
        self.marker: dict[str, Any] | None = None
        self._start_wall = 0.0
        self._start_perf = 0.0

    def __enter__(self) -> Checkpoint:
        self._start_wall = time.time()
        self._start_perf = time.perf_counter()
        # The marker goes out now (with anything buffered): the watcher sees the checkpoint
        # open even if this rank never comes back.
        self.marker = self.recorder.started(self.step, tier=self.tier, target=self.target,
                                            start_time=self._start_wall)
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        elapsed = time.perf_counter() - self._start_perf
        # The end is start + a monotonic duration: a clock step cannot make end < start.
        status = "error" if exc_type is not None else self.status
        self.record = self.recorder.record(
            step=self.step, tier=self.tier, target=self.target, bytes=self.bytes,
            start_time=self._start_wall, end_time=self._start_wall + elapsed, status=status,
            **{PHASES[name]: seconds for name, seconds in self.phases.items()})
        if status != "ok":
            self.recorder.flush()  # the process may be about to die

    @contextmanager
    def phase(self, name: str) -> Iterator[None]:
        """Time one phase (``open``, ``write``, ``fsync``, ``close``); repeated phases add up."""
        if name not in PHASES:
            raise ValueError(f"unknown phase {name!r} (one of {', '.join(PHASES)})")
        t0 = time.perf_counter()
        try:
            yield
        finally:
            self.phases[name] = self.phases.get(name, 0.0) + time.perf_counter() - t0

    def add_bytes(self, n: int) -> None:
        """Count bytes this rank wrote for this checkpoint."""
        if isinstance(n, bool) or not isinstance(n, int) or n < 0:
            raise ValueError(f"bytes must be an integer >= 0, got {n!r}")
        self.bytes += n


class CheckpointRecorder:
    """Writes one JSON Lines record per rank per checkpoint (see the module docstring).

    ``path`` is a directory (per-day files ``<job_id>-<node>-<date>.jsonl`` inside) or a file
    ending in ``.jsonl``. ``job_id``, ``rank`` and ``node`` default to the launcher's environment
    (``default_job_id``, ``default_rank``, ``default_node``). ``flush_every`` records are
    buffered before an append (1 = every record is durable when its checkpoint ends). Keep 1
    where ``ckptwatch watch`` follows the files: a finished record held in the buffer until
    the next checkpoint's start marker flushes it looks, to the watcher, like a rank still open.
    """

    def __init__(self, path: str | os.PathLike[str], *, job_id: str | None = None,
                 rank: int | None = None, node: str | None = None, tier: str = "local",
                 target: str | None = None, flush_every: int = 1, fsync: bool = True) -> None:
        job = job_id if job_id is not None else default_job_id()
        if not job:
            raise ValueError("no job_id: pass job_id= or set CKPTWATCH_JOB_ID (SLURM_JOB_ID and "
                             "other scheduler variables are read too)")
        self.job_id = str(job)
        self.rank = default_rank() if rank is None else rank
        self.node = node or default_node()
        if tier not in TIERS:
            raise ValueError(f"tier must be one of {', '.join(TIERS)}, got {tier!r}")
        if isinstance(self.rank, bool) or not isinstance(self.rank, int) or self.rank < 0:
            raise ValueError(f"rank must be an integer >= 0, got {self.rank!r}")
        if flush_every < 1:
            raise ValueError(f"flush_every must be >= 1, got {flush_every}")
        self.tier = tier
        self.target = target
        self.flush_every = flush_every
        self.fsync = fsync
        raw = os.fspath(path)
        self.path = Path(raw)
        self.is_dir = not (self.path.suffix in (".jsonl", ".ndjson") and not self.path.is_dir())
        self._buffer: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        self._pid = os.getpid()
        self._closed = False
        _LIVE.add(self)

    # ------------------------------------------------------------------ records

    def file_for(self, record: Mapping[str, Any]) -> Path:
        """The file a record goes to (per UTC day of its start when ``path`` is a directory)."""
        if not self.is_dir:
            return self.path
        day = datetime.fromtimestamp(_epoch(record["start_time"]), tz=UTC).date().isoformat()
        name = _safe_name(f"{self.job_id}-{self.node}-{day}.jsonl")
        return self.path / name

    def checkpoint(self, step: int, *, target: str | None = None,
                   tier: str | None = None) -> Checkpoint:
        """A context manager timing this rank's write of checkpoint ``step``: entering it
        writes the start marker (``started``), leaving it the finished record."""
        if isinstance(step, bool) or not isinstance(step, int) or step < 0:
            raise ValueError(f"step must be an integer >= 0, got {step!r}")
        return Checkpoint(self, step, tier=tier or self.tier,
                          target=target if target is not None else self.target)

    def started(self, step: int, *, start_time: datetime | float | str | None = None,
                tier: str | None = None, target: str | None = None,
                rank: int | None = None) -> dict[str, Any]:
        """Append the start marker of this rank's checkpoint ``step`` now, with every record
        still buffered (one locked append per file, fsynced): ``status = "started"``, no
        ``end_time`` or ``bytes``. ``start_time`` defaults to now; ``tier``, ``target`` and
        ``rank`` to the recorder's. Returns the marker; its finished record follows
        (``record``, or leaving ``checkpoint``)."""
        if isinstance(step, bool) or not isinstance(step, int) or step < 0:
            raise ValueError(f"step must be an integer >= 0, got {step!r}")
        marker = validate_record({
            "job_id": self.job_id, "step": step, "rank": self.rank if rank is None else rank,
            "node": self.node, "tier": tier or self.tier,
            "target": target if target is not None else self.target,
            "start_time": time.time() if start_time is None else start_time,
            "status": STARTED})
        self._add(marker, flush=True)
        return marker

    def record(self, **fields: Any) -> dict[str, Any]:
        """Add one finished record; missing identity fields come from the recorder.

        ``start_time``/``end_time`` may be datetimes, epoch seconds or ISO strings; phase
        seconds are ``open_s``, ``write_s``, ``fsync_s``, ``close_s``. Returns the record.
        (``status = "started"`` makes it a start marker: prefer ``started``, which writes it
        at once.)
        """
        base: dict[str, Any] = {"job_id": self.job_id, "rank": self.rank, "node": self.node,
                                "tier": self.tier, "target": self.target, "bytes": 0}
        if fields.get("status") == STARTED:
            del base["bytes"]
        base.update({k: v for k, v in fields.items() if v is not None or k not in base})
        record = validate_record(base)
        self._add(record, flush=record["status"] == STARTED)
        return record

    def _add(self, record: dict[str, Any], *, flush: bool) -> None:
        """Buffer ``record``; flush when the buffer is full or ``flush`` (a marker)."""
        with self._lock:
            if self._closed:
                raise ValueError("recorder is closed")
            self._adopt_pid()
            self._buffer.append(record)
            full = flush or len(self._buffer) >= self.flush_every
        if full:
            self.flush()

    def flush(self) -> None:
        """Append the buffered records (one locked append per file) and fsync."""
        with self._lock:
            self._adopt_pid()
            pending, self._buffer = self._buffer, []
        by_file: dict[Path, list[dict[str, Any]]] = {}
        for record in pending:
            by_file.setdefault(self.file_for(record), []).append(record)
        files = list(by_file.items())
        for i, (path, records) in enumerate(files):
            try:
                append_lines(path, [dumps_record(r) for r in records], fsync=self.fsync)
            except OSError:
                # Keep what was not written (this file's and the rest) for the next flush.
                unwritten = [r for _, rs in files[i:] for r in rs]
                with self._lock:
                    self._buffer[:0] = unwritten
                raise

    def close(self) -> None:
        """Flush and refuse further records (also run at interpreter exit)."""
        if self._closed:
            return
        self.flush()
        self._closed = True
        _LIVE.discard(self)

    def __enter__(self) -> CheckpointRecorder:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    def _adopt_pid(self) -> None:
        # A forked child inherits the parent's buffer; those records are the parent's to write.
        if os.getpid() != self._pid:
            self._pid = os.getpid()
            self._buffer = []


_UNSAFE = re.compile(r"[^A-Za-z0-9._@+-]")


def _safe_name(name: str) -> str:
    return _UNSAFE.sub("_", name)


_LIVE: weakref.WeakSet[CheckpointRecorder] = weakref.WeakSet()


@atexit.register
def _flush_all_at_exit() -> None:
    for recorder in list(_LIVE):
        try:
            recorder.close()
        except OSError as exc:  # say so: these records are lost
            print(f"ckptwatch recorder: could not write {len(recorder._buffer)} record(s) to "
                  f"{recorder.path} at exit: {exc}", file=sys.stderr)


__all__ = ["CheckpointRecorder", "Checkpoint", "append_lines", "default_job_id", "default_node",
           "default_rank", "dumps_record", "iso_time", "validate_record", "write_records",
           "FIELDS", "MARKER_FIELDS", "PHASES", "STARTED", "STATUSES", "TIERS"]
