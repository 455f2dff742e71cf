"""Write one parsed raw file into the lake as one transaction (journal, parts, manifest)."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Literal

import polars as pl

from ckptwatch.ingest.read import ParsedFile
from ckptwatch.lake.schema import QUARANTINE, TABLES
from ckptwatch.lake.store import Lake, ManifestEntry
from ckptwatch.sources.base import safe_text

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
