"""What the pool readers' bulk parsers share (``base.BulkParser``, ``base.JsonBulkParser``):
the target as ``pool_common.pool_row`` writes it, and the arithmetic the reference parsers do
in Python, done in polars to the same bits.

Polars divides by a constant as a multiplication by its reciprocal (``15559 / 1000`` is
``15.559000000000001`` there, ``15.559`` in Python): ``divided`` divides by a column of the
constant instead, which polars divides element by element as Python does. ``epoch_time`` is
``datetime.fromtimestamp(seconds, tz=UTC)``: whole seconds, and the fraction's microseconds
rounded half to even, as CPython rounds them.
"""

from __future__ import annotations

from datetime import UTC, datetime

import polars as pl

from ckptwatch.sources.base import plain_output
from ckptwatch.sources.pool_common import pool_row

TS = pl.Datetime("us", "UTC")
_ANY_TIME = datetime(2026, 1, 1, tzinfo=UTC)


def row_targets(frame: pl.DataFrame, column: str = "target") -> pl.DataFrame:
    """``frame`` with its ``column`` of target names as ``pool_row`` writes them (each
    distinct name asked once)."""
    names = frame[column].unique(maintain_order=True).drop_nulls()
    written = [pool_row(_ANY_TIME, "", name, "", 0.0)["target"] for name in names.to_list()]
    if written == names.to_list():
        return frame
    return frame.with_columns(pl.col(column).replace_strict(
        names, pl.Series(written, dtype=pl.String), default=None, return_dtype=pl.String))


def divided(frame: pl.DataFrame, by: float, *columns: str) -> pl.DataFrame:
    """``frame`` with ``columns`` divided by ``by`` as Python's ``x / by`` divides a float."""
    divisor = "__divisor"
    frame = frame.with_columns(pl.repeat(float(by), frame.height, eager=True).alias(divisor))
    return frame.with_columns(pl.col(c) / pl.col(divisor) for c in columns).drop(divisor)


def epoch_time(seconds: pl.Expr) -> pl.Expr:
    """Epoch seconds (Float64, not negative) as ``datetime.fromtimestamp(s, tz=UTC)`` reads
    them: the whole seconds, and the fraction times 10**6 rounded half to even."""
    whole = seconds.floor()
    micros = ((seconds - whole) * 1e6).round(0, mode="half_to_even")
    return (whole.cast(pl.Int64) * 1_000_000 + micros.cast(pl.Int64)).cast(TS)


def plain_lines(env: pl.DataFrame) -> pl.DataFrame:
    """The non-blank lines of the envelopes with plain text output (``base.PLAIN_TEXT``: on
    it ``str.splitlines`` splits at the newlines alone), stripped: ``__env``, ``__k`` (the
    line's place among all, in the envelopes' order), ``__first`` (whether it is its
    envelope's first), ``line``."""
    return (env.filter(plain_output(env))
            .select("__env", pl.col("output").str.split("\n").alias("line"))
            .explode("line")
            .select("__env", pl.col("line").str.strip_chars())
            .filter(pl.col("line") != "")
            .with_row_index("__k")
            .with_columns(pl.col("__k").cast(pl.Int64),
                          pl.col("__env").ne_missing(pl.col("__env").shift(1)).alias("__first")))


def read_whole(env: pl.DataFrame, lines: pl.DataFrame, ok: pl.Expr) -> tuple[
        pl.DataFrame, pl.Series]:
    """``lines`` of the envelopes all of whose lines are ``ok``, and the envelopes declined:
    the others (text not plain, no line at all, a line not ``ok``)."""
    lines = lines.with_columns(ok.fill_null(False).all().over("__env").alias("__ok"))
    good = lines.filter(pl.col("__ok")).drop("__ok")
    declined = env.filter(~pl.col("__env").is_in(good["__env"].implode()))["__env"]
    return good, declined


def row_major(frame: pl.DataFrame, index: list[str], columns: list[str],
              metrics: list[str]) -> pl.DataFrame:
    """``frame``'s ``columns`` as rows ``metric``/``value`` (Float64, nulls dropped), named
    ``metrics``, in ``frame``'s order and each row's in ``columns``' order, beside ``index``;
    ``__idx``: the rows' order. (``unpivot`` gives them a column at a time: one permutation
    puts them row by row, without a sort.)"""
    n, width = frame.height, len(columns)
    long = frame.select(*index, *[pl.col(c).cast(pl.Float64) for c in columns]).unpivot(
        columns, index=index, variable_name="metric")
    at = pl.int_range(n * width, dtype=pl.Int64, eager=True)
    long = long[(at % width) * n + at // width]
    return long.with_columns(
        pl.Series("metric", metrics, dtype=pl.String).gather(at % width).alias("metric"),
        at.alias("__idx")).drop_nulls("value").select("__idx", *index, "metric", "value")
