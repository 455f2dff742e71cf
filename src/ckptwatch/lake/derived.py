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
A day's fingerprint hashes the SQL of the rules, the field limit, the day's raw parts (name,
size, mtime) of the three counter tables and the previous day's fingerprint: a part ingested
into a day makes it and every later day stale. A connection reads the materialised rows only
when every day it reads is fresh (:func:`is_fresh`), else it computes the deltas as before;
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
together), and the day's state is gathered by series_id.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
from dataclasses import dataclass
from datetime import date
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq  # loaded already: ckptwatch.lake.store writes every part with it

from ckptwatch.errors import LakeError
from ckptwatch.lake.store import (
    SCHEMA_PART,
    SCHEMA_PARTITION,
    Lake,
    atomic_write_bytes,
    atomic_write_many,
)

DERIVED_DIR = "derived"
DELTAS = "counter_deltas"
SERIES = "counter_series"
STATE = "counter_state"
MANIFEST = "counter_deltas.json"
LOCK = ".derived.lock"
#: Siblings of ``derived/counter_deltas`` (outside the glob its view reads): a day being
#: written, and a day being replaced.
_TMP = ".tmp"
_OLD = ".old"
#: The raw tables whose samples ``stg_counter_deltas`` reads.
COUNTER_TABLES = ("fabric_counters", "nvme_smart", "pool_metrics")
#: The SQL files whose text decides the rows (a change makes every day stale).
RULE_FILES = ("session.sql", "staging/stg_counter_deltas.sql", "staging/stg_fabric_counters.sql",
              "staging/stg_metric_samples.sql", "staging/stg_metric_names.sql",
              "staging/stg_nvme_smart.sql", "staging/stg_pool_metrics.sql")

_TS = pa.timestamp("us", tz="UTC")
#: The columns of ``stg_counter_deltas``, as DuckDB writes them.
SCHEMA = pa.schema([
    ("source_table", pa.string()), ("host", pa.string()), ("device", pa.string()),
    ("port", pa.string()), ("pool", pa.string()), ("counter", pa.string()),
    ("series_id", pa.uint64()), ("ts", _TS), ("prev_ts", _TS), ("interval_s", pa.float64()),
    ("value", pa.float64()), ("prev_value", pa.float64()), ("delta", pa.float64()),
    ("rate_per_s", pa.float64()), ("reset", pa.bool_()), ("wrapped", pa.bool_()),
    ("saturated", pa.bool_()), ("invalid", pa.bool_()),
])
_KEY = "source_table, host, device, port, pool, counter"
_KEY_COLUMNS = ("source_table", "host", "device", "port", "pool", "counter")
#: The columns stored per sample (``counter_deltas``) and once per series and day
#: (``counter_series``): a day's 35 M rows are written without their six key strings, which
#: cost more to encode than every other column together; ``derived_counter_deltas`` joins them.
#: Per sample, neither ``prev_ts``, ``interval_s`` nor ``rate_per_s`` is stored but the
#: interval in microseconds, from which the view computes them by ``stg_counter_deltas``' own
#: formulas (``interval_seconds``, ``counter_rate``): those three columns were a third of the
#: Parquet encoding of a batch (0.42 -> 0.25 s for 2 M rows with no dictionary attempts).
SERIES_SCHEMA = pa.schema([SCHEMA.field(c) for c in ("series_id", *_KEY_COLUMNS)])
DELTAS_SCHEMA = pa.schema([
    SCHEMA.field("series_id"), SCHEMA.field("ts"), pa.field("interval_us", pa.int64()),
    *(SCHEMA.field(c) for c in ("value", "prev_value", "delta", "reset", "wrapped",
                                "saturated", "invalid")),
])
#: Each series' last valid sample at a day's end (``counter_state``).
STATE_SCHEMA = pa.schema([*(SCHEMA.field(c) for c in _KEY_COLUMNS), SCHEMA.field("ts"),
                          SCHEMA.field("value")])
