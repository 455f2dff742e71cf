"""DuckDB over the lake: build the views of ``sql/`` in layer order, run queries.

The SQL files are the source of truth; each is ``create or replace view <file name> as …`` (one,
``int_signal_counters``, sets a variable of that name) and reads the lake through the ``lake``
variable, so the same files run in the ``duckdb`` CLI after ``SET VARIABLE lake = 'data/lake';``
(see ``sql/build.sql``). ``sql/session.sql`` holds the settings every connection runs first.

The lake views are built on every connection, over its lake; the views that read them are
copied from a connection that built them before over lake views of the same columns
(``ckptwatch.lake.viewcache``: some 20 ms, where binding them costs 1-2 s), else built and
saved for the next (``ckptwatch.lake.seam.build_views``).

A connection costs what its query needs: a query that names no view (``select 1``) builds
none and imports neither polars nor pyarrow (``ckptwatch sql`` starts in about twice the time
of ``import duckdb``); results reach polars through the Arrow C stream, without pyarrow.
"""

from __future__ import annotations

import functools
import re
import tempfile
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import date
from pathlib import Path
from typing import TYPE_CHECKING, Any

import duckdb

from ckptwatch.errors import LakeError, QueryError
from ckptwatch.lake import seam
from ckptwatch.settings import duckdb_memory_limit, ingest_settings, sql_dir

if TYPE_CHECKING:  # polars and the lake store (pyarrow) are imported where they are used
    import polars as pl

LAYERS = ("lake", "staging", "intermediate", "marts")
#: Settings run on every connection before the views (``sql/session.sql``).
SESSION_FILE = "session.sql"
#: ``ckptwatch.lake.store.MANIFEST_DIR``: what ``Lake.exists`` looks for. Repeated here so that
#: a connection building no lake view does not import the store (polars, pyarrow: ~0.3 s);
#: tests/lake/test_query.py pins the two equal.
MANIFEST_DIR = "_manifest"


@dataclass(frozen=True)
class _Catalog:
    """The view files of one SQL directory, read once: build order, text, what each reads."""

    ordered: tuple[Path, ...]
    text: dict[str, str]
    reads: dict[str, frozenset[str]]


def _catalog(root: Path) -> _Catalog:
    """The catalog of ``root``, reread only when a file is added, removed or changed."""
    files = [f for layer in LAYERS for f in sorted((root / layer).glob("*.sql"))]
    return _read_catalog(tuple((f, f.stat().st_mtime_ns) for f in files))


@functools.lru_cache(maxsize=8)
def _read_catalog(files: tuple[tuple[Path, int], ...]) -> _Catalog:
    text = {f.stem: f.read_text() for f, _ in files}
    names = _names(text)
    reads = {name: _named_in(sql, names) - {name} for name, sql in text.items()}
    ordered: list[Path] = []
    for layer in LAYERS:
        layer_files = {f.stem: f for f, _ in files if f.parent.name == layer}
        done: set[str] = set()
        while len(done) < len(layer_files):
            ready = sorted(n for n in layer_files if n not in done
                           and reads[n] & layer_files.keys() <= done)
            if not ready:
                cycle = sorted(set(layer_files) - done)
                raise QueryError(f"circular view references in sql/{layer}: {', '.join(cycle)}")
            for n in ready:
                ordered.append(layer_files[n])
                done.add(n)
    return _Catalog(tuple(ordered), text, reads)


#: What a view file defines besides its view: ``create or replace macro <name>`` (a table
#: macro, e.g. ``stg_counter_deltas_of`` in ``stg_counter_deltas.sql``), ``set variable <name>``.
_DEFINES = re.compile(r"create\s+(?:or\s+replace\s+)?macro\s+(\w+)|set\s+variable\s+(\w+)",
                      re.IGNORECASE)


def _names(text: dict[str, str]) -> dict[str, str]:
    """Every name a query can use (a view, a macro, a variable), to the file that defines it."""
    names = {name: name for name in text}
    for name, sql in text.items():
        for m in _DEFINES.finditer(_strip_comments(sql)):
            names.setdefault((m.group(1) or m.group(2)).lower(), name)
    return names


def _named_in(sql: str, names: dict[str, str]) -> frozenset[str]:
    """The files whose view, macro or variable ``sql`` names (comments aside)."""
    words = set(re.findall(r"\w+", _strip_comments(sql).lower()))
    return frozenset(names[w] for w in words & names.keys())


