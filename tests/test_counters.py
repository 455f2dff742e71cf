"""Cumulative counters -> deltas: literal edge cases and hypothesis properties."""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ckptwatch.counters import IB_SATURATION, U32_MAX, cumulative_deltas

T0 = datetime(2026, 11, 28, tzinfo=UTC)
SAT = float(U32_MAX)
M32 = float(2**32)


def frame(values: Sequence[float | None], counter: str = "port_xmit_wait",
          gaps: Sequence[int] | None = None, **extra: Sequence[float | None]) -> pl.DataFrame:
    """One series; ``gaps[i]`` is the time before sample ``i`` (``gaps[0]`` is ignored)."""
    gaps = gaps or [10] * len(values)
    ts = [T0 + timedelta(seconds=sum(gaps[1 : i + 1])) for i in range(len(values))]
    return pl.DataFrame({"node": "n1", "device": "mlx5_0", "port": "1", "counter": counter,
                         "ts": ts, "value": list(values), **{k: list(v) for k, v in extra.items()}},
                        schema_overrides={"value": pl.Float64})


def test_saturation_reset_and_normal_intervals() -> None:
    out = cumulative_deltas(frame([100.0, 300.0, SAT, SAT, 50.0, 80.0]))
    assert out["delta"].to_list() == [None, 200.0, None, None, 50.0, 30.0]
    assert out["saturated"].to_list() == [False, False, True, True, False, False]
    assert out["reset"].to_list() == [False, False, False, False, True, False]
    assert out["rate_per_s"].to_list() == [None, 20.0, None, None, 5.0, 3.0]
    assert out["interval_s"].to_list() == [None, 10.0, 10.0, 10.0, 10.0, 10.0]


def test_byte_form_saturates_at_four_times_the_word_ceiling() -> None:
    out = cumulative_deltas(frame([4.0 * SAT - 8, 4.0 * SAT], counter="port_xmit_bytes"))
    assert out["saturated"].to_list() == [False, True]
    assert IB_SATURATION["port_xmit_data"] == SAT


def test_wraps_32_and_64_bit() -> None:
    out32 = cumulative_deltas(frame([M32 - 100, 50.0, 60.0], counter="rx_bytes",
                                    wrap_at=[M32, M32, M32]))
    assert out32["delta"].to_list() == [None, 150.0, 10.0]
    assert not out32["reset"].any()
    near = float(2**64 - 2**12)  # exactly representable in float64
    out64 = cumulative_deltas(frame([near, 4096.0], counter="rx_bytes"))
    assert out64["delta"].to_list() == [None, 8192.0]
    small_drop = cumulative_deltas(frame([5000.0, 10.0], counter="rx_bytes"))
    assert small_drop["delta"].to_list() == [None, 10.0] and small_drop["reset"].to_list() == [
        False, True]


def test_overrides_and_degenerate_rows() -> None:
    # an explicit ceiling for a 4-bit legacy counter; no ceiling by name for it otherwise
    out = cumulative_deltas(frame([3.0, 15.0], counter="local_link_integrity_errors",
                                  saturate_at=[15.0, 15.0]))
    assert out["saturated"].to_list() == [False, True]
    assert cumulative_deltas(frame([3.0, 15.0], counter="local_link_integrity_errors"))[
        "delta"].to_list() == [None, 12.0]
    # saturation off: the same value is an ordinary reading
    assert cumulative_deltas(frame([1.0, SAT]), saturation=None)["delta"].to_list() == [
        None, SAT - 1]
    # same timestamp twice: delta kept, no rate
    same = cumulative_deltas(frame([1.0, 4.0], gaps=[0, 0]))
    assert same["delta"].to_list() == [None, 3.0] and same["rate_per_s"].to_list() == [None, None]
    # a missing reading restarts the series instead of inventing a delta
    gap = cumulative_deltas(frame([1.0, None, 7.0, 9.0]))
    assert gap["delta"].to_list() == [None, None, None, 2.0]
    # epoch-seconds timestamps work too
    epoch = frame([1.0, 5.0]).with_columns(ts=pl.Series([100.0, 104.0]))
    assert cumulative_deltas(epoch)["rate_per_s"].to_list() == [None, 1.0]


def test_series_are_independent_and_input_order_does_not_matter() -> None:
    a = frame([10.0, 20.0, 5.0])
    b = frame([1.0, 2.0, 3.0]).with_columns(device=pl.lit("mlx5_1"))
    out = cumulative_deltas(pl.concat([a, b]).sample(fraction=1.0, shuffle=True, seed=3))
    assert out.filter(pl.col("device") == "mlx5_0")["delta"].to_list() == [None, 10.0, 5.0]
    assert out.filter(pl.col("device") == "mlx5_1")["delta"].to_list() == [None, 1.0, 1.0]
    assert out.columns[-5:] == ["delta", "interval_s", "rate_per_s", "reset", "saturated"]


# ------------------------------------------------------------------------------- properties


@dataclass
class Truth:
    """A generated cumulative series and, per interval, what really happened."""

    values: list[float]
    gaps: list[int]
    increments: list[float]  # true increment of each interval (index 0 unused)
    resets: list[bool]
    saturated: list[bool]


