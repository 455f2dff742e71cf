"""Prefect flow: raw telemetry directory -> Parquet lake (discover -> parse -> write).

Tasks are thin wrappers over ``ckptwatch.ingest``; only I/O tasks retry. Run once:
``ckptwatch ingest RAW --lake LAKE --flow`` or ``python pipelines/ingest.py RAW LAKE``.
Scheduled runs come from ``prefect.yaml``.
"""

from __future__ import annotations

import sys
import time
from datetime import UTC, datetime
from pathlib import Path

from prefect import flow, get_run_logger, task
from prefect.cache_policies import NO_CACHE

from ckptwatch.discover import RawFile, discover
from ckptwatch.errors import LakeError
from ckptwatch.ingest import (
    FileResult,
    IngestReport,
    ParsedFile,
    parse_file,
    prepare_lake,
    run_stopped,
    write_file,
)
from ckptwatch.lake import Lake


@task(retries=2, retry_delay_seconds=5, task_run_name="discover {raw_dir}", cache_policy=NO_CACHE)
def discover_files(raw_dir: Path) -> list[RawFile]:
    """List and recognise the raw files (I/O: retried)."""
    return discover(raw_dir)


@task(task_run_name="parse {raw.rel}", cache_policy=NO_CACHE)
def parse(raw: RawFile, known: set[str]) -> ParsedFile:
    """Parse one raw file into canonical rows and rejects."""
    return parse_file(raw, known)


@task(retries=2, retry_delay_seconds=5, task_run_name="write {pf.raw.rel}",
      cache_policy=NO_CACHE)
def write(lake_root: Path, pf: ParsedFile, ingested_ts: datetime) -> FileResult:
    """Write one file's parts and commit it (I/O: retried; the journal makes retries safe)."""
    return write_file(Lake(lake_root), pf, ingested_ts)


@flow(name="ingest", flow_run_name="ingest {raw_dir}", log_prints=True)
def ingest_flow(raw_dir: Path, lake_root: Path, lock_wait_s: float = 600.0) -> IngestReport:
    """Ingest every new raw file under ``raw_dir`` into the lake at ``lake_root``."""
    logger = get_run_logger()
    t0 = time.monotonic()
    raw_dir, lake_root = Path(raw_dir), Path(lake_root)
    with Lake(lake_root).lock(wait_s=lock_wait_s):
        lake, recovered = prepare_lake(lake_root)
        if recovered:
            logger.warning("rolled back %d file(s) left half-ingested by an earlier run",
                           recovered)
        files = discover_files(raw_dir)
        known = lake.manifest_keys()
        now = datetime.now(UTC)
        results: list[FileResult] = []
        for i, raw in enumerate(files, start=1):
            pf = parse(raw, known)
            try:
                result = write(lake_root, pf, now)
            except LakeError as exc:  # disk full, permission denied: stop with one line
                raise run_stopped(exc, raw, results) from exc
            results.append(result)
            if result.status == "ingested":
                known.add(pf.key)  # a second copy of this content later in the run is skipped
            if i % 50 == 0 or i == len(files):
                logger.info("ingest: %d/%d files", i, len(files))
    report = IngestReport(raw_dir, lake_root, results, recovered, time.monotonic() - t0)
    logger.info("ingest: %d ingested, %d skipped, %d quarantined records", report.count(
        "ingested"), report.count("skipped"), report.quarantined)
    return report


if __name__ == "__main__":
    ingest_flow(Path(sys.argv[1]), Path(sys.argv[2]))
