"""Ingest: raw files -> canonical rows -> lake parts, one source file at a time, in process.

The steps are separate so that the Prefect flow (``ckptwatch.flows.ingest``) can run them as
tasks: ``discover.discover`` -> ``read.parse_file`` -> ``write.write_file``. ``ingest`` runs
them here, in order.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from ckptwatch.errors import LakeError
from ckptwatch.ingest.discover import RawFile, discover
from ckptwatch.ingest.read import parse_file
from ckptwatch.ingest.write import FileResult, FileStatus, prepare_lake, write_file
from ckptwatch.lake.store import Lake
from ckptwatch.settings import IngestSettings, active_ingest, using_ingest
from ckptwatch.sources.base import safe_text


@dataclass
class IngestReport:
    """The outcome of one ingest run."""

    raw_dir: Path
    lake: Path
    files: list[FileResult]
    recovered: int
    elapsed_s: float
    #: Remarks on the run as a whole (a lake skipped under the raw directory), shown once.
    notes: list[str] = field(default_factory=list)

    def count(self, status: FileStatus) -> int:
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


def ingest(raw_dir: Path, lake_root: Path, *,
           progress: Callable[[int, int, str], None] | None = None,
           lock_wait_s: float = 600.0, limits: IngestSettings | None = None) -> IngestReport:
    """Ingest every new raw file under ``raw_dir`` into the lake at ``lake_root``.

    Files are committed one at a time. A write failure (disk full, permission denied) stops the
    run with one ``LakeError`` naming the file; that file is rolled back and the files committed
    before it stay, so a rerun finishes the job. ``limits``: the input limits (default: the
    built-in ones and the ``CKPTWATCH_MAX_*`` variables). The lake, when it lies under
    ``raw_dir``, is not read (``IngestReport.notes`` says so).
    """
    with using_ingest(limits or active_ingest()):
        return _ingest(raw_dir, lake_root, progress, lock_wait_s)


def _ingest(raw_dir: Path, lake_root: Path, progress: Callable[[int, int, str], None] | None,
            lock_wait_s: float) -> IngestReport:
    t0 = time.monotonic()
    notes: list[str] = []
    files = discover(raw_dir, lake=lake_root, notes=notes)
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
    return IngestReport(raw_dir, lake_root, results, recovered, time.monotonic() - t0,
                        notes=[safe_text(n) for n in notes])


def run_stopped(exc: LakeError, raw: RawFile, done: list[FileResult]) -> LakeError:
    """The error that stops a run: the write failure, which file, and what was kept."""
    n = sum(r.status == "ingested" for r in done)
    return LakeError(f"{exc} (while writing {safe_text(raw.rel)}, which was rolled back; "
                     f"{n} file(s) committed earlier in this run are kept; rerun to finish)")
