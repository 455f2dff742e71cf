"""The parse step of an ingest spread over worker processes, its results taken in file order.

Parsing (``read.parse_loaded``: the line loop, the bulk parsers, typing the rows) is most of an
ingest's CPU and is done file group by file group; the groups are independent. A run with more
than ``PARALLEL_BYTES`` to read hands its groups to ``workers`` processes (``spawn``ed: polars
is not safe to fork), which parse them and encode their Parquet parts (``write.encode_batch``),
and takes their results back in the order it gave them, so the files are
written, skipped and reported exactly as a run in one process does: loading (read, hash,
deduplicate) and writing (journal, parts, manifest) stay in the calling process, and a crash of
a worker loses nothing (its groups are parsed again here; the lake is written only here).

At most ``workers + 1`` groups are in flight (each at most ``IngestSettings.parse_bytes`` of
input), so memory stays bounded by the group size, not the run's; a JSON Lines table over
``table_chunk_bytes`` is in no group: the run streams it itself (``stream``, ``run``).
``IngestSettings.workers`` (``--workers``, ``CKPTWATCH_INGEST_WORKERS``) sets the number: ``1``
parses in this process, ``auto`` (the default) uses up to ``MAX_AUTO_WORKERS`` of the CPUs
this process may run on when the run is large enough to pay for starting them (about 1.2 CPU s
of imports each).
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
from multiprocessing.shared_memory import SharedMemory
from pathlib import Path

from ckptwatch.ingest.discover import RawFile
from ckptwatch.ingest.read import LoadedFile, ParsedFile, parse_loaded
from ckptwatch.ingest.write import batches, encode_batch, plan_batches
from ckptwatch.lake.store import Lake

#: Bytes of files beside a run's largest from which ``auto`` starts workers. Two workers cost ~2.4
#: CPU s to start (imports); below this their start costs about what they save (a run of
#: 70-80 MB of tool text parses within ~1 s either way), and larger runs gain.
PARALLEL_BYTES = 128 * 2**20
#: Most workers ``auto`` starts (the calling process loads and writes beside them).
MAX_AUTO_WORKERS = 4


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
    (a JSON Lines table over ``table_chunk_bytes`` by this one, chunk after chunk, workers or
    not: ``stream``), so only the rest can go beside it: with one large file and a small one,
    workers cost more (their start, the frames sent back) than they save (a 360 MB checkpoint
    file and an 80 MB one: ~25 % slower with two), while many files gain."""
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
#: in again: on a large ingest that saves ~40 % of the page faults and of the system time, for
#: ~200 MB more peak RSS.
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


#: Where a group's bytes are in shared memory (``_Segments``): the segment's name and, per
#: file, (its place in the group, offset, length); None: they travel in the group itself.
Shared = tuple[str, list[tuple[int, int, int]]] | None


def _parse_group(items: Sequence[ParsedFile | LoadedFile], shared: Shared, lake_root: Path,
                 ingested_ts: datetime) -> list[ParsedFile]:
    """``parse_loaded`` in a worker (under the run's limits, which each file carries:
    ``RawFile.limits``), each batch's parts encoded for the lake at ``lake_root``
    (``write.encode_batch``: the Parquet encoding is done here too); the files' bytes first
    taken from shared memory when ``shared`` says where."""
    lake = Lake(lake_root)
    if shared is not None:
        items = _from_shared(items, *shared)
    return [pf for batch in batches(_parse_batched(items))
            for pf in encode_batch(lake, batch, ingested_ts)]


def _parse_batched(items: Sequence[ParsedFile | LoadedFile]) -> list[ParsedFile]:
    """``parse_loaded`` of a group, its write batches marked (``write.plan_batches``, under
    the run's limits, which each file carries)."""
    parsed = parse_loaded(items)
    return plan_batches(parsed, parsed[0].raw.limits) if parsed else parsed


def _from_shared(items: Sequence[ParsedFile | LoadedFile], name: str,
                 spans: list[tuple[int, int, int]]) -> list[ParsedFile | LoadedFile]:
    """``items`` with the bytes of the files ``spans`` lists copied out of segment ``name``
    (the run that started this worker keeps it until the group's result is back)."""
    out = list(items)
    segment = SharedMemory(name=name)
    try:
        buf = segment.buf
        assert buf is not None
        for k, offset, length in spans:
            item = out[k]
            assert isinstance(item, LoadedFile)
            out[k] = replace(item, content=replace(
                item.content, data=bytes(buf[offset:offset + length])))
        del buf  # no view of the segment left: it can close
    finally:
        segment.close()
    return out


_MIB = 1 << 20
#: A group with at least this many bytes of loaded files goes to a worker in shared memory.
SHARE_MIN_BYTES = 1 << 16
#: Segments kept for the next groups at most this large (a larger one is freed after its
#: group: a segment holds its pages, in ``/dev/shm``, until then).
KEEP_SEGMENT_BYTES = 64 << 20
#: Free segments kept at most (the largest: a group in flight per worker, one more being
#: filled, and one to spare); a smaller one beyond them is freed.
KEEP_SEGMENTS = 4


