"""The Parquet lake: hive partitions by date, atomic part writes, manifest, quarantine, lock.

Layout::

    LAKE/<table>/date=YYYY-MM-DD/part-<filekey>-<hash>.parquet   zstd, canonical schema
    LAKE/<table>/date=1970-01-01/part-schema.parquet             zero rows: fixes the schema
    LAKE/_manifest/<filekey>.json                                one per ingested source file
    LAKE/_inflight/<filekey>.json                                parts being written (journal)
    LAKE/.lock                                                   flock held by a running ingest

A source file is committed when its manifest entry exists. Before its parts are written, the
part names go to an in-flight journal; a run that finds a journal entry (a crash) deletes those
parts first, so a rerun ends with exactly the rows of one clean run. A write that fails in
process (disk full, permission denied, Ctrl-C) is rolled back at once (``rollback``), so the
lake is left as it was before that file. Paths come from dates and hashes only, never from
input text; ``PART_PATH`` is checked for every part written and every part a rollback deletes.
See RELIABILITY.md for the guarantees and the tests that prove them.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import errno
import fcntl
import hashlib
import json
import os
import re
import shutil
import sys
import time
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import polars as pl
import pyarrow as pa
import pyarrow.compute  # noqa: F401 - ``Table.cast`` (``write_part``) needs it: loaded
import pyarrow.parquet as pq  # here, not lazily inside the first commit of a run (~0.1 s)

from ckptwatch.errors import LakeError, LakeLockedError
from ckptwatch.lake.schema import DERIVED_DIR, DERIVED_TABLES, TABLES, Table

SCHEMA_PARTITION = "date=1970-01-01"
SCHEMA_PART = "part-schema.parquet"
MANIFEST_DIR = "_manifest"
INFLIGHT_DIR = "_inflight"
LOCK_FILE = ".lock"
#: Every path a part may have, relative to the lake: the only names rollback will delete.
PART_PATH = re.compile(r"[a-z_]+/date=\d{4}-\d{2}-\d{2}/part-[A-Za-z0-9_-]{1,80}\.parquet")


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


#: fsyncs issued at once by ``_fsync_files``: the file system's journal (ext4's jbd2, XFS's log)
#: commits fsyncs that wait together in one commit, so n files cost about one fsync, not n.
FSYNC_THREADS = 8


def _fsync_file(path: Path) -> None:
    with open(path, "rb+") as fh:
        os.fsync(fh.fileno())


def _fsync_files(paths: Sequence[Path]) -> None:
    """fsync every file of ``paths`` (concurrently when there are several); the first failure
    is raised once all have finished."""
    if len(paths) <= 1:
        for p in paths:
            _fsync_file(p)
        return
    with ThreadPoolExecutor(min(FSYNC_THREADS, len(paths))) as pool:
        futures = [pool.submit(_fsync_file, p) for p in paths]
    for f in futures:
        f.result()


def _fsync_dirs(paths: Sequence[Path]) -> None:
    """fsync each distinct directory of ``paths`` once (concurrently when there are several)."""
    dirs = list(dict.fromkeys(paths))
    if len(dirs) <= 1:
        for d in dirs:
            _fsync_dir(d)
        return
    with ThreadPoolExecutor(min(FSYNC_THREADS, len(dirs))) as pool:
        futures = [pool.submit(_fsync_dir, d) for d in dirs]
    for f in futures:
        f.result()


def _errno(exc: OSError) -> int | None:
    """The errno of an OSError, also when pyarrow only names it in the message."""
    if exc.errno is not None:
        return exc.errno
    m = re.search(r"\[errno (\d+)\]", str(exc), re.IGNORECASE)
    if m:
        return int(m.group(1))
    text = str(exc).lower()
    if "no space left" in text:
        return errno.ENOSPC
    if "permission denied" in text:
        return errno.EACCES
    if "read-only file system" in text:
        return errno.EROFS
    return None


def _os_error(exc: OSError, what: Path) -> LakeError:
    code = _errno(exc)
    if code in (errno.ENOSPC, errno.EDQUOT):
        hint = "the disk is full; free space and rerun"
    elif code in (errno.EACCES, errno.EPERM):
        hint = "permission denied; run as a user that can write the lake"
    elif code == errno.EROFS:
        hint = "the file system is read-only; remount it read-write or use another --lake"
    else:
        hint = " ".join((exc.strerror or str(exc)).split())
    return LakeError(f"cannot write {what}: {hint}")


#: The compression of every Parquet part.
PART_COMPRESSION = "zstd"
#: String columns that keep min/max statistics in a part: the hosts (``derived.HOST_COLUMNS``:
#: the counter deltas batch a day's parts by their footers' host range) and jobs (a query of
#: one node or job skips the other files' parts whole). Other strings keep none: computing a
#: string column's statistics was a quarter of a part's encode, and a part holds every counter
#: name, so their range never skips one.
STAT_STRINGS = frozenset({"node", "target", "job_id"})


def _write_parquet(table: pa.Table, where: Any) -> None:
    """Write ``table`` as one Parquet part: zstd, dictionary-encoded strings (only: a
    dictionary of timestamps or floats costs time and saves nothing), statistics on every
    non-string column and on ``STAT_STRINGS``. Every part of the lake is written here."""
    strings = [f.name for f in table.schema if pa.types.is_string(f.type)
               or pa.types.is_large_string(f.type)]
    pq.write_table(table, where, compression=PART_COMPRESSION, use_dictionary=strings or False,
                   write_statistics=[f.name for f in table.schema
                                     if f.name not in strings or f.name in STAT_STRINGS]
                   or False)


def fsync_file(path: Path) -> None:
    """fsync one written file (opened read-only: a file another step wrote and closed)."""
    with open(path, "rb") as fh:
        os.fsync(fh.fileno())


def replace_dir(new: Path, path: Path, old: Path | None = None) -> None:
    """Rename directory ``new`` to ``path``, replacing it, and fsync their parent. ``old``: where
    the replaced directory goes first (removed after; a crash in between leaves ``path``
    without rows, never half of them); None: it is removed before the rename."""
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)
    if path.exists():
        if old is None:
            shutil.rmtree(path)
        else:
            old.parent.mkdir(parents=True, exist_ok=True)
            os.replace(path, old)
    path.parent.mkdir(parents=True, exist_ok=True)
    os.replace(new, path)
    _fsync_dir(path.parent)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` via a temp file, fsync and rename."""
    tmp = path.with_name(f".{path.name}.tmp")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(tmp, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
        _fsync_dir(path.parent)
    except BaseException as exc:  # noqa: BLE001 - no temp file left behind, even on Ctrl-C
        with contextlib.suppress(OSError):
            tmp.unlink()
        if isinstance(exc, OSError):
            raise _os_error(exc, path) from exc
        raise


def atomic_write_table(path: Path, table: pa.Table) -> None:
    """Write an Arrow table as zstd Parquet via temp + fsync + rename."""
    tmp = path.with_name(f".{path.name}.tmp")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        _write_parquet(table, tmp)
        with open(tmp, "rb+") as fh:
            os.fsync(fh.fileno())
        os.replace(tmp, path)
        _fsync_dir(path.parent)
    except BaseException as exc:  # noqa: BLE001 - no temp file left behind, even on Ctrl-C
        with contextlib.suppress(OSError):
            tmp.unlink()
        if isinstance(exc, OSError):
            raise _os_error(exc, path) from exc
        raise


def _has_schema(path: Path, schema: pa.Schema) -> bool:
    """True when the Parquet file ``path`` has ``schema``'s columns (names and types, in
    order)."""
    try:
        found = pq.read_schema(path)
    except (OSError, pa.ArrowException):
        return False
    return [(f.name, f.type) for f in found] == [(f.name, f.type) for f in schema]


def part_table(table: Table, rows: pl.DataFrame) -> pa.Table:
    """A part's rows as Arrow with the table's canonical schema (as written)."""
    return rows.to_arrow().select(table.schema.names).cast(table.schema)


def encode_part(table: Table, rows: pl.DataFrame) -> bytes:
    """A part's Parquet file as bytes, exactly as ``atomic_write_many`` writes ``rows`` (a
    parse worker encodes its parts: the run's process only writes them)."""
    sink = pa.BufferOutputStream()
    _write_parquet(part_table(table, rows), sink)
    return bytes(sink.getvalue())


def atomic_write_many(items: Sequence[tuple[Path, bytes | pa.Table]]) -> None:
    """Write several files atomically: each to a temp file (bytes as they are, an Arrow table
    as zstd Parquet), then all temp files fsynced together, renamed, and each directory
    fsynced once. Every file is durable and whole at its name when this returns, as after one
    ``atomic_write_bytes``/``atomic_write_table`` each; a failure removes the temp files (the
    files renamed before it stay: the caller's journal names them) and raises ``LakeError``
    naming the file."""
    if not items:
        return
    tmps: list[tuple[Path, Path]] = []
    what = items[0][0]  # named in the error: the file, or the directory of several
    many = items[0][0].parent if len(items) > 1 else items[0][0]
    try:
        for path, data in items:
            what = path
            tmp = path.with_name(f".{path.name}.tmp")
            path.parent.mkdir(parents=True, exist_ok=True)
            tmps.append((tmp, path))
            if isinstance(data, bytes):
                with open(tmp, "wb") as fh:
                    fh.write(data)
            else:
                _write_parquet(data, tmp)
        what = many
        _fsync_files([tmp for tmp, _ in tmps])
        for tmp, path in tmps:
            what = path
            os.replace(tmp, path)
        what = many
        _fsync_dirs([path.parent for _, path in tmps])
    except BaseException as exc:  # noqa: BLE001 - no temp file left behind, even on Ctrl-C
        for tmp, _ in tmps:
            with contextlib.suppress(OSError):
                tmp.unlink()
        if isinstance(exc, OSError):
            raise _os_error(exc, what) from exc
        raise


def _uncommitted_parts(journal: Path, committed: set[str]
                       ) -> tuple[list[Any] | None, list[str]]:
    """The parts a journal entry names that belong to no committed file: all its parts (one
    file's entry, ``begin``), or those of its files without a manifest entry (a batch's,
    ``begin_batch``; None when every one of its files is committed); and the committed files
    to roll back with them: those of a batch whose files share parts (``shared``), all of
    whose parts go unless all of its files are committed. A damaged entry names none."""
    try:
        data = json.loads(journal.read_text())
        files = data.get("files")
        if isinstance(files, dict):
            if all(k in committed for k in files):
                return None, []
            if data.get("shared") is True:
                parts = data.get("parts", [])
                return (parts if isinstance(parts, list) else [],
                        [k for k in files if isinstance(k, str) and k in committed])
            return [p for k, ps in files.items() if k not in committed
                    and isinstance(ps, list) for p in ps], []
        parts = data.get("parts", [])
    except (ValueError, AttributeError, UnicodeDecodeError):
        return [], []
    return (parts if isinstance(parts, list) else []), []


@dataclass(frozen=True)
class ManifestEntry:
    """One committed source file."""

    key: str
    path: str
    size_bytes: int
    ingested_ts: str
    rows: dict[str, int]
    quarantined: int
    parts: list[str]


class Lake:
    """A lake directory: paths, schema stubs, manifest, journal, lock and part writes."""

    def __init__(self, root: Path | str) -> None:
        self.root = Path(root)

    def _check_root(self) -> None:
        """A lake path that exists must be a directory (a regular file there is a typo)."""
        if self.root.exists() and not self.root.is_dir():
            raise LakeError(f"--lake {self.root} is a file, not a directory: name a directory "
                            "(it is created if missing)")

    # -- layout -------------------------------------------------------------------------
    def table_dir(self, table: str) -> Path:
        """Directory of one table."""
        return self.root / table

    def glob(self, table: str) -> str:
        """Glob of every part of ``table`` (for DuckDB ``read_parquet``)."""
        return str(self.root / table / "*" / "*.parquet")

    def days(self, table: str) -> list[dt.date]:
        """The days of ``table``'s partitions that hold data parts, oldest first (the schema
        stub's partition is not a day of data)."""
        found = []
        for d in self.table_dir(table).glob("date=*"):
            if d.name != SCHEMA_PARTITION and any(d.glob("*.parquet")):
                with contextlib.suppress(ValueError):  # not a partition this lake wrote
                    found.append(dt.date.fromisoformat(d.name.removeprefix("date=")))
        return sorted(found)

    def init(self) -> None:
        """Create the lake and a zero-row schema part per table (idempotent).

        ``_manifest/`` is made last: ``exists()`` (what queries check) is then true only for a
        lake whose every table can be read, even if a first run was killed during ``init``.
        """
        self._check_root()
        try:
            self.root.mkdir(parents=True, exist_ok=True)
            (self.root / INFLIGHT_DIR).mkdir(exist_ok=True)
        except OSError as exc:
            raise _os_error(exc, self.root) from exc
        self.add_missing_tables()
        try:
            (self.root / MANIFEST_DIR).mkdir(exist_ok=True)
        except OSError as exc:
            raise _os_error(exc, self.root) from exc

    def add_missing_tables(self) -> None:
        """Write the zero-row schema part of every table that has none (idempotent).

        A lake made by an older version lacks the tables added since (``checkpoint_starts``);
        queries call this so that such a lake reads as having them, empty. The derived tables
        (``LAKE/derived/``, ``ckptwatch.lake.derived``) get theirs too, and one of another
        layout is rewritten: ``derived_counter_deltas`` reads before any refresh, and reads its
        parts without ``union_by_name``, so its columns come from the stub (the days of another
        layout are stale, never read, until the next refresh rebuilds them).
        """
        missing = [(stub, t.schema.empty_table()) for t in TABLES.values()
                   if not (stub := self.table_dir(t.name) / SCHEMA_PARTITION / SCHEMA_PART)
                   .exists()]
        for name, schema in DERIVED_TABLES.items():
            stub = self.root / DERIVED_DIR / name / SCHEMA_PARTITION / SCHEMA_PART
            if not stub.exists() or not _has_schema(stub, schema):
                missing.append((stub, schema.empty_table()))
        atomic_write_many(missing)  # fsynced together: one journal commit, not one a stub

    def exists(self) -> bool:
        """True when ``init`` has run here."""
        return (self.root / MANIFEST_DIR).is_dir()

    # -- lock ---------------------------------------------------------------------------
    @contextlib.contextmanager
    def lock(self, wait_s: float = 600.0, name: str = LOCK_FILE,
             what: str = "another run") -> Iterator[None]:
        """Exclusive lock for writers. A killed holder's lock is released by the kernel.

        The lock is an ``flock`` on ``LAKE/.lock``; the file's text (who holds it) is only for
        the messages, so a stale file left by a killed run blocks nothing. A run that has to
        wait says so once on stderr (who holds the lock, how long it waits at most); with
        ``wait_s`` 0 it does not wait. ``name``: another lock file of the lake (the alert
        state's, the watcher's), independent of the writers' lock; ``what``: who holds it, for
        the messages.
        """
        path = self.root / name
        self._check_root()
        try:
            self.root.mkdir(parents=True, exist_ok=True)
            fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as exc:
            raise _os_error(exc, path) from exc
        deadline = time.monotonic() + wait_s
        told = False
        try:
            while True:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    holder = os.pread(fd, 200, 0).decode(errors="replace").strip()
                    if time.monotonic() >= deadline:
                        raise LakeLockedError(
                            f"lake {self.root} is locked by {what} ({holder or 'unknown'});"
                            f" waited {wait_s:.0f} s — retry when it finishes") from None
                    if not told:  # once: a wait of up to wait_s is not silent
                        told = True
                        sys.stderr.write(f"ckptwatch: lake {self.root} is locked by {what} "
                                         f"({holder or 'unknown'}); waiting up to {wait_s:g} s "
                                         "for it to finish\n")
                        sys.stderr.flush()
                    time.sleep(0.2)
            with contextlib.suppress(OSError):  # who holds it: informative only (disk full)
                os.ftruncate(fd, 0)
                os.pwrite(fd, f"pid {os.getpid()} since "
                          f"{datetime.now(UTC):%Y-%m-%dT%H:%M:%SZ}".encode(), 0)
            yield
        finally:
            with contextlib.suppress(OSError):
                fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)

    # -- manifest -----------------------------------------------------------------------
    def manifest_keys(self) -> set[str]:
        """Keys of every committed source file."""
        d = self.root / MANIFEST_DIR
        if not d.is_dir():
            return set()
        return {p.stem for p in d.glob("*.json")}

    def manifest(self) -> list[ManifestEntry]:
        """Every committed source file's entry."""
        out = []
        for p in sorted((self.root / MANIFEST_DIR).glob("*.json")):
            try:
                out.append(ManifestEntry(**json.loads(p.read_text())))
            except (ValueError, TypeError) as exc:
                raise LakeError(f"corrupt manifest entry {p}: {exc}; delete it and rerun "
                                "the ingest to re-read that file") from exc
        return out

    def commit(self, entry: ManifestEntry) -> None:
        """Record a source file as ingested (manifest last), then drop its journal entry."""
        atomic_write_bytes(self.root / MANIFEST_DIR / f"{entry.key}.json",
                           json.dumps(entry.__dict__, sort_keys=True).encode())
        with contextlib.suppress(FileNotFoundError):
            (self.root / INFLIGHT_DIR / f"{entry.key}.json").unlink()

    def begin(self, key: str, parts: list[str]) -> None:
        """Journal the parts about to be written for source file ``key``."""
        atomic_write_bytes(self.root / INFLIGHT_DIR / f"{key}.json",
                           json.dumps({"key": key, "parts": parts}).encode())

    def rollback(self, key: str, parts: list[str]) -> None:
        """Undo a file whose write failed in this process: its manifest entry (if the failure
        came after it), its parts, then its journal entry. Best effort: what cannot be removed
        now stays journalled, and the next run's ``recover`` removes it."""
        self.rollback_batch(key, {key: parts})  # a file is a batch of one

    def _remove_parts(self, parts: list[str]) -> None:
        """Delete journalled parts and their temp files, and partitions left empty. A name
        that is not a part path of this lake (a damaged journal) is left alone."""
        for rel in parts:
            if not isinstance(rel, str) or not PART_PATH.fullmatch(rel):
                continue
            path = self.root / rel
            for p in (path, path.with_name(f".{path.name}.tmp")):
                with contextlib.suppress(FileNotFoundError):
                    p.unlink()
            with contextlib.suppress(OSError):  # only succeeds when the partition is empty
                path.parent.rmdir()

    def _uncommit(self, keys: list[str]) -> None:
        """Remove the manifest entries of ``keys`` (file keys: hex digests, never a path),
        durably: their files are read again by the next run."""
        for k in keys:
            if re.fullmatch(r"[0-9a-f]{64}", k):
                for name in (f".{k}.json.tmp", f"{k}.json"):
                    with contextlib.suppress(FileNotFoundError):
                        (self.root / MANIFEST_DIR / name).unlink()
        _fsync_dir(self.root / MANIFEST_DIR)

    def recover(self) -> int:
        """Roll back the parts of source files whose ingest was interrupted; returns count.

        Only names of the lake's own part layout (``PART_PATH``) are ever deleted, whatever a
        journal entry says, so a damaged journal cannot reach outside the lake.
        """
        d = self.root / INFLIGHT_DIR
        committed = self.manifest_keys()
        n = 0
        for p in sorted(d.glob("*.json")) if d.is_dir() else []:
            if p.stem in committed:  # killed between manifest write and journal removal
                p.unlink()
                continue
            parts, uncommit = _uncommitted_parts(p, committed)
            if parts is None:  # a batch killed after its last manifest entry: all committed
                p.unlink()
                continue
            if uncommit:  # a batch of shared parts, killed half way through its commit
                self._uncommit(uncommit)
                committed.difference_update(uncommit)
            self._remove_parts(parts)
            p.unlink()
            n += 1
        for tmp in [*self.root.glob("*/*/.*.tmp"), *self.root.glob("_*/.*.tmp")]:
            with contextlib.suppress(FileNotFoundError):
                tmp.unlink()
        return n

    # -- batches of files ---------------------------------------------------------------
    # A batch is several source files written as one journal entry and one round of fsyncs
    # (``ingest.write.write_files``). Each file stays its own transaction, committed by its
    # own manifest entry: the journal lists every file's parts under its key, and ``recover``
    # deletes the parts of the files with no manifest entry only. Why a kill (or a power cut)
    # at any point loses and duplicates nothing:
    # 1. the journal is durable (``atomic_write_bytes``) before any part of the batch is
    #    renamed into view: every part a query may see is named by a journal or a manifest;
    # 2. every part's bytes and rename are durable (``atomic_write_many``: temp files fsynced,
    #    renamed, their directories fsynced) before any manifest entry of the batch is renamed
    #    into place: a file with a manifest entry has all its rows;
    # 3. the manifest entries are durable before the journal goes (same): a crash between
    #    leaves a journal whose files are all committed, and ``recover`` keeps their parts;
    # 4. a file whose manifest entry did not land (killed half way through the renames) has
    #    its parts removed by ``recover`` and is read again by the rerun, whole.
    # So after any crash each file is in the lake once, whole, or not at all, as with one
    # journal entry per file; only the number of fsyncs differs (about 2 per file, not 6).
    # A batch whose files share parts (``shared``: a part holds the rows of several of them)
    # is one transaction on recovery: a crash before its last manifest entry rolls back every
    # file of it, the committed ones' manifest entries first, then its parts (step 4 for all
    # of its files), and the rerun reads them all again.
    def begin_batch(self, key: str, files: dict[str, list[str]], shared: bool = False) -> None:
        """Journal the parts about to be written for several source files (by file key);
        ``shared``: the files share parts (a part may be named under several of them)."""
        atomic_write_bytes(self.root / INFLIGHT_DIR / f"{key}.json", json.dumps(
            {"key": key, "parts": list(dict.fromkeys(p for ps in files.values() for p in ps)),
             "files": files, **({"shared": True} if shared else {})}).encode())

    def write_parts(self, parts: Sequence[tuple[str, Table, pl.DataFrame | bytes]]) -> None:
        """Write several parts (relative path, table, rows; or the part's Parquet bytes,
        ``encode_part``) with their tables' canonical schemas, durable together
        (``atomic_write_many``)."""
        atomic_write_many([(self.root / rel, rows if isinstance(rows, bytes)
                            else part_table(table, rows)) for rel, table, rows in parts])

    def commit_batch(self, key: str, entries: Sequence[ManifestEntry]) -> None:
        """Record the files of batch ``key`` as ingested (their manifest entries, durable
        together), then drop the batch's journal entry."""
        atomic_write_many([(self.root / MANIFEST_DIR / f"{e.key}.json",
                            json.dumps(e.__dict__, sort_keys=True).encode()) for e in entries])
        with contextlib.suppress(FileNotFoundError):
            (self.root / INFLIGHT_DIR / f"{key}.json").unlink()

    def rollback_batch(self, key: str, files: dict[str, list[str]]) -> None:
        """``rollback`` of every file of batch ``key`` (manifest entries, parts, then the
        batch's journal entry); best effort, as ``rollback``."""
        try:
            for k, parts in files.items():
                for name in (f".{k}.json.tmp", f"{k}.json"):
                    with contextlib.suppress(FileNotFoundError):
                        (self.root / MANIFEST_DIR / name).unlink()
                self._remove_parts(parts)
            for name in (f".{key}.json.tmp", f"{key}.json"):
                with contextlib.suppress(FileNotFoundError):
                    (self.root / INFLIGHT_DIR / name).unlink()
        except OSError:
            pass  # the journal entry is still there: recover() finishes the job

    # -- parts --------------------------------------------------------------------------
    def plan_parts(self, key: str, table: Table, frame: pl.DataFrame) -> list[
            tuple[str, pl.DataFrame]]:
        """Split ``frame`` by its date partition: [(relative part path, rows)]."""
        col = table.partition_column
        groups: list[tuple[Any, pl.DataFrame]]
        lo, hi = frame[col].min(), frame[col].max()
        if (isinstance(lo, datetime) and isinstance(hi, datetime) and lo.date() == hi.date()
                and 1000 <= lo.year <= 9999 and not frame[col].null_count()):
            groups = [(lo.date().isoformat(), frame)]  # one day (the usual file): no split
        else:
            dated = frame.with_columns(pl.col(col).dt.strftime("%Y-%m-%d").alias("__date"))
            groups = [(date, rows.drop("__date")) for (date,), rows in sorted(
                dated.group_by("__date"), key=lambda g: str(g[0][0]))]
        out = []
        for date, rows in groups:
            digest = hashlib.sha256(f"{key}|{table.name}|{date}".encode()).hexdigest()[:12]
            rel = f"{table.name}/date={date}/part-{key[:16]}-{digest}.parquet"
            if not PART_PATH.fullmatch(rel):  # dates and hashes only: never input text
                raise LakeError(f"refusing to write part {rel!r}: not a lake part path")
            out.append((rel, rows))
        return out

    def write_part(self, rel: str, table: Table, rows: pl.DataFrame) -> None:
        """Write one part with the table's canonical schema."""
        atomic_write_table(self.root / rel, part_table(table, rows))

    def read(self, table: str) -> pl.DataFrame:
        """All rows of a table (small lakes, tests and notebooks; use DuckDB for big ones)."""
        t = TABLES[table]
        files = sorted(self.table_dir(table).glob("date=*/*.parquet"))
        if not files:
            return pl.from_arrow(t.schema.empty_table())  # type: ignore[return-value]
        tables: list[Any] = [pq.read_table(f, schema=t.schema) for f in files]
        return pl.from_arrow(pa.concat_tables(tables))  # type: ignore[return-value]
