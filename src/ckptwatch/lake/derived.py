"""Counter deltas once: ``stg_counter_deltas`` materialised in the lake, a day at a time.

Layout (never read as input: no ingest, no lake view of a raw table reads ``derived/``)::

    LAKE/derived/counter_deltas/date=YYYY-MM-DD/part-deltas.parquet  the day's rows
    LAKE/derived/counter_deltas/date=1970-01-01/part-schema.parquet  zero rows: fixes the schema
    LAKE/derived/counter_state/date=YYYY-MM-DD/part-state.parquet    each series' last valid
                                                                     sample at the day's end
    LAKE/derived/counter_deltas.json                                 {day: fingerprint}

A day's rows are those of ``stg_counter_deltas`` over every day of the lake whose ``ts`` falls
on that day: :func:`refresh` computes them with ``counter_deltas_over`` (the macro of
``sql/staging/stg_counter_deltas.sql``, the one rule set) over the day's samples and, as carry
rows, the previous day's state, so a series' ``prev`` crosses days and files as in one pass.
A day's fingerprint hashes the SQL of the rules, the field limit, the day's raw parts (name,
size, mtime) of the three counter tables and the previous day's fingerprint: a part ingested
into a day makes it and every later day stale. A connection reads the materialised rows only
when every day it reads is fresh (:func:`is_fresh`), else it computes the deltas as before;
``int_signal_counter_deltas`` then treats a sample whose ``prev`` is before the first day read
as a series' first, exactly as a pass over those days would. Each part is written to a temp
file, fsynced and renamed, and the manifest is rewritten after each day: a crash leaves every
finished day valid and the rest stale (recomputed by the next refresh).
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

from ckptwatch.errors import LakeError
from ckptwatch.lake.store import (
    SCHEMA_PART,
    SCHEMA_PARTITION,
    Lake,
    atomic_write_bytes,
    atomic_write_table,
)

DERIVED_DIR = "derived"
DELTAS = "counter_deltas"
STATE = "counter_state"
MANIFEST = "counter_deltas.json"
LOCK = ".derived.lock"
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

#: One day's rows: the day's samples with the previous day's state as carry rows.
_DAY_SQL = f"""
    with
    samples as (
        select * from stg_counter_samples(null)
        union all by name
        select {_KEY}, ts, value, true as is_carry from counter_carry
    )
    select * from counter_deltas_over('samples')
"""
#: Each series' last valid sample at the end of the day (the next day's carry rows).
_STATE_SQL = f"""
    select {_KEY}, max(ts) as ts, arg_max(value, ts) as value
    from (
        select {_KEY}, ts, value from read_parquet($deltas) where value >= 0
        union all
        select {_KEY}, ts, value from counter_carry
    )
    group by all
"""
_EMPTY_CARRY = f"""
    create temp table counter_carry as
    select {_KEY}, ts, value from read_parquet($schema_part) where false
"""


def derived_dir(lake: Lake) -> Path:
    """``LAKE/derived``."""
    return lake.root / DERIVED_DIR


def add_stub(lake: Lake) -> None:
    """The zero-row schema part of ``derived/counter_deltas`` (what its lake view reads when no
    day has been materialised; idempotent)."""
    stub = derived_dir(lake) / DELTAS / SCHEMA_PARTITION / SCHEMA_PART
    if not stub.exists():
        atomic_write_table(stub, SCHEMA.empty_table())


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
    return "\n".join([*texts, f"max_field_chars={active_ingest().max_field_chars}"])


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
            and _day_part(lake, DELTAS, d, "deltas").is_file()
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
        days = _raw_days(lake)
        prints = _fingerprints(lake, days, _rules())
        manifest = {k: v for k, v in _manifest(lake).items()
                    if k in {d.isoformat() for d in days}}
        for orphan in _derived_days(lake) - set(days):  # raw parts gone: rows gone too
            for table in (DELTAS, STATE):
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


def _build_day(lake: Lake, day: date, previous: date | None,
               memory_limit: str | None) -> None:
    import duckdb  # here: Lake.add_missing_tables imports this module, and ingest needs no DuckDB

    from ckptwatch.lake.query import connect

    con = connect(lake.root, days=(day, day), memory_limit=memory_limit,
                  views=("stg_counter_deltas",))
    try:
        deltas = _day_part(lake, DELTAS, day, "deltas")
        state = _day_part(lake, STATE, day, "state")
        deltas.parent.mkdir(parents=True, exist_ok=True)
        state.parent.mkdir(parents=True, exist_ok=True)
        if previous is None:
            con.execute(_EMPTY_CARRY, {"schema_part": str(
                derived_dir(lake) / DELTAS / SCHEMA_PARTITION / SCHEMA_PART)})
        else:
            con.execute("create temp table counter_carry as select * from read_parquet($p)",
                        {"p": str(_day_part(lake, STATE, previous, "state"))})
        tmp_deltas = deltas.with_name(f".{deltas.name}.tmp")
        tmp_state = state.with_name(f".{state.name}.tmp")
        try:
            con.sql(_DAY_SQL).write_parquet(str(tmp_deltas), compression="zstd")
            con.sql(_STATE_SQL, params={"deltas": str(tmp_deltas)}).write_parquet(
                str(tmp_state), compression="zstd")
            _fsync_replace(tmp_state, state)
            _fsync_replace(tmp_deltas, deltas)
        except duckdb.Error as exc:
            raise LakeError(f"counter deltas of {day} ({deltas}): {exc}") from exc
        finally:
            for tmp in (tmp_deltas, tmp_state):
                tmp.unlink(missing_ok=True)
    finally:
        con.close()
