"""Counter deltas once: ``stg_counter_deltas`` materialised in the lake, a day at a time.

Layout (never read as input: no ingest, no lake view of a raw table reads ``derived/``)::

    LAKE/derived/counter_deltas/date=YYYY-MM-DD/part-NNNN.parquet  the day's rows by series_id,
                                                                   one part per batch
    LAKE/derived/counter_series/date=YYYY-MM-DD/part-NNNN.parquet  each series' key, per batch
    LAKE/derived/counter_state/date=YYYY-MM-DD/part-state.parquet  each series' last valid
                                                                   sample at the day's end
    LAKE/derived/<each of the three>/date=1970-01-01/part-schema.parquet   zero rows: the schema
    LAKE/derived/counter_deltas.json                               {day: fingerprint}

A day's rows are those of ``stg_counter_deltas`` over every day of the lake whose ``ts`` falls
on that day: :func:`refresh` computes them with ``counter_deltas_by_series`` and
``counter_series_of`` (the macros of ``sql/staging/stg_counter_deltas.sql``, the one rule set,
whose ``counter_deltas_over`` joins the two) over the day's samples and, as carry rows, the
previous day's state, so a series' ``prev`` crosses days and files as in one pass.
A day's fingerprint (``ckptwatch.lake.freshness``: the rule SQL, the field limit, the day's raw
parts, the previous day's fingerprint) goes into the manifest once its rows are in place. A
connection reads the materialised rows only when every day it reads is fresh (:func:`is_fresh`;
the switch is ``ckptwatch.lake.seam``'s), else it computes the deltas;
``int_signal_counter_deltas`` then treats a sample whose ``prev`` is before the first day read
as a series' first, exactly as a pass over those days would. A day's parts are written to
temp directories, fsynced and renamed into place, and the manifest is rewritten after each day:
a crash leaves every finished day valid and the rest stale (recomputed by the next refresh).

The cost is about one ``lag()`` pass (``bench/derived.py`` measures both side by side): a day is
computed in batches of parts (:func:`_batches`) that cannot share a series, since a series' key
holds its host and the Parquet footers give each part's host range; each batch's window (which
also deduplicates re-sent samples) stays in memory at the nightly cap, where one pass over a
512-node day's 35 M samples spilled ~5 GB. A batch's rows are computed by series_id, without
the six key strings (each series' key is one group-by row): the strings are written once per
series and day, not once per sample (encoding them cost more than every other column
together), and the day's state is gathered by series_id. Batches share nothing but the carry
rows, so ``refresh(map_batches=...)`` runs them elsewhere (:func:`compute_batch`, each on a
connection of its own: the nightly flow's Dask tasks), this process gathering each day's state
from their last samples and fsyncing, renaming and naming the day as it does for its own.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import date
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq  # loaded already: ckptwatch.lake.store writes every part with it

from ckptwatch.errors import LakeError
from ckptwatch.lake import seam, signalstats
from ckptwatch.lake.freshness import (
    COUNTER_TABLES,
    DELTAS,
    MANIFEST,
    SERIES,
    STATE,
    day_part,
    derived_days,
    derived_dir,
    fingerprints,
    fresh_days,
    is_fresh,
    manifest,
    raw_days,
    rules,
)
from ckptwatch.lake.query import connect, sql_string
from ckptwatch.lake.schema import COUNTER_DELTAS as SCHEMA
from ckptwatch.lake.schema import DERIVED_DIR, DERIVED_TABLES, SERIES_KEY
from ckptwatch.lake.store import (
    SCHEMA_PART,
    SCHEMA_PARTITION,
    Lake,
    atomic_write_bytes,
    fsync_file,
    replace_dir,
)

#: What a caller reads here besides ``refresh``: the layout and whether a day is fresh
#: (``ckptwatch.lake.freshness``), the schemas (``ckptwatch.lake.schema``).
__all__ = ["COUNTER_TABLES", "DELTAS", "DELTAS_SCHEMA", "DERIVED_DIR", "HOST_COLUMNS",
           "MANIFEST", "SCHEMA", "SERIES", "SERIES_SCHEMA", "STATE", "STATE_SCHEMA",
           "BatchMapper", "DayBatch", "Refresh", "compute_batch", "derived_dir", "is_fresh",
           "refresh"]

LOCK = ".derived.lock"
#: Siblings of ``derived/counter_deltas`` (outside the glob its view reads): a day being
#: written, and a day being replaced.
_TMP = ".tmp"
_OLD = ".old"
DELTAS_SCHEMA = DERIVED_TABLES[DELTAS]
SERIES_SCHEMA = DERIVED_TABLES[SERIES]
STATE_SCHEMA = DERIVED_TABLES[STATE]
_KEY = ", ".join(SERIES_KEY)

#: One batch's samples: the day's samples with the previous day's state as carry rows.
_DAY_SAMPLES = f"""
    with
    samples as (
        select * from stg_counter_samples(null)
        union all by name
        select {_KEY}, ts, value, true as is_carry from counter_carry
    )
