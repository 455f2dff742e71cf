"""The view cache: the views a connection built, copied into the next connection that would
build the same ones, instead of building them again.

DuckDB binds a view's whole dependency tree when the view is created, so building the views of
``sql/`` binds the staging views and the lake's Parquet leaves dozens of times over: 1-2 s per
connection (a test file opens a hundred connections, a command one or two). What a view stores
is its SQL and the column names and types it bound to, nothing of the rows. So once a
connection has built its views, :func:`save` writes them (and the table macros of their files)
to a DuckDB database file, and :func:`load` copies them into a later connection with ``COPY FROM
DATABASE``, which binds nothing (some 20 ms). The copy is the connection's own: it may replace a
view (``ckptwatch.lake.seam.pinned_views``, ``read_parts``) without touching another's.

Not cached, set up by each connection as before (``ckptwatch.lake.query.connect``,
``ckptwatch.lake.seam.build_views``): the settings and variables (``sql/session.sql``, the
lake, its days, the stored-deltas switch, and the ``set variable`` statements of the view files,
run again on the connection's lake: ``int_signal_counters``), the macros of ``sql/session.sql``,
and the lake views (``lake/``), which bind the connection's own lake. The cached views are
those of the other layers.

The key (:func:`key`) holds everything their stored entries depend on: the view files' text,
the DuckDB version, the session settings, what the connection holds before them (its macros,
its lake views' SQL with the one-footer rewrite, and the column names and types each lake view
bound to over this lake), and its variables' names and types. Two lakes whose tables bind to
the same columns share the views; a lake of another schema (written by an older version, or
with other column types) gets its own. When a connection cannot share (rows added to it, a
database file, an object the files would replace), it builds its views as before.

The files live in ``<temp dir>/ckptwatch-views-<uid>`` (mode 0700; not used if another user
owns it or may write to it), each written under a temporary name and renamed into place, so
that processes and threads building the same views at once each read a whole file. Files
unused for a week, and the least recently used beyond 256, are removed.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import stat
import tempfile
import threading
import time
import uuid
from collections.abc import Iterable
from pathlib import Path

import duckdb

#: Part of every key: change it when what a file holds for the same view files changes (when
#: ``ckptwatch.lake.seam.build_views`` builds the cached views otherwise), so that no file
#: written before is read.
CACHE_FORMAT = "1"
#: The name a cache file is attached under while it is read or written.
ALIAS = "ckptwatch_view_cache"
#: A cache file unused this long is removed (when another is written).
MAX_AGE_S = 7 * 24 * 3600
#: At most this many cache files are kept (some 0.3 MB each; a test run makes about 100).
MAX_FILES = 256
#: A file in use is touched at most this often (its age is since its last use).
TOUCH_AFTER_S = 3600

#: One row per object of the connection (database, schema, kind, name, definition): views,
#: tables and sequences, the temporary ones too, and (``_MACROS_SQL``) macros.
_OBJECTS_SQL = """
select database_name, schema_name, 'view', view_name, sql
from duckdb_views() where not internal
union all
select database_name, schema_name, 'table', table_name, coalesce(sql, '') from duckdb_tables()
union all
select database_name, schema_name, 'sequence', sequence_name, coalesce(sql, '')
from duckdb_sequences()
"""
#: The macros (some 20 ms: ``duckdb_functions()`` lists every built-in function too).
_MACROS_SQL = """
select database_name, schema_name, function_type, function_name,
    parameters::varchar || ' ' || coalesce(macro_definition, '')
