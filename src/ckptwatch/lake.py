"""The Parquet lake: hive partitions by date, atomic part writes, manifest, quarantine, lock.

Layout::

    LAKE/<table>/date=YYYY-MM-DD/part-<filekey>-<hash>.parquet   zstd, canonical schema
    LAKE/<table>/date=1970-01-01/part-schema.parquet             zero rows: fixes the schema
    LAKE/_manifest/<filekey>.json                                one per ingested source file
    LAKE/_inflight/<filekey>.json                                parts being written (journal)
    LAKE/.lock                                                   flock held by a running ingest

A source file is committed when its manifest entry exists. Before its parts are written, the
part names go to an in-flight journal; a run that finds a journal entry (a crash) deletes those
parts first, so a rerun ends with exactly the rows of one clean run.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import json
import os
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq

from ckptwatch.errors import LakeError, LakeLockedError
from ckptwatch.schema import TABLES, Table

SCHEMA_PARTITION = "date=1970-01-01"
SCHEMA_PART = "part-schema.parquet"
MANIFEST_DIR = "_manifest"
INFLIGHT_DIR = "_inflight"
LOCK_FILE = ".lock"


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _os_error(exc: OSError, what: Path) -> LakeError:
    if exc.errno == errno.ENOSPC:
        hint = "the disk is full; free space and rerun (the lake is unchanged for this file)"
    elif exc.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
        hint = "permission denied; run as a user that can write the lake"
    else:
        hint = exc.strerror or str(exc)
    return LakeError(f"cannot write {what}: {hint}")


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
    except OSError as exc:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise _os_error(exc, path) from exc


def atomic_write_table(path: Path, table: pa.Table) -> None:
    """Write an Arrow table as zstd Parquet via temp + fsync + rename."""
    tmp = path.with_name(f".{path.name}.tmp")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        pq.write_table(table, tmp, compression="zstd")
        with open(tmp, "rb+") as fh:
            os.fsync(fh.fileno())
        os.replace(tmp, path)
        _fsync_dir(path.parent)
    except OSError as exc:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise _os_error(exc, path) from exc


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

    # -- layout -------------------------------------------------------------------------
    def table_dir(self, table: str) -> Path:
        """Directory of one table."""
        return self.root / table

    def glob(self, table: str) -> str:
        """Glob of every part of ``table`` (for DuckDB ``read_parquet``)."""
        return str(self.root / table / "*" / "*.parquet")

    def init(self) -> None:
        """Create the lake and a zero-row schema part per table (idempotent)."""
        try:
            self.root.mkdir(parents=True, exist_ok=True)
            for name in (MANIFEST_DIR, INFLIGHT_DIR):
                (self.root / name).mkdir(exist_ok=True)
        except OSError as exc:
            raise _os_error(exc, self.root) from exc
        for t in TABLES.values():
            stub = self.table_dir(t.name) / SCHEMA_PARTITION / SCHEMA_PART
            if not stub.exists():
                atomic_write_table(stub, t.schema.empty_table())

    def exists(self) -> bool:
        """True when ``init`` has run here."""
        return (self.root / MANIFEST_DIR).is_dir()

    # -- lock ---------------------------------------------------------------------------
    @contextlib.contextmanager
    def lock(self, wait_s: float = 600.0) -> Iterator[None]:
        """Exclusive lock for writers. A killed holder's lock is released by the kernel."""
        self.root.mkdir(parents=True, exist_ok=True)
        path = self.root / LOCK_FILE
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as exc:
            raise _os_error(exc, path) from exc
        deadline = time.monotonic() + wait_s
        try:
            while True:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    if time.monotonic() >= deadline:
                        holder = os.pread(fd, 200, 0).decode(errors="replace").strip()
                        raise LakeLockedError(
                            f"lake {self.root} is locked by another run ({holder or 'unknown'});"
                            f" waited {wait_s:.0f} s — retry when it finishes") from None
                    time.sleep(0.2)
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"pid {os.getpid()} since {datetime.now(UTC):%Y-%m-%dT%H:%M:%SZ}"
                      .encode(), 0)
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

    def recover(self) -> int:
        """Roll back the parts of source files whose ingest was interrupted; returns count."""
        d = self.root / INFLIGHT_DIR
        committed = self.manifest_keys()
        n = 0
        for p in sorted(d.glob("*.json")) if d.is_dir() else []:
            if p.stem in committed:  # killed between manifest write and journal removal
                p.unlink()
                continue
            try:
                parts = json.loads(p.read_text()).get("parts", [])
            except ValueError:
                parts = []
            for rel in parts:
                with contextlib.suppress(FileNotFoundError):
                    (self.root / rel).unlink()
            p.unlink()
            n += 1
        for tmp in self.root.glob("*/*/.*.tmp"):
            with contextlib.suppress(FileNotFoundError):
                tmp.unlink()
        return n

    # -- parts --------------------------------------------------------------------------
    def plan_parts(self, key: str, table: Table, frame: pl.DataFrame) -> list[
            tuple[str, pl.DataFrame]]:
        """Split ``frame`` by its date partition: [(relative part path, rows)]."""
        col = table.partition_column
        dated = frame.with_columns(pl.col(col).dt.strftime("%Y-%m-%d").alias("__date"))
        out = []
        for (date,), rows in sorted(dated.group_by("__date"), key=lambda g: str(g[0][0])):
            rows = rows.drop("__date")
            digest = hashlib.sha256(f"{key}|{table.name}|{date}".encode()).hexdigest()[:12]
            rel = f"{table.name}/date={date}/part-{key[:16]}-{digest}.parquet"
            out.append((rel, rows))
        return out

    def write_part(self, rel: str, table: Table, rows: pl.DataFrame) -> None:
        """Write one part with the table's canonical schema."""
        arrow = rows.to_arrow().select(table.schema.names).cast(table.schema)
        atomic_write_table(self.root / rel, arrow)

    def read(self, table: str) -> pl.DataFrame:
        """All rows of a table (small lakes, tests and notebooks; use DuckDB for big ones)."""
        t = TABLES[table]
        files = sorted(self.table_dir(table).glob("date=*/*.parquet"))
        if not files:
            return pl.from_arrow(t.schema.empty_table())  # type: ignore[return-value]
        tables: list[Any] = [pq.read_table(f, schema=t.schema) for f in files]
        return pl.from_arrow(pa.concat_tables(tables))  # type: ignore[return-value]