"""
#: A batch's rows by series_id (``counter_deltas``: the columns of ``DELTAS_SCHEMA``).
_BATCH_DELTAS_SQL = f"""
    create or replace temp table derived_batch as
    {_DAY_SAMPLES}
    select {", ".join(DELTAS_SCHEMA.names)} from counter_deltas_by_series('samples')
"""
#: A batch's rows written as its ``counter_deltas`` part: zstd, no dictionary attempted
#: (``dictionary_size_limit`` 1 byte: every column is floats, timestamps or an id per series,
#: which a dictionary never shrinks; trying one was a fifth of the write). ``{dst}``: the path
#: as a quoted literal (COPY takes no parameter for it).
_WRITE_DELTAS_SQL = ("copy derived_batch to {dst} "
                     "(format parquet, compression zstd, dictionary_size_limit 1)")
#: A batch's series (``counter_series``): one row per series_id.
_BATCH_SERIES_SQL = f"""
    create or replace temp table derived_batch_series as
    {_DAY_SAMPLES}
    select * from counter_series_of('samples')
"""
#: Each series' last valid sample in a batch (gathered over the day's batches).
_BATCH_LAST = f"""
    select {", ".join(f"series.{c}" for c in SERIES_KEY)}, last.ts, last.value
    from (
        select series_id, max(ts) as ts, arg_max(value, ts) as value
        from derived_batch
        where value >= 0
        group by series_id
    ) as last
    inner join derived_batch_series as series
        on last.series_id = series.series_id
"""
_BATCH_LAST_SQL = f"insert into day_last {_BATCH_LAST}"
#: Each series' last valid sample at the end of the day (the next day's carry rows).
_STATE_SQL = f"""
    select {_KEY}, max(ts) as ts, arg_max(value, ts) as value
    from (
        select {_KEY}, ts, value from day_last
        union all
        select {_KEY}, ts, value from counter_carry
    )
    group by all
"""
_CARRY = f"""
    create temp table counter_carry as
    select {_KEY}, ts, value from read_parquet($p, hive_partitioning = false)
"""
_DAY_LAST = f"create temp table day_last as select {_KEY}, ts, value from counter_carry where false"
_EMPTY_CARRY = f"""
    create temp table counter_carry as
    select {_KEY}, ts, value from read_parquet($schema_part) where false
