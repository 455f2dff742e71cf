"""Write one parsed raw file into the lake as one transaction (journal, parts, manifest).

A file that could not be read whole (``ParsedFile.failure``) is ``failed``: its rejects and
the records read from it go to quarantine only (a record as its canonical values in JSON,
with a reason saying so; at most ``max_quarantine_rows`` of them), and no manifest entry is
written, so the next run reads the file again. Its quarantine parts are named by its key and
day, so a rerun on the same day replaces them instead of adding rows.
"""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from pathlib import Path
from typing import Literal

import polars as pl

from ckptwatch.ingest.read import EncodedParts, ParsedFile
from ckptwatch.lake.schema import QUARANTINE, TABLES, Table
from ckptwatch.lake.store import INFLIGHT_DIR, Lake, ManifestEntry, encode_part
from ckptwatch.settings import IngestSettings
from ckptwatch.sources.base import Parsed, Reject, clip_raw, safe_text

#: What happened to one raw file: ``ingested``, ``skipped`` (already in the lake), ``ignored``
#: (not telemetry) or ``failed`` (could not be read; ``FileResult.error`` says why).
FileStatus = Literal["ingested", "skipped", "ignored", "failed"]


@dataclass
class FileResult:
    """What happened to one raw file."""

    rel: str
    status: FileStatus
    rows: dict[str, int] = field(default_factory=dict)
    quarantined: int = 0
    notes: list[str] = field(default_factory=list)
    error: str | None = None


def write_file(lake: Lake, pf: ParsedFile, ingested_ts: datetime) -> FileResult:
    """Write one parsed file's parts and commit it (journal first, manifest last).

    A failure while writing (disk full, permission denied) rolls this file's parts back before
    the error propagates, so the lake holds the file whole or not at all.
    """
    return write_files(lake, [pf], ingested_ts)[0]


@dataclass
class _Planned:
    """A file to ingest, planned: its parts (table, part path, rows), manifest entry, result;
    or, where ``frames`` holds its rows per table (with provenance), its parts still to plan
    (``_share_parts``: with the other files of its batch)."""

    parts: list[tuple[str, str, pl.DataFrame | bytes]]
    entry: ManifestEntry
    result: FileResult
    frames: dict[str, pl.DataFrame] | None = None
    #: Its parts are shared with the other files of its batch (encoded so in a worker).
    shares: bool = False


def write_files(lake: Lake, pfs: list[ParsedFile], ingested_ts: datetime) -> list[FileResult]:
    """``write_file`` of each of ``pfs``, in order, the files to ingest written as one batch
    (``Lake.begin_batch``: one journal entry and one round of fsyncs, each file still
    committed by its own manifest entry; see ``lake.store`` for why a crash loses and doubles
    nothing). A file that failed to read is written on its own (quarantine only), first.

    A failure while writing rolls back every file of the batch before the error propagates, so
    the lake holds each file whole or not at all, and none of this batch.

    The rows of the batch's files are written together, a part per table and day for all of
    them (``_share_parts``), not a part per file: the batch is then one transaction on
    recovery too (``Lake.begin_batch``'s ``shared``: a crash before its last manifest entry
    rolls back all of its files, which the next run reads again). Files whose parts a parse
    worker encoded (``ParsedFile.encoded``) keep their own.
    """
    results: list[FileResult | None] = []
    planned: list[tuple[int, _Planned]] = []
    for pf in pfs:
        step = _plan(lake, pf, ingested_ts)
        if isinstance(step, _Planned):
            planned.append((len(results), step))
            results.append(None)
        else:
            results.append(step)
    if planned:
        key = batch_key([p.entry.key for _, p in planned])
        parts, shared = _share_parts(lake, key, [p for _, p in planned])
        files = {p.entry.key: p.entry.parts for _, p in planned}
        try:
            lake.begin_batch(key, files, shared=shared)
            lake.write_parts(parts)
            lake.commit_batch(key, [p.entry for _, p in planned])
        except BaseException:  # noqa: BLE001 - roll back on anything, Ctrl-C included, re-raise
            lake.rollback_batch(key, files)
            raise
        for i, p in planned:
            results[i] = p.result
    return [r for r in results if r is not None]


