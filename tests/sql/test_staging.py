"""Staging views: typed, deduplicated lake tables and counter deltas (resets, saturation).

Each test seeds a few literal rows into a fresh lake (Parquet with the canonical schemas), builds
the views with ``ckptwatch.lake.query.connect`` and checks one view's rows exactly.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tests.sql_seed import INGESTED, at, seed, views_read

from ckptwatch.lake.query import connect, run_sql
from ckptwatch.lake.schema import TABLES
from ckptwatch.lake.store import Lake

IB32_MAX = 4_294_967_295.0



def fabric(ts: float, value: float, counter: str = "rx_prio3_pause", node: str = "n0",
           **extra: Any) -> dict[str, Any]:
    """One fabric counter sample on n0/mlx5_0/port 1."""
    return {"ts": at(ts), "node": node, "device": "mlx5_0", "port": "1", "counter": counter,
            "value": value, "source": "ethtool", **extra}


@pytest.fixture
def lake(tmp_path: Path) -> Path:
    """An initialised, empty lake."""
    Lake(tmp_path).init()
    return tmp_path


def rows(root: Path, sql: str, params: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    """Build the views the query reads over ``root`` and return its rows as dicts."""
    con = connect(root, views=views_read(sql))
    try:
        return run_sql(con, sql, params).to_dicts()
    finally:
        con.close()


def write(rank: int, duration: float, **extra: Any) -> dict[str, Any]:
    """One rank's checkpoint write of job j1, step 100."""
    return {"job_id": "j1", "step": 100, "rank": rank, "node": f"n{rank // 2}", "tier": "pool",
            "target": "t0", "start_ts": at(0), "end_ts": at(duration), "duration_s": duration,
            "bytes": 1000, "status": "ok", **extra}


def test_stg_checkpoint_writes_keeps_the_latest_ingested_record(lake: Path) -> None:
    seed(lake, "checkpoint_writes", [write(0, 10.0), write(1, 20.0)], part="a")
    later = INGESTED + timedelta(hours=1)
    seed(lake, "checkpoint_writes", [write(1, 25.0, ingested_ts=later)], part="b")
    got = rows(lake, "select rank, duration_s, source_file from stg_checkpoint_writes "
                     "order by rank")
    assert got == [{"rank": 0, "duration_s": 10.0, "source_file": "seed/a"},
                   {"rank": 1, "duration_s": 25.0, "source_file": "seed/b"}]


def test_stg_checkpoint_writes_ties_go_to_the_later_source_file(lake: Path) -> None:
    seed(lake, "checkpoint_writes", [write(0, 10.0, source_file="a.jsonl")], part="a")
    seed(lake, "checkpoint_writes", [write(0, 12.0, source_file="b.jsonl")], part="b")
    got = rows(lake, "select rank, duration_s from stg_checkpoint_writes")
    assert got == [{"rank": 0, "duration_s": 12.0}]


def test_stg_checkpoint_writes_distinct_ranks_sharing_a_bitmap_bit_are_kept(lake: Path) -> None:
    # -5 and 5 (and 5 and 1029) share a bit of the repeated-rank bitmap: the exact path runs and
    # keeps all of them, because none repeats.
    seed(lake, "checkpoint_writes", [write(r, 10.0 + i) for i, r in enumerate((-5, 5, 1029))])
    got = rows(lake, "select rank from stg_checkpoint_writes order by rank")
    assert [r["rank"] for r in got] == [-5, 5, 1029]


def test_stg_jobs_and_topology_take_the_latest_ingest(lake: Path) -> None:
    later = INGESTED + timedelta(days=1)
    seed(lake, "jobs", [{"job_id": "j1", "n_ranks": 4, "checkpoint_timeout_s": 120.0}], "a")
    seed(lake, "jobs", [{"job_id": "j1", "n_ranks": 8, "checkpoint_timeout_s": 90.0,
                         "ingested_ts": later}], "b")
    seed(lake, "topology", [{"node": "n0", "leaf_switch": "leaf01", "nic": "mlx5_0",
                             "port": "1"}], "a")
    seed(lake, "topology", [{"node": "n0", "leaf_switch": "leaf02", "nic": "mlx5_0",
                             "port": "1", "ingested_ts": later}], "b")
    assert rows(lake, "select job_id, n_ranks, checkpoint_timeout_s from stg_jobs") == [
        {"job_id": "j1", "n_ranks": 8, "checkpoint_timeout_s": 90.0}]
    assert rows(lake, "select node, leaf_switch from stg_topology") == [
        {"node": "n0", "leaf_switch": "leaf02"}]


