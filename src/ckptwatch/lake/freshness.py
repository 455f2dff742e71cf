"""Whether the stored counter deltas can be read: the layout of ``LAKE/derived/``, its
manifest and each day's fingerprint.

``ckptwatch.lake.derived.refresh`` writes a day's rows and then its fingerprint into the
manifest; the query seam (``ckptwatch.lake.seam``) reads the stored rows only when every day a
connection reads is fresh (:func:`is_fresh`). Both use this module, which needs neither DuckDB
nor the views: refresh builds its days with ``connect``, and ``connect`` asks this.

A day's fingerprint hashes the SQL of the rules, the field limit, the layout, the day's raw
parts (name, size, mtime) of the three counter tables and the previous day's fingerprint: a
part ingested into a day makes it and every later day stale.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
from datetime import date
from pathlib import Path

from ckptwatch.lake.schema import DERIVED_DIR
from ckptwatch.lake.store import SCHEMA_PARTITION, Lake

DELTAS = "counter_deltas"
SERIES = "counter_series"
STATE = "counter_state"
MANIFEST = "counter_deltas.json"
#: The raw tables whose samples ``stg_counter_deltas`` reads.
COUNTER_TABLES = ("fabric_counters", "nvme_smart", "pool_metrics")
#: The SQL files whose text decides the rows (a change makes every day stale).
RULE_FILES = ("session.sql", "staging/stg_counter_deltas.sql", "staging/stg_fabric_counters.sql",
              "staging/stg_metric_samples.sql", "staging/stg_metric_names.sql",
              "staging/stg_nvme_smart.sql", "staging/stg_pool_metrics.sql",
              "staging/stg_pool_vocabulary.sql")
#: The layout's version: part of every day's fingerprint (a day stored by another is stale).
LAYOUT = "3: deltas by series_id with interval_us, counter_series"


def derived_dir(lake: Lake) -> Path:
    """``LAKE/derived``."""
    return lake.root / DERIVED_DIR


def day_part(lake: Lake, table: str, day: date, name: str) -> Path:
    """The part ``name`` of derived ``table`` on ``day``."""
    return derived_dir(lake) / table / f"date={day.isoformat()}" / f"part-{name}.parquet"


def raw_days(lake: Lake) -> list[date]:
    """The days any counter table has parts for, oldest first."""
    return sorted({d for t in COUNTER_TABLES for d in lake.days(t)})


def fingerprints(lake: Lake, days: list[date], rules: str) -> dict[date, str]:
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


def rules() -> str:
    """The text the rows depend on besides the raw parts: the rule SQL and the field limit."""
    from ckptwatch.settings import ingest_settings, sql_dir

    root = sql_dir()
    texts = [(root / f).read_text() if (root / f).is_file() else "" for f in RULE_FILES]
    return "\n".join([*texts, f"max_field_chars={ingest_settings().max_field_chars}",
                      f"layout={LAYOUT}"])


def manifest(lake: Lake) -> dict[str, str]:
    """The manifest: each stored day's fingerprint (unreadable: empty, every day stale)."""
    path = derived_dir(lake) / MANIFEST
    if not path.is_file():
        return {}
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}  # unreadable: every day is stale, the next refresh rewrites it
    return {str(k): str(v) for k, v in data.items()} if isinstance(data, dict) else {}


def derived_days(lake: Lake) -> set[date]:
    """The days ``derived/counter_deltas`` has a partition for (the schema stub's aside)."""
    found = set()
    for d in (derived_dir(lake) / DELTAS).glob("date=*"):
        if d.name != SCHEMA_PARTITION:
            with contextlib.suppress(ValueError):
                found.add(date.fromisoformat(d.name.removeprefix("date=")))
    return found


def fresh_days(lake: Lake, stored: dict[str, str], prints: dict[date, str]) -> set[date]:
    """The days whose stored fingerprint is ``prints``' and whose rows and state exist."""
    return {d for d, fp in prints.items() if stored.get(d.isoformat()) == fp
            and all(any((derived_dir(lake) / t / f"date={d.isoformat()}").glob("*.parquet"))
                    for t in (DELTAS, SERIES))
            and day_part(lake, STATE, d, "state").is_file()}


def is_fresh(lake_root: Path | str, days: tuple[date, date] | None = None) -> bool:
    """True when every counter day of the lake in ``days`` (``None``: every day) is
    materialised from the raw parts it has now (and the lake has at least one such day)."""
    lake = Lake(lake_root)
    all_days = raw_days(lake)
    upto = [d for d in all_days if days is None or d <= days[1]]
    wanted = [d for d in upto if days is None or d >= days[0]]
    if not wanted:
        return False
    stored = manifest(lake)
    if not stored:
        return False
    orphans = {d for d in derived_days(lake) - set(all_days)
               if days is None or days[0] <= d <= days[1]}
    if orphans:  # a day whose raw parts are gone (the next refresh removes it): not read
        return False
    return set(wanted) <= fresh_days(lake, stored, fingerprints(lake, upto, rules()))
