"""Canonical Arrow schemas of the lake, defined once. Units live in column names.

Every table carries two provenance columns: ``source_file`` (path of the raw file, relative to
the raw directory) and ``ingested_ts``. Time-series tables are partitioned by the UTC date of
their ``partition_column``; tables without time (``jobs``, ``topology``) by ingest date.
"""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa

TS = pa.timestamp("us", tz="UTC")

PROVENANCE = [
    pa.field("source_file", pa.string(), nullable=False),
    pa.field("ingested_ts", TS, nullable=False),
]


@dataclass(frozen=True)
class Table:
    """A lake table: name, Arrow schema, the column that decides its date partition."""

    name: str
    schema: pa.Schema
    partition_column: str
    #: Columns a raw record must provide (the rest are optional or derived).
    required: tuple[str, ...]
    doc: str


def _schema(*fields: pa.Field) -> pa.Schema:
    return pa.schema([*fields, *PROVENANCE])


CHECKPOINT_WRITES = Table(
    name="checkpoint_writes",
    schema=_schema(
        pa.field("job_id", pa.string(), nullable=False),
        pa.field("step", pa.int64(), nullable=False),
        pa.field("rank", pa.int32(), nullable=False),
        pa.field("node", pa.string(), nullable=False),
        pa.field("tier", pa.string(), nullable=False),
        pa.field("target", pa.string()),
        pa.field("start_ts", TS, nullable=False),
        pa.field("end_ts", TS, nullable=False),
        pa.field("duration_s", pa.float64(), nullable=False),
        pa.field("bytes", pa.int64(), nullable=False),
        pa.field("open_s", pa.float64()),
        pa.field("write_s", pa.float64()),
        pa.field("fsync_s", pa.float64()),
        pa.field("close_s", pa.float64()),
        pa.field("status", pa.string(), nullable=False),
    ),
    partition_column="start_ts",
    required=("job_id", "step", "rank", "node", "tier", "start_time", "end_time", "bytes"),
    doc="One row per rank per checkpoint: when it wrote, how much, and where the time went.",
)

CHECKPOINT_LOADS = Table(
    name="checkpoint_loads",
    schema=_schema(
        pa.field("job_id", pa.string(), nullable=False),
        pa.field("step", pa.int64(), nullable=False),
        pa.field("rank", pa.int32(), nullable=False),
        pa.field("node", pa.string(), nullable=False),
        pa.field("tier", pa.string(), nullable=False),
        pa.field("target", pa.string()),
        pa.field("start_ts", TS, nullable=False),
        pa.field("end_ts", TS, nullable=False),
        pa.field("duration_s", pa.float64(), nullable=False),
        pa.field("bytes", pa.int64(), nullable=False),
    ),
    partition_column="start_ts",
    required=("job_id", "step", "rank", "node", "tier", "start_time", "end_time", "bytes"),
    doc=("Checkpoint loads (restores): one row per rank per checkpoint it read back, the same "
         "core columns as checkpoint_writes (DLIO load_ckptN). Planning reads the slowest "
         "rank's duration as the measured restart cost."),
)

CHECKPOINT_STARTS = Table(
    name="checkpoint_starts",
    schema=_schema(
        pa.field("job_id", pa.string(), nullable=False),
        pa.field("step", pa.int64(), nullable=False),
        pa.field("rank", pa.int32(), nullable=False),
        pa.field("node", pa.string(), nullable=False),
        pa.field("tier", pa.string(), nullable=False),
        pa.field("target", pa.string()),
        pa.field("start_ts", TS, nullable=False),
    ),
    partition_column="start_ts",
    required=("job_id", "step", "rank", "node", "tier", "start_time"),
    doc=("In-flight markers: one row per rank per checkpoint it started (a checkpoint record "
         "with status 'started', written when the rank begins; its finished record follows in "
         "checkpoint_writes). A started rank with no finished record never finished."),
)

JOBS = Table(
    name="jobs",
    schema=_schema(
        pa.field("job_id", pa.string(), nullable=False),
        pa.field("n_ranks", pa.int32(), nullable=False),
        pa.field("checkpoint_timeout_s", pa.float64(), nullable=False),
        pa.field("checkpoint_interval_s", pa.float64()),
        pa.field("step_time_s", pa.float64()),
        pa.field("gpus_per_node", pa.int32()),
        pa.field("tier", pa.string()),
    ),
    partition_column="ingested_ts",
    required=("job_id", "n_ranks", "checkpoint_timeout_s"),
    doc="Job metadata: size and the checkpoint timeout its watchdog enforces.",
)

NVME_SMART = Table(
    name="nvme_smart",
    schema=_schema(
        pa.field("ts", TS, nullable=False),
        pa.field("node", pa.string(), nullable=False),
        pa.field("device", pa.string(), nullable=False),
        pa.field("source", pa.string(), nullable=False),
        pa.field("metric", pa.string(), nullable=False),
        pa.field("value", pa.float64(), nullable=False),
        pa.field("model", pa.string()),
        pa.field("serial", pa.string()),
        pa.field("firmware", pa.string()),
    ),
    partition_column="ts",
    required=("ts", "node", "device", "metric", "value"),
    doc="NVMe SMART / health and vendor logs, long form; metric names carry units.",
)

FABRIC_COUNTERS = Table(
    name="fabric_counters",
    schema=_schema(
        pa.field("ts", TS, nullable=False),
        pa.field("node", pa.string(), nullable=False),
        pa.field("device", pa.string(), nullable=False),
        pa.field("port", pa.string(), nullable=False),
        pa.field("counter", pa.string(), nullable=False),
        pa.field("value", pa.float64(), nullable=False),
        pa.field("source", pa.string(), nullable=False),
    ),
    partition_column="ts",
    required=("ts", "node", "device", "port", "counter", "value"),
    doc="Cumulative fabric counters (InfiniBand, RoCE/Ethernet), long form.",
)