def test_counter_deltas_handle_reset_and_saturation(lake: Path) -> None:
    seed(lake, "fabric_counters", [
        fabric(0, 10), fabric(10, 25), fabric(20, 5),  # 25 -> 5: reset, delta = 5
        fabric(30, IB32_MAX), fabric(40, IB32_MAX),  # saturated: unknown, not zero
        fabric(50, 100),  # cleared after saturating: a reset again
    ])
    got = rows(lake, """
        select ts, interval_s, delta, rate_per_s, reset, saturated
        from stg_counter_deltas order by ts
    """)
    assert [(r["interval_s"], r["delta"], r["rate_per_s"], r["reset"], r["saturated"])
            for r in got] == [
        (None, None, None, False, False),
        (10.0, 15.0, 1.5, False, False),
        (10.0, 5.0, 0.5, True, False),
        (10.0, None, None, False, True),
        (10.0, None, None, False, True),
        (10.0, 100.0, 10.0, True, False),
    ]


def test_a_negative_cumulative_value_is_invalid_not_a_delta(lake: Path) -> None:
    # A counter cannot go below zero: the -50 sample is not a reading; the next delta is taken
    # from the last valid one (30 -> 20 is a reset: delta 20, over 20 s).
    seed(lake, "fabric_counters", [fabric(0, 10), fabric(10, 30), fabric(20, -50),
                                   fabric(30, 20), fabric(40, 25)])
    got = rows(lake, "select value, interval_s, delta, reset, invalid from stg_counter_deltas "
                     "order by ts")
    assert [(r["interval_s"], r["delta"], r["reset"], r["invalid"]) for r in got] == [
        (None, None, False, False), (10.0, 20.0, False, False), (10.0, None, False, True),
        (20.0, 20.0, True, False), (10.0, 5.0, False, False)]


def test_counter_deltas_drop_duplicate_samples(lake: Path) -> None:
    seed(lake, "fabric_counters", [fabric(0, 10), fabric(10, 30)], part="a")
    # The same file ingested again (exact duplicates) plus a re-read sample that disagrees:
    # the most recently ingested value wins.
    later = INGESTED + timedelta(hours=1)
    seed(lake, "fabric_counters", [fabric(0, 10), fabric(10, 40, ingested_ts=later),
                                   fabric(20, 70)], part="b")
    got = rows(lake, "select ts, value, delta from stg_counter_deltas order by ts")
    assert [(r["value"], r["delta"]) for r in got] == [(10.0, None), (40.0, 30.0),
                                                       (70.0, 30.0)]
    assert rows(lake, "select count(*) as n from stg_fabric_counters") == [{"n": 3}]


def test_counter_deltas_are_per_series(lake: Path) -> None:
    seed(lake, "fabric_counters", [
        fabric(0, 100), fabric(10, 150),
        fabric(0, 7, counter="tx_prio3_pause"), fabric(10, 9, counter="tx_prio3_pause"),
        fabric(0, 1000, node="n1"), fabric(10, 1001, node="n1"),
    ])
    got = rows(lake, """
        select host, counter, delta from stg_counter_deltas
        where delta is not null order by host, counter
    """)
    assert got == [{"host": "n0", "counter": "rx_prio3_pause", "delta": 50.0},
                   {"host": "n0", "counter": "tx_prio3_pause", "delta": 2.0},
                   {"host": "n1", "counter": "rx_prio3_pause", "delta": 1.0}]


