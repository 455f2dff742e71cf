"""Follow checkpoint files as they grow: only the new bytes, whole lines, resumable.

A :class:`Cursor` per file remembers how far it was read (offset, inode, a hash of the first
bytes, the CSV header). A scan reads what was appended since, up to ``max_bytes`` per file (a
backlog is caught up over several scans: memory stays bounded), and hands on complete lines
only: a partial last line waits for its newline. A file that shrank (truncated) or was
replaced under its name (a new inode, or different first bytes: rotation, ``copytruncate``) is
read again from its start. A line longer than the record limit is skipped up to its newline
and reported. Parquet files are read whole, once per version (size and mtime). Compressed
files are left to the nightly ingest (a stream cannot be tailed).

Nothing here parses records: :func:`parse_chunk` hands the bytes to the ingest's own loaders
(:mod:`ckptwatch.sources.tabular`), so the watcher reads exactly what ``ckptwatch ingest``
reads.
"""

from __future__ import annotations

import hashlib
import os
import stat
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ckptwatch.errors import RecordError
from ckptwatch.lake.schema import CHECKPOINT_WRITES
from ckptwatch.safetext import escape_controls
from ckptwatch.settings import INGEST, IngestSettings
from ckptwatch.sources.base import Parsed
from ckptwatch.sources.tabular import canonicalise, load_csv, load_jsonl, load_parquet

#: Text formats followed line by line, and the whole-file one.
LINE_SUFFIXES = {".jsonl", ".ndjson", ".json", ".csv"}
WHOLE_SUFFIXES = {".parquet"}
#: Bytes of a file's start whose hash tells a replaced file from a grown one.
HEAD_BYTES = 256


@dataclass
class Cursor:
    """How far one file has been read."""

    offset: int = 0
    inode: int = 0
    device: int = 0
    #: sha256 (hex, 16) of the file's first ``min(HEAD_BYTES, offset)`` bytes.
    head: str = ""
    #: Lines handed on so far (record numbers in messages are 1-based file lines).
    lines: int = 0
    #: The CSV header line (text files ending .csv).
    header: str | None = None
    #: Skipping a line over the record limit until its newline.
    skipping: bool = False
    #: Parquet: the (size, mtime_ns) version last read.
    version: str = ""

    def to_json(self) -> dict[str, Any]:
        """JSON form for the watcher's state (by hand: ``asdict`` cost 0.2 s a scan over 4096
        files)."""
        return {"offset": self.offset, "inode": self.inode, "device": self.device,
                "head": self.head, "lines": self.lines, "header": self.header,
                "skipping": self.skipping, "version": self.version}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Cursor:
        """Inverse of :meth:`to_json` (unknown keys ignored)."""
        known = {k: data[k] for k in cls.__dataclass_fields__ if k in data}
        return cls(**known)


@dataclass
class Chunk:
    """New complete lines of one file (a CSV chunk starts with its header line)."""

    rel: str
    suffix: str
    data: bytes
    #: File line number of the chunk's first record line.
    first_line: int


@dataclass
class ScanResult:
    """One scan: the new chunks, and remarks for the log (each already escaped)."""

    chunks: list[Chunk] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    bytes_read: int = 0


def _head_hash(fd: int, n: int) -> str:
    return hashlib.sha256(os.pread(fd, n, 0)).hexdigest()[:16]


def _files(root: Path) -> Iterator[tuple[str, os.DirEntry[str]]]:
    """Regular files under ``root`` by relative path (``checkpoints/…``), sorted; links and
    special files are not followed."""
    base = len(str(root.parent)) + 1
    stack = [str(root)]
    while stack:
        d = stack.pop()
        try:
            with os.scandir(d) as it:
                entries = sorted(it, key=lambda e: e.name)
        except OSError:
            continue
        for e in entries:
            if e.name.startswith("."):
                continue
            if e.is_dir(follow_symlinks=False):
                stack.append(e.path)
            elif e.is_file(follow_symlinks=False):
                yield e.path[base:].replace(os.sep, "/"), e