class _Segments:
    """Shared-memory segments that carry the groups' bytes to the workers, reused group after
    group: the bytes are copied in here and out in the worker (~1.3 CPU s for 3.5 GB, a sixth
    of pickling them through the pool's pipe: its send, its reading and copying on the other
    side; a new segment each time costs three times that in page faults). A segment is reserved
    whole when made (``posix_fallocate``): a full ``/dev/shm`` (a container's 64 MB) is an
    ``OSError`` here, and the group goes through the pipe, instead of a ``SIGBUS`` on writing.
    The segments are unlinked by ``close`` (or, the run killed, by multiprocessing's resource
    tracker)."""

    def __init__(self) -> None:
        self.free: list[SharedMemory] = []
        self.used: dict[str, SharedMemory] = {}

    def put(self, group: Sequence[ParsedFile | LoadedFile]) -> tuple[
            list[ParsedFile | LoadedFile], Shared]:
        """``group`` as sent to a worker (``_portable``), its files' bytes in a segment when
        they are ``SHARE_MIN_BYTES`` or more and a segment can be had."""
        sent = [_portable(x) for x in group]
        sizes = [len(x.content.data) if isinstance(x, LoadedFile) else 0 for x in group]
        total = sum(sizes)
        if not total or total < SHARE_MIN_BYTES:
            return sent, None
        try:
            segment = self._segment(total)
        except OSError:  # no room in /dev/shm (or none): the bytes go in the group
            return sent, None
        spans: list[tuple[int, int, int]] = []
        offset = 0
        buf = segment.buf
        assert buf is not None
        for k, (item, size) in enumerate(zip(group, sizes, strict=True)):
            if size:
                assert isinstance(item, LoadedFile)
                buf[offset:offset + size] = item.content.data
                item_sent = sent[k]
                assert isinstance(item_sent, LoadedFile)
                sent[k] = replace(item_sent, content=replace(item_sent.content, data=b""))
                spans.append((k, offset, size))
                offset += size
        self.used[segment.name] = segment
        return sent, (segment.name, spans)

    def _segment(self, size: int) -> SharedMemory:
        """A free segment of at least ``size`` bytes (the smallest), else a new one."""
        fits = [s for s in self.free if s.size >= size]
        if fits:
            best = min(fits, key=lambda s: s.size)
            self.free.remove(best)
            return best
        segment = SharedMemory(create=True, size=-(-size // _MIB) * _MIB)  # a whole MiB: reused
        try:
            if hasattr(os, "posix_fallocate"):
                os.posix_fallocate(segment._fd, 0, segment.size)  # type: ignore[attr-defined]
        except OSError:
            _unlink(segment)
            raise
        return segment

    def release(self, shared: Shared) -> None:
        """The group's segment is no longer read: kept for the next group, or freed."""
        if shared is None or shared[0] not in self.used:
            return
        segment = self.used.pop(shared[0])
        if segment.size > KEEP_SEGMENT_BYTES:
            _unlink(segment)
            return
        self.free.append(segment)
        if len(self.free) > KEEP_SEGMENTS:  # groups grew: the smallest is the least use
            smallest = min(self.free, key=lambda s: s.size)
            self.free.remove(smallest)
            _unlink(smallest)

    def close(self) -> None:
        """Unlink every segment (the workers are stopped: none is read any more)."""
        for segment in [*self.free, *self.used.values()]:
            _unlink(segment)
        self.free, self.used = [], {}


def _unlink(segment: SharedMemory) -> None:
    with contextlib.suppress(OSError):
        segment.close()
        segment.unlink()


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
                                   Future[list[ParsedFile]] | None, Shared]] = deque()
        self._segments = _Segments()
        #: the keys of the files in the groups in flight
        self.keys: set[str] = set()

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
        self._segments.close()

    def forget(self) -> None:
        """Drop the groups in flight (a run stopped; the workers stay for the next)."""
        for _group, future, shared in self._pending:
            if future is None or future.done():
                self._segments.release(shared)
            # else: a worker may still read its segment; close() unlinks it
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
            return _parse_batched(group)
        future: Future[list[ParsedFile]] | None = None
        shared: Shared = None
        if pool is not None:
            portable, shared = self._segments.put(group)
            try:
                with _main_left_behind():  # a submit may start a worker
                    future = pool.submit(_parse_group, portable, shared, lake.root,
                                         ingested_ts)
            except (BrokenProcessPool, OSError, RuntimeError) as exc:  # a worker died
                self._segments.release(shared)
                shared = None
                self._broken(exc)
        self._pending.append((group, future, shared))
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
        group, future, shared = self._pending.popleft()
        for x in group:
            if isinstance(x, LoadedFile):
                self.keys.discard(x.key)
        if future is not None:
            try:
                return future.result()
            except BrokenProcessPool as exc:
                self._broken(exc)
            finally:
                self._segments.release(shared)
        return _parse_batched(group)

    def _broken(self, exc: BaseException) -> None:
        """A worker died (killed, out of memory): the rest is parsed in this process."""
        if self._pool is None:  # said already
            return
        self.notes.append(f"a parse worker stopped ({exc or type(exc).__name__}); the rest of "
                          "the run was parsed in one process")
        self._pool.shutdown(wait=False, cancel_futures=True)
        self._pool = None
        self.workers = 1
        self._pending = deque((g, None, shared) for g, _, shared in self._pending)