def test_smart_and_pool_counters_get_deltas_and_gauges_pass_through(lake: Path) -> None:
    smart = [{"ts": at(t), "node": "n0", "device": "nvme0", "source": "smartctl",
              "metric": m, "value": v}
             for t, m, v in [(0, "host_written_bytes", 1e9), (60, "host_written_bytes", 4e9),
                             (0, "temperature_c", 40.0), (60, "temperature_c", 45.0),
                             (0, "controller_busy_time_min", 10.0),
                             (60, "controller_busy_time_min", 11.0)]]
    pool = [{"ts": at(t), "pool": "p0", "target": "t0", "metric": m, "value": v}
            for t, m, v in [(0, "write_bytes", 0.0), (10, "write_bytes", 5e9),
                            (0, "gc_active", 0.0), (10, "gc_active", 1.0),
                            (0, "metadata_ops", 100.0), (10, "metadata_ops", 50.0),
                            (0, "metadata_ops_total", 900.0), (10, "metadata_ops_total", 50.0)]]
    seed(lake, "nvme_smart", smart)
    seed(lake, "pool_metrics", pool)
    kinds = rows(lake, "select source_table, metric, kind from stg_metric_names "
                       "order by source_table, metric")
    assert [(k["metric"], k["kind"]) for k in kinds] == [
        ("controller_busy_time_min", "counter"), ("host_written_bytes", "counter"),
        ("temperature_c", "gauge"),
        ("gc_active", "gauge"), ("metadata_ops", "gauge"), ("metadata_ops_total", "counter"),
        ("write_bytes", "counter")]
    got = rows(lake, """
        select source_table, host, device, pool, counter, delta, rate_per_s, reset
        from stg_counter_deltas where delta is not null order by source_table, counter
    """)
    assert got == [
        {"source_table": "nvme_smart", "host": "n0", "device": "nvme0", "pool": None,
         "counter": "controller_busy_time_min", "delta": 1.0, "rate_per_s": 1 / 60,
         "reset": False},
        {"source_table": "nvme_smart", "host": "n0", "device": "nvme0", "pool": None,
         "counter": "host_written_bytes", "delta": 3e9, "rate_per_s": 5e7, "reset": False},
        {"source_table": "pool_metrics", "host": "t0", "device": None, "pool": "p0",
         "counter": "metadata_ops_total", "delta": 50.0, "rate_per_s": 5.0, "reset": True},
        {"source_table": "pool_metrics", "host": "t0", "device": None, "pool": "p0",
         "counter": "write_bytes", "delta": 5e9, "rate_per_s": 5e8, "reset": False},
    ]
    gauges = rows(lake, "select metric, value from stg_nvme_smart where kind = 'gauge' "
                        "order by ts")
    assert gauges == [{"metric": "temperature_c", "value": 40.0},
                      {"metric": "temperature_c", "value": 45.0}]


def test_quarantine_staging_renames_the_table_column(lake: Path) -> None:
    seed(lake, "quarantine", [{"table": "checkpoint_writes", "line": 3,
                               "reason": "bytes is not a number: 'lots'", "raw": "j2,7,…"}])
    assert rows(lake, "select lake_table, line, reason from stg_quarantine") == [
        {"lake_table": "checkpoint_writes", "line": 3, "reason": "bytes is not a number: 'lots'"}]


def _con_without(tmp_path_factory: pytest.TempPathFactory,
                 table: str) -> Iterator[duckdb.DuckDBPyConnection]:
    """Views over an empty lake without ``table``'s view: tests create a table of rows in its
    place."""
    root = tmp_path_factory.mktemp("lake")
    Lake(root).init()
    con = connect(root)
    con.execute(f"drop view {table}")  # a lake table's name (a constant), not data
    yield con
    con.close()


@pytest.fixture(scope="module")
def delta_con(tmp_path_factory: pytest.TempPathFactory) -> Iterator[duckdb.DuckDBPyConnection]:
    """Views over an empty lake; tests swap the fabric_counters view for a table of rows."""
    yield from _con_without(tmp_path_factory, "fabric_counters")


@settings(max_examples=40, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.one_of(st.integers(0, 2**40).map(float), st.just(IB32_MAX),
                          st.integers(-(2**31), -1).map(float)),
                min_size=1, max_size=12))