class Follower:
    """Reads what the checkpoint files under ``root`` gained since the last scan."""

    def __init__(self, root: Path, cursors: dict[str, Cursor] | None = None, *,
                 max_bytes: int = 8 << 20, max_record_bytes: int = 1 << 20) -> None:
        self.root = root
        self.cursors: dict[str, Cursor] = dict(cursors or {})
        self.max_bytes = max(max_bytes, max_record_bytes + 1)
        self.max_record_bytes = max_record_bytes
        self._told: set[str] = set()

    def _once(self, result: ScanResult, key: str, text: str) -> None:
        if key not in self._told:
            self._told.add(key)
            result.notes.append(text)

    def scan(self) -> ScanResult:
        """Read every file's new complete lines (and new Parquet versions)."""
        result = ScanResult()
        seen: set[str] = set()
        if not self.root.is_dir():
            self._once(result, "missing-root", f"{escape_controls(str(self.root))}: no such "
                       "directory yet; waiting for checkpoint files")
            return result
        for rel, entry in _files(self.root):
            seen.add(rel)
            suffix = os.path.splitext(entry.name)[1].lower()
            if suffix in WHOLE_SUFFIXES:
                self._read_whole(rel, Path(entry.path), result)
            elif suffix in LINE_SUFFIXES:
                cur = self.cursors.get(rel)
                if cur is not None and not cur.skipping:
                    try:  # unchanged since the last scan: no open, no read
                        st = entry.stat(follow_symlinks=False)
                    except OSError:
                        continue
                    if (st.st_size == cur.offset and st.st_ino == cur.inode
                            and st.st_dev == cur.device):
                        continue
                self._read_lines(rel, Path(entry.path), suffix, result)
            else:
                self._once(result, f"skip:{rel}", f"{escape_controls(rel)}: not followed live "
                           f"({escape_controls(suffix or 'no suffix')}; the nightly ingest reads "
                           "it)")
        for gone in set(self.cursors) - seen:  # removed files: forget them
            del self.cursors[gone]
        return result

    def _read_whole(self, rel: str, path: Path, result: ScanResult) -> None:
        try:
            st = path.stat()
        except OSError:
            return
        version = f"{st.st_size}:{st.st_mtime_ns}"
        cur = self.cursors.setdefault(rel, Cursor())
        if cur.version == version:
            return
        if st.st_size > self.max_bytes:
            self._once(result, f"big:{rel}:{version}", f"{escape_controls(rel)}: "
                       f"{st.st_size} bytes, over the live limit of {self.max_bytes}; left to "
                       "the nightly ingest")
            cur.version = version
            return
        try:
            data = path.read_bytes()
        except OSError as exc:
            result.notes.append(f"{escape_controls(rel)}: cannot read ({exc.strerror})")
            return
        if not data.endswith(b"PAR1"):  # still being written
            return
        cur.version, cur.offset = version, len(data)
        result.bytes_read += len(data)
        result.chunks.append(Chunk(rel, ".parquet", data, 1))

    def _read_lines(self, rel: str, path: Path, suffix: str, result: ScanResult) -> None:
        try:
            fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
        except OSError:
            return
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode):
                return
            cur = self.cursors.get(rel)
            restart = None
            if cur is None:
                cur = Cursor(inode=st.st_ino, device=st.st_dev)
            elif (st.st_ino, st.st_dev) != (cur.inode, cur.device):
                restart = "replaced (a new file under the same name)"
            elif st.st_size < cur.offset:
                restart = f"truncated ({st.st_size} bytes, was read to {cur.offset})"
            elif cur.offset and _head_hash(fd, min(HEAD_BYTES, cur.offset)) != cur.head:
                restart = "rewritten (its first bytes changed)"
            if restart:
                result.notes.append(f"{escape_controls(rel)}: {restart}; reading it again "
                                    "from the start")
                cur = Cursor(inode=st.st_ino, device=st.st_dev)
            self.cursors[rel] = cur
            if st.st_size <= cur.offset:
                return
            data = os.pread(fd, min(st.st_size - cur.offset, self.max_bytes), cur.offset)
            result.bytes_read += len(data)
            self._take(rel, suffix, fd, cur, data, result)
        finally:
            os.close(fd)

    def _take(self, rel: str, suffix: str, fd: int, cur: Cursor, data: bytes,
              result: ScanResult) -> None:
        start = cur.offset
        try:
            self._advance(rel, suffix, cur, data, result)
        finally:  # the first bytes read so far: a later scan tells a rewritten file by them
            if cur.offset and (start < HEAD_BYTES or not cur.head):
                cur.head = _head_hash(fd, min(HEAD_BYTES, cur.offset))

    def _advance(self, rel: str, suffix: str, cur: Cursor, data: bytes,
                 result: ScanResult) -> None:
        if cur.skipping:  # the rest of an over-long line
            nl = data.find(b"\n")
            if nl < 0:
                cur.offset += len(data)
                return
            cur.offset += nl + 1
            cur.lines += 1
            cur.skipping = False
            data = data[nl + 1:]
        end = data.rfind(b"\n")
        if end < 0:
            if len(data) >= self.max_record_bytes:
                result.notes.append(
                    f"{escape_controls(rel)}: line {cur.lines + 1} is over the record limit of "
                    f"{self.max_record_bytes} bytes (CKPTWATCH_MAX_RECORD_BYTES); skipped live "
                    "(the nightly ingest quarantines it)")
                cur.offset += len(data)
                cur.skipping = True
            return  # a partial last line waits for its newline
        body = data[:end + 1]
        first_line = cur.lines + 1
        cur.offset += len(body)
        cur.lines += body.count(b"\n")
        if suffix == ".csv":
            if cur.header is None:
                nl = body.find(b"\n")
                cur.header = body[:nl + 1].decode("utf-8", errors="replace").lstrip("\ufeff")
                body = body[nl + 1:]
                first_line += 1
            if not body.strip():
                return
            body = cur.header.encode() + body
        result.chunks.append(Chunk(rel, suffix, body, first_line))


def parse_chunk(chunk: Chunk, limits: IngestSettings = INGEST) -> Parsed:
    """The chunk's records, read by the ingest's loaders for checkpoint files under the
    ingest's ``limits``; a chunk that cannot be read at all is one reject."""
    table = CHECKPOINT_WRITES.name
    cap = limits.max_quarantine_rows
    try:
        if chunk.suffix == ".parquet":
            frame = load_parquet(chunk.data, table)
        elif chunk.suffix == ".csv":
            frame = load_csv(chunk.data, table, cap=cap)
        else:
            frame = load_jsonl(chunk.data, table, cap=cap)
        return canonicalise(frame, table, file_label=chunk.rel, limits=limits)
    except RecordError as exc:
        from ckptwatch.sources.base import Reject
        out = Parsed(limits=limits)
        out.rejects.append(Reject(exc.reason, chunk.first_line, None, table))
        return out