#: The layout's version: part of every day's fingerprint (a day stored by another is stale).
LAYOUT = "3: deltas by series_id with interval_us, counter_series"

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
_BATCH_LAST_SQL = f"""
    insert into day_last
    select {", ".join(f"series.{c}" for c in _KEY_COLUMNS)}, last.ts, last.value
    from (
        select series_id, max(ts) as ts, arg_max(value, ts) as value
        from derived_batch
        where value >= 0
        group by series_id
    ) as last
    inner join derived_batch_series as series
        on last.series_id = series.series_id
"""
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


def derived_dir(lake: Lake) -> Path:
    """``LAKE/derived``."""
    return lake.root / DERIVED_DIR


def add_stub(lake: Lake) -> None:
    """The zero-row schema parts of ``derived/counter_deltas``, ``counter_series`` and
    ``counter_state`` (what ``derived_counter_deltas`` and a first day's carry read when no day
    has been materialised; idempotent)."""
    atomic_write_many(missing_stubs(lake))


def missing_stubs(lake: Lake) -> list[tuple[Path, pa.Table]]:
    """The derived tables' zero-row schema parts that ``lake`` lacks (or holds of another
    layout), and their empty tables
    (``Lake.add_missing_tables`` writes them with the lake's own stubs, in one round of
    fsyncs)."""
    out: list[tuple[Path, pa.Table]] = []
    for table, schema in ((DELTAS, DELTAS_SCHEMA), (SERIES, SERIES_SCHEMA),
                          (STATE, STATE_SCHEMA)):
        stub = derived_dir(lake) / table / SCHEMA_PARTITION / SCHEMA_PART
        if not stub.exists() or not _has_schema(stub, schema):
            out.append((stub, schema.empty_table()))
    return out


def _has_schema(path: Path, schema: pa.Schema) -> bool:
    """True when the Parquet file ``path`` has ``schema``'s columns (names and types, in
    order). A schema part of another layout (an older version's) is rewritten: the view reads
    the parts without ``union_by_name``, so its columns come from that part, and the days of
    another layout are stale (never read) until the next refresh rebuilds them."""
    try:
        found = pq.read_schema(path)
    except (OSError, pa.ArrowException):
        return False
    return [(f.name, f.type) for f in found] == [(f.name, f.type) for f in schema]


def _day_part(lake: Lake, table: str, day: date, name: str) -> Path:
    return derived_dir(lake) / table / f"date={day.isoformat()}" / f"part-{name}.parquet"


def _raw_days(lake: Lake) -> list[date]:
    return sorted({d for t in COUNTER_TABLES for d in lake.days(t)})


def _fingerprints(lake: Lake, days: list[date], rules: str) -> dict[date, str]:
    """Each day's fingerprint (chained: it covers every earlier day too)."""
    out: dict[date, str] = {}
    previous = hashlib.sha256(rules.encode()).hexdigest()
    for day in days:
        h = hashlib.sha256(previous.encode())
        for table in COUNTER_TABLES:
            part_dir = lake.table_dir(table) / f"date={day.isoformat()}"
            for f in sorted(part_dir.glob("*.parquet")):
                st = f.stat()
                h.update(f"{table}/{f.name}|{st.st_size}|{st.st_mtime_ns}\n".encode())
        previous = out[day] = h.hexdigest()
    return out


def _rules() -> str:
    """The text the rows depend on besides the raw parts: the rule SQL and the field limit."""
    from ckptwatch.settings import active_ingest, sql_dir

    root = sql_dir()
    texts = [(root / f).read_text() if (root / f).is_file() else "" for f in RULE_FILES]
    return "\n".join([*texts, f"max_field_chars={active_ingest().max_field_chars}",
                      f"layout={LAYOUT}"])


def _manifest(lake: Lake) -> dict[str, str]:
    path = derived_dir(lake) / MANIFEST
    if not path.is_file():
        return {}
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}  # unreadable: every day is stale, the next refresh rewrites it
    return {str(k): str(v) for k, v in data.items()} if isinstance(data, dict) else {}


