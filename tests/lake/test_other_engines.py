"""The lake is plain hive-partitioned Parquet (docs/lake.md, docs/scale.md "The lake
elsewhere"): another engine reads it as it is. pyarrow.dataset and Polars' lazy scan, given
only the table directory and hive partitioning, find the same rows per table and date
partition as the lake's own views, and each table's columns as the lake's schema declares
them (plus the ``date`` partition column)."""

from __future__ import annotations

from datetime import date
from pathlib import Path

import polars as pl
import pyarrow.dataset as ds
import pytest

from ckptwatch.lake.query import connect, run_sql
from ckptwatch.lake.schema import TABLES


def _duckdb_counts(lake: Path) -> dict[str, dict[date, int]]:
    con = connect(lake, views=tuple(TABLES))
    try:
        return {table: {r["date"]: r["n"] for r in run_sql(
            con, f'select date, count(*) as n from "{table}" group by date').to_dicts()}
            for table in TABLES}
    finally:
        con.close()


def _pyarrow_counts(lake: Path, table: str) -> dict[date, int]:
    data = ds.dataset(lake / table, format="parquet", partitioning="hive")
    counts = data.to_table(columns=["date"]).group_by("date").aggregate([("date", "count")])
    return {date.fromisoformat(str(d)): n for d, n in zip(
        counts.column("date").to_pylist(), counts.column("date_count").to_pylist(),
        strict=True) if n}


def _polars_counts(lake: Path, table: str) -> dict[date, int]:
    frame = (pl.scan_parquet(lake / table / "*" / "*.parquet", hive_partitioning=True)
             .group_by("date").agg(pl.len().alias("n")).collect())
    return {date.fromisoformat(str(d)): n for d, n in frame.iter_rows() if n}


@pytest.fixture(scope="module")
def counts(sample_lake: Path) -> dict[str, dict[date, int]]:
    return _duckdb_counts(sample_lake)


@pytest.mark.parametrize("table", sorted(TABLES))
def test_pyarrow_and_polars_count_what_the_views_count(sample_lake: Path, table: str,
                                                       counts: dict[str, dict[date, int]]
                                                       ) -> None:
    assert _pyarrow_counts(sample_lake, table) == counts[table]
    assert _polars_counts(sample_lake, table) == counts[table]


def test_the_sample_lake_has_rows_to_compare(counts: dict[str, dict[date, int]]) -> None:
    # The comparison above compares something: the telemetry tables hold rows on their days.
    for table in ("checkpoint_writes", "nvme_smart", "fabric_counters", "pool_metrics", "jobs"):
        assert sum(counts[table].values()) > 0, table


@pytest.mark.parametrize("table", sorted(TABLES))
def test_another_engine_sees_the_declared_schema(sample_lake: Path, table: str) -> None:
    data = ds.dataset(sample_lake / table, format="parquet", partitioning="hive")
    declared = TABLES[table].schema
    for f in declared:
        assert data.schema.field(f.name).type == f.type, (table, f.name)
    assert set(data.schema.names) == {*declared.names, "date"}
