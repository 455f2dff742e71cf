"""The parse step of an ingest spread over worker processes, its results taken in file order.

Parsing (``read.parse_loaded``: the line loop, the bulk parsers, typing the rows) is most of an
ingest's CPU and is done file group by file group; the groups are independent. A run with more
than ``PARALLEL_BYTES`` to read hands its groups to ``workers`` processes (``spawn``ed: polars
is not safe to fork), which parse them and encode their Parquet parts (``write.encode_parts``),
and takes their results back in the order it gave them, so the files are
written, skipped and reported exactly as a run in one process does: loading (read, hash,
deduplicate) and writing (journal, parts, manifest) stay in the calling process, and a crash of
a worker loses nothing (its groups are parsed again here; the lake is written only here).

At most ``workers + 1`` groups are in flight (each at most ``run.PARSE_BYTES`` of input), so
memory stays bounded by the group size, not the run's. ``CKPTWATCH_INGEST_WORKERS`` (or
``ingest(workers=)``) sets the number: ``1`` parses in this process, ``auto`` (the default)
uses up to ``MAX_AUTO_WORKERS`` of the CPUs this process may run on when the run is large
enough to pay for starting them (about 1.2 CPU s of imports each).
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import signal
import sys
import threading
import time
import types
from collections import deque
from collections.abc import Iterable, Iterator, Sequence
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import replace
from datetime import datetime
from pathlib import Path

from ckptwatch.errors import ConfigError
from ckptwatch.ingest.discover import RawFile
from ckptwatch.ingest.read import LoadedFile, ParsedFile, parse_loaded
from ckptwatch.ingest.write import encode_parts
from ckptwatch.lake.store import Lake
from ckptwatch.settings import IngestSettings, active_ingest, using_ingest

#: The environment variable of the number of parse workers (``auto`` or a positive integer).
WORKERS_ENV = "CKPTWATCH_INGEST_WORKERS"
#: Bytes of files beside a run's largest from which ``auto`` starts workers. Two workers cost ~2.4
#: CPU s to start (imports); below this they can lose: a 78 MB run of node_exporter scrapes
#: took 2.4 s with them, a 72 MB run of perfquery text 4.6 s (5.6 s without); the 291 MB
#: mixed day and the 1.5 GB 512-node day gain (docs/scale.md, "fifth round").
PARALLEL_BYTES = 128 * 2**20
#: Most workers ``auto`` starts (the calling process loads and writes beside them).
MAX_AUTO_WORKERS = 4


def workers_asked(value: int | str | None = None) -> int | None:
    """The number of parse workers asked for: ``value``, else ``$CKPTWATCH_INGEST_WORKERS``;
    None for ``auto`` (or neither given). Raises ``ConfigError`` for anything but ``auto`` or
    a positive integer."""
    if value is None:
        value = os.environ.get(WORKERS_ENV, "").strip() or "auto"
    if isinstance(value, str):
        text = value.strip()
        if text.lower() == "auto":
            return None
        try:
            value = int(text)
        except ValueError:
            raise ConfigError(f"ingest workers (--workers, {WORKERS_ENV}) must be 'auto' or a "
                              f"positive integer (got {text[:40]!r})") from None
    if value < 1:
        raise ConfigError(f"ingest workers (--workers, {WORKERS_ENV}) must be 'auto' or a "
                          f"positive integer (got {value})")
    return value


def usable_cpus() -> int:
    """CPUs this process may run on (its affinity, else the machine's)."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def workers_for(files: Iterable[RawFile], asked: int | None) -> int:
    """Parse workers for a run over ``files``: ``asked``, or (``auto``) up to
    ``MAX_AUTO_WORKERS`` of the usable CPUs when the files beside the largest hold
    ``PARALLEL_BYTES`` or more, else 1 (parse in this process). A file is parsed by one process
    (a large one chunk after chunk), so only the rest can go beside it: a run of one 360 MB
    checkpoint file and an 80 MB one took 11.1-12.0 s with two workers (15.7-16.6 CPU s: their
    start, the frames sent back) and 9.0-9.3 s without (11.5-11.8 CPU s); the 512-node day's
    1.5 GB of many files gains from them (docs/scale.md, "ninth round")."""
    if asked is not None:
        return asked
    cpus = usable_cpus()
    if cpus < 2:
        return 1
    total = largest = 0
    for raw in files:
        try:
            size = raw.path.stat().st_size if raw.kind != "ignored" else 0
        except OSError:
            continue  # the load says why it cannot be read
        total += size
        largest = max(largest, size)
        if total - largest >= PARALLEL_BYTES:
            return min(cpus, MAX_AUTO_WORKERS)
    return 1


#: How often a worker looks whether the run that started it is still there (seconds).
_PARENT_CHECK_S = 0.5


def _start_worker(parent: int) -> None:
    """A worker leaves Ctrl-C to the run that started it (which stops it): no traceback per
    worker on the terminal. It ends when that run does, even killed (``SIGKILL``, the OOM
    killer): its own queues keep their pipes open, so it would wait for work forever, holding
    the run's output open for whoever reads it."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(_PARENT_CHECK_S)
        os._exit(0)  # the run is gone: nothing to hand a result to

    threading.Thread(target=watch, name="ckptwatch-parent-watch", daemon=True).start()


@contextlib.contextmanager
def _main_left_behind() -> Iterator[None]:
    """While a worker starts, ``__main__`` is a blank module: a ``spawn``ed worker re-runs the
    main module of the process that starts it, and the program calling ``ingest`` may be a
    script without an ``if __name__ == "__main__"`` guard (its workers would run it again:
    ingest, write). The worker needs nothing of it (its task is in this module). The swap
    lasts the starting of the process (``Popen``), in the thread that starts it."""
    main = sys.modules.get("__main__")
    sys.modules["__main__"] = types.ModuleType("__main__")
    try:
        yield
    finally:
        if main is not None:
            sys.modules["__main__"] = main


#: The environment variable of polars' allocator (jemalloc, its symbols prefixed ``_rjem_``),
#: which polars sets on import to its own choice (``POLARS_ALLOCATOR``, the user's value
#: appended: later options win), and what a worker gets unless the user set one: freed pages
#: kept 10 s for the next file's frames, where polars returns them after 0.5 s and faults them
#: in again. On the 512-node day's ingest: 2.7 M -> 1.6 M page faults, 11.7 -> 7.1 s of system
#: time (of ~56 CPU s), for ~200 MB more peak RSS (docs/scale.md, "seventh round").
ALLOCATOR_ENV = "_RJEM_MALLOC_CONF"
POLARS_ALLOCATOR = "dirty_decay_ms:500,muzzy_decay_ms:1000"
WORKER_ALLOCATOR = "dirty_decay_ms:10000,muzzy_decay_ms:10000"


@contextlib.contextmanager
def _worker_allocator() -> Iterator[None]:
    """While the workers start, ``ALLOCATOR_ENV`` is ``WORKER_ALLOCATOR``, unless it holds
    something else than polars' own choice (the user's, which wins); this process's
    environment is as it was after."""
    current = os.environ.get(ALLOCATOR_ENV)
    if current not in (None, POLARS_ALLOCATOR):
        yield
        return
    os.environ[ALLOCATOR_ENV] = WORKER_ALLOCATOR
    try:
        yield
    finally:
        if current is None:
            os.environ.pop(ALLOCATOR_ENV, None)
        else:
            os.environ[ALLOCATOR_ENV] = current


def _parse_group(items: Sequence[ParsedFile | LoadedFile], limits: IngestSettings,
                 lake_root: Path, ingested_ts: datetime) -> list[ParsedFile]:
    """``parse_loaded`` in a worker, under the run's limits, each file's parts encoded for the
    lake at ``lake_root`` (``write.encode_parts``: the Parquet encoding is done here too)."""
    lake = Lake(lake_root)
    with using_ingest(limits):
        return [encode_parts(lake, pf, ingested_ts) for pf in parse_loaded(items)]


def _portable(item: ParsedFile | LoadedFile) -> ParsedFile | LoadedFile:
    """``item`` as sent to a worker: the content's hash object (which cannot be pickled, and
    which the parse does not read) left behind."""
    if isinstance(item, LoadedFile):
        return replace(item, content=replace(item.content, sha=None))
    return item


class Parsing:
    """Groups of loaded files parsed in the order given (``submit``), in this process or in
    ``workers`` worker processes; ``notes``: what went wrong with the workers (a worker that
    died: its groups are parsed here instead)."""

    def __init__(self, workers: int = 1) -> None:
        self.workers = workers
        self.notes: list[str] = []
        self._pool: ProcessPoolExecutor | None = None
        self._pending: deque[tuple[list[ParsedFile | LoadedFile],
                                   Future[list[ParsedFile]] | None]] = deque()
        #: the keys of the files in the groups in flight
        self.keys: set[str] = set()
        self._limits = active_ingest()

    def __enter__(self) -> Parsing:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Stop the workers (what is still in flight is dropped: the run stopped)."""
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None
        self.forget()

    def forget(self) -> None:
        """Drop the groups in flight (a run stopped; the workers stay for the next)."""
        self._pending.clear()
        self.keys.clear()

    def _executor(self) -> ProcessPoolExecutor | None:
        """The pool, its workers all started at once (a pool starts one on a submit that
        finds none idle: started later, one could be half-started when another dies, and
        wait for its start forever)."""
        if self._pool is None and self.workers > 1:
            self._pool = ProcessPoolExecutor(self.workers, initializer=_start_worker,
                                             initargs=(os.getpid(),),
                                             mp_context=multiprocessing.get_context("spawn"))
            with _main_left_behind(), _worker_allocator():
                for _ in range(self.workers):  # each finds none idle (they are starting)
                    self._pool.submit(os.getpid)
        return self._pool

    def submit(self, items: Sequence[ParsedFile | LoadedFile], lake: Lake,
               ingested_ts: datetime) -> list[ParsedFile]:
        """Hand a group over; returns the results that are due, in order (in one process: this
        group's, at once; with workers: the oldest group's once ``workers + 1`` are in
        flight, their parts for ``lake`` encoded, ``ingested_ts`` their time)."""
        group = list(items)
        if not group:
            return []
        pool = self._executor()
        if pool is None and not self._pending:
            return parse_loaded(group)
        future: Future[list[ParsedFile]] | None = None
        if pool is not None:
            portable = [_portable(x) for x in group]
            try:
                with _main_left_behind():  # a submit may start a worker
                    future = pool.submit(_parse_group, portable, self._limits, lake.root,
                                         ingested_ts)
            except (BrokenProcessPool, OSError, RuntimeError) as exc:  # a worker died
                self._broken(exc)
        self._pending.append((group, future))
        self.keys.update(x.key for x in group if isinstance(x, LoadedFile))
        out: list[ParsedFile] = []
        while self._pending and (len(self._pending) > self.workers or self._pool is None):
            out += self._take()
        return out

    def drain(self) -> list[ParsedFile]:
        """The results of every group in flight, in order."""
        out: list[ParsedFile] = []
        while self._pending:
            out += self._take()
        return out

    def _take(self) -> list[ParsedFile]:
        group, future = self._pending.popleft()
        for x in group:
            if isinstance(x, LoadedFile):
                self.keys.discard(x.key)
        if future is not None:
            try:
                return future.result()
            except BrokenProcessPool as exc:
                self._broken(exc)
        return parse_loaded(group)

    def _broken(self, exc: BaseException) -> None:
        """A worker died (killed, out of memory): the rest is parsed in this process."""
        if self._pool is None:  # said already
            return
        self.notes.append(f"a parse worker stopped ({exc or type(exc).__name__}); the rest of "
                          "the run was parsed in one process")
        self._pool.shutdown(wait=False, cancel_futures=True)
        self._pool = None
        self.workers = 1
        self._pending = deque((g, None) for g, _ in self._pending)