def _derived_days(lake: Lake) -> set[date]:
    """The days ``derived/counter_deltas`` has a partition for (the schema stub's aside)."""
    found = set()
    for d in (derived_dir(lake) / DELTAS).glob("date=*"):
        if d.name != SCHEMA_PARTITION:
            with contextlib.suppress(ValueError):
                found.add(date.fromisoformat(d.name.removeprefix("date=")))
    return found


def _fresh_days(lake: Lake, manifest: dict[str, str], prints: dict[date, str]) -> set[date]:
    return {d for d, fp in prints.items() if manifest.get(d.isoformat()) == fp
            and all(any((derived_dir(lake) / t / f"date={d.isoformat()}").glob("*.parquet"))
                    for t in (DELTAS, SERIES))
            and _day_part(lake, STATE, d, "state").is_file()}


def is_fresh(lake_root: Path | str, days: tuple[date, date] | None = None) -> bool:
    """True when every counter day of the lake in ``days`` (``None``: every day) is
    materialised from the raw parts it has now (and the lake has at least one such day)."""
    lake = Lake(lake_root)
    all_days = _raw_days(lake)
    upto = [d for d in all_days if days is None or d <= days[1]]
    wanted = [d for d in upto if days is None or d >= days[0]]
    if not wanted:
        return False
    manifest = _manifest(lake)
    if not manifest:
        return False
    orphans = {d for d in _derived_days(lake) - set(all_days)
               if days is None or days[0] <= d <= days[1]}
    if orphans:  # a day whose raw parts are gone (the next refresh removes it): not read
        return False
    return set(wanted) <= _fresh_days(lake, manifest, _fingerprints(lake, upto, _rules()))


@dataclass(frozen=True)
class Refresh:
    """What :func:`refresh` did: the days it computed and the days that were already fresh."""

    built: tuple[date, ...]
    kept: tuple[date, ...]


def _fsync_replace(tmp: Path, path: Path) -> None:
    with open(tmp, "rb+") as fh:
        os.fsync(fh.fileno())
    os.replace(tmp, path)


def refresh(lake_root: Path | str, *, memory_limit: str | None = None,
            lock_wait_s: float = 600.0) -> Refresh:
    """Materialise the counter deltas of every stale day, oldest first (see the module doc).

    Holds the lake's derived lock (not the ingest's); a day's rows and state are renamed into
    place before the manifest names them. Days without raw counter parts any more lose their
    entry and their files (until then no connection reads the materialised rows).
    """
    lake = Lake(lake_root)
    if not lake.exists():
        raise LakeError(f"no lake at {lake.root} (run `ckptwatch ingest RAW_DIR --lake "
                        f"{lake.root}` first)")
    with lake.lock(lock_wait_s, name=LOCK, what="another counter-delta refresh"):
        add_stub(lake)
        for table in (DELTAS, SERIES):  # what a crashed refresh left
            for leftover in (f"{table}{_TMP}", f"{table}{_OLD}"):
                shutil.rmtree(derived_dir(lake) / leftover, ignore_errors=True)
        days = _raw_days(lake)
        prints = _fingerprints(lake, days, _rules())
        manifest = {k: v for k, v in _manifest(lake).items()
                    if k in {d.isoformat() for d in days}}
        for orphan in _derived_days(lake) - set(days):  # raw parts gone: rows gone too
            for table in (DELTAS, SERIES, STATE):
                shutil.rmtree(derived_dir(lake) / table / f"date={orphan.isoformat()}",
                              ignore_errors=True)
        fresh = _fresh_days(lake, manifest, prints)
        built: list[date] = []
        kept: list[date] = []
        previous: date | None = None
        for day in days:
            if day in fresh:  # prints are chained: a day after a changed one is stale
                kept.append(day)
            else:
                _build_day(lake, day, previous, memory_limit)
                manifest[day.isoformat()] = prints[day]
                atomic_write_bytes(derived_dir(lake) / MANIFEST,
                                   json.dumps(manifest, indent=1, sort_keys=True).encode())
                built.append(day)
            previous = day
        return Refresh(tuple(built), tuple(kept))


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
#: The lake view of a counter table over the parts of one batch (``derived_parts``, each
#: table's zero-row schema part included, so a batch without parts of a table reads it empty).
_BATCH_VIEW = """
    create or replace view {table} as
    select *
    from read_parquet(
        getvariable('derived_parts_{table}'),
        hive_partitioning = true,
        hive_types = {{'date': date}},
        union_by_name = true
    )
"""


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


