"""A large JSON Lines table file ingested in memory bounded by a chunk, not by the file.

A JSON Lines table (checkpoint records, long fabric counters, pool metrics, jobs, topology)
over ``IngestSettings.table_chunk_bytes`` is never held whole (``ingest_stream``; the run
routes such files here, ``read.large_table``, in its own process, workers or not:
``run.ingest_files``):

1. **its key**: the file is read once through (``scan``, in a thread beside the first chunk's
   parse: reading and hashing leave the GIL; ``load.ContentStream``: decompressed, cut at
   the size limit, its UTF-8 checked, hashed as ``load`` hashes it), a piece at a time;
   nothing is written before it is known, and a file already in the lake is skipped, as
   ever. UTF-16 text and a file that opens a JSON array are read whole instead (``load``;
   None here);
2. **its rows**: read again a chunk of whole lines at a time (``load.LineChunks``: the chunks
   ``tabular.read_table`` cuts, lines over the record limit blanked as ``load`` blanks them),
   each chunk typed (``tabular.TableTyper``) and its rows written at once as the file's
   parts, not yet visible: temp files (``.part-….parquet.tmp``) in their partitions, named
   by the file's key and the chunk's number, every one of them journalled before it is
   written (``Lake.begin_batch``, the journal rewritten per chunk). The content is hashed
   again: a file that changed between the reads is read again from the start;
3. **the duplicate rule** (the last record of a (job_id, step, rank) in the file wins): each
   chunk keeps its own last; beside it only a 64-bit hash and the line of every finished
   record are held (16 bytes a record). Records whose hashes meet are read again (their
   chunks typed again: the same values) for their exact keys: each earlier one is
   quarantined with its raw line, read again by its number, and dropped from its chunk's
   parts (rewritten; duplicates are rare);
4. **the commit**: the rejects are those of the file read whole (``read.parse_one``: over-long
   lines, the quarantine cap, a missing required column); the quarantine's part is written,
   the journal names every part, the temp files are fsynced, renamed and their directories
   fsynced, and the manifest entry commits the file (``Lake.commit_batch``): one transaction
   of its own, as a file written alone (``write.write_files``). A crash before the manifest
   entry leaves only journalled parts and temp files, which the next run removes
   (``Lake.recover``): nothing of the file; a failure in process rolls it back at once.

A file that cannot be read whole (``read.ParsedFile.failure``) writes no part: its rejects,
and its first records read again (``write.kept_records``), go to quarantine only
(``write.write_failed``), as ever. The lake ends exactly as when the file is read whole (rows,
rejects with their raw text, notes, the manifest's counts); only its parts differ: a part per
table, day and chunk instead of per table and day.
"""

from __future__ import annotations

import bisect
import hashlib
import os
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

import numpy as np
import polars as pl

from ckptwatch.ingest.discover import RawFile
from ckptwatch.ingest.load import Content, ContentStream, LineChunks
from ckptwatch.ingest.read import (
    PARSE_ERRORS,
    LoadedFile,
    ParsedFile,
    file_key,
    given,
    parse_one,
)
from ckptwatch.ingest.write import (
    FileResult,
    kept_records,
    provenance,
    quarantine_frame,
    write_failed,
)
from ckptwatch.lake.schema import QUARANTINE, TABLES
from ckptwatch.lake.store import (
    Lake,
    ManifestEntry,
    _fsync_dirs,
    _fsync_files,
    _os_error,
    encode_part,
)
from ckptwatch.settings import IngestSettings
from ckptwatch.sources.base import Parsed, Reject, clip_raw, safe_text
from ckptwatch.sources.tabular import (
    CHECKPOINT_KEY,
    LINE,
    TableTyper,
    Typed,
    _lines,
    _opens_array,
    duplicate_reason,
    finished_rows,
    last_per_key,
    load_jsonl,
)

#: Times a file that changes while it is read is read again before it is read whole.
ATTEMPTS = 3
#: The seed of the records' key hashes (one run's: the hashes never leave the process).
_SEED = 47


@dataclass
class Scan:
    """The first read of a file (``scan``): its content as ``load`` gives it, but its bytes
    (``Content.data`` empty), and its key."""

    content: Content
    key: str


