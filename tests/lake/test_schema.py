"""The canonical schemas: one per lake table, provenance on each, units in names."""

from __future__ import annotations

import re

import pyarrow as pa
import pytest

from ckptwatch.lake.schema import ENVELOPE_SOURCES, TABLES, TS

EXPECTED = {"checkpoint_writes", "checkpoint_starts", "checkpoint_loads", "jobs", "nvme_smart",
            "fabric_counters", "pool_metrics", "topology", "quarantine"}


def test_every_table_of_the_design_is_defined_once() -> None:
    assert set(TABLES) == EXPECTED
    assert all(name == t.name for name, t in TABLES.items())


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_provenance_partition_and_required_columns(name: str) -> None:
    t = TABLES[name]
    assert t.schema.field("source_file").type == pa.string()
    assert t.schema.field("ingested_ts").type == TS
    assert t.partition_column in t.schema.names
    assert t.schema.field(t.partition_column).type == TS
    assert t.doc


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_units_live_in_column_names(name: str) -> None:
    for f in TABLES[name].schema:
        if pa.types.is_timestamp(f.type):
            assert f.name == "ts" or f.name.endswith("_ts"), f.name
            assert f.type.tz == "UTC"
        if pa.types.is_floating(f.type) and f.name != "value":
            assert re.search(r"_(s|pct|ms|bytes)$", f.name), f"{name}.{f.name} has no unit"


def test_checkpoint_writes_carries_the_input_contract() -> None:
    names = set(TABLES["checkpoint_writes"].schema.names)
    assert {"job_id", "step", "rank", "node", "tier", "target", "start_ts", "end_ts",
            "duration_s", "bytes", "open_s", "write_s", "fsync_s", "close_s", "status"} <= names
    assert TABLES["checkpoint_writes"].required == (
        "job_id", "step", "rank", "node", "tier", "start_time", "end_time", "bytes")


def test_envelope_sources_are_the_contracts() -> None:
    assert ENVELOPE_SOURCES == ("smartctl", "nvme-smart-log", "nvme-ocp-smart", "perfquery",
                                "sysfs-ib", "ethtool", "prometheus")