def views_named_in(sql: str, root: Path | None = None) -> frozenset[str]:
    """The views (file names) a query names: what ``connect(views=…)`` must build to run it.

    A view's macro (``stg_counter_deltas_of``) or variable (``int_signal_counters``) names its
    file. Names are matched as words, so a mention in a string literal builds that view too
    (harmless: it only costs its build).
    """
    catalog = _catalog(root or sql_dir())
    return _named_in(sql, _names(catalog.text))


def view_files(root: Path | None = None, needed: Iterable[str] | None = None) -> list[Path]:
    """Every view file in build order: by layer, then dependencies, then name. ``needed``: only
    those views and the views they read, in the same order (the rest are not built)."""
    catalog = _catalog(root or sql_dir())
    if needed is None:
        return list(catalog.ordered)
    keep = _closure(catalog, set(needed))
    return [f for f in catalog.ordered if f.stem in keep]


def _closure(catalog: _Catalog, needed: set[str]) -> set[str]:
    """The views of ``needed`` and everything they read, transitively."""
    unknown = sorted(needed - catalog.reads.keys())
    if unknown:
        raise QueryError(f"no view named {', '.join(unknown)} in the SQL directory")
    keep: set[str] = set()
    todo = list(needed)
    while todo:
        name = todo.pop()
        if name not in keep:
            keep.add(name)
            todo += catalog.reads[name] - keep
    return keep


def sql_string(value: str) -> str:
    """``value`` as a SQL string literal, quotes doubled: for what takes no parameter
    (``SET name = …``, ``COPY … TO …``)."""
    return "'" + value.replace("'", "''") + "'"


def _strip_comments(sql: str) -> str:
    return re.sub(r"--[^\n]*", "", sql)


def _disable_projection_pullup(con: duckdb.DuckDBPyConnection) -> None:
    """Add DuckDB's projection pull-up to the disabled optimizers, where the engine has it.

    The pass walks the whole inlined plan for each projection it lifts, and the marts' plans
    are deep (stall_signals inlines some forty views): planning ``select * from
    stall_signals`` took 12 s, 11.8 of them in that pass, over a lake of 8 ranks (2.5 s
    without it); ``ckptwatch stalls`` on a 128-node, 8-hour day takes the same 12 s and prints
    the same with or without it. Not in sql/session.sql: the duckdb CLI of the pins (1.5) has
    no such pass and refuses its name."""
    known = con.execute("select count(*) from duckdb_optimizers() "
                        "where name = 'projection_pullup'").fetchone()
    if known and known[0]:
        con.execute("SET disabled_optimizers = current_setting('disabled_optimizers') "
                    "|| ',projection_pullup'").fetchall()


def connect(lake_root: Path | str, *, build: bool = True, database: str = ":memory:",
            days: tuple[date, date] | None = None, memory_limit: str | None = None,
            views: Iterable[str] | None = None,
            extra_rows: Mapping[str, pl.DataFrame] | None = None) -> duckdb.DuckDBPyConnection:
    """A DuckDB connection with every view of ``sql/`` built over the lake.

    ``days`` (first, last; inclusive): the time-series tables (checkpoints, SMART, fabric, pool)
    show only those days' partitions, and DuckDB opens only their files; ``None``: every day.
    ``memory_limit``: DuckDB's memory cap (``3GB``; ``"none"``: uncapped); ``None``:
    ``$CKPTWATCH_DUCKDB_MEMORY`` (see :func:`ckptwatch.settings.duckdb_memory_limit`).
    ``views``: build only these views and those they read (a step that needs two marts does
    not pay for binding all of them: ~5 s over a 512-node day); ``None``: every view.
    ``extra_rows``: rows added to lake tables (``union all by name``) before any view or
    variable reads them. Every view is built as its file says but for the swaps of
    ``ckptwatch.lake.seam`` (these rows, the stored counter deltas, one footer per lake view).
    """
    if days is not None and days[0] > days[1]:
        raise QueryError(f"days: {days[0]} is after {days[1]}")
    root = Path(lake_root)
    if not (root / MANIFEST_DIR).is_dir():
        raise LakeError(f"no lake at {root} (run `ckptwatch ingest RAW_DIR --lake "
                        f"{root}` first)")
    extra = {t: rows for t, rows in (extra_rows or {}).items() if rows.height}
    files = view_files(needed=views) if build else []
    if not build or any(f.parent.name == "lake" for f in files):
        _add_missing_tables(root)  # the views (or the caller, unbuilt) read the tables
    con = duckdb.connect(database)
    session = sql_dir() / SESSION_FILE
    settings = session.read_text() if session.is_file() else None
    if settings is not None:  # only settings: a SQL directory without it still builds (slower)
        try:
            con.execute(settings).fetchall()
        except duckdb.Error as exc:
            raise QueryError(f"session settings ({session}): {exc}") from exc
    _disable_projection_pullup(con)
    limit = duckdb_memory_limit(memory_limit)
    if limit:
        spill = Path(tempfile.gettempdir()) / "ckptwatch-duckdb"
        try:
            con.execute(f"SET memory_limit = {sql_string(limit)}").fetchall()
            con.execute(f"SET temp_directory = {sql_string(str(spill))}").fetchall()
        except duckdb.Error as exc:
            raise QueryError(f"DuckDB memory limit {limit!r} (--duckdb-memory or "
                             f"CKPTWATCH_DUCKDB_MEMORY={limit!r}): {exc} (use e.g. 3GB)") from exc
    con.execute("SET VARIABLE lake = ?", [str(root)]).fetchall()
    # The ingest's field limit as configured: staging leaves out longer identifiers
    # (int_lake_skipped_rows).
    con.execute("SET VARIABLE max_field_chars = ?",
                [ingest_settings().max_field_chars]).fetchall()
    if days is not None:
        con.execute("SET VARIABLE lake_since = ?", [days[0]]).fetchall()
        con.execute("SET VARIABLE lake_until = ?", [days[1]]).fetchall()
    if build:
        seam.build_views(con, root, files, _catalog(sql_dir()).text, days, extra,
                         share=(settings or "") if database == ":memory:" else None)
    return con


