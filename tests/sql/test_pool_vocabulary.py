"""The pool vocabulary in the lake: kinds by base name (stg_metric_names), and the interval
means of cumulative sums over counts (int_pool_interval_means) with the lake's reset rules.

Each test seeds a few literal pool_metrics rows (as the Lustre reader writes them) and reads
the view back exactly.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import duckdb
from tests.sql_seed import at, seed, views_read

from ckptwatch.lake.query import connect, run_sql


def rows(lake: Path, sql: str) -> list[dict[str, Any]]:
    con = connect(lake, views=views_read(sql))
    try:
        return run_sql(con, sql).to_dicts()
    finally:
        con.close()


def pool(t: float, metric: str, value: float, target: str = "fs-OST0000",
         pool_name: str = "fs") -> dict[str, Any]:
    return {"ts": at(t), "pool": pool_name, "target": target, "metric": metric, "value": value}


MEANS = ("select target, signal, qualifier, job_id, source, samples, value, max_value, reset "
         "from int_pool_interval_means order by target, signal, qualifier nulls first, ts")


def test_kinds_follow_the_base_name_before_the_dot(lake: Path) -> None:
    seed(lake, "pool_metrics", [
        pool(0, "write_ops", 1), pool(0, "write_ops.job=42", 1),
        pool(0, "metadata_latency_us_total.open", 5), pool(0, "background_active.scrub", 1),
        pool(0, "queue_depth", 3), pool(0, "write_latency_peak_ms", 2),
        # outside the vocabulary: the unit-suffix rule on the whole name, as before
        pool(0, "lustre.write_bytes", 1), pool(0, "ost_gc", 1),
    ])
    kinds = {r["metric"]: r["kind"] for r in rows(
        lake, "select metric, kind from stg_metric_names where source_table = 'pool_metrics'")}
    assert kinds == {
        "write_ops": "counter", "write_ops.job=42": "counter",
        "metadata_latency_us_total.open": "counter", "background_active.scrub": "gauge",
        "queue_depth": "gauge", "write_latency_peak_ms": "gauge",
        "lustre.write_bytes": "counter", "ost_gc": "gauge"}


def test_write_latency_is_the_increase_of_the_sum_over_the_increase_of_the_count(
        lake: Path) -> None:
    seed(lake, "pool_metrics", [
        pool(0, "write_ops", 100), pool(0, "write_latency_us_total", 200_000),
        pool(0, "write_latency_peak_ms", 9.0),
        # 50 writes took 400 ms in all: 8 ms each; the peak rose to 30 ms in this interval
        pool(60, "write_ops", 150), pool(60, "write_latency_us_total", 600_000),
        pool(60, "write_latency_peak_ms", 30.0),
        # 10 writes, 20 ms: 2 ms each; the peak stayed: this interval's max is not known
        pool(120, "write_ops", 160), pool(120, "write_latency_us_total", 620_000),
        pool(120, "write_latency_peak_ms", 30.0),
        # no write in the interval: no mean
        pool(180, "write_ops", 160), pool(180, "write_latency_us_total", 620_000),
    ])
    got = rows(lake, MEANS)
    assert [(r["samples"], r["value"], r["max_value"], r["reset"]) for r in got] == [
        (50.0, 8.0, 30.0, False), (10.0, 2.0, None, False), (0.0, None, None, False)]
    assert {(r["signal"], r["source"], r["qualifier"]) for r in got} == {
        ("write_latency_ms", "counters", None)}


def test_a_cleared_stats_file_is_a_reset_counted_from_zero(lake: Path) -> None:
    # lctl set_param obdfilter.*.stats=clear between the readings: both counters drop
    seed(lake, "pool_metrics", [
        pool(0, "write_ops", 1000), pool(0, "write_latency_us_total", 5_000_000),
        pool(0, "write_latency_peak_ms", 50.0),
        pool(60, "write_ops", 4), pool(60, "write_latency_us_total", 12_000),
        pool(60, "write_latency_peak_ms", 4.0),
    ])
    (got,) = rows(lake, MEANS)
    assert (got["samples"], got["value"], got["max_value"], got["reset"]) == (
        4.0, 3.0, 4.0, True)


def test_only_one_counter_reset_gives_no_mean(lake: Path) -> None:
    seed(lake, "pool_metrics", [
        pool(0, "write_ops", 1000), pool(0, "write_latency_us_total", 5_000_000),
        pool(60, "write_ops", 1010), pool(60, "write_latency_us_total", 12_000),
    ])
    (got,) = rows(lake, MEANS)
    assert got["value"] is None and got["reset"] is True


def test_metadata_per_operation_per_job_queues_and_source_means(lake: Path) -> None:
    mdt = "fs-MDT0000"
    seed(lake, "pool_metrics", [
        pool(0, "metadata_ops_total.open", 10, mdt), pool(0, "metadata_latency_us_total.open",
                                                         1_000, mdt),
        pool(10, "metadata_ops_total.open", 14, mdt), pool(10, "metadata_latency_us_total.open",
                                                          21_000, mdt),
        pool(0, "write_ops.job=SLURM_JOB10", 5), pool(0, "write_latency_us_total.job=SLURM_JOB10",
                                                      50_000),
        pool(10, "write_ops.job=SLURM_JOB10", 7),
        pool(10, "write_latency_us_total.job=SLURM_JOB10", 56_000),
        pool(0, "queue_requests_total.disk", 100), pool(0, "queue_depth_total.disk", 200),
        pool(10, "queue_requests_total.disk", 110), pool(10, "queue_depth_total.disk", 260),
        # a source that reports its own interval mean and max (a gauge)
        pool(10, "write_latency_ms", 7.5, "engine0/tgt_3", "daos0"),
        pool(10, "write_latency_max_ms", 90.0, "engine0/tgt_3", "daos0"),
    ])
    got = rows(lake, MEANS)
    assert [(r["target"], r["signal"], r["qualifier"], r["job_id"], r["source"], r["samples"],
             r["value"], r["max_value"]) for r in got] == [
        ("engine0/tgt_3", "write_latency_ms", None, None, "gauge", None, 7.5, 90.0),
        ("fs-MDT0000", "metadata_latency_ms", "open", None, "counters", 4.0, 5.0, None),
        ("fs-OST0000", "queue_depth", "disk", None, "counters", 10.0, 6.0, None),
        ("fs-OST0000", "write_latency_ms", "job=SLURM_JOB10", "SLURM_JOB10", "counters", 2.0,
         3.0, None),
    ]


def test_the_vocabulary_reads_no_lake_table() -> None:
    # ckptwatch.ingest.run runs it alone (the unused-names report)
    sql = (Path(__file__).parents[2] / "sql" / "staging" / "stg_pool_vocabulary.sql").read_text()
    con = duckdb.connect()
    con.execute(sql)
    names = {r[0] for r in con.execute("select metric from stg_pool_vocabulary").fetchall()}
    assert {"gc_active", "free_blocks_pct", "metadata_latency_ms", "metadata_ops",
            "write_bytes", "write_latency_us_total", "queue_depth"} <= names
