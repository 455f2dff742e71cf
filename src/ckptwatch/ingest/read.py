"""Read one raw file into canonical rows and rejects (``parse_file``), and say who it is.

Every kind of raw file (``discover.FileKind``) has one entry in ``READERS``: how its bytes are
loaded (a file, or a whole sysfs tree; ``refused`` files are never read) and how they are
parsed. A file's identity (``file_key``) is its content, so that a copy under another name, or
a rerun, is skipped instead of written twice.

A file that cannot be read as a whole (``ParsedFile.failure``: corrupt or truncated
compression, a file cut off at the size limit, undecodable text, a wrong structure, a reader
bug, more rejected records than the quarantine keeps) is ``failed``: what was read of it goes
to quarantine only, and it is not recorded in the manifest, so it is read again once fixed.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from ckptwatch.errors import RecordError
from ckptwatch.ingest.discover import FileKind, RawFile
from ckptwatch.ingest.load import Content, ContentStream, load, read_bytes
from ckptwatch.settings import IngestSettings
from ckptwatch.sources import mlperf
from ckptwatch.sources.base import (
    INPUT_ERRORS,
    Parsed,
    Reject,
    Rejects,
    ToolContext,
    clip_raw,
    safe_text,
)
from ckptwatch.sources.envelope import (
    EnvelopeFile,
    ToolFile,
    is_text,
    parse_tool_output,
    read_envelope_files,
    read_envelopes,
    read_tool_file,
    read_tool_files,
    rows_to_frames,
    rows_to_frames_together,
    time_from_name,
)
from ckptwatch.sources.tabular import LOADERS, load_jsonl, read_table


@dataclass
class EncodedParts:
    """A file's lake parts encoded ahead of its write (``write.encode_batch``, in a parse
    worker): (table, part path, Parquet bytes) in the order written, and rows per table.
    ``held``: the parts holding its rows where the files of its batch share parts (those of
    the batch are then all in its first file's ``parts``); None: its own ``parts``."""

    parts: list[tuple[str, str, bytes]]
    rows: dict[str, int]
    held: list[str] | None = None


@dataclass
class ParsedFile:
    """One raw file after parsing: its identity (``key``) and what it produced."""

    raw: RawFile
    key: str
    size_bytes: int
    parsed: Parsed
    already: bool = False
    #: The file could not be read at all (nothing of it is written).
    error: str | None = None
    #: The file could not be read whole: why (what was read goes to quarantine; ``failed``).
    failure: str | None = None
    #: Its parts, encoded (``parsed`` then holds its rejects and notes, not its rows).
    encoded: EncodedParts | None = None
    #: The last file of a batch the ingest writes together (``write.plan_batches``).
    ends_batch: bool = False

    @property
    def n_rows(self) -> int:
        """Rows parsed, over all tables."""
        if self.encoded is not None:
            return sum(self.encoded.rows.values())
        return sum(f.height for fs in self.parsed.frames.values() for f in fs)


@dataclass(frozen=True)
class Reader:
    """How one kind of raw file is read: its bytes (``load``; None: the file is never read) and
    what they hold (``parse``, which raises ``RecordError`` for a malformed file).
    ``whole_record``: the file is one record (a bare tool output), so the record limit
    applies to the whole file."""

    parse: Callable[[RawFile, bytes], Parsed]
    load: Callable[[RawFile], Content] | None
    whole_record: bool = False


def _file_bytes(raw: RawFile) -> Content:
    """The file's content (``ingest.load.load``), lines over the record limit blanked in the
    line-oriented formats (JSON Lines, CSV, envelopes); a CSV or JSON Lines table that is not
    UTF-8 (nor UTF-16) cannot be read whole."""
    table_text = raw.kind == "tabular" and raw.suffix != ".parquet"
    return load(raw.path, lines=raw.kind == "envelope" or table_text, text=table_text,
                limits=raw.limits)


def _sysfs_tree_bytes(raw: RawFile) -> Content:
    """A sysfs tree's identity: its counter files' paths and contents."""
    # Imported when first needed: importing a format module registers its parser, and the
    # order of registration is the order of detection (``sources.base.detect_tool``).
    from ckptwatch.sources.sysfs_ib import read_sysfs_tree

    data = json.dumps(read_sysfs_tree(raw.path), sort_keys=True).encode()
    return Content(data, hashlib.sha256(data), len(data))


def _read_tabular(raw: RawFile, data: bytes) -> Parsed:
    """A canonical table file (JSON Lines, CSV or Parquet) for ``raw.table``."""
    assert raw.table is not None
    loader = LOADERS.get(raw.suffix)
    if loader is None:
        raise RecordError(f"unsupported file type '{raw.suffix}' for {raw.table} "
                          f"(use .jsonl, .csv or .parquet)")
    if raw.suffix == ".parquet":
        _check_parquet_size(data, raw.limits)
    return read_table(data, raw.table, raw.suffix, file_label=raw.rel, limits=raw.limits)


def _check_parquet_size(data: bytes, limits: IngestSettings) -> None:
    """A Parquet file whose columns decode to more than the size limit (its footer says) is a
    ``RecordError``: it is not decoded at all."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        meta = pq.read_metadata(pa.BufferReader(data))
    except (OSError, ValueError, pa.ArrowException):
        return  # unreadable: the loader says why
    size = sum(meta.row_group(i).total_byte_size for i in range(meta.num_row_groups))
    cap = limits.decompressed_limit(len(data))
    if size > cap:
        raise RecordError(f"cannot read file: Parquet columns decode to {size:,} bytes, more "
                          f"than the limit of {cap:,} (CKPTWATCH_MAX_DECOMPRESSED_RATIO, "
                          "CKPTWATCH_MAX_FILE_BYTES): not read; split the file or raise it")


def _read_envelopes(raw: RawFile, data: bytes) -> Parsed:
    """A JSON Lines envelope file; a line without ``node`` takes the node its place names."""
    return read_envelopes(data, file_label=raw.rel, default_node=raw.node, limits=raw.limits)


def _read_tool(raw: RawFile, data: bytes) -> Parsed:
    """A bare tool output under ``<kind>/<node>/``; its time is in its name or its mtime."""
    assert raw.node is not None
    return read_tool_file(data, file_label=raw.rel, node=raw.node, ts=_tool_time(raw),
                          limits=raw.limits)


def _tool_time(raw: RawFile) -> datetime:
    """A bare tool output's time: in its name, else its mtime."""
    return time_from_name(raw.path.name) or datetime.fromtimestamp(
        raw.path.stat().st_mtime, tz=UTC)


def _read_sysfs_tree(raw: RawFile, data: bytes) -> Parsed:
    """A copied ``/sys/class/infiniband`` tree; its time is in a directory name or the mtime."""
    from ckptwatch.sources.sysfs_ib import read_sysfs_tree

    assert raw.node is not None
    ts = next((t for t in (time_from_name(p) for p in Path(raw.rel).parts) if t), None)
    if ts is None:
        newest = max((p.stat().st_mtime for p in raw.path.rglob("*") if p.is_file()),
                     default=raw.path.stat().st_mtime)
        ts = datetime.fromtimestamp(newest, tz=UTC)
    out = Parsed(limits=raw.limits)
    ctx = ToolContext(node=raw.node, ts=ts, source="sysfs-ib")
    rows_to_frames(parse_tool_output(read_sysfs_tree(raw.path), ctx), out)
    return out


def _read_dlio(raw: RawFile, data: bytes) -> Parsed:
    """A DLIO/MLPerf Storage ``<rank>_per_epoch_stats.json``: its saves to
    ``checkpoint_writes``, its loads to ``checkpoint_loads``. The rank is in the file name
    (bare ``per_epoch_stats.json``: rank 0), the node is ``hostname`` of ``<rank>_output.json``
    beside it, the rank count and the storage come from the run's ``summary.json`` and
    ``dlio.log``, the job from the run directory (``_dlio_job_id``)."""
    out = Parsed(limits=raw.limits)
    rows_to_frames(_dlio_rows(raw, data, out), out)
    return out


def _dlio_rows(raw: RawFile, data: bytes, out: Parsed) -> dict[str, list[dict[str, Any]]]:
    """``_read_dlio``'s rows of the file, as row dicts per table (its notes go to ``out``)."""
    rank = mlperf.rank_from_filename(raw.path.name)
    if rank is None:  # DLIO names per-rank files <rank>_per_epoch_stats.json; bare is rank 0
        rank = 0
    parent = raw.path.parent
    summary = _dlio_companion(parent / "summary.json", out.notes, raw.limits)
    log = _dlio_companion(parent / "dlio.log", out.notes, raw.limits)
    try:
        run = mlperf.read_dlio_run(summary, log)
    except (RecordError, RecursionError) as exc:
        why = exc.reason if isinstance(exc, RecordError) else "nested too deeply"
        out.notes.append(f"{raw.rel}: the run's summary.json is not read ({why})")
        run = mlperf.read_dlio_run(None, log)
    node = None
    output = _dlio_companion(parent / f"{rank}_output.json", out.notes, raw.limits)
    if output is not None:
        try:
            node = mlperf.hostname_from_output(output)
        except (RecordError, RecursionError) as exc:
            why = exc.reason if isinstance(exc, RecordError) else "nested too deeply"
            out.notes.append(f"{raw.rel}: {rank}_output.json is not read ({why})")
    if node is None:
        out.notes.append(f"{raw.rel}: no hostname in a {rank}_output.json beside it "
                         "(node='unknown'); see docs/formats.md")
    return mlperf.parse_dlio_checkpoints(data, rank=rank, job_id=_dlio_job_id(raw, run),
                                         node=node, n_ranks=run.n_ranks,
                                         target=run.storage_root)


def _read_dlio_files(items: Sequence[LoadedFile]) -> dict[int, Parsed]:
    """``_read_dlio`` of each of ``items`` (by ``id``), their rows typed together
    (``rows_to_frames_together``: a run's hundreds of per-rank files are a frame each
    otherwise). A file whose reading fails is left out: ``parse_one`` reads it again on its own,
    so that the failure is its own."""
    outs: list[Parsed] = []
    results: list[dict[str, list[dict[str, Any]]]] = []
    done: list[LoadedFile] = []
    for x in items:
        out = Parsed(limits=x.raw.limits)
        try:
            results.append(_dlio_rows(x.raw, x.content.data, out))
        except PARSE_ERRORS:
            continue
        outs.append(out)
        done.append(x)
    try:
        rows_to_frames_together(results, outs)
    except PARSE_ERRORS:  # each file again on its own: whose failure it is
        return {}
    return {id(x): out for x, out in zip(done, outs, strict=True)}


def _dlio_companion(path: Path, notes: list[str], limits: IngestSettings) -> str | None:
    """The text of a file of a DLIO run beside the per-rank stats (None: there is none, or it
    cannot be read, which ``notes`` says): read within the ingest's limits."""
    if not path.is_file():
        return None
    try:
        return read_bytes(path, limits).decode("utf-8", errors="replace")
    except OSError as exc:
        notes.append(f"{path.name} beside DLIO stats is not read: {exc}")
        return None


def _dlio_job_id(raw: RawFile, run: mlperf.DlioRun) -> str:
    """The job of a DLIO run: ``<system>/<model>/<timestamp>`` when the run directory is in
    MLPerf's published layout (or dlio.log says it was saved there), else the run directory's
    name; a stats file directly under ``checkpoints/`` is named by the run's start."""
    layout = mlperf.job_id_from_layout(raw.path.parent.absolute())
    if layout is None and run.results_dir:
        layout = mlperf.job_id_from_layout(run.results_dir)
    if layout is not None:
        return layout
    parts = Path(raw.rel).parts
    if len(parts) >= 2 and parts[-2] != "checkpoints":
        return parts[-2]
    if len(parts) == 1 and raw.path.parent.absolute().name:
        return raw.path.parent.absolute().name
    if run.start_ts is not None:
        return f"dlio-{run.start_ts:%Y%m%d_%H%M%S}"
    return raw.path.stem


def _read_unrecognised(raw: RawFile, data: bytes) -> Parsed:
    """A file nothing recognised: one quarantined record with the reason and its first bytes."""
    return Parsed(rejects=[Reject(raw.reason or "unrecognised file", None, clip_raw(data))],
                  limits=raw.limits)


def _read_refused(raw: RawFile, data: bytes) -> Parsed:
    """A file that must not be read (see ``discover``): one quarantined record saying why."""
    return Parsed(rejects=[Reject(raw.reason or "not read", None)], limits=raw.limits)


def _read_nothing(raw: RawFile, data: bytes) -> Parsed:
    """Documentation or labels beside the telemetry: read for its key, listed as ignored."""
    return Parsed()


#: The one reader of every kind of raw file (a test checks that every ``FileKind`` has one).
READERS: dict[FileKind, Reader] = {
    "tabular": Reader(_read_tabular, _file_bytes),
    "envelope": Reader(_read_envelopes, _file_bytes),
    "tool": Reader(_read_tool, _file_bytes, whole_record=True),
    "sysfs_tree": Reader(_read_sysfs_tree, _sysfs_tree_bytes),
    "dlio": Reader(_read_dlio, _file_bytes, whole_record=True),
    "unknown": Reader(_read_unrecognised, _file_bytes),
    "refused": Reader(_read_refused, None),
    "ignored": Reader(_read_nothing, _file_bytes),
}


def file_key(content: Content, raw: RawFile) -> str:
    """Identity of a source file: its content (decompressed), plus the node its path names
    (bare tool output) or the rank its name gives (DLIO stats). A file not read whole is its
    own identity: what was read of it, and that it was cut there (an empty file and a broken
    ``.gz`` read to nothing differ)."""
    h = content.sha.copy()
    if raw.kind == "tool" and raw.node:  # surrogatepass: a directory name need not be UTF-8
        h.update(b"\0node=" + raw.node.encode("utf-8", "surrogatepass"))
    if raw.kind == "dlio":  # the rank is in the name only: ranks that timed alike differ
        h.update(b"\0dlio-rank=%d" % (mlperf.rank_from_filename(raw.path.name) or 0))
    if content.failure:
        h.update(b"\0not read whole")
    return h.hexdigest()


def _unread_key(raw: RawFile) -> str:
    """Identity of a file that is never read: its place and the reason."""
    return hashlib.sha256(b"refused\0" + raw.rel.encode("utf-8", "surrogatepass") + b"\0"
                          + (raw.reason or "").encode("utf-8", "surrogatepass")).hexdigest()


@dataclass
class LoadedFile:
    """A raw file whose content is loaded and whose key is known, not yet parsed
    (``load_file``; ``parse_loaded``)."""

    raw: RawFile
    key: str
    content: Content


def parse_file(raw: RawFile, known: set[str] | None = None) -> ParsedFile:
    """Read and parse one raw file (skips the parse when its key is already in ``known``).

    Never raises for what the file holds: a malformed record is a reject; a file that cannot
    be read whole (see the module docstring) is a ``failure`` with its reason as a reject,
    beside whatever was read of it; a failure of a parser itself (a bug that hostile input
    found) is such a failure too, saying so. Only a file that cannot be opened is an ``error``.
    """
    return parse_loaded([load_file(raw, known)])[0]


def load_file(raw: RawFile, known: set[str] | None = None) -> ParsedFile | LoadedFile:
    """``parse_file``'s first step: the file's content and key (``LoadedFile``), or at once
    the ``ParsedFile`` of a file that is not parsed: never read (refused), that cannot be
    opened (``error``), or whose key is in ``known`` (``already``)."""
    reader = READERS[raw.kind]
    if reader.load is None:  # never read: one quarantined record saying why
        key = _unread_key(raw)
        if known is not None and key in known:
            return ParsedFile(raw, key, 0, Parsed(), already=True)
        return ParsedFile(raw, key, 0, reader.parse(raw, b""))
    try:
        content = reader.load(raw)
    except (OSError, EOFError, ValueError) as exc:  # ValueError: a sysfs tree's bad names
        return ParsedFile(raw, "", 0, Parsed(),
                          error=safe_text(f"cannot read {raw.rel}: {exc}"))
    return skip_known(LoadedFile(raw, file_key(content, raw), content), known)


def skip_known(item: LoadedFile, known: set[str] | None) -> ParsedFile | LoadedFile:
    """``item``, or its ``already`` result when its key is in ``known``."""
    if known is not None and item.key in known:
        return ParsedFile(item.raw, item.key, item.content.size, Parsed(), already=True)
    return item


def parse_loaded(items: Sequence[ParsedFile | LoadedFile]) -> list[ParsedFile]:
    """``parse_file``'s second step for each of ``items``, in order (a ``ParsedFile`` is
    passed through). The envelope files among them that were read whole are parsed together
    (``envelope.read_envelope_files``: one bulk-parser call per source for all of them, each
    file's rows, rejects and notes exactly those it gets on its own); should that fail, each
    is parsed on its own, so that the failure is the file's that caused it. So are bare tool
    outputs (``envelope.read_tool_files``: the files of a format with a bulk parser through it
    at once: a pool's mmpmon or lctl files, one per server) and DLIO per-rank files
    (``_read_dlio_files``: their rows typed in one frame per table)."""
    together = [x for x in items if isinstance(x, LoadedFile) and _parsed_together(x)]
    parsed: dict[int, Parsed] = {}
    if len(together) > 1:
        try:
            results = read_envelope_files([EnvelopeFile(x.content.data, x.raw.rel, x.raw.node)
                                           for x in together], limits=together[0].raw.limits)
        except PARSE_ERRORS:  # each file again on its own: whose failure it is
            results = []
        parsed = {id(x): p for x, p in zip(together, results, strict=False)}
    # A name the file system gave that is not text (bytes that are not UTF-8, kept as
    # surrogates) cannot enter a polars frame: that file is read on its own, as before.
    tools = [x for x in items if isinstance(x, LoadedFile) and x.raw.kind == "tool"
             and not x.content.failure and not _over_record_limit(x.raw, x.content.data)
             and is_text(str(x.raw.node)) and is_text(x.raw.rel)]
    if len(tools) > 1:
        try:
            found = read_tool_files([ToolFile(x.content.data, x.raw.rel, str(x.raw.node),
                                               _tool_time(x.raw)) for x in tools],
                                    limits=tools[0].raw.limits)
        except PARSE_ERRORS:  # each file again on its own: whose failure it is
            found = []
        parsed.update({id(x): p for x, p in zip(tools, found, strict=False)})
    dlio = [x for x in items if isinstance(x, LoadedFile) and x.raw.kind == "dlio"
            and not x.content.failure and not _over_record_limit(x.raw, x.content.data)]
    if len(dlio) > 1:
        parsed.update(_read_dlio_files(dlio))
    out: list[ParsedFile] = []
    for x in items:
        if isinstance(x, ParsedFile):
            out.append(x)
        elif id(x) in parsed:
            out.append(parse_one(x, given(parsed[id(x)])))
        else:
            out.append(parse_one(x, READERS[x.raw.kind].parse))
    return out


#: What a parse may raise for what a file holds (``parse_one`` turns each into the file's
#: failure).
PARSE_ERRORS: tuple[type[BaseException], ...] = (RecordError, *INPUT_ERRORS)


def given(parsed: Parsed) -> Callable[[RawFile, bytes], Parsed]:
    """A parse that gives ``parsed`` (what ``parse_loaded`` parsed of a file already)."""
    return lambda _raw, _data: parsed


def _parsed_together(item: LoadedFile) -> bool:
    """True when ``parse_loaded`` parses ``item`` with the others: an envelope file read
    whole."""
    return item.raw.kind == "envelope" and not item.content.failure


def parse_one(item: LoadedFile, parse: Callable[[RawFile, bytes], Parsed]) -> ParsedFile:
    """Parse one loaded file with ``parse`` (its reader's, or one giving what
    ``parse_loaded`` or ``stream`` parsed of it already) into its ``ParsedFile`` (see
    ``parse_file``)."""
    raw, key, content = item.raw, item.key, item.content
    limits = raw.limits
    failure = content.failure
    data = content.data
    try:
        if raw.kind == "unknown" and failure:
            parsed = Parsed(limits=limits)  # the failure's own row says why: nothing more
        elif _over_record_limit(raw, data):
            parsed = Parsed(rejects=[Reject(
                f"the file is one record of {len(data):,} bytes, over the limit of "
                f"{limits.max_record_bytes:,} (CKPTWATCH_MAX_RECORD_BYTES): not read", None,
                clip_raw(data[:limits.quarantine_raw_max]), raw.table)], limits=limits)
        else:
            parsed = parse(raw, data)
    except RecordError as exc:
        parsed = Parsed(rejects=[Reject(exc.reason, exc.line,
                                        clip_raw(data[:limits.quarantine_raw_max]), raw.table)],
                        limits=limits)
        failure = failure or exc.reason
    except INPUT_ERRORS as exc:
        detail = " ".join(str(exc).split())[:300]
        reason = (f"the {raw.kind} reader failed on this file ({type(exc).__name__}: "
                  f"{detail}); the whole file is quarantined; please report it as a ckptwatch "
                  "bug")
        parsed = Parsed(rejects=[Reject(reason, None,
                                        clip_raw(data[:limits.quarantine_raw_max]), raw.table)],
                        limits=limits)
        failure = failure or reason
    _add_limit_rejects(raw, content, parsed)
    rejects = parsed.capped
    if rejects.dropped:
        failure = failure or (
            f"{rejects.total:,} records rejected, more than the {rejects.cap:,} quarantine rows "
            "kept per file (CKPTWATCH_MAX_QUARANTINE_ROWS): the rest of the file was only "
            "counted")
        rejects.cap += 1
        rejects.append(Reject(
            f"{rejects.dropped:,} more rejected record(s) of this file not kept: over the limit "
            f"of {rejects.cap - 1:,} quarantine rows per file (CKPTWATCH_MAX_QUARANTINE_ROWS)",
            None, None, raw.table))
    if content.failure:
        rejects.cap += 1
        rejects.insert(0, Reject(f"cannot read file: {content.failure}", None, None, raw.table))
    return ParsedFile(raw, key, content.size, parsed, failure=failure)


def _over_record_limit(raw: RawFile, data: bytes) -> bool:
    """A file its reader takes as one record (``Reader.whole_record``) over
    ``max_record_bytes``: quarantined unread."""
    return READERS[raw.kind].whole_record and len(data) > raw.limits.max_record_bytes


def _add_limit_rejects(raw: RawFile, content: Content, parsed: Parsed) -> None:
    """The lines ``load`` blanked (over the record limit) as rejects, in line order."""
    if not content.long_lines:
        return
    limit = raw.limits.max_record_bytes
    merged = [*parsed.rejects, *(Reject(
        f"line is {length:,} bytes, over the limit of {limit:,} (CKPTWATCH_MAX_RECORD_BYTES): "
        "not read", line, clip_raw(head), raw.table) for line, length, head in content.long_lines)]
    merged.sort(key=lambda r: r.line or 0)
    kept = Rejects(merged, cap=raw.limits.max_quarantine_rows)
    kept.dropped += parsed.capped.dropped
    parsed.rejects = kept


def content_key(raw: RawFile) -> str | None:
    """The key ``parse_file`` gives ``raw``, without parsing it (None: cannot be read now).

    A parallel run (the Dask ingest flow) uses it to skip, before any work is handed out, the
    files already in the lake and the second copy of content seen earlier in the run, exactly
    as the sequential run skips them.
    """
    load_content = READERS[raw.kind].load
    if load_content is None:
        return _unread_key(raw)
    try:
        if large_table(raw):  # hashed a piece at a time, never held
            stream = ContentStream(raw.path, raw.limits)
            for _ in stream.pieces():
                pass
            if not stream.utf16:  # (UTF-16 text is re-encoded whole: loaded)
                return file_key(stream.content(), raw)
        content = load_content(raw)
    except (OSError, EOFError, ValueError):
        return None
    return file_key(content, raw)


def large_table(raw: RawFile) -> bool:
    """Whether ``raw`` may be a JSON Lines table over ``table_chunk_bytes``, which the ingest
    reads as a stream, never whole (``stream.ingest_stream`` decides): a table file read by
    the JSON Lines loader whose bytes are over that size (a ``.gz``: its stored bytes, or the
    decompressed size its trailer gives)."""
    if raw.kind != "tabular" or raw.table is None or LOADERS.get(raw.suffix) is not load_jsonl:
        return False
    size = raw.limits.table_chunk_bytes
    try:
        stored = raw.path.stat().st_size
        if stored > size:
            return True
        if raw.path.suffix.lower() != ".gz" or stored < 4:
            return False
        with open(raw.path, "rb") as fh:  # ISIZE: the last member's size, modulo 2**32
            fh.seek(-4, os.SEEK_END)
            return int.from_bytes(fh.read(4), "little") > size
    except OSError:
        return False  # the load says why it cannot be read
