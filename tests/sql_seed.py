"""Literal rows straight into a lake, for the SQL unit tests (seed 2-5 rows, run a view)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq

from ckptwatch.lake.query import connect, run_sql, views_named_in
from ckptwatch.lake.schema import TABLES
from ckptwatch.lake.store import Lake

T0 = datetime(2026, 11, 28, tzinfo=UTC)
INGESTED = datetime(2026, 11, 29, tzinfo=UTC)


def at(seconds: float) -> datetime:
    """T0 + seconds."""
    return T0 + timedelta(seconds=seconds)


def views_read(sql: str) -> tuple[str, ...] | None:
    """The views ``sql`` names (``query.views_named_in``), for ``connect(..., views=...)``:
    those and what they read are built, not all 46 (a full build binds every mart: ~1.6 CPU s,
    against ~0.2 s for one staging view); ``None`` (none named): every view."""
    return tuple(sorted(views_named_in(sql))) or None


def seed(root: Path, table: str, rows: list[dict[str, Any]], part: str = "x") -> None:
    """Write literal rows as one lake part of ``table`` (missing optional columns are null)."""
    schema = TABLES[table].schema
    defaults = {"source_file": f"seed/{part}", "ingested_ts": INGESTED}
    filled = [{**defaults, **row} for row in rows]
    arrow = pa.table({f.name: [r.get(f.name) for r in filled] for f in schema}, schema=schema)
    path = root / table / f"date={T0:%Y-%m-%d}" / f"part-{part}.parquet"
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(arrow, path)


def fabric_deltas(lake_root: Path, rows: list[dict[str, Any]]) -> pl.DataFrame:
    """Parsed fabric rows -> the ``stg_counter_deltas`` view (the one implementation)."""
    Lake(lake_root).init()
    con = connect(lake_root, views=("stg_counter_deltas",))  # that view and what it reads
    try:
        con.execute("drop view fabric_counters").fetchall()
        provenance = {"source_file": "test", "ingested_ts": INGESTED}
        con.register("fabric_counters", pa.Table.from_pylist(
            [{**row, **provenance} for row in rows], schema=TABLES["fabric_counters"].schema))
        return run_sql(con, "select * from stg_counter_deltas order by host, device, port, "
                            "counter, ts")
    finally:
        con.close()


def marker(job: str, step: int, rank: int, *, start: float = 0.0, tier: str = "pool",
           **extra: Any) -> dict[str, Any]:
    """One rank's start marker (a ``checkpoint_starts`` row) at T0 + ``start``, ingested then
    (as a watcher-era lake would: the ingest time counts towards the data end); node
    n<rank // 2> and target t<rank % 2>, as ``tests.sql.test_marts.write`` places a record."""
    return {"job_id": job, "step": step, "rank": rank, "node": f"n{rank // 2}", "tier": tier,
            "target": f"t{rank % 2}", "start_ts": at(start), "ingested_ts": at(start),
            **extra}
