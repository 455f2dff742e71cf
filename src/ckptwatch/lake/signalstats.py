"""The stall step's per-series statistics, computed once a day beside the counter deltas.

Attribution pins what every one of its queries reads (``ckptwatch.lake.seam``:
``PINNED_SAMPLES``, ``PINNED_SERIES``, ``PINNED_STORED``): the pool's interval means, the gauge
samples with their intervals, each drive's write amplification on its common time base, each
series' median and MAD over every sample the connection reads, and the pool's demand per
second (``pool_demand``, whose capacity estimate reads the whole day). Over a day they are a
pass over all of its samples, the same pass for every stall step, ``ckptwatch stalls`` or
``explain`` of that day.
:func:`store` computes them once per day, when ``ckptwatch.lake.derived.refresh`` has stored
the day's counter deltas, over a connection that reads that day alone, and writes their rows;
:func:`stored` gives a connection the files to pin instead of computing them: the same rows,
for the same SQL over the same parts.

Layout (beside the counter deltas; never read as input)::

    LAKE/derived/signal_stats/date=YYYY-MM-DD/<name>.parquet   the rows of each of ``STORED``
    LAKE/derived/signal_stats/date=YYYY-MM-DD/key.json         what they were computed from

A day's ``key.json`` holds its key (the day's counter-delta fingerprint, the text of every SQL
file the statistics read and of sql/session.sql, the day's parts of the lake tables they read)
and the values of the session variables their SQL reads (the signal catalog found when the
views were built, the detection thresholds that decide which checkpoints stalled, a
configured pool capacity, ...). A connection reads the stored rows only when it reads
exactly that one day, its counter deltas are the stored ones (``counter_deltas_derived``), it
was given no added rows, and both the key and the variables are its own; otherwise it computes
them as before. A connection over several days computes them over those days (a median is not
the median of daily medians): the nightly run reads one day unless ``--lookback-days`` says
more. Files are written to a temporary directory, fsynced and renamed into place, the key last
inside it: a crash leaves a day without statistics (computed again), never half of them.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import re
import shutil
from datetime import date
from pathlib import Path

import duckdb

from ckptwatch.lake.freshness import derived_dir, manifest, raw_days
from ckptwatch.lake.query import sql_string
from ckptwatch.lake.seam import PINNED_SAMPLES, PINNED_SERIES, PINNED_STORED
from ckptwatch.lake.store import Lake, fsync_file, replace_dir

#: How a written file is made durable (a name of this module, which the tests replace).
_fsync = fsync_file
#: The pinned views and table macros stored, in pin order (each may read the ones before it).
STORED: tuple[str, ...] = (*PINNED_SAMPLES, *PINNED_SERIES, *PINNED_STORED)
STATS = "signal_stats"
KEY = "key.json"
_TMP = ".tmp"
#: Variables a connection sets itself for the days it reads: not part of what the rows are.
_OWN_VARIABLES = frozenset({"lake", "lake_since", "lake_until"})
_GETVARIABLE = re.compile(r"getvariable\(\s*'(\w+)'\s*\)", re.IGNORECASE)
_LAKE_TABLE = re.compile(r"getvariable\('lake'\)\s*\|\|\s*'/(\w+)/")


@functools.lru_cache(maxsize=4)
def _closure(sql_root: Path) -> tuple[tuple[Path, ...], frozenset[str], frozenset[str]]:
    """The SQL files the stored statistics read (and sql/session.sql), the variables that SQL
    reads, and the lake tables it reads."""
    from ckptwatch.lake.query import view_files, views_named_in

    files = tuple(view_files(sql_root, views_named_in(" ".join(STORED), sql_root)))
    texts = [f.read_text() for f in files]
    variables = frozenset(v.lower() for t in texts for v in _GETVARIABLE.findall(t))
    tables = frozenset(m for t in texts for m in _LAKE_TABLE.findall(t))
    return (*files, sql_root / "session.sql"), variables - _OWN_VARIABLES, tables


def _sql_root() -> Path:
    from ckptwatch.settings import sql_dir

    return sql_dir()


def day_dir(lake: Lake, day: date) -> Path:
    """``LAKE/derived/signal_stats/date=YYYY-MM-DD``."""
    return derived_dir(lake) / STATS / f"date={day.isoformat()}"


def _key(lake: Lake, day: date) -> str | None:
    """What the day's statistics are computed from; None when its deltas are not stored."""
    fingerprint = manifest(lake).get(day.isoformat())
    if fingerprint is None:
        return None
    files, _, tables = _closure(_sql_root())
    h = hashlib.sha256(fingerprint.encode())
    for f in files:
        h.update(f"{f.parent.name}/{f.name}\n{f.read_text()}\n".encode())
    for table in sorted(tables):
        for part in sorted((lake.table_dir(table) / f"date={day.isoformat()}").glob("*.parquet")):
            st = part.stat()
            h.update(f"{table}/{part.name}|{st.st_size}|{st.st_mtime_ns}\n".encode())
    return h.hexdigest()


