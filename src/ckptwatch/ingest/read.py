"""Read one raw file into canonical rows and rejects (``parse_file``), and say who it is.

Every kind of raw file (``discover.FileKind``) has one entry in ``READERS``: how its bytes are
loaded (a file, or a whole sysfs tree; ``refused`` files are never read) and how they are
parsed. A file's identity (``file_key``) is its content, so that a copy under another name, or
a rerun, is skipped instead of written twice.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from ckptwatch.errors import CorruptInputError, RecordError
from ckptwatch.ingest.discover import FileKind, RawFile, read_bytes
from ckptwatch.sources import mlperf
from ckptwatch.sources.base import INPUT_ERRORS, Parsed, Reject, ToolContext, clip_raw, safe_text
from ckptwatch.sources.envelope import (
    parse_tool_output,
    read_envelopes,
    read_tool_file,
    rows_to_frames,
    time_from_name,
)
from ckptwatch.sources.tabular import LOADERS, canonicalise


@dataclass
class ParsedFile:
    """One raw file after parsing: its identity (``key``) and what it produced."""

    raw: RawFile
    key: str
    size_bytes: int
    parsed: Parsed
    already: bool = False
    error: str | None = None


@dataclass(frozen=True)
class Reader:
    """How one kind of raw file is read: its bytes (``load``; None: the file is never read) and
    what they hold (``parse``, which raises ``RecordError`` for a malformed file)."""

    parse: Callable[[RawFile, bytes], Parsed]
    load: Callable[[RawFile], bytes] | None


def _file_bytes(raw: RawFile) -> bytes:
    """The file's content, decompressed when it ends in ``.gz``."""
    return read_bytes(raw.path)


def _sysfs_tree_bytes(raw: RawFile) -> bytes:
    """A sysfs tree's identity: its counter files' paths and contents."""
    # Imported when first needed: importing a format module registers its parser, and the
    # order of registration is the order of detection (``sources.base.detect_tool``).
    from ckptwatch.sources.sysfs_ib import read_sysfs_tree

    return json.dumps(read_sysfs_tree(raw.path), sort_keys=True).encode()


def _read_tabular(raw: RawFile, data: bytes) -> Parsed:
    """A canonical table file (JSON Lines, CSV or Parquet) for ``raw.table``."""
    assert raw.table is not None
    loader = LOADERS.get(raw.suffix)
    if loader is None:
        raise RecordError(f"unsupported file type '{raw.suffix}' for {raw.table} "
                          f"(use .jsonl, .csv or .parquet)")
    return canonicalise(loader(data, raw.table), raw.table, file_label=raw.rel)


def _read_envelopes(raw: RawFile, data: bytes) -> Parsed:
    """A JSON Lines envelope file; a line without ``node`` takes the node its place names."""
    return read_envelopes(data, file_label=raw.rel, default_node=raw.node)


def _read_tool(raw: RawFile, data: bytes) -> Parsed:
    """A bare tool output under ``<kind>/<node>/``; its time is in its name or its mtime."""
    assert raw.node is not None
    ts = time_from_name(raw.path.name) or datetime.fromtimestamp(
        raw.path.stat().st_mtime, tz=UTC)
    return read_tool_file(data, file_label=raw.rel, node=raw.node, ts=ts)


def _read_sysfs_tree(raw: RawFile, data: bytes) -> Parsed:
    """A copied ``/sys/class/infiniband`` tree; its time is in a directory name or the mtime."""
    from ckptwatch.sources.sysfs_ib import read_sysfs_tree

    assert raw.node is not None
    ts = next((t for t in (time_from_name(p) for p in Path(raw.rel).parts) if t), None)
    if ts is None:
        newest = max((p.stat().st_mtime for p in raw.path.rglob("*") if p.is_file()),
                     default=raw.path.stat().st_mtime)
        ts = datetime.fromtimestamp(newest, tz=UTC)
    out = Parsed()
    ctx = ToolContext(node=raw.node, ts=ts, source="sysfs-ib")
    rows_to_frames(parse_tool_output(read_sysfs_tree(raw.path), ctx), out)
    return out


def _read_dlio(raw: RawFile, data: bytes) -> Parsed:
    """A DLIO/MLPerf Storage ``<rank>_per_epoch_stats.json``: job = its directory's name, the
    rank from the file name, the rank count from the run's ``summary.json`` beside it."""
    rank = mlperf.rank_from_filename(raw.path.name)
    if rank is None:  # DLIO names per-rank files <rank>_per_epoch_stats.json; bare is rank 0
        rank = 0
    parent = raw.path.parent
    job_id = parent.name if len(Path(raw.rel).parts) > 2 else raw.path.stem
    n_ranks = None
    summary = parent / "summary.json"
    if summary.exists():
        try:
            n_ranks = mlperf.n_ranks_from_summary(json.loads(summary.read_text()))
        except (OSError, ValueError):
            n_ranks = None
    rows = mlperf.parse_dlio_per_epoch_stats(data, rank=rank, job_id=job_id, node=None,
                                             n_ranks=n_ranks)
    out = Parsed()
    rows_to_frames({"checkpoint_writes": rows}, out)
    out.notes.append(f"{raw.rel}: DLIO stats name no node or target (node='unknown'); "
                     "see docs/formats.md to supply them")
    return out