def _share_parts(lake: Lake, key: str, planned: list[_Planned]
                 ) -> tuple[list[tuple[str, Table, pl.DataFrame | bytes]], bool]:
    """The parts of batch ``key``'s files (``planned``): each file's ``parts``, and each
    file's manifest entry naming the parts that hold its rows. The files with ``frames``
    share their parts when there are several (``_pooled_parts``). Returns (relative path,
    table, rows or bytes) of every part of the batch, and whether parts are shared (there or
    in a parse worker: ``EncodedParts.held``)."""
    out: list[tuple[str, Table, pl.DataFrame | bytes]] = [
        (rel, TABLES[table], part) for p in planned for table, rel, part in p.parts]
    pooled = [p for p in planned if p.frames is not None]
    if len(pooled) == 1:  # a file of its own: its parts named by its key, as ever
        p = pooled[0]
        assert p.frames is not None
        for table, frame in p.frames.items():
            p.parts += [(table, rel, part)
                        for rel, part in lake.plan_parts(p.entry.key, TABLES[table], frame)]
        out += [(rel, TABLES[table], part) for table, rel, part in p.parts]
        p.entry = replace(p.entry, parts=[rel for _, rel, _ in p.parts])
        pooled = []
    elif pooled:
        parts, held = _pooled_parts(lake, key, [p.frames or {} for p in pooled])
        out += [(rel, TABLES[table], part) for table, rel, part in parts]
        for p, rels in zip(pooled, held, strict=True):
            p.entry = replace(p.entry, parts=rels)
    shared = bool(pooled) or any(p.shares for p in planned)
    return out, shared


def _pooled_parts(lake: Lake, key: str, frames: list[dict[str, pl.DataFrame]]
                  ) -> tuple[list[tuple[str, str, pl.DataFrame]], list[list[str]]]:
    """The parts of several files' rows (``frames``: each file's rows per table) in common:
    per table (the quarantine last) their rows one after another, in the files' order, split
    by day (``Lake.plan_parts``, named by ``key``); and per file the parts holding its rows.
    A part per table and day for a batch, not per file: fewer, larger parts (a file per node
    of a few thousand rows each cost a part, its encoding and its fsync)."""
    held: list[list[str]] = [[] for _ in frames]
    out: list[tuple[str, str, pl.DataFrame]] = []
    tables = sorted({t for f in frames for t in f}, key=lambda t: (t == QUARANTINE.name, t))
    for table in tables:
        frame = pl.concat([f[table].with_columns(pl.lit(k, pl.UInt32).alias("__file"))
                           for k, f in enumerate(frames) if table in f],
                          how="diagonal_relaxed")
        for rel, part in lake.plan_parts(key, TABLES[table], frame):
            for k in part["__file"].unique(maintain_order=True).to_list():
                held[k].append(rel)
            out.append((table, rel, part.drop("__file")))
    return out, held


def batch_key(keys: list[str]) -> str:
    """The journal key of a batch of files to ingest (their keys, in order), which names
    the parts they share."""
    return keys[0] if len(keys) == 1 else hashlib.sha256("\0".join(keys).encode()).hexdigest()


def to_ingest(pf: ParsedFile) -> bool:
    """True when ``write_files`` ingests ``pf`` (it is neither skipped, ignored nor failed)."""
    return not (pf.error or pf.already or pf.failure or pf.raw.kind == "ignored")


def plan_batches(pfs: Sequence[ParsedFile], limits: IngestSettings) -> list[ParsedFile]:
    """``pfs`` with the last file of each batch marked (``ParsedFile.ends_batch``): files in
    order, a batch closed at ``limits.batch_files`` files to ingest or ``batch_rows`` rows,
    and a file that failed to read a batch of its own. A run writes the batches of each group
    of files it parses (``read.parse_loaded``) as marked here, in its process or (their
    shared parts encoded: ``encode_batch``) in a parse worker: the same batches either way."""
    rows = files = 0
    out = list(pfs)
    for k, pf in enumerate(out):
        if pf.failure:
            if k:
                out[k - 1].ends_batch = True
            pf.ends_batch = True
            rows = files = 0
            continue
        if to_ingest(pf):
            rows += pf.n_rows
            files += 1
        if rows >= limits.batch_rows or files >= limits.batch_files:
            pf.ends_batch = True
            rows = files = 0
    if out:
        out[-1].ends_batch = True
    return out


def batches(pfs: Sequence[ParsedFile]) -> list[list[ParsedFile]]:
    """``pfs`` cut after each file that ends a batch (``plan_batches``)."""
    out: list[list[ParsedFile]] = [[]]
    for pf in pfs:
        out[-1].append(pf)
        if pf.ends_batch:
            out.append([])
    return [b for b in out if b]


