"""Every run-time rewrite of the view graph of ``sql/``: what a view returns, when it is not
exactly what its SQL file says, is decided here and nowhere else.

``ckptwatch.lake.query.connect`` builds each view from its file as written, through
:func:`build_views`; the SQL files hold the rules. The swaps below change how rows are
computed or where they come from; the first four return the same rows as the files alone:

1. **Lake views, one footer** (:func:`lake_view_sql`): a ``lake/`` view reads its parts without
   ``union_by_name`` when every part has the same columns in the same order (one footer is
   bound instead of every part's, at each of the many binds a mart build does).
2. **Stored counter deltas** (:func:`use_stored_deltas`): ``int_signal_counter_deltas`` reads
   ``derived_counter_deltas`` (the rows ``ckptwatch.lake.derived.refresh`` stored) instead of
   computing ``stg_counter_deltas_of``, when every day the connection reads is fresh
   (``ckptwatch.lake.freshness``) and no counter rows were added (5). The SQL holds both
   branches; the variable ``counter_deltas_derived`` picks one (unset, as in the duckdb CLI:
   computed).
3. **Pinned views** (:func:`pinned_views`): within a block, a view or parameterless table macro
   reads a temporary table of its own rows, computed once on entry, so that the views reading
   it do not compute it again; restored on exit. Attribution pins ``PINNED_VIEWS``,
   ``PINNED_SAMPLES`` and ``PINNED_SERIES`` (``ckptwatch.analysis.stalls``).
4. **Stored signal statistics** (in :func:`pinned_views`): a pinned view of
   ``PINNED_SAMPLES`` / ``PINNED_SERIES`` reads the rows ``ckptwatch.lake.signalstats`` stored
   for the one day the connection reads (the same SQL over the same parts with the same
   settings, run when that day's deltas were stored) instead of computing them, unless rows
   were added (5).

Two swaps give a view other rows, on the caller's request:

5. **Added rows** (``connect(extra_rows=...)``, :func:`add_rows`): rows added to a lake table's
   view (``union all by name``) before any other view reads it: raw telemetry not yet ingested
   (the live watcher). The stored deltas do not hold them, so a connection given rows of a
   counter table computes the deltas (2).
6. **Some parts only** (:func:`read_parts`): a lake table's view reads the given Parquet files
   only (``ckptwatch.lake.derived.refresh``: a day's counter parts, a batch at a time).

Not a swap (the same views, bound the same): the views of the layers after ``lake/`` are built
once and copied (:func:`build_views` through ``ckptwatch.lake.viewcache``). A connection whose
lake views bound the same columns as an earlier one's, with the same view files and session
settings, is given that connection's views and table macros without binding them again, and
runs its files' ``set variable`` statements itself, over its own lake; a connection given
added rows (5) or a database file builds its own. A view a connection replaces (3, 4, 6) is
replaced on that connection only.

To see what a view returns without any of them, build it in the duckdb CLI (``sql/build.sql``)
or with ``ckptwatch sql``, which passes no ``extra_rows`` and pins nothing
(``sql/README.md``, "What a view returns at run time").
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager, suppress
from datetime import date
from pathlib import Path
from typing import TYPE_CHECKING

import duckdb

from ckptwatch.errors import QueryError
from ckptwatch.lake import viewcache

if TYPE_CHECKING:  # polars is imported by the callers that pass frames
    import polars as pl

#: The view that reads the stored counter deltas when every day read is fresh.
DERIVED_READER = "int_signal_counter_deltas"
#: The session variable that picks its branch.
DERIVED_SWITCH = "counter_deltas_derived"

#: The views ``stall_features`` reads through several marts, computed once per call: the
#: checkpoint latency (under stalls, stragglers, counter_windows), the stalls (under
#: stall_ranks, stall_signals) and the stall ranks (under stall_signals); each query would
#: otherwise recompute them. They are small (a row per checkpoint, per stall, per rank of a
#: stall). The checkpoint records are not pinned: a million rows held through the signal
#: queries leave those too little under a 2 GB cap. In this order, so that each is computed
#: from the pinned ones before it.
PINNED_VIEWS: tuple[str, ...] = ("checkpoint_latency", "stalls", "stall_ranks")
#: The per-series statistics (``int_signal_series()``, a table macro of int_signal_noise.sql:
#: each series' median and MAD, one pass over every sample) that both ``stall_signals`` (its
#: baselines) and ``int_signal_noise`` read: computed once per call (on one thread when every
#: thread runs out of memory: :func:`one_thread`), a row per series. Pinned only when there
#: are stalls to attribute.
PINNED_SERIES: tuple[str, ...] = ("int_signal_series",)
#: What every reader of ``int_signal_samples`` (``int_signal_series()``, ``stall_signals``,
#: ``int_signal_noise``, ``counter_windows``) shares, table macros of int_signal_samples.sql
#: computed once per call: the gauge samples with their intervals
#: (``int_signal_gauge_samples()``: the SMART and pool signal gauges deduplicated, one ``lag()``
#: per series), and each drive's write amplification on its common time base
#: (``int_signal_write_amplification()``, read by ``int_signal_noise`` and ``stall_signals``:
#: one pass over the two SMART byte counters); first, the pool's interval means
#: (``int_pool_interval_means``: one ``lag()`` over every pool series, a row per interval of a
#: target's latency, queue and metadata counters), which int_signal_samples, pool_demand and
#: stall_pool_jobs read: otherwise computed again by each of the stall step's queries. The
#: catalog's signal names (``int_signal_families()``) need no pin: a constant list found when
#: the views are built (int_signal_counters.sql). Before ``PINNED_SERIES`` (which reads them),
#: and only when there are stalls to attribute. A day's rows of all of them are stored once
#: (``ckptwatch.lake.signalstats``) and read from there when they are the connection's (4).
PINNED_SAMPLES: tuple[str, ...] = ("int_pool_interval_means", "int_signal_gauge_samples",
                                   "int_signal_write_amplification")
#: Views attribution reads for a few stalls but that span the whole day: the pool's demand per
#: second (``pool_demand``: its capacity estimate reads every second of the day) and the
#: stalled jobs' fabric levels at every checkpoint (``counter_window_fabric_levels()``, the
#: history a stall's pause level is judged against). Pinned only when their rows are stored
#: for the connection's day (4); otherwise left to the query that reads them, filtered to what
#: it needs (computing all of them on entry would cost the stall step more than that).
PINNED_STORED: tuple[str, ...] = ("pool_demand", "counter_window_fabric_levels")


def build_views(con: duckdb.DuckDBPyConnection, root: Path, files: Iterable[Path],
                text: Mapping[str, str], days: tuple[date, date] | None,
                extra_rows: Mapping[str, pl.DataFrame], *, share: str | None = None) -> None:
    """Build ``files`` (view files in build order; ``text``: each one's SQL by view name) on
    ``con``, with the swaps of the module doc: the stored-deltas switch, then each view, a
    lake view's parts read with one footer when they allow it and ``extra_rows`` added to its
    table.

    ``share`` (the session settings the connection ran, or None): the views after the lake
    views are copied from ``ckptwatch.lake.viewcache`` when a connection built the same ones
    over lake views of the same columns before (then only the ``set variable`` statements of
    their files run, on this lake), else built here and saved there. Not with ``extra_rows``:
    built here, as with None."""
    files = list(files)
    if any(f.stem == DERIVED_READER for f in files):
        use_stored_deltas(con, root, days, added_to=extra_rows.keys())
    n_lake = next((i for i, f in enumerate(files) if f.parent.name != "lake"), len(files))
    rest = files[n_lake:]
    if share is None or extra_rows or not rest or any(f.parent.name == "lake" for f in rest):
        _build(con, root, files, text, extra_rows)
        return
    _build(con, root, files[:n_lake], text, extra_rows)
    try:
        cache_key = viewcache.key(con, [share, *(
            f"{f.parent.name}/{f.name}\n{text[f.stem]}" for f in rest)])
    except duckdb.Error:
        _build(con, root, rest, text, extra_rows)
        return
    if viewcache.load(con, cache_key):
        for f in rest:  # what the files set besides their views: their variables, on this lake
            for statement in _session_statements(con, text[f.stem]):
                try:
                    con.execute(statement).fetchall()
                except duckdb.Error as exc:
                    raise QueryError(f"building view {f.stem} ({f}): {exc}") from exc
        return
    try:
        before: frozenset[viewcache.Object] | None = viewcache.objects(con)
    except duckdb.Error:
        before = None
    _build(con, root, rest, text, extra_rows)
    if before is not None:
        with suppress(duckdb.Error):
            viewcache.save(con, cache_key, before)


def _build(con: duckdb.DuckDBPyConnection, root: Path, files: Iterable[Path],
           text: Mapping[str, str], extra_rows: Mapping[str, pl.DataFrame]) -> None:
    """Run each of ``files`` on ``con`` (a lake view with one footer when its parts allow it,
    ``extra_rows`` added to its table)."""
    for f in files:
        sql = text[f.stem]
        is_lake = f.parent.name == "lake"
        if is_lake:
            sql = lake_view_sql(con, sql, root)
        try:
            con.execute(sql).fetchall()
            if is_lake and f.stem in extra_rows:
                add_rows(con, f.stem, extra_rows[f.stem])
        except duckdb.Error as exc:
            raise QueryError(f"building view {f.stem} ({f}): {exc}") from exc


#: Statements a view file runs that create, change or drop no object: what a connection given
#: the file's objects by ``viewcache.load`` runs itself (``set variable``).
_CATALOG_STATEMENTS = frozenset({duckdb.StatementType.CREATE, duckdb.StatementType.ALTER,
                                 duckdb.StatementType.DROP, duckdb.StatementType.CREATE_FUNC})
_SESSION_STATEMENTS: dict[str, tuple[str, ...]] = {}


def _session_statements(con: duckdb.DuckDBPyConnection, sql: str) -> tuple[str, ...]:
    """The statements of ``sql`` that are not of :data:`_CATALOG_STATEMENTS`, in order."""
    found = _SESSION_STATEMENTS.get(sql)
    if found is None:
        found = tuple(s.query for s in con.extract_statements(sql)
                      if s.type not in _CATALOG_STATEMENTS)
        _SESSION_STATEMENTS[sql] = found
    return found


def use_stored_deltas(con: duckdb.DuckDBPyConnection, root: Path,
                      days: tuple[date, date] | None, *, added_to: Iterable[str] = ()) -> bool:
    """Set ``counter_deltas_derived``: true when the stored counter deltas hold every day
    ``con`` reads and no rows were added to a counter table (``added_to``: the lake tables
    given rows; rows of other tables change no delta). Returns the value."""
    from ckptwatch.lake import freshness  # the store (pyarrow): only when needed

    stored = not set(added_to) & set(freshness.COUNTER_TABLES) \
        and freshness.is_fresh(root, days)
    con.execute(f"SET VARIABLE {DERIVED_SWITCH} = ?", [stored]).fetchall()
    return stored


#: A lake view's glob of its parts (``getvariable('lake') || '/table/*/*.parquet'``).
_LAKE_GLOB = re.compile(r"getvariable\('lake'\)\s*\|\|\s*'(/[^']+\.parquet)'")
_UNION = re.compile(r"union_by_name\s*=\s*true", re.I)

#: One row per part of a glob whose columns (names, order, types, nesting) differ from another's.
_SCHEMAS_SQL = """
select count(distinct columns) from (
    select file_name, list((name, type, logical_type, repetition_type) order by pos) as columns
    from (select *, row_number() over () as pos from parquet_schema(?))
    group by file_name
)"""


def lake_view_sql(con: duckdb.DuckDBPyConnection, text: str, root: Path) -> str:
    """A lake view's SQL, reading its parts without ``union_by_name`` when every part has the
    same columns in the same order (the same rows then: one footer is bound instead of every
    part's). Parts of several schemas (written by different versions), or parts whose schema
    cannot be read: ``text`` as it is."""
    found = _LAKE_GLOB.search(text)
    if found is None or not _UNION.search(text):
        return text
    try:
        row = con.execute(_SCHEMAS_SQL, [f"{root}{found.group(1)}"]).fetchone()
    except duckdb.Error:
        return text
    return _UNION.sub("union_by_name = false", text) if row and row[0] == 1 else text


def add_rows(con: duckdb.DuckDBPyConnection, table: str, rows: pl.DataFrame) -> None:
    """The lake table's view ``table`` shows ``rows`` too (its own view renamed ``lake_*``)."""
    con.register(f"extra_{table}", rows.to_arrow())
    con.execute(f'alter view "{table}" rename to "lake_{table}"').fetchall()
    con.execute(f'create view "{table}" as select * from "lake_{table}" '
                f'union all by name select * from "extra_{table}"').fetchall()


#: A lake table's view over given files (the variable ``parts_<table>``), every column of each.
_PARTS_VIEW = """
    create or replace view "{table}" as
    select *
    from read_parquet(
        getvariable('parts_{table}'),
        hive_partitioning = true,
        hive_types = {{'date': date}},
        union_by_name = true
    )
"""


def read_parts(con: duckdb.DuckDBPyConnection, table: str, files: list[str]) -> None:
    """The lake view ``table`` reads ``files`` only (Parquet parts of that table; its zero-row
    schema part among them gives a table without other parts its columns, empty)."""
    con.execute(f"SET VARIABLE parts_{table} = ?", [files]).fetchall()
    con.execute(_PARTS_VIEW.format(table=table)).fetchall()


def _definition(con: duckdb.DuckDBPyConnection, name: str) -> str | None:
    """The statement that creates ``name`` again: a view of the connection, or a table macro
    without parameters (as ``int_signal_series``); None when it has neither."""
    # fetchall, not fetchone: a result left unfinished blocks the connection's next relation
    rows = con.execute("select sql from duckdb_views() where view_name = ? "
                       "and schema_name = 'main' and not temporary", [name]).fetchall()
    if rows:
        return str(rows[0][0])
    rows = con.execute("select macro_definition from duckdb_functions() "
                       "where function_name = ? and schema_name = 'main' "
                       "and function_type = 'table_macro' and len(parameters) = 0",
                       [name]).fetchall()
    if rows:
        return f'create or replace macro "{name}"() as table {rows[0][0]}'
    return None


@contextmanager
def pinned_views(con: duckdb.DuckDBPyConnection, names: Iterable[str], *,
                 one_thread_if_short: bool = False,
                 stored: Mapping[str, Path] | None = None,
                 only_stored: bool = False) -> Iterator[None]:
    """Within the block, each view of ``names`` the connection has (or table macro without
    parameters) reads a temporary table of its rows, computed once on entry (the views
    reading it see the same rows, now without recomputing them); on exit the views are as
    they were and the tables are gone. ``one_thread_if_short``: a table that runs out of
    DuckDB's memory on every thread is computed again on one (:func:`one_thread`). A view's
    rows depend on the session variables set before entry (detection settings).
    ``stored``: files of views' rows stored for the connection (``ckptwatch.lake.signalstats
    .stored``, which the caller asks: it reads this module), read instead of computing them
    (4); ``only_stored``: the views without stored rows are not pinned.
    """
    stored = stored or {}
    saved: list[tuple[str, str]] = []
    try:
        for name in names:
            sql = _definition(con, name)
            if sql is None or (only_stored and name not in stored):  # not built; not stored
                continue
            is_view = not sql.startswith("create or replace macro")
            # Identifiers from the PINNED_* constants, not values: no parameter for them.
            source = f'"{name}"' if is_view else f'"{name}"()'
            if name in stored:  # a path under date=…/: not a hive column of the rows
                source = ("read_parquet('" + str(stored[name]).replace("'", "''")
                          + "', hive_partitioning = false)")
            pin = f'create or replace temp table "pinned_{name}" as select * from {source}'
            try:
                con.execute(pin).fetchall()
            except duckdb.OutOfMemoryException:
                if not one_thread_if_short:
                    raise
                with one_thread(con):
                    con.execute(pin).fetchall()
            saved.append((name, sql))
            if is_view:
                con.execute(f'create or replace view "{name}" as '
                            f'select * from temp."pinned_{name}"').fetchall()
            else:
                con.execute(f'create or replace macro "{name}"() as table '
                            f'select * from temp."pinned_{name}"').fetchall()
        yield
    finally:
        for name, sql in reversed(saved):
            if not sql.startswith("create or replace macro"):
                con.execute(f'drop view if exists "{name}"').fetchall()
            con.execute(sql).fetchall()
            con.execute(f'drop table if exists temp."pinned_{name}"').fetchall()


@contextmanager
def one_thread(con: duckdb.DuckDBPyConnection) -> Iterator[None]:
    """Within the block, DuckDB runs on one thread (then as many as before). For the series'
    medians and MADs (``int_signal_series()``) when every thread runs out of memory: each
    holds its own share of every series' values (the same rows either way, in less memory,
    more slowly)."""
    rows = con.execute("select current_setting('threads')").fetchall()
    threads = rows[0] if rows else None
    con.execute("set threads = 1").fetchall()
    try:
        yield
    finally:
        if threads is not None:
            con.execute("set threads = ?", [int(threads[0])]).fetchall()
