"""Cumulative counters -> deltas (``stg_counter_deltas``): literal edge cases and properties.

The SQL view is the one implementation. The views are built once over an empty lake; each test
drops its rows in as the ``fabric_counters`` lake view (canonical schema) and reads
``stg_counter_deltas``, whose counter limits come from ``stg_metric_names``.
"""

from __future__ import annotations

import random
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import duckdb
import polars as pl
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ckptwatch.lake.query import connect, run_sql
from ckptwatch.lake.schema import TABLES
from ckptwatch.lake.store import Lake

T0 = datetime(2026, 11, 28, tzinfo=UTC)
INGESTED = datetime(2026, 11, 29, tzinfo=UTC)
U32_MAX = 2**32 - 1
SAT = float(U32_MAX)
M32 = float(2**32)
#: A 32-bit mlx5 queue counter (RDMA hw_counters): wraps at 2**32, no ceiling.
WRAPS_32 = "out_of_sequence"


@pytest.fixture(scope="module")
def con(tmp_path_factory: pytest.TempPathFactory) -> Iterator[duckdb.DuckDBPyConnection]:
    """Every view built over an empty lake, its ``fabric_counters`` view dropped for seeding."""
    root = tmp_path_factory.mktemp("lake")
    Lake(root).init()
    connection = connect(root)
    connection.execute("drop view fabric_counters").fetchall()
    yield connection
    connection.close()


def series(values: Sequence[float], counter: str = "port_xmit_wait",
           gaps: Sequence[int] | None = None, device: str = "mlx5_0") -> list[dict[str, Any]]:
    """One series' rows; ``gaps[i]`` is the time before sample ``i`` (``gaps[0]`` is ignored)."""
    gaps = gaps or [10] * len(values)
    return [{"ts": T0 + timedelta(seconds=sum(gaps[1 : i + 1])), "node": "n1",
             "device": device, "port": "1", "counter": counter, "value": float(v),
             "source": "test", "source_file": "seed", "ingested_ts": INGESTED}
            for i, v in enumerate(values)]


def deltas(con: duckdb.DuckDBPyConnection, rows: list[dict[str, Any]]) -> pl.DataFrame:
    """``rows`` as the fabric_counters table -> stg_counter_deltas, by device and ts."""
    con.register("fabric_counters",
                 pa.Table.from_pylist(rows, schema=TABLES["fabric_counters"].schema))
    return run_sql(con, "select * from stg_counter_deltas order by device, ts")


def column(out: pl.DataFrame, name: str) -> list[Any]:
    return out[name].to_list()


def test_saturation_reset_and_normal_intervals(con: duckdb.DuckDBPyConnection) -> None:
    out = deltas(con, series([100, 300, SAT, SAT, 50, 80]))
    assert column(out, "delta") == [None, 200.0, None, None, 50.0, 30.0]
    assert column(out, "saturated") == [False, False, True, True, False, False]
    # after saturation the counter was cleared (a legacy counter holds its ceiling until then)
    assert column(out, "reset") == [False, False, False, False, True, False]
    assert column(out, "wrapped") == [False] * 6
    assert column(out, "rate_per_s") == [None, 20.0, None, None, 5.0, 3.0]
    assert column(out, "interval_s") == [None, 10.0, 10.0, 10.0, 10.0, 10.0]


def test_per_name_ceilings(con: duckdb.DuckDBPyConnection) -> None:
    # 16-bit and 8-bit legacy error counters stop at 2**16-1 / 2**8-1
    symbol = deltas(con, series([10, 65535, 65535, 3], counter="symbol_error"))
    assert column(symbol, "saturated") == [False, True, True, False]
    assert column(symbol, "delta") == [None, None, None, 3.0]
    assert column(symbol, "reset") == [False, False, False, True]
    downed = deltas(con, series([254, 255], counter="link_downed"))
    assert column(downed, "saturated") == [False, True] and column(downed, "delta") == [None, None]
    # the byte form derived from the word counter stops at 4 x the word ceiling
    words_as_bytes = deltas(con, series([4 * SAT - 8, 4 * SAT], counter="port_xmit_bytes"))
    assert column(words_as_bytes, "saturated") == [False, True]
    # 4-bit counters get no ceiling by name (a 64-bit extended counter resting at 15 is likely)
    integrity = deltas(con, series([3, 15], counter="local_link_integrity_errors"))
    assert column(integrity, "delta") == [None, 12.0] and not column(integrity, "saturated")[1]


def test_a_64_bit_counter_of_a_legacy_name_passes_the_ceiling(
        con: duckdb.DuckDBPyConnection) -> None:
    # perfquery -x / counters_ext report port_xmit_data in 64 bits under the same name: only a
    # value exactly at the ceiling is saturated, a value beyond it is an ordinary reading.
    out = deltas(con, series([SAT - 10, SAT + 90, SAT + 190], counter="port_xmit_data"))
    assert column(out, "delta") == [None, 100.0, 100.0]
    assert column(out, "saturated") == [False, False, False]