def test_counter_deltas_are_never_negative(delta_con: duckdb.DuckDBPyConnection,
                                           values: list[float]) -> None:
    schema = TABLES["fabric_counters"].schema
    table = pa.table({
        "ts": [at(10 * i) for i in range(len(values))], "node": ["n0"] * len(values),
        "device": ["d"] * len(values), "port": ["1"] * len(values),
        "counter": ["c"] * len(values), "value": values, "source": ["s"] * len(values),
        "source_file": ["f"] * len(values), "ingested_ts": [INGESTED] * len(values),
    }, schema=schema)
    delta_con.register("seeded", table)
    delta_con.execute("create or replace table fabric_counters as select * from seeded")
    got = delta_con.execute("select value, delta, reset, saturated, invalid "
                            "from stg_counter_deltas order by ts").fetchall()
    assert len(got) == len(values)
    last_valid: float | None = None
    for value, delta, reset, saturated, invalid in got:
        assert saturated == (value == IB32_MAX) and invalid == (value < 0)
        if last_valid is None or saturated or invalid:
            assert delta is None
        else:
            assert delta is not None and delta >= 0
            assert reset == (value < last_valid)
            assert delta == (value if reset else value - last_valid)
        if not invalid:
            last_valid = value


def test_counter_deltas_of_a_name_list_are_the_views_rows_of_those_names(lake: Path) -> None:
    seed(lake, "fabric_counters", [
        fabric(0, 100), fabric(10, 150), fabric(20, 5),  # a reset
        fabric(0, 7, counter="tx_prio3_pause"), fabric(10, 9, counter="tx_prio3_pause"),
        fabric(0, 1, counter="port_xmit_bytes"), fabric(10, 2, counter="port_xmit_bytes"),
    ])
    cols = "counter, ts, prev_ts, delta, rate_per_s, reset, series_id"
    some = rows(lake, f"select {cols} from stg_counter_deltas_of(['rx_prio3_pause', "
                      "'tx_prio3_pause']) order by counter, ts")
    view = rows(lake, f"select {cols} from stg_counter_deltas where counter <> "
                      "'port_xmit_bytes' order by counter, ts")
    assert some == view
    assert [r["delta"] for r in some] == [None, 50.0, 5.0, None, 2.0]
    assert len({r["series_id"] for r in some}) == 2  # one id per series
    every = rows(lake, "select count(*) as n from stg_counter_deltas_of(null)")
    assert every == [{"n": 7}]


def test_attribution_reads_only_the_signal_counters(lake: Path) -> None:
    seed(lake, "fabric_counters", [fabric(0, 1), fabric(0, 1, counter="port_rcv_errors")])
    con = connect(lake)
    try:
        names = con.execute("select getvariable('int_signal_counters')").fetchone()
        optimizers = con.execute("select current_setting('disabled_optimizers')").fetchone()
    finally:
        con.close()
    assert names is not None and names[0] == ["rx_prio3_pause"]
    assert optimizers is not None
    assert {"build_side_probe_side", "projection_pullup"} <= set(optimizers[0].split(","))


