"""The lake views read their parts without ``union_by_name`` only when every part has the same
columns (``lake.seam.lake_view_sql``): the rows are the same either way."""

from __future__ import annotations

from pathlib import Path

import polars as pl

from ckptwatch.ingest.run import ingest
from ckptwatch.lake.query import connect


def _view_sql(con: object, name: str) -> str:
    rows = con.execute("select sql from duckdb_views() where view_name = ?",  # type: ignore[attr-defined]
                       [name]).fetchall()
    return rows[0][0].lower()


def _rows(con: object, table: str) -> list[tuple[object, ...]]:
    return sorted(con.execute(f"select * from {table}").fetchall(),  # type: ignore[attr-defined]
                  key=repr)


def test_uniform_parts_are_read_without_union_and_give_the_same_rows(raw_dir: Path,
                                                                      tmp_path: Path) -> None:
    lake = tmp_path / "lake"
    ingest(raw_dir, lake)
    con = connect(lake, views=("fabric_counters",))
    assert "union_by_name = false" in _view_sql(con, "fabric_counters")
    fast = _rows(con, "fabric_counters")
    con.execute("create or replace view union_fabric as select * from read_parquet("
                "getvariable('lake') || '/fabric_counters/*/*.parquet', hive_partitioning = "
                "true, hive_types = {'date': date}, union_by_name = true)")
    assert fast and fast == _rows(con, "union_fabric")


def test_a_part_of_an_older_schema_keeps_the_union(raw_dir: Path, tmp_path: Path) -> None:
    """A part written by a version without a column: its rows read that column as NULL."""
    lake = tmp_path / "lake"
    ingest(raw_dir, lake)
    part = max((lake / "fabric_counters").glob("*/*.parquet"), key=lambda f: f.stat().st_size)
    frame = pl.read_parquet(part, hive_partitioning=False)
    assert frame.height and "port" in frame.columns
    frame.drop("port").write_parquet(part.with_name("older-version.parquet"))
    con = connect(lake, views=("fabric_counters",))
    assert "union_by_name = true" in _view_sql(con, "fabric_counters")
    total, no_port = con.execute("select count(*), count(*) filter (where port is null) "
                                 "from fabric_counters").fetchone()
    assert total == 2 * frame.height and no_port >= frame.height