def test_any_other_fabric_counter_stuck_at_2_32_minus_1_is_saturated(
        con: duckdb.DuckDBPyConnection) -> None:
    pause = deltas(con, series([5, SAT, SAT + 5], counter="rx_prio3_pause"))
    assert column(pause, "saturated") == [False, True, False]
    assert column(pause, "delta") == [None, None, 5.0]
    # ... but a counter known to wrap at 2**32 reads 2**32-1 as an ordinary value
    queue = deltas(con, series([SAT - 1, SAT], counter=WRAPS_32))
    assert column(queue, "saturated") == [False, False] and column(queue, "delta") == [None, 1.0]


def test_wraps_32_and_64_bit(con: duckdb.DuckDBPyConnection) -> None:
    out32 = deltas(con, series([M32 - 100, 50, 60], counter=WRAPS_32))
    assert column(out32, "delta") == [None, 150.0, 10.0]
    assert column(out32, "wrapped") == [False, True, False]
    assert not any(column(out32, "reset"))
    # a drop of exactly half the modulus is a reset; one more is a wrap
    half = deltas(con, series([2**31 + 10, 10, 2**31 + 11, 10], counter=WRAPS_32))
    assert column(half, "delta") == [None, 10.0, 2**31 + 1.0, 2**31 - 1.0]
    assert column(half, "reset") == [False, True, False, False]
    assert column(half, "wrapped") == [False, False, False, True]
    small_drop = deltas(con, series([5000, 10], counter=WRAPS_32))
    assert column(small_drop, "delta") == [None, 10.0]
    assert column(small_drop, "reset") == [False, True]
    # every other fabric counter is 64-bit
    near = float(2**64 - 2**12)  # exactly representable in float64
    out64 = deltas(con, series([near, 4096], counter="rx_bytes"))
    assert column(out64, "delta") == [None, 8192.0] and column(out64, "wrapped") == [False, True]
    reset64 = deltas(con, series([5000, 10], counter="rx_bytes"))
    assert column(reset64, "delta") == [None, 10.0] and column(reset64, "reset") == [False, True]


def test_an_invalid_sample_is_skipped_without_hiding_a_wrap(
        con: duckdb.DuckDBPyConnection) -> None:
    out = deltas(con, series([M32 - 100, -7, 50], counter=WRAPS_32))
    assert column(out, "invalid") == [False, True, False]
    assert column(out, "delta") == [None, None, 150.0]
    assert column(out, "interval_s") == [None, 10.0, 20.0]
    assert column(out, "wrapped") == [False, False, True]


def test_limits_are_listed_once_per_name(con: duckdb.DuckDBPyConnection) -> None:
    names = ["port_xmit_data", "port_rcv_bytes", "port_xmit_discards", "link_downed",
             WRAPS_32, "local_link_integrity_errors", "rx_prio3_pause"]
    con.register("fabric_counters", pa.Table.from_pylist(
        [row for name in names for row in series([1], counter=name)],
        schema=TABLES["fabric_counters"].schema))
    got = run_sql(con, "select metric, saturate_at, wrap_at from stg_metric_names "
                       "where source_table = 'fabric_counters'").rows()
    assert {m: (s, w) for m, s, w in got} == {
        "port_xmit_data": (SAT, None), "port_rcv_bytes": (4 * SAT, None),
        "port_xmit_discards": (2.0**16 - 1, None), "link_downed": (2.0**8 - 1, None),
        WRAPS_32: (None, M32), "local_link_integrity_errors": (SAT, 2.0**64),
        "rx_prio3_pause": (SAT, 2.0**64)}


def test_series_are_independent_and_input_order_does_not_matter(
        con: duckdb.DuckDBPyConnection) -> None:
    rows = series([10, 20, 5]) + series([1, 2, 3], device="mlx5_1")
    random.Random(3).shuffle(rows)
    out = deltas(con, rows)
    assert column(out.filter(pl.col("device") == "mlx5_0"), "delta") == [None, 10.0, 5.0]
    assert column(out.filter(pl.col("device") == "mlx5_1"), "delta") == [None, 1.0, 1.0]
    assert out.columns[-7:] == ["prev_value", "delta", "rate_per_s", "reset", "wrapped",
                                "saturated", "invalid"]


# ------------------------------------------------------------------------------- properties


@dataclass
class Truth:
    """A generated cumulative series and, per interval, what really happened."""

    values: list[float]
    gaps: list[int]
    increments: list[float]  # true increment of each interval (index 0 unused)
    resets: list[bool]
    wraps: list[bool]
    saturated: list[bool]

    def add(self, value: float, gap: int, inc: float, *, reset: bool = False,
            wrap: bool = False, saturated: bool = False) -> None:
        for name, item in (("values", value), ("gaps", gap), ("increments", inc),
                           ("resets", reset), ("wraps", wrap), ("saturated", saturated)):
            getattr(self, name).append(item)