def scan(raw: RawFile) -> Scan | None:
    """``raw``'s content and key, its bytes read a piece at a time (never whole), or None
    when it is not read as a stream: UTF-16 text, a text of ``table_chunk_bytes`` or less,
    one that opens a JSON array (judged on the whole file) or begins with more blank space
    than ``load.HEAD_BYTES``. Raises ``OSError`` when it cannot be read."""
    stream = ContentStream(raw.path, raw.limits)
    for _ in stream.pieces():
        pass
    head = stream.head
    if (stream.utf16 or stream.text_bytes <= raw.limits.table_chunk_bytes
            or _opens_array(head) or not head.strip()):
        return None
    content = stream.content()
    return Scan(content, file_key(content, raw))


@dataclass
class Streamed:
    """What ``ingest_stream`` did with a file: its result, its key, and whether it went in."""

    result: FileResult
    key: str
    ingested: bool


def ingest_stream(lake: Lake, raw: RawFile, known: set[str], now: datetime) -> Streamed | None:
    """Ingest ``raw``, a JSON Lines table over ``table_chunk_bytes``, in memory bounded by a
    chunk (see the module docstring), or None when it is not read this way (``scan``; or it
    kept changing while read): the caller reads it whole. ``known``: the keys in the lake
    (and met earlier in the run): such a file is skipped. Raises ``LakeError`` when the lake
    cannot be written (the file rolled back)."""
    for _ in range(ATTEMPTS):
        # the read for the key goes on beside the first chunk's (GIL-free: reads and hashing)
        with ThreadPoolExecutor(1, thread_name_prefix="ckptwatch-key") as pool:
            keying = pool.submit(scan, raw)
            try:
                return _FileStream(lake, raw, keying, known, now).run()
            except _Changed:
                continue  # rolled back: read again from the start
            except _Settled as settled:  # known, not read as a stream, or unreadable
                return settled.streamed
    return None


class _Changed(Exception):
    """The file's content changed between two reads of it (``_FileStream``)."""


class _Settled(Exception):
    """The read for the key settled the file before anything of it was written: skipped
    (known), read whole (None: not a stream), or unreadable."""

    def __init__(self, streamed: Streamed | None) -> None:
        super().__init__()
        self.streamed = streamed


class _Unreadable(Exception):
    """The file could not be read on (an ``OSError`` of the raw file, not of the lake)."""

    def __init__(self, exc: OSError) -> None:
        super().__init__(str(exc))
        self.exc = exc


def _reading(pieces: Iterator[bytes]) -> Iterator[bytes]:
    """``pieces``, an ``OSError`` reading them raised as ``_Unreadable``."""
    while True:
        try:
            piece = next(pieces)
        except StopIteration:
            return
        except OSError as exc:
            raise _Unreadable(exc) from exc
        yield piece


@dataclass
class _Chunk:
    """A chunk of the file as read: the number of its first line, its parts (table, path)."""

    first_line: int
    parts: list[tuple[str, str]] = field(default_factory=list)