"""


@dataclass(frozen=True)
class Refresh:
    """What :func:`refresh` did: the days whose deltas it computed, the days that were already
    fresh, and the days whose signal statistics it computed (``ckptwatch.lake.signalstats``)."""

    built: tuple[date, ...]
    kept: tuple[date, ...]
    stats: tuple[date, ...] = ()


@dataclass(frozen=True)
class DayBatch:
    """One batch of a day's parts as :func:`compute_batch` computes it, in a process of its own
    (a Dask task of the nightly flow): what it reads and where it writes, as plain values."""

    lake_root: str
    day: date
    #: The day whose state gives the carry rows (None: the lake's first day).
    previous: date | None
    index: int
    #: Each counter table's files: its schema part and the batch's parts (of one table).
    files: dict[str, list[str]]
    #: The batch's ``counter_deltas`` and ``counter_series`` parts, in the day's temp dirs.
    deltas_part: str
    series_part: str
    memory_limit: str | None


#: Runs :func:`compute_batch` on each of a day's batches (Dask tasks, a process pool, ...) and
#: returns their results in batch order; every batch has ended when it returns or raises.
BatchMapper = Callable[[Sequence[DayBatch]], Sequence[pa.Table]]


def _fsync_replace(tmp: Path, path: Path) -> None:
    with open(tmp, "rb+") as fh:
        os.fsync(fh.fileno())
    os.replace(tmp, path)


def refresh(lake_root: Path | str, *, memory_limit: str | None = None,
            lock_wait_s: float = 600.0, map_batches: BatchMapper | None = None) -> Refresh:
    """Materialise the counter deltas of every stale day, oldest first (see the module doc).

    Holds the lake's derived lock (not the ingest's); a day's rows and state are renamed into
    place before the manifest names them. Days without raw counter parts any more lose their
    entry and their files (until then no connection reads the materialised rows).
    ``map_batches``: run each stale day's batches there (:class:`DayBatch`, each its own
    connection, e.g. Dask tasks: the nightly flow's ``--dask``), in order of days (a day's
    carry is the previous day's state); this process gathers their last samples into the
    day's state, fsyncs and renames as before. None: one batch after another here. The same
    rows either way.
    """
    lake = Lake(lake_root)
    if not lake.exists():
        raise LakeError(f"no lake at {lake.root} (run `ckptwatch ingest RAW_DIR --lake "
                        f"{lake.root}` first)")
    with lake.lock(lock_wait_s, name=LOCK, what="another counter-delta refresh"):
        lake.add_missing_tables()  # the derived tables' stubs: what a first day's carry reads
        for table in (DELTAS, SERIES):  # what a crashed refresh left
            for leftover in (f"{table}{_TMP}", f"{table}{_OLD}"):
                shutil.rmtree(derived_dir(lake) / leftover, ignore_errors=True)
        days = raw_days(lake)
        prints = fingerprints(lake, days, rules())
        stored = {k: v for k, v in manifest(lake).items()
                    if k in {d.isoformat() for d in days}}
        for orphan in derived_days(lake) - set(days):  # raw parts gone: rows gone too
            for table in (DELTAS, SERIES, STATE):
                shutil.rmtree(derived_dir(lake) / table / f"date={orphan.isoformat()}",
                              ignore_errors=True)
            signalstats.remove(lake, orphan)
        fresh = fresh_days(lake, stored, prints)
        built: list[date] = []
        kept: list[date] = []
        stats: list[date] = []
        previous: date | None = None
        for day in days:
            if day in fresh:  # prints are chained: a day after a changed one is stale
                kept.append(day)
            else:
                _build_day(lake, day, previous, memory_limit, map_batches)
                stored[day.isoformat()] = prints[day]
                atomic_write_bytes(derived_dir(lake) / MANIFEST,
                                   json.dumps(stored, indent=1, sort_keys=True).encode())
                built.append(day)
            previous = day
            if _store_stats(lake, day, memory_limit):
                stats.append(day)
        return Refresh(tuple(built), tuple(kept), tuple(stats))


def _store_stats(lake: Lake, day: date, memory_limit: str | None) -> bool:
    """The day's signal statistics (``ckptwatch.lake.signalstats``), once its deltas are in
    place; a DuckDB failure is the refresh's, named by day."""
    try:
        return signalstats.store(lake, day, memory_limit)
    except duckdb.Error as exc:
        raise LakeError(f"signal statistics of {day} ({signalstats.day_dir(lake, day)}): "
                        f"{exc}") from exc


def _parts(lake: Lake, table: str, day: date) -> list[Path]:
    return sorted((lake.table_dir(table) / f"date={day.isoformat()}").glob("*.parquet"))


def _host_range(path: Path, column: str) -> tuple[int, tuple[str, str] | None]:
    """A part's rows and the range of its ``column`` from the Parquet footer (no data read);
    ``None`` when the footer cannot bound it (no statistics, nulls): the part then shares a
    batch with every other part of its table."""
    try:
        meta = pq.ParquetFile(path).metadata
    except (OSError, pa.ArrowException) as exc:
        raise LakeError(f"counter deltas: cannot read the footer of {path}: {exc} (remove the "
                        "part or ingest its source file again)") from exc
    names = [meta.schema.column(i).name for i in range(meta.num_columns)]
    if column not in names:
        return meta.num_rows, None
    index = names.index(column)
    lo: str | None = None
    hi: str | None = None
    for g in range(meta.num_row_groups):
        stats = meta.row_group(g).column(index).statistics
        if stats is None or not stats.has_min_max or stats.null_count:
            return meta.num_rows, None
        lo = stats.min if lo is None else min(lo, stats.min)
        hi = stats.max if hi is None else max(hi, stats.max)
    return meta.num_rows, (str(lo), str(hi)) if lo is not None and hi is not None else None


