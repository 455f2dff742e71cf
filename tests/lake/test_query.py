"""Connections build every view, or only the views a step reads (and what those read)."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

from ckptwatch.errors import QueryError
from ckptwatch.ingest.run import ingest
from ckptwatch.lake.query import connect, view_files, views_named_in


def _views(con: object) -> set[str]:
    rows = con.execute("select view_name from duckdb_views() where not internal").fetchall()  # type: ignore[attr-defined]
    return {r[0] for r in rows}


def test_only_the_needed_views_and_what_they_read_are_built(raw_dir: Path,
                                                            tmp_path: Path) -> None:
    lake = tmp_path / "lake"
    ingest(raw_dir, lake)
    every = connect(lake)
    some = connect(lake, views=["checkpoint_latency", "stg_jobs"])
    try:
        built = _views(some)
        assert {"checkpoint_latency", "stg_checkpoint_writes", "checkpoint_writes", "stg_jobs",
                "jobs"} <= built
        assert "stall_signals" not in built and "stg_counter_deltas" not in built
        assert built < _views(every)
        query = "select job_id, step, barrier_s from checkpoint_latency order by 1, 2"
        assert some.execute(query).fetchall() == every.execute(query).fetchall()
    finally:
        every.close()
        some.close()
    order = [f.stem for f in view_files()]
    subset = [f.stem for f in view_files(needed=["checkpoint_latency"])]
    assert subset == [n for n in order if n in subset]  # build order kept


def test_an_unknown_view_is_a_query_error(raw_dir: Path, tmp_path: Path) -> None:
    lake = tmp_path / "lake"
    ingest(raw_dir, lake)
    with pytest.raises(QueryError, match="no view named no_such_view"):
        connect(lake, views=["no_such_view"])


def test_a_view_that_calls_a_macro_builds_the_macros_file() -> None:
    # int_signal_samples names stg_counter_deltas_of (via int_signal_counter_deltas), a macro of
    # stg_counter_deltas.sql: its closure must hold that file and what it reads, or the build
    # of stall_signals alone fails
    needed = {f.stem for f in view_files(needed=["int_signal_samples"])}
    assert {"int_signal_counter_deltas", "stg_counter_deltas", "stg_fabric_counters",
            "int_signal_counters"} <= needed
    assert "checkpoint_latency" not in needed


def test_a_query_names_the_views_it_needs() -> None:
    assert views_named_in("select 1") == frozenset()
    assert views_named_in("select * from STALL_SIGNALS -- checkpoint_latency\n"
                          "join stalls using (job_id)") == {"stall_signals", "stalls"}
    assert views_named_in("select * from stg_counter_deltas_of(['rx_pause'])") == {
        "stg_counter_deltas"}
    assert views_named_in("select getvariable('int_signal_counters')") == {
        "int_signal_counters"}


def test_sql_select_1_builds_no_view(raw_dir: Path, tmp_path: Path,
                                     capsys: pytest.CaptureFixture[str]) -> None:
    from ckptwatch.cli.main import main

    lake = tmp_path / "lake"
    ingest(raw_dir, lake)
    con = connect(lake, views=views_named_in("select 1"))
    try:
        assert _views(con) == set()
    finally:
        con.close()
    assert main(["sql", "--lake", str(lake), "--format", "csv",
                 "select count(*) as n from stg_jobs"]) == 0
    assert capsys.readouterr().out.splitlines()[0] == "n"


def test_the_manifest_dir_is_the_stores() -> None:
    """``connect`` checks for a lake without importing the store: the same directory name."""
    from ckptwatch.lake import query, store

    assert query.MANIFEST_DIR == store.MANIFEST_DIR


def test_sql_select_1_imports_no_pyarrow_and_no_store(raw_dir: Path, tmp_path: Path) -> None:
    """``ckptwatch sql "select 1"`` pays for duckdb and polars only (a fresh interpreter: this
    one has imported everything already)."""
    import subprocess
    import sys

    lake = tmp_path / "lake"
    ingest(raw_dir, lake)
    code = ("import sys; from ckptwatch.cli.main import main; "
            f"rc = main(['sql', '--lake', {str(lake)!r}, 'select 1 as one']); "
            "print(rc, sorted(m for m in ('pyarrow', 'numpy', 'ckptwatch.lake.store', "
            "'ckptwatch.cli.plan', 'prefect') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout.splitlines()
    assert out[-1] == "0 []"
    assert "| one |" in out


def test_a_missing_table_is_added_when_a_view_reads_it(raw_dir: Path, tmp_path: Path) -> None:
    """A lake from an older version (no checkpoint_starts): a view over it still reads it,
    empty; a query that reads no table leaves the lake as it is."""
    import shutil

    lake = tmp_path / "lake"
    ingest(raw_dir, lake)
    shutil.rmtree(lake / "checkpoint_starts")
    connect(lake, views=()).close()
    assert not (lake / "checkpoint_starts").exists()
    con = connect(lake, views=["stg_checkpoint_starts"])
    try:
        assert con.execute("select count(*) from stg_checkpoint_starts").fetchall() == [(0,)]
    finally:
        con.close()


def test_run_sql_gives_the_frame_duckdb_pl_gives() -> None:
    """Results reach polars through the Arrow C stream: the same columns, types and values as
    ``DuckDBPyRelation.pl()``, repeated column names renamed as it renames them."""
    import duckdb

    from ckptwatch.lake.query import run_sql

    con = duckdb.connect()
    for sql in (
        "select 1 as i, 'a\x1b' as s, timestamptz '2026-03-02 10:00:00+00' as ts, [1.5, null] "
        "as l, 2.50::decimal(10, 2) as d, {'k': 'v'} as st, null::double as n, true as b",
        "select * from range(0)",
        "select 1 as a, 2 as a",
    ):
        got, want = run_sql(con, sql), con.sql(sql).pl()
        assert got.schema == want.schema, sql
        assert got.equals(want), sql
    with pytest.raises(QueryError, match="Conversion Error"):
        run_sql(con, "select cast('x' || range as int) from range(3)")


def test_extra_rows_join_the_lake_tables_before_any_view_reads_them(raw_dir: Path,
                                                                    tmp_path: Path) -> None:
    # The live watcher's raw telemetry not yet ingested: a counter the lake has never seen on a
    # node it has never seen. The views (and the variables computed from the data, such as the
    # signal counters' names) see it as if it had been ingested; the stored deltas do not hold
    # it, so the deltas are computed.
    lake = tmp_path / "lake"
    ingest(raw_dir, lake)
    base = 1_800_000_000
    extra = pl.DataFrame({
        "ts": [base + 10 * i for i in range(4)], "node": ["extra-node"] * 4,
        "device": ["mlx5_0"] * 4, "port": ["1"] * 4, "counter": ["tx_prio5_pause"] * 4,
        "value": [0.0, 100.0, 300.0, 600.0], "source": ["ethtool"] * 4,
        "source_file": ["fabric/extra-node.jsonl"] * 4,
    }).with_columns(pl.from_epoch("ts").dt.replace_time_zone("UTC"),
                    pl.lit(base).cast(pl.Int64).pipe(pl.from_epoch).dt.replace_time_zone("UTC")
                    .alias("ingested_ts"))
    con = connect(lake, views=["int_signal_samples"], extra_rows={"fabric_counters": extra})
    try:
        got = con.execute("select signal, delta from int_signal_samples "
                          "where host = 'extra-node' order by ts").fetchall()
        assert got == [("tx_prio5_pause", None), ("tx_prio5_pause", 100.0),
                       ("tx_prio5_pause", 200.0), ("tx_prio5_pause", 300.0)]
        [(n_lake,)] = con.execute("select count(*) from lake_fabric_counters").fetchall()
        [(n_all,)] = con.execute("select count(*) from fabric_counters").fetchall()
        assert n_all == n_lake + 4
        assert con.execute("select getvariable('counter_deltas_derived')").fetchone() == (False,)
    finally:
        con.close()
    plain = connect(lake, views=["int_signal_samples"])
    try:
        assert plain.execute("select count(*) from int_signal_samples "
                             "where host = 'extra-node'").fetchone() == (0,)
    finally:
        plain.close()