def encode_batch(lake: Lake, pfs: list[ParsedFile], ingested_ts: datetime
                 ) -> list[ParsedFile]:
    """``pfs`` (one batch: ``plan_batches``) with the parts ``write_files`` would write for
    them encoded (``EncodedParts``: the same bytes it writes), their rows dropped: the parts
    they share (``_pooled_parts``) where several are to ingest, else each file's own
    (``encode_parts``)."""
    todo = [k for k, pf in enumerate(pfs) if to_ingest(pf) and pf.encoded is None]
    if len(todo) < 2:
        return [encode_parts(lake, pf, ingested_ts) for pf in pfs]
    out = list(pfs)
    frames = []
    rows = []
    for k in todo:
        f, r = _frames(pfs[k], safe_text(pfs[k].raw.rel), ingested_ts)
        frames.append(f)
        rows.append(r)
    parts, held = _pooled_parts(lake, batch_key([pfs[k].key for k in todo]), frames)
    encoded = [(t, rel, encode_part(TABLES[t], part)) for t, rel, part in parts]
    for n, k in enumerate(todo):
        pf = pfs[k]
        out[k] = replace(pf, parsed=Parsed(rejects=pf.parsed.rejects, notes=pf.parsed.notes),
                         encoded=EncodedParts(encoded if n == 0 else [], rows[n], held[n]))
    return out


def _plan(lake: Lake, pf: ParsedFile, ingested_ts: datetime) -> FileResult | _Planned:
    """What writing ``pf`` takes: its result at once (nothing to write, or a failed file,
    written here on its own), or its parts (or its rows, ``_Planned.frames``, when they are
    its batch's to share) and manifest entry (``_Planned``)."""
    raw = pf.raw
    rel_text = safe_text(raw.rel)  # file names need not be UTF-8; the lake stores UTF-8
    if pf.error:
        return FileResult(rel_text, "failed", error=pf.error)
    if raw.kind == "ignored":
        return FileResult(rel_text, "ignored", notes=[safe_text(f"{raw.rel}: {raw.reason}")])
    if pf.already:
        return FileResult(rel_text, "skipped")
    if pf.failure:
        return write_failed(lake, pf, rel_text, provenance(rel_text, ingested_ts))
    planned: list[tuple[str, str, pl.DataFrame | bytes]] = []
    frames: dict[str, pl.DataFrame] | None = None
    held: list[str] | None = None
    if pf.encoded is not None:
        planned, rows = list(pf.encoded.parts), dict(pf.encoded.rows)
        held = pf.encoded.held
    else:
        frames, rows = _frames(pf, rel_text, ingested_ts)
    rejects = pf.parsed.rejects
    parts = [rel for _, rel, _ in planned] if held is None else list(held)
    entry = ManifestEntry(
        key=pf.key, path=rel_text, size_bytes=pf.size_bytes,
        ingested_ts=ingested_ts.isoformat(), rows=rows, quarantined=len(rejects), parts=parts)
    notes = [safe_text(n) for n in pf.parsed.notes]
    if not rows and not rejects:
        notes.append(f"{rel_text}: no records in this file")
    return _Planned(planned, entry, FileResult(rel_text, "ingested", rows=rows,
                                               quarantined=len(rejects), notes=notes), frames,
                    held is not None)


def provenance(rel_text: str, ingested_ts: datetime) -> dict[str, pl.Expr]:
    """The provenance columns of a file's rows (``source_file``, ``ingested_ts``)."""
    return {"source_file": pl.lit(rel_text), "ingested_ts": _ingested_ts(ingested_ts)}


@functools.lru_cache(maxsize=8)
def _ingested_ts(ingested_ts: datetime) -> pl.Expr:
    """The run's ``ingested_ts`` as a literal: made once per run, not once per file (a
    datetime literal costs ~0.5 ms: 0.17 s of a DLIO run's 376 files)."""
    return pl.lit(ingested_ts).cast(pl.Datetime("us", "UTC"))


def _frames(pf: ParsedFile, rel_text: str, ingested_ts: datetime
            ) -> tuple[dict[str, pl.DataFrame], dict[str, int]]:
    """A file's rows with provenance per table, its rows first, its rejects last (under the
    quarantine's name), and its rows per table."""
    prov = provenance(rel_text, ingested_ts)
    out: dict[str, pl.DataFrame] = {}
    rows: dict[str, int] = {}
    for table, frames in sorted(pf.parsed.frames.items()):
        frame = pl.concat(frames, how="diagonal_relaxed").with_columns(**prov)
        rows[table] = frame.height
        out[table] = frame
    rejects = pf.parsed.rejects
    if rejects:
        out[QUARANTINE.name] = quarantine_frame(rejects, pf.raw.table).with_columns(**prov)
    return out, rows


def _parts(lake: Lake, pf: ParsedFile, rel_text: str, ingested_ts: datetime
           ) -> tuple[list[tuple[str, str, pl.DataFrame]], dict[str, int]]:
    """A file's parts of its own (table, part path, rows with provenance), its rows first,
    its rejects last, and its rows per table."""
    frames, rows = _frames(pf, rel_text, ingested_ts)
    return [(table, rel, part) for table, frame in frames.items()
            for rel, part in lake.plan_parts(pf.key, TABLES[table], frame)], rows