def _build_day(lake: Lake, day: date, previous: date | None,
               memory_limit: str | None) -> None:
    """One day's rows, a batch of parts at a time (:func:`_day_batches`: each batch is one
    DuckDB pass of ``counter_deltas_by_series`` with the previous day's state as carry rows, small
    enough to stay in memory), its deltas and series written to temp directories and renamed
    into place; then the day's state (the manifest, rewritten by the caller, comes last)."""
    import duckdb  # here: Lake.add_missing_tables imports this module, and ingest needs no DuckDB

    from ckptwatch.lake.query import connect, sql_string

    con = connect(lake.root, days=(day, day), memory_limit=memory_limit,
                  views=("stg_counter_deltas",))
    part = f"date={day.isoformat()}"
    finals = {t: derived_dir(lake) / t / part for t in (DELTAS, SERIES)}
    tmps = {t: derived_dir(lake) / f"{t}{_TMP}" / part for t in (DELTAS, SERIES)}
    state = _day_part(lake, STATE, day, "state")
    tmp_state = state.with_name(f".{state.name}.tmp")
    try:
        for tmp in tmps.values():
            shutil.rmtree(tmp, ignore_errors=True)
            tmp.mkdir(parents=True)
        state.parent.mkdir(parents=True, exist_ok=True)
        if previous is None:
            con.execute(_EMPTY_CARRY, {"schema_part": str(
                derived_dir(lake) / STATE / SCHEMA_PARTITION / SCHEMA_PART)})
        else:
            con.execute(_CARRY, {"p": str(_day_part(lake, STATE, previous, "state"))})
        con.execute(_DAY_LAST)
        written: list[Path] = []
        try:
            for i, batch in enumerate(_day_batches(lake, day)):
                for table, files in batch.items():
                    con.execute(f"SET VARIABLE derived_parts_{table} = ?", [files])
                    con.execute(_BATCH_VIEW.format(table=table))
                con.execute(_BATCH_DELTAS_SQL)
                con.execute(_BATCH_SERIES_SQL)
                out = tmps[DELTAS] / f"part-{i:04d}.parquet"
                con.execute(_WRITE_DELTAS_SQL.format(dst=sql_string(str(out))))
                written.append(out)
                out = tmps[SERIES] / f"part-{i:04d}.parquet"
                con.table("derived_batch_series").write_parquet(str(out), compression="zstd")
                written.append(out)
                con.execute(_BATCH_LAST_SQL)
            con.execute("drop table if exists derived_batch")
            con.execute("drop table if exists derived_batch_series")
            con.sql(_STATE_SQL).write_parquet(str(tmp_state), compression="zstd")
            for f in written:
                _fsync(f)
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


def _fsync(path: Path) -> None:
    with open(path, "rb") as fh:
        os.fsync(fh.fileno())


def _replace_dir(new: Path, path: Path) -> None:
    """Rename directory ``new`` to ``path``, replacing it (a crash in between leaves the day
    without rows: stale, rebuilt by the next refresh; the old rows go to a sibling first)."""
    old = path.parent.parent / f"{path.parent.name}{_OLD}" / path.name
    shutil.rmtree(old, ignore_errors=True)
    if path.exists():
        old.parent.mkdir(parents=True, exist_ok=True)
        os.replace(path, old)
    path.parent.mkdir(parents=True, exist_ok=True)
    os.replace(new, path)
    fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
    shutil.rmtree(old, ignore_errors=True)