def test_attribution_reads_only_the_signal_gauges_and_the_same_rows(lake: Path) -> None:
    """int_signal_gauges: the signal gauges' names (a filter that reaches the scan, under the
    dedup windows); the gauge samples with it equal those without it (null: every gauge),
    re-sent samples deduplicated the same way, a non-signal gauge (temperature_c) left out."""
    smart = [{"ts": at(t), "node": "n0", "device": "nvme0", "source": "smartctl",
              "metric": m, "value": v}
             for t, m, v in [(0, "free_blocks_pct", 40.0), (60, "free_blocks_pct", 35.0),
                             (0, "temperature_c", 40.0), (60, "temperature_c", 45.0),
                             (0, "host_written_bytes", 1e9)]]
    resent = [{**smart[1], "value": 30.0, "ingested_ts": INGESTED + timedelta(hours=1)}]
    pool = [{"ts": at(t), "pool": "p0", "target": "t0", "metric": m, "value": v}
            for t, m, v in [(0, "gc_active", 0.0), (10, "gc_active", 1.0),
                            (0, "write_bytes", 0.0)]]
    seed(lake, "nvme_smart", smart)
    seed(lake, "nvme_smart", resent, part="y")
    seed(lake, "pool_metrics", pool)
    query = ("select source_table, family, signal, host, ts, prev_ts, value "
             "from int_signal_gauge_samples() order by source_table, signal, ts")
    con = connect(lake, views=views_read(query))
    try:
        names = con.execute("select getvariable('int_signal_gauges')").fetchall()[0]
        counters = con.execute("select getvariable('int_signal_counters')").fetchall()[0]
        shortcut = run_sql(con, query).to_dicts()
        con.execute("set variable int_signal_gauges = null").fetchall()
        every = run_sql(con, query).to_dicts()
    finally:
        con.close()
    assert sorted(names[0]) == ["free_blocks_pct", "gc_active"]
    assert "host_written_bytes" in counters[0]
    assert shortcut == every
    assert [(r["signal"], r["value"]) for r in shortcut] == [
        ("free_blocks_pct", 40.0), ("free_blocks_pct", 30.0),  # the later ingest wins
        ("gc_active", 0.0), ("gc_active", 1.0)]


def test_duckdb_memory_limit_from_the_caller_or_the_environment(lake: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    from ckptwatch.errors import QueryError

    monkeypatch.setenv("CKPTWATCH_DUCKDB_MEMORY", "512MB")
    con = connect(lake)
    try:
        got = con.execute("select current_setting('memory_limit')").fetchone()
    finally:
        con.close()
    assert got is not None and got[0] == "488.2 MiB"
    from ckptwatch.settings import duckdb_memory_limit

    # the nightly run's cap is passed to its connections, not put in the environment
    con = connect(lake, memory_limit="1GB")
    try:
        got = con.execute("select current_setting('memory_limit')").fetchone()
    finally:
        con.close()
    assert got is not None and got[0] == "953.6 MiB"
    assert duckdb_memory_limit("1GB") == "1GB" and duckdb_memory_limit("none") is None
    assert duckdb_memory_limit() == "512MB"
    monkeypatch.setenv("CKPTWATCH_DUCKDB_MEMORY", "none")
    assert duckdb_memory_limit() is None
    monkeypatch.setenv("CKPTWATCH_DUCKDB_MEMORY", "lots")
    with pytest.raises(QueryError, match="CKPTWATCH_DUCKDB_MEMORY='lots'.*use e.g. 3GB"):
        connect(lake)


def _copy_to_day(lake: Path, table: str, part: str, day: str) -> None:
    """Put a copy of ``table``'s seeded part ``part`` under the partition of ``day``."""
    src = next((lake / table).glob(f"date=*/part-{part}.parquet"))
    dest = lake / table / f"date={day}" / f"part-{part}-copy.parquet"
    dest.parent.mkdir(parents=True, exist_ok=True)
    dest.write_bytes(src.read_bytes())


def test_connect_days_reads_only_those_days_partitions(lake: Path) -> None:
    from datetime import date

    from ckptwatch.errors import QueryError

    seed(lake, "fabric_counters", [fabric(0, 1), fabric(10, 2)], part="a")  # 2026-11-28
    _copy_to_day(lake, "fabric_counters", "a", "2026-11-20")
    seed(lake, "checkpoint_writes", [write(0, 10.0)], part="c")
    _copy_to_day(lake, "checkpoint_writes", "c", "2026-11-20")
    count = ("select (select count(*) from fabric_counters) as fabric, "
             "(select count(*) from checkpoint_writes) as writes")
    assert rows(lake, count) == [{"fabric": 4, "writes": 2}]
    con = connect(lake, days=(date(2026, 11, 27), date(2026, 11, 28)))
    try:
        assert run_sql(con, count).to_dicts() == [{"fabric": 2, "writes": 1}]
    finally:
        con.close()
    with pytest.raises(QueryError, match="days: 2026-11-28 is after 2026-11-27"):
        connect(lake, days=(date(2026, 11, 28), date(2026, 11, 27)))


def test_nightly_days_end_on_the_newest_checkpoint_day(lake: Path) -> None:
    from datetime import date

    from ckptwatch.errors import ConfigError
    from ckptwatch.report.facts import nightly_days

    seed(lake, "checkpoint_writes", [write(0, 10.0)], part="c")  # 2026-11-28
    _copy_to_day(lake, "checkpoint_writes", "c", "2026-11-20")
    assert nightly_days(lake, None, 1) == (date(2026, 11, 27), date(2026, 11, 28))
    assert nightly_days(lake, date(2026, 11, 20), 0) == (date(2026, 11, 20), date(2026, 11, 20))
    with pytest.raises(ConfigError, match="lookback days must be 0 or more, not -1"):
        nightly_days(lake, None, -1)


def test_a_re_sent_sample_whose_later_ingest_is_invalid_is_skipped_whole(lake: Path) -> None:
    # stg_counter_deltas dedups re-sent samples in its window pass: at ts 10 the later ingest
    # (-1, not a reading) wins over 30, so 20 is measured from 10, not from the superseded 30;
    # n1's series has no re-sent sample and is computed in the same pass.
    later = INGESTED + timedelta(hours=1)
    seed(lake, "fabric_counters", [fabric(0, 10), fabric(10, 30), fabric(20, 20),
                                   fabric(0, 5, node="n1"), fabric(10, 8, node="n1")], part="a")
    seed(lake, "fabric_counters", [fabric(10, -1, ingested_ts=later)], part="b")
    got = rows(lake, "select host, ts, value, prev_value, delta, reset, invalid "
                     "from stg_counter_deltas order by host, ts")
    assert [(r["host"], r["value"], r["prev_value"], r["delta"], r["reset"], r["invalid"])
            for r in got] == [
        ("n0", 10.0, None, None, False, False), ("n0", -1.0, 10.0, None, False, True),
        ("n0", 20.0, 10.0, 10.0, False, False),
        ("n1", 5.0, None, None, False, False), ("n1", 8.0, 5.0, 3.0, False, False)]


#: The deltas of stg_fabric_counters' deduplicated samples (a group-by, then the rules): the
#: oracle of the window pass's own dedup of re-sent samples.
DEDUP_FIRST = """
    with
    samples as (
        select
            'fabric_counters' as source_table, node as host, device, port,
            cast(null as varchar) as pool, counter, ts, value,
            cast(0 as hugeint) as version, false as is_carry,
        from stg_fabric_counters
    )
    select * from counter_deltas_over('samples') order by host, ts
"""


@settings(max_examples=40, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.tuples(st.sampled_from(["n0", "n1"]), st.integers(0, 5),
                          st.one_of(st.integers(0, 100).map(float), st.just(IB32_MAX),
                                    st.just(-1.0)),
                          st.integers(0, 2), st.sampled_from(["f0", "f1"])),
                min_size=1, max_size=14))