def _add_missing_tables(root: Path) -> None:
    """A lake from an older version: the tables added since, empty (``Lake.add_missing_tables``)."""
    from ckptwatch.lake.store import Lake

    try:
        Lake(root).add_missing_tables()
    except (OSError, LakeError) as exc:
        raise LakeError(f"lake {root} lacks a table added in this version and cannot be "
                        f"given one: {exc}") from None


def run_sql(con: duckdb.DuckDBPyConnection, sql: str,
            params: list[Any] | dict[str, Any] | None = None) -> pl.DataFrame:
    """Run one query and return a polars frame; DuckDB errors become ``QueryError``
    (:func:`relation`, then :func:`relation_frame`)."""
    import polars as pl

    rel = relation(con, sql, params)
    return pl.DataFrame() if rel is None else relation_frame(rel)


def relation(con: duckdb.DuckDBPyConnection, sql: str,
             params: list[Any] | dict[str, Any] | None = None) -> duckdb.DuckDBPyRelation | None:
    """``con.sql(sql)`` (``None``: a statement without a result); DuckDB errors become
    ``QueryError``."""
    try:
        return con.sql(sql, params=params)
    except duckdb.Error as exc:
        raise QueryError(str(exc).splitlines()[0]) from exc


def relation_frame(rel: duckdb.DuckDBPyRelation) -> pl.DataFrame:
    """``rel``'s rows as a polars frame; DuckDB errors become ``QueryError``.

    The rows reach polars through the Arrow C stream (``DuckDBPyRelation.pl()`` would import
    pyarrow and numpy: 0.2 s of a ``ckptwatch sql`` run); the columns and types are the same.
    A result with repeated column names still goes through ``.pl()``, which renames them.
    """
    import polars as pl

    try:
        if len(set(rel.columns)) < len(rel.columns):  # .pl() renames repeats (a, a_1)
            return rel.pl()
        return pl.DataFrame(rel)
    except duckdb.Error as exc:
        raise QueryError(str(exc).splitlines()[0]) from exc


def skipped_rows(con: duckdb.DuckDBPyConnection) -> list[str]:
    """One warning per table and source file whose rows the views leave out
    (``int_lake_skipped_rows``: identifiers over the field limit, stored by an older version).
    ``con`` must have that view (``views=("int_lake_skipped_rows",)`` or every view)."""
    from ckptwatch.safetext import escape_controls

    rows = run_sql(con, "select table_name, source_file, n_rows, reason "
                        "from int_lake_skipped_rows order by table_name, source_file")
    return [escape_controls(
        f"lake: {n} row(s) of {table} from {source} left out of every analysis: {reason} "
        "(written before the ingest limited it; ingest the file again after fixing it, or "
        "remove its parts)") for table, source, n, reason in rows.iter_rows()]
