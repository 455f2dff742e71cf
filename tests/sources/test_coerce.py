"""Coercion of a repeated text column: read once per distinct value, row by row the same."""

from __future__ import annotations

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