def test_re_sent_samples_give_the_rows_of_a_dedup_first(
        delta_con: duckdb.DuckDBPyConnection,
        samples: list[tuple[str, int, float, int, str]]) -> None:
    """Any mix of re-sent samples (same series and ts; later ingests, other files, exact
    copies) gives the rows of deduplicating first (stg_fabric_counters) and then the rules."""
    schema = TABLES["fabric_counters"].schema
    table = pa.table({
        "ts": [at(10 * t) for _, t, _, _, _ in samples], "node": [n for n, *_ in samples],
        "device": ["d"] * len(samples), "port": ["1"] * len(samples),
        "counter": ["port_xmit_wait"] * len(samples), "value": [v for _, _, v, _, _ in samples],
        "source": ["s"] * len(samples), "source_file": [f for *_, f in samples],
        "ingested_ts": [INGESTED + timedelta(hours=h) for _, _, _, h, _ in samples],
    }, schema=schema)
    # one winner per (node, ts): a tie of ingest and file (the same file sent twice with other
    # values) has no defined winner, in stg_fabric_counters as here
    winners = without_undefined_ties(samples)
    table = table.filter(pa.array(winners))
    delta_con.register("seeded", table)
    delta_con.execute("create or replace table fabric_counters as select * from seeded")
    got = delta_con.execute("select * from stg_counter_deltas order by host, ts").fetchall()
    want = delta_con.execute(DEDUP_FIRST).fetchall()
    assert got == want
    assert len(got) == len({(n, t) for n, t, *_ in samples})