@st.composite
def saturating_series(draw: st.DrawFn) -> Truth:
    """Legacy IB counter (ceiling 2**32-1): increments, jumps into saturation, resets."""
    n = draw(st.integers(2, 30))
    v = float(draw(st.sampled_from([0, 2**31, U32_MAX - 5, U32_MAX])))
    truth = Truth([v], [0], [0.0], [False], [v >= SAT])
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
        truth.values.append(v)
        truth.gaps.append(draw(st.integers(1, 60)))
        truth.increments.append(inc)
        truth.resets.append(reset)
        truth.saturated.append(v >= SAT)
    return truth


@st.composite
def wrapping_series(draw: st.DrawFn) -> Truth:
    """32-bit counter that wraps at 2**32, with resets that stay distinguishable from wraps."""
    n = draw(st.integers(2, 30))
    v = float(draw(st.integers(0, 2**32 - 1)))
    truth = Truth([v], [0], [0.0], [False], [False])
    for _ in range(n - 1):
        event = draw(st.sampled_from(["inc", "inc", "jump", "reset"]))
        reset = event == "reset" and v > 0
        if reset:  # a drop of at most 2**31 (a larger drop is read as a wrap; see counters.py)
            inc = float(draw(st.integers(max(0, int(v) - 2**31), int(v) - 1)))
            v = inc
        else:
            inc = float(draw(st.integers(0, 2**16) if event == "inc" else
                             st.integers(2**30, 2**31 - 1)))
            v = (v + inc) % M32
        truth.values.append(v)
        truth.gaps.append(draw(st.integers(1, 60)))
        truth.increments.append(inc)
        truth.resets.append(reset)
        truth.saturated.append(False)
    return truth


@st.composite
def resetting_series(draw: st.DrawFn) -> Truth:
    """Ordinary 64-bit counter below 2**53: driver reloads and reboots only."""
    n = draw(st.integers(2, 30))
    v = float(draw(st.integers(0, 2**50)))
    truth = Truth([v], [0], [0.0], [False], [False])
    for _ in range(n - 1):
        reset = draw(st.booleans()) and v > 0
        inc = float(draw(st.integers(0, int(v) - 1)) if reset else draw(st.integers(0, 2**40)))
        v = inc if reset else v + inc
        truth.values.append(v)
        truth.gaps.append(draw(st.integers(1, 60)))
        truth.increments.append(inc)
        truth.resets.append(reset)
        truth.saturated.append(False)
    return truth


def check(truths: list[Truth], counter: str, seed: int, **wrap: float) -> None:
    frames = []
    for k, t in enumerate(truths):
        extra = {"wrap_at": [wrap["wrap_at"]] * len(t.values)} if wrap else {}
        frames.append(frame(t.values, counter=counter, gaps=t.gaps, **extra)
                      .with_columns(device=pl.lit(f"dev{k}")))
    rows = pl.concat(frames)
    order = list(range(rows.height))
    random.Random(seed).shuffle(order)
    out = cumulative_deltas(rows[order])
    for k, t in enumerate(truths):
        got = out.filter(pl.col("device") == f"dev{k}")
        delta, sat = got["delta"].to_list(), got["saturated"].to_list()
        reset = got["reset"].to_list()
        rate, interval = got["rate_per_s"].to_list(), got["interval_s"].to_list()
        assert got["value"].to_list() == t.values
        assert delta[0] is None and sat[0] == t.saturated[0]
        for i in range(1, len(t.values)):
            assert sat[i] == t.saturated[i]
            assert interval[i] == t.gaps[i]
            if t.saturated[i]:
                assert delta[i] is None and rate[i] is None  # unknown, never read as 0
            else:
                assert delta[i] == t.increments[i]
                assert reset[i] == t.resets[i]
                assert rate[i] == pytest.approx(t.increments[i] / t.gaps[i])
        known = [d for d in delta if d is not None]
        assert all(d >= 0 for d in known)
        assert all(r >= 0 for r in rate if r is not None)
        assert sum(known) == sum(inc for i, inc in enumerate(t.increments)
                                 if i > 0 and not t.saturated[i])


@settings(max_examples=120, deadline=None)
@given(st.lists(saturating_series(), min_size=1, max_size=3), st.integers(0, 2**16))
def test_saturating_ib_counters(truths: list[Truth], seed: int) -> None:
    check(truths, "port_xmit_wait", seed)


@settings(max_examples=120, deadline=None)
@given(st.lists(wrapping_series(), min_size=1, max_size=3), st.integers(0, 2**16))
def test_wrapping_32_bit_counters(truths: list[Truth], seed: int) -> None:
    check(truths, "rx_prio3_pause", seed, wrap_at=M32)


@settings(max_examples=80, deadline=None)
@given(st.lists(resetting_series(), min_size=1, max_size=3), st.integers(0, 2**16))
def test_resetting_64_bit_counters(truths: list[Truth], seed: int) -> None:
    check(truths, "cnp_sent", seed)
