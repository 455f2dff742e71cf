"""A lake from an older version with an identifier over the field limit: every analysis reads
on, the row left out and named (issue 17: "every analysis survives any lake")."""

from __future__ import annotations

from pathlib import Path

import pytest
from tests.sql_seed import T0, at, seed

from ckptwatch.lake.query import connect, run_sql, skipped_rows
from ckptwatch.lake.schema import TABLES
from ckptwatch.lake.store import Lake

LONG = "x" * 300


def _row(table: str, long_col: str | None) -> dict[str, object]:
    """A valid row of ``table`` (long_col: that identifier 300 characters long)."""
    row: dict[str, object] = {}
    for f in TABLES[table].schema:
        if f.name in ("source_file", "ingested_ts"):
            continue
        if str(f.type).startswith("timestamp"):
            row[f.name] = at(10)
        elif str(f.type) == "string":
            row[f.name] = "ok"
        elif str(f.type).startswith(("int", "double")):
            row[f.name] = 1
    if table in ("checkpoint_writes", "checkpoint_loads"):
        row.update(start_ts=T0, end_ts=at(10), duration_s=10.0, status="ok")
    if long_col:
        row[long_col] = LONG
    return row


STAGING = {t: f"stg_{t}" for t in TABLES if t != "quarantine"}
IDS = {"checkpoint_writes": "job_id", "checkpoint_starts": "node", "checkpoint_loads": "target",
       "jobs": "job_id",
       "nvme_smart": "serial", "fabric_counters": "port", "pool_metrics": "target",
       "topology": "leaf_switch"}


@pytest.mark.parametrize("table", sorted(IDS))
def test_a_long_identifier_is_left_out_and_named(tmp_path: Path, table: str) -> None:
    Lake(tmp_path).init()
    seed(tmp_path, table, [_row(table, None)], part="good")
    seed(tmp_path, table, [_row(table, IDS[table])], part="old")
    # The staging view and the skipped-rows view (and what they read), not every mart.
    con = connect(tmp_path, views=(STAGING[table], "int_lake_skipped_rows"))
    try:
        rows = run_sql(con, f"select * from {STAGING[table]}")
        assert rows.height == 1 and all(LONG not in str(v) for v in rows.row(0))
        warnings = skipped_rows(con)
    finally:
        con.close()
    assert len(warnings) == 1
    assert f"1 row(s) of {table} from seed/old" in warnings[0]
    assert "longer than 256 characters" in warnings[0]