def without_undefined_ties(samples: list[tuple[str, int, float, int, str]]) -> list[bool]:
    """Keep a sample unless an earlier one has the same node, ts, ingest and file but another
    value (the winner of such a tie is not defined)."""
    seen: dict[tuple[str, int, int, str], float] = {}
    keep = []
    for node, t, value, hours, file in samples:
        key = (node, t, hours, file)
        keep.append(key not in seen or seen[key] == value)
        seen.setdefault(key, value)
    return keep


#: The deltas of the SMART counters deduplicated first, by the rule written out (the latest
#: ingest, then the later source file by name): the oracle of the window pass's own dedup of
#: re-sent SMART samples (stg_nvme_smart_versions' one-integer version).
SMART_DEDUP_FIRST = """
    with
    deduplicated as (
        select *
        from nvme_smart
        qualify row_number() over (
            partition by node, device, metric, ts order by ingested_ts desc, source_file desc
        ) = 1
    ),
    samples as (
        select
            'nvme_smart' as source_table, node as host, device, cast(null as varchar) as port,
            cast(null as varchar) as pool, metric as counter, ts, value,
            cast(0 as hugeint) as version, false as is_carry,
        from deduplicated
    )
    select * from counter_deltas_over('samples') order by host, ts
"""


@pytest.fixture(scope="module")
def smart_con(tmp_path_factory: pytest.TempPathFactory) -> Iterator[duckdb.DuckDBPyConnection]:
    """Views over an empty lake; tests swap the nvme_smart view for a table of rows."""
    yield from _con_without(tmp_path_factory, "nvme_smart")


@settings(max_examples=40, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.tuples(st.sampled_from(["n0", "n1"]), st.integers(0, 5),
                          st.one_of(st.integers(0, 100).map(float), st.just(-1.0)),
                          st.integers(0, 2),
                          st.sampled_from(["raw/f0", "raw/f1", "raw/f10", "raw/f2"])),
                min_size=1, max_size=14))
def test_re_sent_smart_samples_give_the_rows_of_a_dedup_first(
        smart_con: duckdb.DuckDBPyConnection,
        samples: list[tuple[str, int, float, int, str]]) -> None:
    """Re-sent SMART counter samples (smartctl and nvme-cli at one ts, a file ingested twice)
    give the rows of deduplicating first by the latest ingest, then the later file by name
    ('raw/f2' after 'raw/f10'), and then the rules; stg_nvme_smart keeps the same winners."""
    schema = TABLES["nvme_smart"].schema
    columns: dict[str, list[Any]] = {
        "ts": [at(10 * t) for _, t, _, _, _ in samples], "node": [n for n, *_ in samples],
        "device": ["nvme0"] * len(samples), "metric": ["host_written_bytes"] * len(samples),
        "value": [v for _, _, v, _, _ in samples], "source": ["smartctl"] * len(samples),
        "source_file": [f for *_, f in samples],
        "ingested_ts": [INGESTED + timedelta(hours=h) for _, _, _, h, _ in samples],
    }
    table = pa.table({f.name: columns.get(f.name, [None] * len(samples)) for f in schema},
                     schema=schema).filter(pa.array(without_undefined_ties(samples)))
    smart_con.register("seeded", table)
    smart_con.execute("create or replace table nvme_smart as select * from seeded")
    got = smart_con.execute("select * from stg_counter_deltas order by host, ts").fetchall()
    want = smart_con.execute(SMART_DEDUP_FIRST).fetchall()
    assert got == want
    assert len(got) == len({(n, t) for n, t, *_ in samples})
    staged = smart_con.execute("select node, ts, value from stg_nvme_smart order by all"
                               ).fetchall()
    oracle = smart_con.execute("select host, ts, value from (" + SMART_DEDUP_FIRST + ") "
                               "order by all").fetchall()
    assert staged == oracle
