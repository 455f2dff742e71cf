"""Paths and settings in one place: the project root, the default lake, environment overrides."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parent
#: Project root when running from a checkout (src/ckptwatch -> root).
PROJECT_ROOT = PACKAGE_DIR.parent.parent


def sql_dir() -> Path:
    """Directory of the layered SQL views (``CKPTWATCH_SQL_DIR`` overrides)."""
    env = os.environ.get("CKPTWATCH_SQL_DIR")
    if env:
        return Path(env)
    return PROJECT_ROOT / "sql"


def pipelines_dir() -> Path:
    """Directory holding the Prefect flows (``CKPTWATCH_PIPELINES_DIR`` overrides)."""
    return Path(os.environ.get("CKPTWATCH_PIPELINES_DIR", PROJECT_ROOT / "pipelines"))


def model_path() -> Path:
    """The attribution model file (``CKPTWATCH_MODEL`` overrides); built by `train-model`."""
    return Path(os.environ.get("CKPTWATCH_MODEL", "data/models/attribution.joblib"))


def default_lake() -> Path:
    """Default lake location (``CKPTWATCH_LAKE`` overrides): ``data/lake`` under the working dir."""
    return Path(os.environ.get("CKPTWATCH_LAKE", "data/lake"))


@dataclass(frozen=True)
class IngestSettings:
    """Knobs of the ingest path."""

    #: Longest raw text kept with a quarantined record (bytes of UTF-8).
    quarantine_raw_max: int = 4096
    #: Timestamp columns earlier than this year are rejected as implausible.
    min_year: int = 2000
    #: ... and later than this one.
    max_year: int = 2100


INGEST = IngestSettings()


def duckdb_memory_limit() -> str | None:
    """``$CKPTWATCH_DUCKDB_MEMORY`` (e.g. ``3GB``): cap DuckDB's memory; it spills to disk
    beyond it (slower: attribution of a 512-node day takes ~35 s at 3GB instead of ~27 s and
    8 GB). Unset or ``none``: DuckDB's default (80 % of RAM)."""
    value = os.environ.get("CKPTWATCH_DUCKDB_MEMORY", "").strip()
    return None if not value or value.lower() == "none" else value


@contextmanager
def duckdb_memory(limit: str | None) -> Iterator[None]:
    """Within the block, connections cap DuckDB at ``limit`` (``None``: leave the environment
    as it is); restores ``$CKPTWATCH_DUCKDB_MEMORY`` afterwards."""
    if limit is None:
        yield
        return
    old = os.environ.get("CKPTWATCH_DUCKDB_MEMORY")
    os.environ["CKPTWATCH_DUCKDB_MEMORY"] = limit
    try:
        yield
    finally:
        if old is None:
            os.environ.pop("CKPTWATCH_DUCKDB_MEMORY", None)
        else:
            os.environ["CKPTWATCH_DUCKDB_MEMORY"] = old