POOL_METRICS = Table(
    name="pool_metrics",
    schema=_schema(
        pa.field("ts", TS, nullable=False),
        pa.field("pool", pa.string(), nullable=False),
        pa.field("target", pa.string(), nullable=False),
        pa.field("metric", pa.string(), nullable=False),
        pa.field("value", pa.float64(), nullable=False),
    ),
    partition_column="ts",
    required=("ts", "pool", "target", "metric", "value"),
    doc=("Disaggregated pool telemetry per target, long form, in the pool vocabulary "
         "(sql/staging/stg_pool_vocabulary.sql, docs/formats.md 'Pool telemetry'): write and "
         "metadata latency, queues, background work, free blocks; readers write it from lctl, "
         "DAOS, SPDK and Storage Scale output or the long CSV."),
)

TOPOLOGY = Table(
    name="topology",
    schema=_schema(
        pa.field("node", pa.string(), nullable=False),
        pa.field("leaf_switch", pa.string(), nullable=False),
        pa.field("nic", pa.string()),
        pa.field("port", pa.string()),
    ),
    partition_column="ingested_ts",
    required=("node", "leaf_switch"),
    doc="Which leaf switch each node's NIC hangs off.",
)

QUARANTINE = Table(
    name="quarantine",
    schema=_schema(
        pa.field("table", pa.string()),
        pa.field("line", pa.int64()),
        pa.field("reason", pa.string(), nullable=False),
        pa.field("raw", pa.string()),
    ),
    partition_column="ingested_ts",
    required=("reason",),
    doc="Rejected records: file, line (1-based; null for whole-file problems), reason, raw text.",
)

TABLES: dict[str, Table] = {
    t.name: t
    for t in (CHECKPOINT_WRITES, CHECKPOINT_STARTS, CHECKPOINT_LOADS, JOBS, NVME_SMART,
              FABRIC_COUNTERS, POOL_METRICS, TOPOLOGY, QUARANTINE)
}

TIERS = ("local", "pool")
STATUSES = ("ok", "error", "timeout")
#: The canonical status of a rank that timed out.
TIMED_OUT = "timeout"
#: Every accepted spelling of a finished record's ``status`` (compared trimmed and in any case)
#: and the canonical value the lake holds for it: a rank killed or aborted by the job's
#: checkpoint timeout timed out. The input contract's one list: ``sources.tabular`` normalises
#: with it, and ``sql/session.sql``'s ``canonical_status`` macro (staging's reading of lakes
#: written before) spells the same list (tests/sql/test_timeouts.py holds them equal).
STATUS_SPELLINGS: dict[str, str] = {
    "ok": "ok",
    "error": "error",
    "timeout": TIMED_OUT,
    "timed_out": TIMED_OUT,
    "killed": TIMED_OUT,
    "aborted": TIMED_OUT,
}
#: The status of an in-flight marker (a row of ``checkpoint_starts``, not ``checkpoint_writes``).
STARTED = "started"
ENVELOPE_SOURCES = (
    "smartctl", "nvme-smart-log", "nvme-ocp-smart", "perfquery", "sysfs-ib", "ethtool",
    "prometheus",
)

#: ``LAKE/derived/``: what the lake computes from its raw tables and stores beside them (the
#: counter deltas, ``ckptwatch.lake.derived``); never read as input by the ingest.
DERIVED_DIR = "derived"
#: The columns of ``stg_counter_deltas``, as DuckDB writes them.
COUNTER_DELTAS = pa.schema([
    ("source_table", pa.string()), ("host", pa.string()), ("device", pa.string()),
    ("port", pa.string()), ("pool", pa.string()), ("counter", pa.string()),
    ("series_id", pa.uint64()), ("ts", TS), ("prev_ts", TS), ("interval_s", pa.float64()),
    ("value", pa.float64()), ("prev_value", pa.float64()), ("delta", pa.float64()),
    ("rate_per_s", pa.float64()), ("reset", pa.bool_()), ("wrapped", pa.bool_()),
    ("saturated", pa.bool_()), ("invalid", pa.bool_()),
])
#: A counter series' key (``series_id`` is its hash).
SERIES_KEY = ("source_table", "host", "device", "port", "pool", "counter")
#: The derived tables and their schemas. Per sample (``counter_deltas``) the key's six strings
#: are not stored but ``series_id``, and the interval in microseconds instead of ``prev_ts``,
#: ``interval_s`` and ``rate_per_s`` (``derived_counter_deltas`` computes those with
#: ``stg_counter_deltas``' own formulas): the strings cost more to encode than every other
#: column together, so they are stored once per series and day (``counter_series``).
#: ``counter_state``: each series' last valid sample at a day's end (the next day's carry).
DERIVED_TABLES: dict[str, pa.Schema] = {
    "counter_deltas": pa.schema([
        COUNTER_DELTAS.field("series_id"), COUNTER_DELTAS.field("ts"),
        pa.field("interval_us", pa.int64()),
        *(COUNTER_DELTAS.field(c) for c in ("value", "prev_value", "delta", "reset", "wrapped",
                                            "saturated", "invalid")),
    ]),
    "counter_series": pa.schema([COUNTER_DELTAS.field(c) for c in ("series_id", *SERIES_KEY)]),
    "counter_state": pa.schema([*(COUNTER_DELTAS.field(c) for c in SERIES_KEY),
                                COUNTER_DELTAS.field("ts"), COUNTER_DELTAS.field("value")]),
}