def encode_parts(lake: Lake, pf: ParsedFile, ingested_ts: datetime) -> ParsedFile:
    """``pf`` with the parts ``write_files`` would write for it encoded (``EncodedParts``:
    the same bytes it writes), its rows dropped; a file ``write_files`` does not write parts
    of this way (failed, skipped, ignored) as it is."""
    if pf.error or pf.failure or pf.already or pf.raw.kind == "ignored" or pf.encoded:
        return pf
    frames, rows = _parts(lake, pf, safe_text(pf.raw.rel), ingested_ts)
    encoded = EncodedParts([(t, rel, encode_part(TABLES[t], part)) for t, rel, part in frames],
                           rows)
    parsed = Parsed(rejects=pf.parsed.rejects, notes=pf.parsed.notes)
    return replace(pf, parsed=parsed, encoded=encoded)


def quarantine_frame(rejects: list[Reject], table: str | None) -> pl.DataFrame:
    """A file's rejects as quarantine rows (provenance still to add); ``table``: the file's,
    for a reject that names none."""
    return pl.DataFrame(
        {
            "table": [r.table or table for r in rejects],
            "line": [r.line for r in rejects],
            "reason": [safe_text(r.reason) for r in rejects],
            "raw": [None if r.raw is None else safe_text(r.raw) for r in rejects],
        },
        schema={"table": pl.String, "line": pl.Int64, "reason": pl.String, "raw": pl.String},
    )


def _kept_records(pf: ParsedFile, room: int) -> list[Reject]:
    """The records read from a failed file, as quarantine rows (canonical values as JSON), at
    most ``room`` of them, and one row counting the rest."""
    return kept_records(str(pf.failure), ((table, frame, frame.height) for table, frames
                                          in sorted(pf.parsed.frames.items())
                                          for frame in frames), room)


def kept_records(failure: str, frames: Iterable[tuple[str, pl.DataFrame, int]],
                 room: int) -> list[Reject]:
    """``_kept_records`` of a failed file's rows given as (table, rows, how many rows they
    stand for: the first of them are given), tables in name order: at most ``room`` rows,
    and one row counting the rest."""
    out: list[Reject] = []
    more = 0
    why = (f"read from a file that failed ({failure}): not ingested; it is when the file "
           "is fixed and ingested again")
    for table, frame, total in frames:
        take = frame.head(max(room - len(out), 0))
        more += total - take.height
        if take.height:
            raws = take.select(pl.struct(pl.all()).struct.json_encode()).to_series()
            out += [Reject(safe_text(why), None, clip_raw(r), table) for r in raws]
    if more:
        out.append(Reject(f"{more:,} more record(s) read from this failed file not kept "
                          "(CKPTWATCH_MAX_QUARANTINE_ROWS); they are ingested when the file is "
                          "fixed", None, None, None))
    return out


def write_failed(lake: Lake, pf: ParsedFile, rel_text: str,
                 prov: dict[str, pl.Expr], kept: list[Reject] | None = None) -> FileResult:
    """A file that could not be read whole: quarantine only, no manifest entry (see the module
    docstring); journalled like any write, so a killed run leaves nothing of it. ``kept``: the
    records read from it as quarantine rows (default: ``_kept_records`` of its rows)."""
    if kept is None:
        kept = _kept_records(pf, pf.raw.limits.max_quarantine_rows)
    rejects = [*pf.parsed.rejects, *kept]
    # Parts named by content and path: two copies of a broken file each keep their rows.
    key = hashlib.sha256(f"{pf.key}\0failed\0{rel_text}".encode()).hexdigest()
    planned = [(rel, part) for rel, part in lake.plan_parts(
        key, QUARANTINE, quarantine_frame(rejects, pf.raw.table).with_columns(**prov))]
    parts = [rel for rel, _ in planned]
    try:
        lake.begin(key, parts)
        for rel, part in planned:
            lake.write_part(rel, QUARANTINE, part)
        (lake.root / INFLIGHT_DIR / f"{key}.json").unlink()
    except BaseException:  # noqa: BLE001 - roll back on anything, Ctrl-C included, re-raise
        lake.rollback(key, parts)
        raise
    notes = [safe_text(n) for n in pf.parsed.notes]
    return FileResult(rel_text, "failed", quarantined=len(rejects), notes=notes,
                      error=safe_text(f"{pf.failure} (kept in quarantine: {len(rejects)} "
                                      "row(s); not recorded as ingested, so the next run reads "
                                      "it again)"))


def prepare_lake(lake_root: Path) -> tuple[Lake, int]:
    """Create the lake if needed and roll back any interrupted file; returns (lake, rolled back)."""
    lake = Lake(lake_root)
    lake.init()
    return lake, lake.recover()
