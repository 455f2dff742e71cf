"""Ingest: raw files -> canonical rows -> lake parts, one source file at a time.

The steps are separate functions so that the Prefect flow (``pipelines/ingest.py``) can run them
as tasks: ``discover`` -> ``parse_file`` -> ``write_file``. ``ingest`` runs them in-process.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import polars as pl

from ckptwatch.errors import LakeError, RecordError
from ckptwatch.ingest.discover import CorruptInputError, RawFile, discover, read_bytes
from ckptwatch.lake.schema import QUARANTINE, TABLES
from ckptwatch.lake.store import Lake, ManifestEntry
from ckptwatch.sources.base import INPUT_ERRORS, Parsed, Reject, safe_text
from ckptwatch.sources.envelope import read_envelopes, read_tool_file, time_from_name
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


@dataclass
class FileResult:
    """What happened to one raw file."""

    rel: str
    status: str  # ingested | skipped (already in the lake) | ignored | failed
    rows: dict[str, int] = field(default_factory=dict)
    quarantined: int = 0
    notes: list[str] = field(default_factory=list)
    error: str | None = None


@dataclass
class IngestReport:
    """The outcome of one ingest run."""

    raw_dir: Path
    lake: Path
    files: list[FileResult]
    recovered: int
    elapsed_s: float

    def count(self, status: str) -> int:
        """Files with this status."""
        return sum(f.status == status for f in self.files)

    @property
    def rows(self) -> dict[str, int]:
        """Rows written per table in this run."""
        out: dict[str, int] = {}
        for f in self.files:
            for t, n in f.rows.items():
                out[t] = out.get(t, 0) + n
        return out

    @property
    def quarantined(self) -> int:
        """Records quarantined in this run."""
        return sum(f.quarantined for f in self.files)


def file_key(data: bytes, raw: RawFile) -> str:
    """Identity of a source file: its content, plus the node its path names (bare tool output)."""
    h = hashlib.sha256(data)
    if raw.kind == "tool" and raw.node:  # surrogatepass: a directory name need not be UTF-8
        h.update(b"\0node=" + raw.node.encode("utf-8", "surrogatepass"))
    return h.hexdigest()


def parse_file(raw: RawFile, known: set[str] | None = None) -> ParsedFile:
    """Read and parse one raw file (skips the parse when its key is already in ``known``).

    Never raises for what the file holds: a malformed record is a reject, a malformed file is
    one reject for the whole file, and a failure of a parser itself (a bug that hostile input
    found) is a reject too, saying so. Only an unreadable file is an ``error``.
    """
    if raw.kind == "refused":  # never read: one quarantined record saying why
        key = _refused_key(raw)
        if known is not None and key in known:
            return ParsedFile(raw, key, 0, Parsed(), already=True)
        return ParsedFile(raw, key, 0, Parsed(rejects=[Reject(raw.reason or "not read", None)]))
    try:
        data = _sysfs_tree_bytes(raw) if raw.kind == "sysfs_tree" else read_bytes(raw.path)
    except CorruptInputError as exc:  # permanent: quarantined under the stored bytes' key
        return _corrupt(raw, exc, known)
    except (OSError, EOFError, ValueError) as exc:  # ValueError: a sysfs tree's bad names
        return ParsedFile(raw, "", 0, Parsed(),
                          error=safe_text(f"cannot read {raw.rel}: {exc}"))
    key = file_key(data, raw)
    if known is not None and key in known:
        return ParsedFile(raw, key, len(data), Parsed(), already=True)
    try:
        parsed = _parse(raw, data)
    except RecordError as exc:
        parsed = Parsed(rejects=[Reject(exc.reason, exc.line, _clip(data), raw.table)])
    except INPUT_ERRORS as exc:
        detail = " ".join(str(exc).split())[:300]
        parsed = Parsed(rejects=[Reject(
            f"the {raw.kind} reader failed on this file ({type(exc).__name__}: {detail}); the "
            "whole file is quarantined; please report it as a ckptwatch bug", None,
            _clip(data), raw.table)])
    return ParsedFile(raw, key, len(data), parsed)


def _refused_key(raw: RawFile) -> str:
    return hashlib.sha256(b"refused\0" + raw.rel.encode("utf-8", "surrogatepass") + b"\0"
                          + (raw.reason or "").encode("utf-8", "surrogatepass")).hexdigest()


def content_key(raw: RawFile) -> str | None:
    """The key ``parse_file`` gives ``raw``, without parsing it (None: cannot be read now).

    A parallel run (the Dask ingest flow) uses it to skip, before any work is handed out, the
    files already in the lake and the second copy of content seen earlier in the run, exactly
    as the sequential run skips them.
    """
    if raw.kind == "refused":
        return _refused_key(raw)
    try:
        data = _sysfs_tree_bytes(raw) if raw.kind == "sysfs_tree" else read_bytes(raw.path)
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


def _parse(raw: RawFile, data: bytes) -> Parsed:
    """Dispatch on the kind of file; raises ``RecordError`` for a malformed file."""
    parsed = Parsed()
    if raw.kind == "tabular":
        assert raw.table is not None
        parsed = _parse_tabular(raw, data)
    elif raw.kind == "envelope":
        parsed = read_envelopes(data, file_label=raw.rel, default_node=raw.node)
    elif raw.kind == "tool":
        assert raw.node is not None
        ts = time_from_name(raw.path.name) or datetime.fromtimestamp(
            raw.path.stat().st_mtime, tz=UTC)
        parsed = read_tool_file(data, file_label=raw.rel, node=raw.node, ts=ts)
    elif raw.kind == "sysfs_tree":
        parsed = _parse_sysfs_tree(raw)
    elif raw.kind == "dlio":
        parsed = _parse_dlio(raw, data)
    else:
        parsed.rejects.append(Reject(raw.reason or "unrecognised file", None,
                                     _clip(data)))
    return parsed


def _parse_tabular(raw: RawFile, data: bytes) -> Parsed:
    assert raw.table is not None
    loader = LOADERS.get(raw.suffix)
    if loader is None:
        raise RecordError(f"unsupported file type '{raw.suffix}' for {raw.table} "
                          f"(use .jsonl, .csv or .parquet)")
    return canonicalise(loader(data, raw.table), raw.table, file_label=raw.rel)


def _sysfs_tree_bytes(raw: RawFile) -> bytes:
    """A sysfs tree's identity: its counter files' paths and contents."""
    import json

    from ckptwatch.sources.sysfs_ib import read_sysfs_tree

    return json.dumps(read_sysfs_tree(raw.path), sort_keys=True).encode()


def _parse_sysfs_tree(raw: RawFile) -> Parsed:
    """A copied ``/sys/class/infiniband`` tree; its time is in a directory name or the mtime."""
    from ckptwatch.sources.base import ToolContext
    from ckptwatch.sources.envelope import parse_tool_output, rows_to_frames
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


def _parse_dlio(raw: RawFile, data: bytes) -> Parsed:
    """A DLIO/MLPerf Storage ``<rank>_per_epoch_stats.json``: job = its directory's name, the
    rank from the file name, the rank count from the run's ``summary.json`` beside it."""
    import json

    from ckptwatch.sources import mlperf
    from ckptwatch.sources.envelope import rows_to_frames

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