class _FileStream:
    """One file's ingest by ``ingest_stream`` (one attempt: ``_Changed`` when its content
    changed while read, everything of it rolled back)."""

    def __init__(self, lake: Lake, raw: RawFile, keying: Future[Scan | None], known: set[str],
                 now: datetime) -> None:
        self.lake = lake
        self.raw = raw
        self.limits: IngestSettings = raw.limits
        self.table = str(raw.table)
        self.keying = keying
        self.known = known
        self.key = ""  # the file's key, once the read for it is done (``_keyed``)
        self.now = now
        self.rel_text = safe_text(raw.rel)
        self.prov = provenance(self.rel_text, now)
        #: Rows are written only when the file is not failed already (a failed file's rows
        #: go to quarantine only: its first records, read again).
        self.spill = True
        self.parts: list[str] = []  # every part journalled, in order
        self.chunks: list[_Chunk] = []
        self.rows: dict[str, int] = {}
        #: The finished records' key hashes and lines, a pair of arrays per chunk.
        self.hashes: list[np.ndarray] = []
        self.lines: list[np.ndarray] = []
        #: Lines of the records the duplicate rule drops (``_duplicates``).
        self.dropped: set[int] = set()

    # -- the reads -------------------------------------------------------------------------
    def _read(self) -> tuple[ContentStream, Iterator[bytes], LineChunks]:
        """A new read of the file: its stream, the stream's pieces, and their chunks."""
        stream = ContentStream(self.raw.path, self.limits)
        pieces = _reading(stream.pieces())
        lim = self.limits
        chunks = LineChunks(pieces, lim.table_chunk_bytes, lim.max_record_bytes,
                            lim.quarantine_raw_max)
        return stream, pieces, chunks

    def _same(self, stream: ContentStream, pieces: Iterator[bytes]) -> None:
        """Read the rest of ``pieces`` (hashed only); ``_Changed`` unless the content read is
        the first read's."""
        for _ in pieces:
            pass
        if stream.utf16 or file_key(stream.content(), self.raw) != self.key:
            raise _Changed

    def _typed(self, chunk: bytes, first_line: int) -> Typed | None:
        """A chunk typed on its own: what it gave when the file was read (the same bytes)."""
        lim = self.limits
        typer = TableTyper(self.table, file_label=self.raw.rel, limits=lim)
        return typer.add(load_jsonl(chunk, self.table, first_line=first_line,
                                    cap=lim.max_quarantine_rows))

    def _keyed(self) -> None:
        """The file's key (``scan``, in its thread: waited for), before anything of the file
        is written; ``_Settled`` when the file is known, not read as a stream, or unreadable."""
        if self.key:
            return
        try:
            first = self.keying.result()
        except OSError as exc:
            raise _Settled(Streamed(FileResult(self.rel_text, "failed", error=safe_text(
                f"cannot read {self.raw.rel}: {exc}")), "", False)) from exc
        if first is None:
            raise _Settled(None)
        if first.key in self.known:
            raise _Settled(Streamed(FileResult(self.rel_text, "skipped"), first.key, False))
        self.key = first.key
        self.spill = first.content.failure is None

    # -- the ingest ------------------------------------------------------------------------
    def run(self) -> Streamed:
        raw, lim = self.raw, self.limits
        try:
            stream, pieces, chunks = self._read()
            typer = TableTyper(self.table, file_label=raw.rel, limits=lim)
            error: BaseException | None = None
            for chunk, first_line in chunks:
                self.chunks.append(_Chunk(first_line))
                if error is not None:
                    continue  # read on for the key only
                try:
                    typed = typer.add(load_jsonl(chunk, self.table, first_line=first_line,
                                                 cap=lim.max_quarantine_rows))
                except PARSE_ERRORS as exc:  # the file fails: its one reject says why
                    error = exc
                    continue
                del chunk
                if typed is not None:
                    self._chunk(typed)
            self._keyed()
            self._same(stream, pieces)
            parsed = Parsed(limits=lim)
            if error is None:
                try:
                    parsed = typer.finish()
                except PARSE_ERRORS as exc:
                    error = exc
            if error is None:
                self._duplicates(parsed)
            pf = parse_one(LoadedFile(raw, self.key, stream.content(chunks.head,
                                                                     chunks.long_lines)),
                           _raising(error) if error is not None else given(parsed))
            if pf.failure:
                self._rollback()
                kept = [] if error is not None else self._kept(pf)
                result = write_failed(self.lake, pf, self.rel_text, self.prov, kept)
                return Streamed(result, self.key, False)
            return Streamed(self._commit(pf), self.key, True)
        except _Unreadable as exc:
            self._rollback()
            return Streamed(FileResult(self.rel_text, "failed", error=safe_text(
                f"cannot read {raw.rel}: {exc.exc}")), self.key, False)
        except BaseException:  # noqa: BLE001 - roll back on anything, Ctrl-C included, re-raise
            self._rollback()
            raise

    def _chunk(self, typed: Typed) -> None:
        """A typed chunk: its finished records' hashes and lines kept, its last record of each
        key made rows, its rows counted and written as the chunk's parts (``spill``)."""
        frames = dict(typed.rows)
        finished = typed.finished
        if finished is not None and finished.height:
            self.hashes.append(finished.select(CHECKPOINT_KEY).hash_rows(seed=_SEED)
                               .to_numpy())
            self.lines.append(finished[LINE].to_numpy())
            frames[self.table] = finished_rows(last_per_key(finished), self.table)
        frames = {t: f for t, f in frames.items() if f.height}
        for table, frame in frames.items():
            self.rows[table] = self.rows.get(table, 0) + frame.height
        self._keyed()
        if not self.spill or not frames:
            return
        number = len(self.chunks) - 1
        key = hashlib.sha256(f"{self.key}\0chunk\0{number}".encode()).hexdigest()
        planned = [(table, rel, part) for table, frame in sorted(frames.items())
                   for rel, part in self.lake.plan_parts(key, TABLES[table],
                                                         frame.with_columns(**self.prov))]
        self._write(planned)
        self.chunks[number].parts += [(table, rel) for table, rel, _ in planned]

    def _write(self, parts: list[tuple[str, str, pl.DataFrame]]) -> None:
        """Journal ``parts`` (table, path, rows with provenance) with the file's others, then
        write each as its temp file."""
        self.parts += [rel for _, rel, _ in parts]
        self.lake.begin_batch(self.key, {self.key: self.parts})
        for table, rel, rows in parts:
            path = self.lake.root / rel
            try:
                data = encode_part(TABLES[table], rows)
                path.parent.mkdir(parents=True, exist_ok=True)
                with open(_tmp(path), "wb") as fh:
                    fh.write(data)
            except OSError as exc:
                raise _os_error(exc, path) from exc

    def _rollback(self) -> None:
        """Remove every part (and temp file) of the file and its journal entry."""
        if self.parts:
            self.lake.rollback_batch(self.key, {self.key: self.parts})
            self.parts = []
            for chunk in self.chunks:
                chunk.parts = []

    # -- the duplicate rule ------------------------------------------------------------------
    def _duplicates(self, parsed: Parsed) -> None:
        """The duplicate rule over the whole file: each record that a later one of the same
        (job_id, step, rank) replaces quarantined in line order (``_latest_per_rank``'s
        reason and raw line) and dropped from its chunk's parts."""
        if not self.hashes:
            return
        seen = pl.DataFrame({"h": np.concatenate(self.hashes), LINE: np.concatenate(self.lines)})
        self.hashes, self.lines = [], []
        met = seen.filter(pl.col("h").is_duplicated())[LINE]
        del seen
        if not met.len():
            return
        exact = self._exact_keys(set(met.to_list()))
        if not exact.height:
            return
        last = pl.col(LINE).max().over(CHECKPOINT_KEY)
        firsts = np.array([c.first_line for c in self.chunks], dtype=np.int64)
        marked = exact.with_columns(last.alias("__last"), pl.Series(
            "__chunk", np.searchsorted(firsts, exact[LINE].to_numpy(), side="right") - 1))
        replaced = marked.filter(pl.col(LINE) != pl.col("__last")).sort(LINE)
        if not replaced.height:
            return  # the hashes met, the keys differ
        self.dropped = set(replaced[LINE].to_list())
        texts = self._raw_lines(replaced[LINE].head(parsed.capped.room).to_list())
        for line, kept in replaced.select(LINE, "__last").iter_rows():
            parsed.rejects.append(Reject(duplicate_reason(kept), line,
                                         clip_raw(texts.get(line, "")), self.table))
        # the rows each chunk wrote: its last record of a key, which a later chunk replaces
        local = marked.group_by([*CHECKPOINT_KEY, "__chunk"]).agg(
            pl.col(LINE).max(), pl.col("__last").first())
        gone = local.filter(pl.col(LINE) != pl.col("__last"))
        self.rows[self.table] -= gone.height
        for chunk in gone["__chunk"].unique().sort().to_list():
            self._drop(chunk, gone.filter(pl.col("__chunk") == chunk).select(CHECKPOINT_KEY))

    def _exact_keys(self, lines: set[int]) -> pl.DataFrame:
        """(job_id, step, rank, ``LINE``) of the finished records at ``lines``, their chunks
        read and typed again."""
        firsts = [c.first_line for c in self.chunks]
        wanted = {bisect.bisect_right(firsts, line) - 1 for line in lines}
        found: list[pl.DataFrame] = []
        stream, pieces, chunks = self._read()
        for n, (chunk, first_line) in enumerate(chunks):
            if n in wanted:
                typed = self._typed(chunk, first_line)
                finished = None if typed is None else typed.finished
                if finished is not None:
                    found.append(finished.filter(pl.col(LINE).is_in(list(lines)))
                                 .select(*CHECKPOINT_KEY, LINE))
                wanted.discard(n)
            if not wanted:
                break
        self._same(stream, pieces)
        return pl.concat(found) if found else pl.DataFrame()

    def _raw_lines(self, lines: list[int]) -> dict[int, str]:
        """The text of the file's ``lines`` (blanked as the parse read them), read again."""
        out: dict[int, str] = {}
        if not lines:
            return out
        todo = sorted(lines)
        stream, pieces, chunks = self._read()
        for chunk, first_line in chunks:
            end = first_line + chunk.count(b"\n") + (not chunk.endswith(b"\n"))
            inside = [line for line in todo if first_line <= line < end]
            if inside:
                text = _lines(chunk)
                out.update((line, text[line - first_line]) for line in inside)
            if todo[-1] < end:
                break
        self._same(stream, pieces)
        return out

    def _drop(self, chunk: int, keys: pl.DataFrame) -> None:
        """Drop the records of ``keys`` from chunk ``chunk``'s parts of the table (rewritten,
        or removed when nothing is left)."""
        if not self.spill:
            return
        table = TABLES[self.table]
        for name, rel in list(self.chunks[chunk].parts):
            if name != self.table:
                continue
            tmp = _tmp(self.lake.root / rel)
            try:
                rows = pl.read_parquet(tmp)
                left = rows.join(keys, on=CHECKPOINT_KEY, how="anti", maintain_order="left")
                if left.height == rows.height:
                    continue
                if left.height:
                    tmp.write_bytes(encode_part(table, left))
                else:
                    tmp.unlink()
            except OSError as exc:
                raise _os_error(exc, self.lake.root / rel) from exc
            if not left.height:
                self.chunks[chunk].parts.remove((name, rel))
                self.parts.remove(rel)

    # -- a failed file ---------------------------------------------------------------------
    def _kept(self, pf: ParsedFile) -> list[Reject]:
        """``write._kept_records`` of the file: its first rows per table (after the duplicate
        rule), read again until there are as many as the quarantine keeps."""
        room = self.limits.max_quarantine_rows
        tables = sorted(t for t, n in self.rows.items() if n)
        heads: dict[str, list[pl.DataFrame]] = {t: [] for t in tables}
        have = dict.fromkeys(tables, 0)
        stream, pieces, chunks = self._read()
        for chunk, first_line in chunks:
            if all(n >= room for n in have.values()):
                break
            typed = self._typed(chunk, first_line)
            if typed is None:
                continue
            frames = dict(typed.rows)
            if typed.finished is not None:
                good = typed.finished.filter(~pl.col(LINE).is_in(list(self.dropped)))
                frames[self.table] = finished_rows(good, self.table)
            for table, frame in frames.items():
                if table in have and have[table] < room and frame.height:
                    heads[table].append(frame.head(room - have[table]))
                    have[table] += heads[table][-1].height
        self._same(stream, pieces)
        return kept_records(str(pf.failure), (
            (t, pl.concat(heads[t]) if heads[t] else pl.DataFrame(), self.rows[t])
            for t in tables), room)

    # -- the commit ------------------------------------------------------------------------
    def _commit(self, pf: ParsedFile) -> FileResult:
        """Write the file's quarantine part, then make its parts visible and commit it."""
        rejects = pf.parsed.rejects
        if rejects:
            frame = quarantine_frame(rejects, self.raw.table).with_columns(**self.prov)
            self._write([(QUARANTINE.name, rel, part)
                         for rel, part in self.lake.plan_parts(self.key, QUARANTINE, frame)])
        rows = {t: self.rows[t] for t in sorted(self.rows) if self.rows[t]}
        entry = ManifestEntry(key=self.key, path=self.rel_text, size_bytes=pf.size_bytes,
                              ingested_ts=self.now.isoformat(), rows=rows,
                              quarantined=len(rejects), parts=list(self.parts))
        # the journal names every part (and those a duplicate emptied): now they show
        _publish(self.lake, self.parts)
        self.lake.commit_batch(self.key, [entry])
        notes = [safe_text(n) for n in pf.parsed.notes]
        if not rows and not rejects:
            notes.append(f"{self.rel_text}: no records in this file")
        return FileResult(self.rel_text, "ingested", rows=rows, quarantined=len(rejects),
                          notes=notes)


def _raising(exc: BaseException) -> Callable[[RawFile, bytes], Parsed]:
    """A parse that raises ``exc`` (what the file's parse raised)."""
    def parse(_raw: RawFile, _data: bytes) -> Parsed:
        raise exc
    return parse


def _tmp(path: Path) -> Path:
    """The temp file of a part (the name ``lake.store`` writes and removes)."""
    return path.with_name(f".{path.name}.tmp")


def _publish(lake: Lake, parts: list[str]) -> None:
    """The temp files of ``parts`` made the parts, durably (``store.atomic_write_many``'s
    second half): fsynced together, renamed, each directory fsynced once."""
    paths = [lake.root / rel for rel in parts]
    what = paths[0].parent if paths else lake.root
    try:
        _fsync_files([_tmp(p) for p in paths])
        for path in paths:
            what = path
            os.replace(_tmp(path), path)
        what = paths[0].parent if paths else lake.root
        _fsync_dirs([p.parent for p in paths])
    except OSError as exc:
        raise _os_error(exc, what) from exc