def _read_unrecognised(raw: RawFile, data: bytes) -> Parsed:
    """A file nothing recognised: one quarantined record with the reason and its first bytes."""
    return Parsed(rejects=[Reject(raw.reason or "unrecognised file", None, clip_raw(data))])


def _read_refused(raw: RawFile, data: bytes) -> Parsed:
    """A file that must not be read (see ``discover``): one quarantined record saying why."""
    return Parsed(rejects=[Reject(raw.reason or "not read", None)])


def _read_nothing(raw: RawFile, data: bytes) -> Parsed:
    """Documentation or labels beside the telemetry: read for its key, listed as ignored."""
    return Parsed()


#: The one reader of every kind of raw file (a test checks that every ``FileKind`` has one).
READERS: dict[FileKind, Reader] = {
    "tabular": Reader(_read_tabular, _file_bytes),
    "envelope": Reader(_read_envelopes, _file_bytes),
    "tool": Reader(_read_tool, _file_bytes),
    "sysfs_tree": Reader(_read_sysfs_tree, _sysfs_tree_bytes),
    "dlio": Reader(_read_dlio, _file_bytes),
    "unknown": Reader(_read_unrecognised, _file_bytes),
    "refused": Reader(_read_refused, None),
    "ignored": Reader(_read_nothing, _file_bytes),
}


def file_key(data: bytes, raw: RawFile) -> str:
    """Identity of a source file: its content, plus the node its path names (bare tool output)."""
    h = hashlib.sha256(data)
    if raw.kind == "tool" and raw.node:  # surrogatepass: a directory name need not be UTF-8
        h.update(b"\0node=" + raw.node.encode("utf-8", "surrogatepass"))
    return h.hexdigest()


def _unread_key(raw: RawFile) -> str:
    """Identity of a file that is never read: its place and the reason."""
    return hashlib.sha256(b"refused\0" + raw.rel.encode("utf-8", "surrogatepass") + b"\0"
                          + (raw.reason or "").encode("utf-8", "surrogatepass")).hexdigest()


def parse_file(raw: RawFile, known: set[str] | None = None) -> ParsedFile:
    """Read and parse one raw file (skips the parse when its key is already in ``known``).

    Never raises for what the file holds: a malformed record is a reject, a malformed file is
    one reject for the whole file, and a failure of a parser itself (a bug that hostile input
    found) is a reject too, saying so. Only an unreadable file is an ``error``.
    """
    reader = READERS[raw.kind]
    if reader.load is None:  # never read: one quarantined record saying why
        key = _unread_key(raw)
        if known is not None and key in known:
            return ParsedFile(raw, key, 0, Parsed(), already=True)
        return ParsedFile(raw, key, 0, reader.parse(raw, b""))
    try:
        data = reader.load(raw)
    except CorruptInputError as exc:  # permanent: quarantined under the stored bytes' key
        return _corrupt(raw, exc, known)
    except (OSError, EOFError, ValueError) as exc:  # ValueError: a sysfs tree's bad names
        return ParsedFile(raw, "", 0, Parsed(),
                          error=safe_text(f"cannot read {raw.rel}: {exc}"))
    key = file_key(data, raw)
    if known is not None and key in known:
        return ParsedFile(raw, key, len(data), Parsed(), already=True)
    try:
        parsed = reader.parse(raw, data)
    except RecordError as exc:
        parsed = Parsed(rejects=[Reject(exc.reason, exc.line, clip_raw(data), raw.table)])
    except INPUT_ERRORS as exc:
        detail = " ".join(str(exc).split())[:300]
        parsed = Parsed(rejects=[Reject(
            f"the {raw.kind} reader failed on this file ({type(exc).__name__}: {detail}); the "
            "whole file is quarantined; please report it as a ckptwatch bug", None,
            clip_raw(data), raw.table)])
    return ParsedFile(raw, key, len(data), parsed)


def content_key(raw: RawFile) -> str | None:
    """The key ``parse_file`` gives ``raw``, without parsing it (None: cannot be read now).

    A parallel run (the Dask ingest flow) uses it to skip, before any work is handed out, the
    files already in the lake and the second copy of content seen earlier in the run, exactly
    as the sequential run skips them.
    """
    load = READERS[raw.kind].load
    if load is None:
        return _unread_key(raw)
    try:
        data = load(raw)
    except CorruptInputError:
        try:
            data = raw.path.read_bytes()
        except OSError:
            return None
    except (OSError, EOFError, ValueError):
        return None
    return file_key(data, raw)


def _corrupt(raw: RawFile, exc: CorruptInputError, known: set[str] | None) -> ParsedFile:
    """A file whose stored bytes cannot be decoded: one quarantined record, keyed by them."""
    try:
        stored = raw.path.read_bytes()
    except OSError as err:
        return ParsedFile(raw, "", 0, Parsed(), error=safe_text(f"cannot read {raw.rel}: {err}"))
    key = file_key(stored, raw)
    if known is not None and key in known:
        return ParsedFile(raw, key, len(stored), Parsed(), already=True)
    return ParsedFile(raw, key, len(stored), Parsed(rejects=[
        Reject(f"cannot read file: {exc}", None, None, raw.table)]))