def _clip(data: bytes) -> str:
    from ckptwatch.settings import INGEST

    return data[: INGEST.quarantine_raw_max].decode("utf-8", "ignore")


def write_file(lake: Lake, pf: ParsedFile, ingested_ts: datetime) -> FileResult:
    """Write one parsed file's parts and commit it (journal first, manifest last).

    A failure while writing (disk full, permission denied) rolls this file's parts back before
    the error propagates, so the lake holds the file whole or not at all.
    """
    raw = pf.raw
    rel_text = safe_text(raw.rel)  # file names need not be UTF-8; the lake stores UTF-8
    if pf.error:
        return FileResult(rel_text, "failed", error=pf.error)
    if raw.kind == "ignored":
        return FileResult(rel_text, "ignored", notes=[safe_text(f"{raw.rel}: {raw.reason}")])
    if pf.already:
        return FileResult(rel_text, "skipped")
    prov = {"source_file": pl.lit(rel_text), "ingested_ts": pl.lit(ingested_ts).cast(
        pl.Datetime("us", "UTC"))}
    planned: list[tuple[str, str, pl.DataFrame]] = []
    rows: dict[str, int] = {}
    for table, frames in sorted(pf.parsed.frames.items()):
        frame = pl.concat(frames, how="diagonal_relaxed").with_columns(**prov)
        rows[table] = frame.height
        for rel, part in lake.plan_parts(pf.key, TABLES[table], frame):
            planned.append((table, rel, part))
    rejects = pf.parsed.rejects
    if rejects:
        q = pl.DataFrame(
            {
                "table": [r.table or raw.table for r in rejects],
                "line": [r.line for r in rejects],
                "reason": [safe_text(r.reason) for r in rejects],
                "raw": [None if r.raw is None else safe_text(r.raw) for r in rejects],
            },
            schema={"table": pl.String, "line": pl.Int64, "reason": pl.String, "raw": pl.String},
        ).with_columns(**prov)
        for rel, part in lake.plan_parts(pf.key, QUARANTINE, q):
            planned.append((QUARANTINE.name, rel, part))
    parts = [rel for _, rel, _ in planned]
    try:
        lake.begin(pf.key, parts)
        for table, rel, part in planned:
            lake.write_part(rel, TABLES[table], part)
        lake.commit(ManifestEntry(
            key=pf.key, path=rel_text, size_bytes=pf.size_bytes,
            ingested_ts=ingested_ts.isoformat(), rows=rows, quarantined=len(rejects),
            parts=parts))
    except BaseException:  # noqa: BLE001 - roll back on anything, Ctrl-C included, re-raise
        lake.rollback(pf.key, parts)
        raise
    notes = [safe_text(n) for n in pf.parsed.notes]
    if not rows and not rejects:
        notes.append(f"{rel_text}: no records in this file")
    return FileResult(rel_text, "ingested", rows=rows, quarantined=len(rejects), notes=notes)