@st.composite
def saturating_series(draw: st.DrawFn) -> Truth:
    """Legacy IB counter (ceiling 2**32-1): increments, jumps into saturation, resets."""
    n = draw(st.integers(2, 30))
    v = float(draw(st.sampled_from([0, 2**31, U32_MAX - 5, U32_MAX])))
    truth = Truth([v], [0], [0.0], [False], [False], [v == SAT])
    for _ in range(n - 1):
        event = draw(st.sampled_from(["inc", "inc", "jump", "reset"]))
        reset = event == "reset" and v > 0
        if reset:
            inc = float(draw(st.integers(0, int(v) - 1)))  # restart, then count: value drops
            v = inc
        else:
            inc = float(draw(st.integers(0, 2**20) if event == "inc" else
                             st.integers(2**29, 2**31)))
            v = min(v + inc, SAT)
        truth.add(v, draw(st.integers(1, 60)), inc, reset=reset, saturated=v == SAT)
    return truth


@st.composite
def wrapping_series(draw: st.DrawFn) -> Truth:
    """32-bit counter that wraps at 2**32, with resets that stay distinguishable from wraps."""
    n = draw(st.integers(2, 30))
    v = float(draw(st.integers(0, U32_MAX)))
    truth = Truth([v], [0], [0.0], [False], [False], [False])
    for _ in range(n - 1):
        event = draw(st.sampled_from(["inc", "inc", "jump", "reset"]))
        reset = event == "reset" and v > 0
        if reset:  # a drop of at most 2**31 (a larger drop is read as a wrap)
            inc = float(draw(st.integers(max(0, int(v) - 2**31), int(v) - 1)))
            new = inc
        else:
            inc = float(draw(st.integers(0, 2**16) if event == "inc" else
                             st.integers(2**30, 2**31 - 1)))
            new = (v + inc) % M32
        truth.add(new, draw(st.integers(1, 60)), inc, reset=reset, wrap=not reset and new < v)
        v = new
    return truth


@st.composite
def resetting_series(draw: st.DrawFn) -> Truth:
    """Ordinary 64-bit counter below 2**53: driver reloads and reboots only."""
    n = draw(st.integers(2, 30))
    v = float(draw(st.integers(0, 2**50)))
    truth = Truth([v], [0], [0.0], [False], [False], [v == SAT])
    for _ in range(n - 1):
        reset = draw(st.booleans()) and v > 0
        inc = float(draw(st.integers(0, int(v) - 1)) if reset else draw(st.integers(0, 2**40)))
        v = inc if reset else v + inc
        # a fabric counter resting on exactly 2**32-1 reads as a stuck 32-bit one
        truth.add(v, draw(st.integers(1, 60)), inc, reset=reset, saturated=v == SAT)
    return truth


def check(con: duckdb.DuckDBPyConnection, truths: list[Truth], counter: str, seed: int) -> None:
    rows = [row for k, t in enumerate(truths)
            for row in series(t.values, counter=counter, gaps=t.gaps, device=f"dev{k}")]
    random.Random(seed).shuffle(rows)
    out = deltas(con, rows)
    for k, t in enumerate(truths):
        got = out.filter(pl.col("device") == f"dev{k}")
        delta, sat = column(got, "delta"), column(got, "saturated")
        reset, wrapped = column(got, "reset"), column(got, "wrapped")
        rate, interval = column(got, "rate_per_s"), column(got, "interval_s")
        assert column(got, "value") == t.values
        assert delta[0] is None and sat[0] == t.saturated[0]
        for i in range(1, len(t.values)):
            assert sat[i] == t.saturated[i]
            assert interval[i] == t.gaps[i]
            if t.saturated[i]:
                assert delta[i] is None and rate[i] is None  # unknown, never read as 0
            else:
                assert delta[i] == t.increments[i]
                assert (reset[i], wrapped[i]) == (t.resets[i], t.wraps[i])
                assert rate[i] == pytest.approx(t.increments[i] / t.gaps[i])
        known = [d for d in delta if d is not None]
        assert all(d >= 0 for d in known)
        assert all(r >= 0 for r in rate if r is not None)
        assert sum(known) == sum(inc for i, inc in enumerate(t.increments)
                                 if i > 0 and not t.saturated[i])


@settings(max_examples=50, deadline=None)
@given(st.lists(saturating_series(), min_size=1, max_size=4), st.integers(0, 2**16))
def test_saturating_ib_counters(con: duckdb.DuckDBPyConnection, truths: list[Truth],
                                seed: int) -> None:
    check(con, truths, "port_xmit_wait", seed)


@settings(max_examples=50, deadline=None)
@given(st.lists(wrapping_series(), min_size=1, max_size=4), st.integers(0, 2**16))
def test_wrapping_32_bit_counters(con: duckdb.DuckDBPyConnection, truths: list[Truth],
                                  seed: int) -> None:
    check(con, truths, WRAPS_32, seed)


@settings(max_examples=40, deadline=None)
@given(st.lists(resetting_series(), min_size=1, max_size=4), st.integers(0, 2**16))
def test_resetting_64_bit_counters(con: duckdb.DuckDBPyConnection, truths: list[Truth],
                                   seed: int) -> None:
    check(con, truths, "cnp_sent", seed)
