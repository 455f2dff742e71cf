"""A connection whose views come from the view cache (``ckptwatch.lake.viewcache``) is the
connection that builds them: the same views, macros, columns, variables and rows."""

from __future__ import annotations

import os
import stat
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import duckdb
import polars as pl
import pytest

from ckptwatch.ingest.run import ingest
from ckptwatch.lake import viewcache
from ckptwatch.lake.query import connect
from ckptwatch.lake.seam import pinned_views


@pytest.fixture
def loads(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> list[bool]:
    """The cache in ``tmp_path/cache``; what each ``viewcache.load`` returned, in order."""
    directory = tmp_path / "cache"
    directory.mkdir(mode=0o700)
    monkeypatch.setattr(viewcache, "cache_dir", lambda: directory)
    found: list[bool] = []
    load = viewcache.load

    def spy(con: duckdb.DuckDBPyConnection, key: str) -> bool:
        found.append(load(con, key))
        return found[-1]

    monkeypatch.setattr(viewcache, "load", spy)
    return found


def _uncached(monkeypatch: pytest.MonkeyPatch) -> Callable[..., duckdb.DuckDBPyConnection]:
    """``connect`` with no cache: every view built on the connection."""
    def built(*args: Any, **kwargs: Any) -> duckdb.DuckDBPyConnection:
        with monkeypatch.context() as m:
            m.setattr(viewcache, "cache_dir", lambda: None)
            return connect(*args, **kwargs)
    return built


def _rows(con: duckdb.DuckDBPyConnection, sql: str) -> list[str]:
    """The rows, sorted, floats to 9 digits (a sum over threads may differ in the last bits
    from one run to the next, cache or not)."""
    return sorted(repr(tuple(float(f"{v:.9g}") if isinstance(v, float) else v for v in row))
                  for row in con.execute(sql).fetchall())


#: Views whose rows the tests compare (every view's: some 40 s; the catalog is compared whole).
ROWS_OF = ("checkpoint_latency", "int_signal_samples", "stg_jobs")


def _state(con: duckdb.DuckDBPyConnection) -> dict[str, Any]:
    views = con.execute("select view_name, sql from duckdb_views() where not internal "
                        "order by 1").fetchall()
    return {
        "views": views,
        "columns": con.execute("select table_name, column_index, column_name, data_type "
                               "from duckdb_columns() order by all").fetchall(),
        "macros": con.execute("select function_name, function_type, parameters "
                              "from duckdb_functions() where not internal "
                              "and function_type like '%macro' order by all").fetchall(),
        "variables": con.execute("select name, value, type from duckdb_variables() "
                                 "order by name").fetchall(),
        **{name: _rows(con, f'select * from "{name}"') for name, _ in views if name in ROWS_OF},
    }


def test_a_connection_from_the_cache_is_the_connection_built(
        raw_dir: Path, tmp_path: Path, loads: list[bool]) -> None:
    lake = tmp_path / "lake"
    ingest(raw_dir, lake)
    built = connect(lake)  # nothing cached: built (then saved)
    cached = connect(lake)
    try:
        assert loads == [False, True]
        want = _state(built)
        assert len(want["views"]) > 40 and set(ROWS_OF) <= want.keys()
        assert _state(cached) == want
        counters = "select getvariable('int_signal_counters')"
        assert cached.execute(counters).fetchall()[0][0]  # set from the lake, as built
    finally:
        cached.close()
        built.close()


def test_lakes_of_the_same_columns_share_views_and_keep_their_own_variables(
        raw_dir: Path, tmp_path: Path, loads: list[bool]) -> None:
    full, empty = tmp_path / "full", tmp_path / "empty"
    ingest(raw_dir, full)
    ingest(tmp_path / "nothing", empty) if False else _empty_lake(empty)
    connect(full, views=("int_signal_samples",)).close()
    con = connect(empty, views=("int_signal_samples",))
    try:
        assert loads == [False, True]
        assert con.execute("select getvariable('int_signal_counters'), "
                           "count(*) from int_signal_samples").fetchone() == ([], 0)
    finally:
        con.close()


def _empty_lake(root: Path) -> None:
    from ckptwatch.lake.store import Lake

    Lake(root).init()


def test_a_lake_of_other_column_types_builds_its_own(
        raw_dir: Path, tmp_path: Path, loads: list[bool],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Views bound to one lake's column types are never given to a lake of others."""
    usual, other = tmp_path / "usual", tmp_path / "other"
    ingest(raw_dir, usual)
    ingest(raw_dir, other)
    for part in (other / "jobs").glob("*/*.parquet"):  # every part: read without the union
        frame = pl.read_parquet(part, hive_partitioning=False)
        frame.with_columns(pl.col("n_ranks").cast(pl.Int64)).write_parquet(part)
    views = ("stg_jobs",)
    connect(usual, views=views).close()
    con = connect(other, views=views)
    assert loads == [False, False]
    want = _uncached(monkeypatch)(other, views=views)
    try:
        assert "BIGINT" in str(con.execute("describe stg_jobs").fetchall())
        assert _state(con) == _state(want)
    finally:
        con.close()
        want.close()
    connect(other, views=views).close()
    assert loads[-1]
    assert len(list((tmp_path / "cache").glob("*.duckdb"))) == 2


def test_added_rows_and_database_files_build_on_the_connection(
        raw_dir: Path, tmp_path: Path, loads: list[bool]) -> None:
    lake = tmp_path / "lake"
    ingest(raw_dir, lake)
    connect(lake, views=("stg_jobs",)).close()
    jobs = connect(lake, views=("jobs",)).sql("select * from jobs limit 1").pl()
    connect(lake, views=("stg_jobs",), extra_rows={"jobs": jobs}).close()
    connect(lake, views=("stg_jobs",), database=str(tmp_path / "views.duckdb")).close()
    assert loads == [False]


def test_connections_from_the_cache_are_their_own(raw_dir: Path, tmp_path: Path,
                                                  loads: list[bool]) -> None:
    """A view pinned on one connection is not pinned on another, open at once or in threads."""
    lake = tmp_path / "lake"
    ingest(raw_dir, lake)
    views = ("checkpoint_latency",)
    connect(lake, views=views).close()
    one, two = connect(lake, views=views), connect(lake, views=views)
    query = "select * from checkpoint_latency"
    sql = "select sql from duckdb_views() where view_name = 'checkpoint_latency'"
    try:
        want, definition = _rows(two, query), two.execute(sql).fetchone()
        with pinned_views(one, views):
            assert "pinned_" in one.execute(sql).fetchall()[0][0]
            assert two.execute(sql).fetchone() == definition
            assert _rows(one, query) == _rows(two, query) == want
    finally:
        one.close()
        two.close()
    got: list[list[str]] = []
    errors: list[BaseException] = []

    def work() -> None:
        try:
            for _ in range(2):
                con = connect(lake, views=views)
                with pinned_views(con, views):
                    got.append(_rows(con, query))
                con.close()
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=work) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors and got == [want] * 6 and all(loads[1:])


def test_a_cache_directory_others_may_write_is_not_used(tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("tempfile.tempdir", str(tmp_path))
    directory = viewcache.cache_dir()
    assert directory is not None and directory.parent == tmp_path
    assert stat.S_IMODE(directory.stat().st_mode) == 0o700
    directory.chmod(0o777)
    assert viewcache.cache_dir() is None
    directory.rmdir()
    directory.symlink_to(tmp_path)
    assert viewcache.cache_dir() is None


def test_what_a_copy_would_not_give_is_not_saved(tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """A table (its rows are the build's), a temporary view, or a macro of the session the
    files replaced: the connection builds its views every time."""
    monkeypatch.setattr(viewcache, "cache_dir", lambda: tmp_path)
    for n, statement in enumerate(("create table t as select 1 as x",
                                   "create temp view t as select 1 as x",
                                   "create or replace macro m(x) as x + 2")):
        con = duckdb.connect()
        con.execute("create macro m(x) as x + 1")
        before = viewcache.objects(con)
        con.execute("create view v as select m(1) as y")
        con.execute(statement)
        viewcache.save(con, f"key{n}", before)
        assert not list(tmp_path.iterdir())


def test_a_copy_that_fails_leaves_the_connection_as_it_was(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(viewcache, "cache_dir", lambda: tmp_path)
    con = duckdb.connect()
    before = viewcache.objects(con)
    con.execute("create view a as select 1 as x")
    con.execute("create macro z(x) as x")
    con.execute("create view b as select z(2) as y")
    viewcache.save(con, "key", before)
    assert [p.name for p in tmp_path.iterdir()] == ["key.duckdb"]
    other = duckdb.connect()
    assert viewcache.load(other, "key")
    assert other.execute("select * from a, b").fetchall() == [(1, 2)]
    clash = duckdb.connect()
    clash.execute("create macro z(x) as x + 1")  # the copy fails on it, after a view or two
    state = viewcache.objects(clash)
    assert not viewcache.load(clash, "key")
    assert viewcache.objects(clash) == state
    assert not viewcache.load(duckdb.connect(), "no-such-key")
    assert sorted(os.listdir(tmp_path)) == ["key.duckdb"]


def test_old_files_and_the_least_used_beyond_the_cap_are_removed(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(viewcache, "MAX_FILES", 2)
    now = time.time()
    ages = {"old.duckdb": viewcache.MAX_AGE_S + 60, "crashed.x.tmp": viewcache.MAX_AGE_S + 60,
            "a.duckdb": 30, "b.duckdb": 20, "c.duckdb": 10, "other.txt": viewcache.MAX_AGE_S * 2}
    for name, age in ages.items():
        (tmp_path / name).write_bytes(b"")
        os.utime(tmp_path / name, (now - age, now - age))
    viewcache._prune(tmp_path)
    assert sorted(os.listdir(tmp_path)) == ["b.duckdb", "c.duckdb", "other.txt"]