from duckdb_functions() where not internal and function_type in ('macro', 'table_macro')
"""
#: The column names and types of every view of the connection's database, as bound.
_COLUMNS_SQL = """
select schema_name, table_name, column_index, column_name, data_type
from duckdb_columns() where database_name = current_database() and not internal
order by all
"""

#: An object of a connection: database, schema, kind (view, macro, table_macro, table,
#: sequence), name, definition.
Object = tuple[str, str, str, str, str]

#: Keys whose views cannot be cached (a file replaced an object, made a table): not tried again.
_UNSHAREABLE: set[str] = set()


def cache_dir() -> Path | None:
    """The directory of the cache files, created if missing; None when it cannot be used safely
    (not a directory of this user's that only this user may write)."""
    uid = os.getuid() if hasattr(os, "getuid") else None
    path = Path(tempfile.gettempdir()) / f"ckptwatch-views-{uid if uid is not None else 'user'}"
    try:
        path.mkdir(mode=0o700, exist_ok=True)
        st = os.lstat(path)
    except OSError:
        return None
    if not stat.S_ISDIR(st.st_mode) or st.st_mode & 0o022:
        return None
    if uid is not None and st.st_uid != uid:
        return None
    return path


def objects(con: duckdb.DuckDBPyConnection, *, macros: bool = True) -> frozenset[Object]:
    """Every view, table, sequence and (``macros``) macro the connection has, temporary ones
    too."""
    sql = f"{_OBJECTS_SQL} union all {_MACROS_SQL}" if macros else _OBJECTS_SQL
    return frozenset(tuple(map(str, row)) for row in con.execute(sql).fetchall())  # type: ignore[misc]


def key(con: duckdb.DuckDBPyConnection, parts: Iterable[str]) -> str:
    """The cache key of the views ``parts`` (the text of their files, and the session settings,
    which define the connection's macros) build on ``con``: these, the views ``con`` holds
    already (its lake views: their SQL, and the columns each bound to), its variables' names
    and types (their values change no view's columns), the DuckDB version."""
    digest = hashlib.sha256()
    for part in (CACHE_FORMAT, duckdb.__version__,
                 repr(sorted(objects(con, macros=False))),
                 repr(con.execute(_COLUMNS_SQL).fetchall()),
                 repr(con.execute("select name, type from duckdb_variables() "
                                  "order by name").fetchall()),
                 *parts):
        digest.update(part.encode())
        digest.update(b"\0")
    return digest.hexdigest()[:40]


def _database(con: duckdb.DuckDBPyConnection) -> str:
    row = con.execute("select current_database()").fetchone()
    return str(row[0]) if row else "memory"


def _ident(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _literal(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


def _drop(con: duckdb.DuckDBPyConnection, database: str, objs: Iterable[Object]) -> None:
    """Drop ``objs`` (views and macros) from ``database`` where they are."""
    done = set()
    for _, schema, kind, name, _ in objs:
        what = {"view": "VIEW", "macro": "MACRO", "table_macro": "MACRO TABLE"}.get(kind)
        if what is None or (schema, kind, name) in done:
            continue
        done.add((schema, kind, name))
        con.execute(f"DROP {what} IF EXISTS "
                    f"{_ident(database)}.{_ident(schema)}.{_ident(name)}").fetchall()


def load(con: duckdb.DuckDBPyConnection, cache_key: str) -> bool:
    """Copy the views and macros saved under ``cache_key`` into ``con``: True when done; False
    (``con`` as it was) when there are none, or they cannot be copied.

    They never have the name of an object ``con`` holds (the key holds its views and the
    session settings that define its macros; :func:`save` leaves those out), so the copy does
    not collide; when it fails all the same (it is not atomic), what it copied (the objects
    now the same in both) is dropped."""
    directory = cache_dir()
    if directory is None:
        return False
    path = directory / f"{cache_key}.duckdb"
    try:
        mtime = path.stat().st_mtime
    except OSError:
        return False
    try:
        database = _database(con)
        con.execute(f"ATTACH {_literal(str(path))} AS {ALIAS} (READ_ONLY)").fetchall()
    except duckdb.Error:
        return False
    try:
        try:
            con.execute(f"COPY FROM DATABASE {ALIAS} TO {_ident(database)}").fetchall()
        except duckdb.Error:  # the copy is not atomic: undo what it did
            now = objects(con)
            copied = {o[1:] for o in now if o[0] == ALIAS}
            _drop(con, database, (o for o in now if o[0] == database and o[1:] in copied))
            return False
    finally:
        with contextlib.suppress(duckdb.Error):
            con.execute(f"DETACH {ALIAS}").fetchall()
    if time.time() - mtime > TOUCH_AFTER_S:
        with contextlib.suppress(OSError):
            os.utime(path)
    return True


def save(con: duckdb.DuckDBPyConnection, cache_key: str, before: frozenset[Object]) -> None:
    """Write the views and macros ``con`` built since it held ``before`` to the cache under
    ``cache_key``. Nothing is written when the build replaced or dropped an object of
    ``before``, or made a table, a sequence or a temporary object (which a copy would not
    give the next connection as the build does); nor when anything fails (the connection is
    left as built)."""
    if cache_key in _UNSHAREABLE:
        return
    database = _database(con)
    after = objects(con)
    new = after - before
    kept = {o for o in before if o[0] == database}
    if not before <= after or any(o[0] != database or o[2] in ("table", "sequence")
                                         for o in new):
        _UNSHAREABLE.add(cache_key)
        return
    directory = cache_dir()
    if directory is None:
        return
    tmp = directory / (f".{cache_key}.{os.getpid()}.{threading.get_ident()}."
                       f"{uuid.uuid4().hex}.tmp")
    try:
        con.execute(f"ATTACH {_literal(str(tmp))} AS {ALIAS}").fetchall()
        try:
            con.execute(f"COPY FROM DATABASE {_ident(database)} TO {ALIAS}").fetchall()
            _drop(con, ALIAS, kept)
            con.execute(f"CHECKPOINT {ALIAS}").fetchall()
        finally:
            con.execute(f"DETACH {ALIAS}").fetchall()
        os.replace(tmp, directory / f"{cache_key}.duckdb")
    except (duckdb.Error, OSError):
        pass
    finally:
        for leftover in (tmp, tmp.with_name(tmp.name + ".wal")):
            with contextlib.suppress(OSError):
                leftover.unlink()
    _prune(directory)


def _prune(directory: Path) -> None:
    """Remove the cache files unused for :data:`MAX_AGE_S` (and temporary ones as old), then
    the least recently used beyond :data:`MAX_FILES`."""
    cutoff = time.time() - MAX_AGE_S
    kept: list[tuple[float, str]] = []
    with contextlib.suppress(OSError):
        for entry in os.scandir(directory):
            with contextlib.suppress(OSError):
                if not entry.name.endswith((".duckdb", ".tmp", ".wal")):
                    continue
                mtime = entry.stat(follow_symlinks=False).st_mtime
                if mtime < cutoff:
                    os.unlink(entry.path)
                elif entry.name.endswith(".duckdb"):
                    kept.append((mtime, entry.path))
    for _, path in sorted(kept)[:max(len(kept) - MAX_FILES, 0)]:
        with contextlib.suppress(OSError):
            os.unlink(path)