def _batches(parts: list[Path], column: str, max_rows: int) -> list[list[Path]]:
    """``parts`` in batches no two of which can hold a sample of the same series: a series'
    key includes ``column`` (the host), so parts whose host ranges overlap share a batch.
    Groups of overlapping parts are packed, in host order, up to ``max_rows`` (a group larger
    than that stays whole). One node per part (as the ingest writes a file per node) gives
    batches of about ``max_rows``; a part that spans every host gives one batch."""
    ranged: list[tuple[str, str, int, Path]] = []
    unbounded: list[tuple[int, Path]] = []
    for part in parts:
        rows, span = _host_range(part, column)
        if span is None:
            unbounded.append((rows, part))
        else:
            ranged.append((span[0], span[1], rows, part))
    if unbounded:
        return [parts]
    ranged.sort()
    groups: list[tuple[int, list[Path]]] = []
    reach = ""
    for lo, hi, rows, part in ranged:
        if groups and lo <= reach:
            n, members = groups[-1]
            groups[-1] = (n + rows, [*members, part])
            reach = max(reach, hi)
        else:
            groups.append((rows, [part]))
            reach = hi
    batches: list[list[Path]] = []
    filled = 0
    for rows, members in groups:
        if batches and filled + rows <= max_rows:
            batches[-1] += members
            filled += rows
        else:
            batches.append(list(members))
            filled = rows
    return batches


#: The column of each counter table that a series' key holds (parts are batched by its range).
HOST_COLUMNS = {"fabric_counters": "node", "nvme_smart": "node", "pool_metrics": "target"}
#: Samples per batch (a day's parts are computed a batch at a time): the window and the dedup
#: of 2 M samples stay in memory at a 2GB DuckDB cap, where one pass over 35 M spills ~5 GB.
BATCH_ROWS = 2_000_000


def _day_batches(lake: Lake, day: date) -> list[dict[str, list[str]]]:
    """The day's parts in batches: for each batch, each counter table's files (its schema
    part and the batch's parts; a batch holds the parts of one table)."""
    stubs = {t: str(lake.table_dir(t) / SCHEMA_PARTITION / SCHEMA_PART) for t in COUNTER_TABLES}
    out: list[dict[str, list[str]]] = []
    for table in COUNTER_TABLES:
        for batch in _batches(_parts(lake, table, day), HOST_COLUMNS[table], BATCH_ROWS):
            out.append({t: [stubs[t], *(map(str, batch) if t == table else ())]
                        for t in COUNTER_TABLES})
    return out


def _load_carry(con: duckdb.DuckDBPyConnection, lake: Lake, previous: date | None) -> None:
    """``counter_carry``: the previous day's state (none before the lake's first day)."""
    if previous is None:
        con.execute(_EMPTY_CARRY, {"schema_part": str(
            derived_dir(lake) / STATE / SCHEMA_PARTITION / SCHEMA_PART)})
    else:
        con.execute(_CARRY, {"p": str(day_part(lake, STATE, previous, "state"))})


def _write_batch(con: duckdb.DuckDBPyConnection, files: dict[str, list[str]], deltas_part: Path,
                 series_part: Path) -> None:
    """One batch's pass (``counter_deltas_by_series`` over its parts and the carry rows): its
    deltas and series parts written, ``derived_batch`` and ``derived_batch_series`` left for
    its last samples (``_BATCH_LAST``)."""
    for table, paths in files.items():
        seam.read_parts(con, table, paths)
    con.execute(_BATCH_DELTAS_SQL)
    con.execute(_BATCH_SERIES_SQL)
    con.execute(_WRITE_DELTAS_SQL.format(dst=sql_string(str(deltas_part))))
    con.table("derived_batch_series").write_parquet(str(series_part), compression="zstd")


def compute_batch(batch: DayBatch) -> pa.Table:
    """One batch of a day on a connection of its own (a task's work, :class:`DayBatch`): the
    carry rows, the batch's pass, its two parts written (fsynced, renamed and named in the
    manifest by the process that gathers the day); returns each of its series' last valid
    sample, the rows the day's state gathers."""
    lake = Lake(batch.lake_root)
    con = connect(lake.root, days=(batch.day, batch.day), memory_limit=batch.memory_limit,
                  views=("stg_counter_deltas",))
    try:
        _load_carry(con, lake, batch.previous)
        _write_batch(con, batch.files, Path(batch.deltas_part), Path(batch.series_part))
        return con.sql(_BATCH_LAST).to_arrow_table()
    except duckdb.Error as exc:
        raise LakeError(f"counter deltas of {batch.day}, batch {batch.index} "
                        f"({batch.deltas_part}): {exc}") from exc
    finally:
        con.close()


