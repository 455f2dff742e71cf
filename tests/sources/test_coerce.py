"""Coercion of a repeated text column: read once per distinct value, row by row the same."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import polars as pl
from hypothesis import given, settings
from hypothesis import strategies as st
from tests.sources.test_tabular import _NUMBERS, _STAMPS

from ckptwatch.sources import coerce


@settings(max_examples=40, deadline=None)
@given(st.lists(st.one_of(st.none(), _STAMPS, _NUMBERS), min_size=1, max_size=12),
       st.randoms(use_true_random=False))
def test_repeated_timestamps_read_once_each_as_the_expression_reads_them(
        values: list[str | None], rnd: Any) -> None:
    """A text column of few distinct times (``coerce.DISTINCT_SHARE``; pool metrics share a
    time per target) gives ``coerce_expr``'s values and flags, row by row."""
    rows = values * 8 + [values[0]] * 60
    rnd.shuffle(rows)
    s = pl.Series("t", rows, dtype=pl.String)
    assert s.n_unique() <= s.len() * coerce.DISTINCT_SHARE  # the distinct path is taken
    value, bad = coerce.coerce_expr("t", pl.Datetime("us", "UTC"))
    want = pl.DataFrame({"t": s}).select(value.alias("v"), bad.alias("b"))
    got_v, got_b = coerce.timestamp_series(s)
    assert got_v.equals(want["v"], check_names=False)
    assert got_b.equals(want["b"], check_names=False)
    assert got_v.name == got_b.name == "t"


def _iso(years: Any, months: Any, days: Any, hours: Any, minutes: Any, seconds: Any,
         fractions: list[str], offsets: list[str]) -> Any:
    return st.builds(
        lambda y, mo, d, h, mi, s, frac, off: f"{y:04d}-{mo:02d}-{d:02d}T{h:02d}:{mi:02d}:"
        f"{s:02d}{frac}{off}", years, months, days, hours, minutes, seconds,
        st.sampled_from(fractions), st.sampled_from(offsets))


#: ISO-8601 times of the one spelling read at once (``coerce._ISO_SHAPE``) ...
_ISO_READ = _iso(st.integers(1, 9999) | st.sampled_from([1999, 2026, 2101]), st.integers(1, 12),
                 st.integers(1, 28), st.integers(0, 23), st.integers(0, 59), st.integers(0, 59),
                 ["", ".5", ".123456", ".000001"],
                 ["Z", "+00:00", "-00:00", "+05:30", "-09:45", "+23:59", "+14:00"])
#: ... and near it, components past their ranges too (month 13, 30 February, hour 24, a leap
#: second), spellings it leaves to the formats (no offset, ``z``, ``+0530``, 7 digits).
_ISO_NEAR = _iso(st.integers(0, 9999), st.integers(0, 13), st.integers(0, 32),
                 st.integers(0, 24), st.integers(0, 60), st.integers(0, 61),
                 ["", ".5", ".123456", ".1234567", "."],
                 ["Z", "+00:00", "+05:30", "+23:59", "z", "", "+0530", "+24:00", "+05:60"])


@settings(max_examples=120, deadline=None)
@given(st.lists(_ISO_READ, min_size=1, max_size=30), st.lists(_ISO_NEAR, max_size=3),
       st.lists(st.none() | _STAMPS, max_size=2))
def test_iso_times_read_at_once_as_the_expression_reads_them(
        times: list[str], near: list[str], others: list[str | None]) -> None:
    """A column of ISO-8601 times of the one spelling (``coerce._iso_at_once``: Arrow's cast
    in one pass) gives ``coerce_expr``'s values and flags, row by row; so does one with
    times near that spelling or other values mixed in (read at once, or by the formats)."""
    assert coerce._iso_at_once(pl.Series(times)) is not None
    for rows in (times, times + near, times + near + others):
        s = pl.Series("t", rows, dtype=pl.String)
        value, bad = coerce.coerce_expr("t", pl.Datetime("us", "UTC"))
        want = pl.DataFrame({"t": s}).select(value.alias("v"), bad.alias("b"))
        got_v, got_b = coerce.timestamp_series(s)
        assert got_v.equals(want["v"], check_names=False), rows
        assert got_b.equals(want["b"], check_names=False), rows


def test_a_column_of_one_iso_spelling_is_read_at_once() -> None:
    """The shape ``_iso_at_once`` reads, and what it leaves to the formats."""
    s = pl.Series(["2026-11-28T00:03:54.451215+05:30", "2026-11-28T00:03:54Z"])
    got = coerce._iso_at_once(s)
    assert got is not None and got.to_list() == [
        datetime(2026, 11, 27, 18, 33, 54, 451215, tzinfo=UTC),
        datetime(2026, 11, 28, 0, 3, 54, tzinfo=UTC)]
    for other in ("2026-11-28 00:03:54Z", "2026-02-30T00:00:00Z", "2026-11-28T23:59:60Z",
                  "2026-11-28T00:03:54.1234567Z", "2026-11-28T00:03:54", "2026-11-28"):
        assert coerce._iso_at_once(pl.Series([other])) is None, other
