"""Prefect flow: the nightly run. Today: ingest the day's raw files and build the SQL views.

Later stages (stall detection and attribution, alerts, the daily report) plug in here as their
issues land; each is a package function wrapped in a thin task.
"""

from __future__ import annotations

import sys
from pathlib import Path

from prefect import flow, get_run_logger, task
from prefect.cache_policies import NO_CACHE

from ckptwatch.query import connect, view_files

try:  # run as a script from the project root, or imported as pipelines.nightly
    from pipelines.ingest import ingest_flow
except ImportError:  # pragma: no cover - script mode
    from ingest import ingest_flow  # type: ignore[no-redef]


@task(task_run_name="build views", cache_policy=NO_CACHE)
def build_views(lake_root: Path) -> int:
    """Build every SQL view over the lake (checks that the SQL layer is sound)."""
    con = connect(lake_root)
    con.close()
    return len(view_files())


@flow(name="nightly", flow_run_name="nightly {raw_dir}", log_prints=True)
def nightly_flow(raw_dir: Path, lake_root: Path) -> dict[str, int]:
    """Ingest new raw files, then build the views."""
    report = ingest_flow(Path(raw_dir), Path(lake_root))
    n_views = build_views(Path(lake_root))
    get_run_logger().info("nightly: %d files ingested, %d views built",
                          report.count("ingested"), n_views)
    return {"ingested": report.count("ingested"), "views": n_views}


if __name__ == "__main__":
    nightly_flow(Path(sys.argv[1]), Path(sys.argv[2]))