def _build_day(lake: Lake, day: date, previous: date | None, memory_limit: str | None,
               map_batches: BatchMapper | None = None) -> None:
    """One day's rows, a batch of parts at a time (:func:`_day_batches`: each batch is one
    DuckDB pass of ``counter_deltas_by_series`` with the previous day's state as carry rows, small
    enough to stay in memory), its deltas and series written to temp directories and renamed
    into place; then the day's state (the manifest, rewritten by the caller, comes last).
    ``map_batches``: the batches run there (:func:`compute_batch`), this connection gathers
    their last samples; None: each runs here in turn."""
    con = connect(lake.root, days=(day, day), memory_limit=memory_limit,
                  views=("stg_counter_deltas",), build=map_batches is None)
    part = f"date={day.isoformat()}"
    finals = {t: derived_dir(lake) / t / part for t in (DELTAS, SERIES)}
    tmps = {t: derived_dir(lake) / f"{t}{_TMP}" / part for t in (DELTAS, SERIES)}
    state = day_part(lake, STATE, day, "state")
    tmp_state = state.with_name(f".{state.name}.tmp")
    try:
        for tmp in tmps.values():
            shutil.rmtree(tmp, ignore_errors=True)
            tmp.mkdir(parents=True)
        state.parent.mkdir(parents=True, exist_ok=True)
        _load_carry(con, lake, previous)
        con.execute(_DAY_LAST)
        written: list[Path] = []
        try:
            batches = _day_batches(lake, day)
            outs = [(tmps[DELTAS] / f"part-{i:04d}.parquet",
                     tmps[SERIES] / f"part-{i:04d}.parquet") for i in range(len(batches))]
            if map_batches is None:
                for batch, (deltas_out, series_out) in zip(batches, outs, strict=True):
                    _write_batch(con, batch, deltas_out, series_out)
                    written += [deltas_out, series_out]
                    con.execute(_BATCH_LAST_SQL)
                con.execute("drop table if exists derived_batch")
                con.execute("drop table if exists derived_batch_series")
            elif batches:
                def here(path: Path | str) -> str:  # a task's working directory is its own
                    return str(Path(path).absolute())

                _gather(con, map_batches([
                    DayBatch(here(lake.root), day, previous, i,
                             {t: [here(f) for f in files] for t, files in batch.items()},
                             here(outs[i][0]), here(outs[i][1]), memory_limit)
                    for i, batch in enumerate(batches)]), len(batches), day)
                written = [f for pair in outs for f in pair]
            con.sql(_STATE_SQL).write_parquet(str(tmp_state), compression="zstd")
            for f in written:
                fsync_file(f)
            _fsync_replace(tmp_state, state)
            for table in (DELTAS, SERIES):
                _replace_dir(tmps[table], finals[table])
        except duckdb.Error as exc:
            raise LakeError(f"counter deltas of {day} ({finals[DELTAS]}): {exc}") from exc
        finally:
            tmp_state.unlink(missing_ok=True)
            for tmp in tmps.values():
                shutil.rmtree(tmp, ignore_errors=True)
                with contextlib.suppress(OSError):  # not empty: another day's, left by a crash
                    tmp.parent.rmdir()
    finally:
        con.close()


def _gather(con: duckdb.DuckDBPyConnection, lasts: Sequence[pa.Table], n_batches: int,
            day: date) -> None:
    """The batches' last samples into ``day_last`` (what ``_BATCH_LAST_SQL`` inserts when the
    batches run here)."""
    if len(lasts) != n_batches:
        raise LakeError(f"counter deltas of {day}: {len(lasts)} batch results for "
                        f"{n_batches} batches")
    for last in lasts:
        con.register("derived_batch_last", last)
        try:
            con.execute("insert into day_last by name select * from derived_batch_last")
        finally:
            con.unregister("derived_batch_last")


def _replace_dir(new: Path, path: Path) -> None:
    """Rename directory ``new`` to ``path``, replacing it (a crash in between leaves the day
    without rows: stale, rebuilt by the next refresh; the old rows go to a sibling first)."""
    replace_dir(new, path, path.parent.parent / f"{path.parent.name}{_OLD}" / path.name)