def _variables(con: duckdb.DuckDBPyConnection) -> dict[str, str | None]:
    """The values of the session variables the statistics' SQL reads, as text."""
    _, names, _ = _closure(_sql_root())
    rows = con.execute("select lower(name), cast(value as varchar) from duckdb_variables()"
                       ).fetchall()
    found = {str(n): (None if v is None else str(v)) for n, v in rows}
    return {n: found.get(n) for n in sorted(names)}


def _stored_key(lake: Lake, day: date) -> dict[str, object] | None:
    path = day_dir(lake, day) / KEY
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def _one_day(con: duckdb.DuckDBPyConnection, lake: Lake) -> date | None:
    """The one day the connection reads, or None (several, or none)."""
    row = con.execute("select getvariable('lake_since'), getvariable('lake_until')").fetchall()
    since, until = row[0] if row else (None, None)
    days = [d for d in raw_days(lake) if (since is None or d >= since)
            and (until is None or d <= until)]
    return days[0] if len(days) == 1 else None


def stored(con: duckdb.DuckDBPyConnection) -> dict[str, Path]:
    """The stored rows of each of ``STORED`` that ``con`` may pin instead of computing them
    (see the module doc): their files by name; empty when it must compute them."""
    try:
        flags = con.execute(
            "select coalesce(getvariable('counter_deltas_derived'), false), "
            "getvariable('lake'), "
            "(select count(*) from duckdb_views() where view_name like 'lake\\_%' escape '\\')"
        ).fetchall()[0]
    except duckdb.Error:
        return {}
    derived_on, root, added = flags
    if not derived_on or root is None or added:
        return {}
    lake = Lake(str(root))
    day = _one_day(con, lake)
    if day is None:
        return {}
    saved = _stored_key(lake, day)
    if saved is None or saved.get("key") != _key(lake, day) \
            or saved.get("variables") != _variables(con):
        return {}
    files = {name: day_dir(lake, day) / f"{name}.parquet" for name in STORED}
    return files if all(f.is_file() for f in files.values()) else {}


def is_stored(lake: Lake, day: date) -> bool:
    """Whether the day's statistics are stored for its current key (variables aside)."""
    saved = _stored_key(lake, day)
    return saved is not None and saved.get("key") == _key(lake, day) and all(
        (day_dir(lake, day) / f"{name}.parquet").is_file() for name in STORED)


def store(lake: Lake, day: date, memory_limit: str | None) -> bool:
    """Compute and write the day's statistics unless they are stored for its key already;
    returns whether it computed them. The day's counter deltas must be stored and fresh
    (``ckptwatch.lake.derived.refresh`` calls this after writing the day's manifest entry)."""
    from ckptwatch.lake.query import connect
    from ckptwatch.lake.seam import pinned_views

    if is_stored(lake, day):
        return False
    key = _key(lake, day)
    if key is None:
        return False
    final = day_dir(lake, day)
    tmp = final.parent.parent / f"{STATS}{_TMP}" / final.name
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    from ckptwatch.lake.query import views_named_in

    con = connect(lake.root, days=(day, day), memory_limit=memory_limit,
                  views=views_named_in(" ".join(STORED)))
    try:
        if not con.execute("select coalesce(getvariable('counter_deltas_derived'), false)"
                           ).fetchall()[0][0]:
            return False  # the deltas are not stored: nothing to compute the day from
        with pinned_views(con, STORED, one_thread_if_short=True):
            for name in STORED:
                out = tmp / f"{name}.parquet"
                # Identifiers from STORED, not values: no parameter for them or for the path.
                con.execute(f'copy temp."pinned_{name}" to {sql_string(str(out))} '
                            "(format parquet, compression zstd)").fetchall()
                _fsync(out)
        key_path = tmp / KEY
        key_path.write_text(json.dumps({"key": key, "variables": _variables(con)},
                                       indent=1, sort_keys=True))
        _fsync(key_path)
        replace_dir(tmp, final)
        return True
    finally:
        con.close()
        shutil.rmtree(tmp, ignore_errors=True)
        with contextlib.suppress(OSError):  # not empty: another day's, left by a crash
            tmp.parent.rmdir()


def remove(lake: Lake, day: date) -> None:
    """Drop a day's statistics (its raw parts are gone)."""
    shutil.rmtree(day_dir(lake, day), ignore_errors=True)