def prepare_lake(lake_root: Path) -> tuple[Lake, int]:
    """Create the lake if needed and roll back any interrupted file; returns (lake, rolled back)."""
    lake = Lake(lake_root)
    lake.init()
    return lake, lake.recover()


def ingest(raw_dir: Path, lake_root: Path, *,
           progress: Callable[[int, int, str], None] | None = None,
           lock_wait_s: float = 600.0) -> IngestReport:
    """Ingest every new raw file under ``raw_dir`` into the lake at ``lake_root``.

    Files are committed one at a time. A write failure (disk full, permission denied) stops the
    run with one ``LakeError`` naming the file; that file is rolled back and the files committed
    before it stay, so a rerun finishes the job.
    """
    t0 = time.monotonic()
    files = discover(raw_dir)
    lake = Lake(lake_root)
    with lake.lock(wait_s=lock_wait_s):
        lake, recovered = prepare_lake(lake_root)
        known = lake.manifest_keys()
        now = datetime.now(UTC)
        results: list[FileResult] = []
        for i, raw in enumerate(files, start=1):
            if progress:
                progress(i, len(files), safe_text(raw.rel))
            pf = parse_file(raw, known)
            try:
                result = write_file(lake, pf, now)
            except LakeError as exc:
                raise run_stopped(exc, raw, results) from exc
            results.append(result)
            if result.status == "ingested":
                known.add(pf.key)  # a second copy of this content later in the run is skipped
    return IngestReport(raw_dir, lake_root, results, recovered, time.monotonic() - t0)


def run_stopped(exc: LakeError, raw: RawFile, done: list[FileResult]) -> LakeError:
    """The error that stops a run: the write failure, which file, and what was kept."""
    n = sum(r.status == "ingested" for r in done)
    return LakeError(f"{exc} (while writing {safe_text(raw.rel)}, which was rolled back; "
                     f"{n} file(s) committed earlier in this run are kept; rerun to finish)")
