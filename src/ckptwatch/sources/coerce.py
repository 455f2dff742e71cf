"""Vectorised coercion of raw columns into canonical types, with a reason for every failure.

Each ``*_expr`` returns ``(value_expr, bad_expr)``: the coerced value, and a boolean that is true
where the raw value was present but could not be read. Nothing here loops per row.
"""

from __future__ import annotations

import polars as pl
import pyarrow as pa

from ckptwatch.settings import INGEST

ISO_FORMATS = (
    "%Y-%m-%dT%H:%M:%S%.f%:z",
    "%Y-%m-%d %H:%M:%S%.f%:z",
    "%Y-%m-%dT%H:%M:%S%.f",
    "%Y-%m-%d %H:%M:%S%.f",
)
#: Epoch values above this are read as milliseconds (1e11 s is the year 5138).
EPOCH_MS_ABOVE = 1e11


def present(col: str) -> pl.Expr:
    """True where the raw value is non-null and not an empty string."""
    return pl.col(col).is_not_null() & (pl.col(col).cast(pl.String).str.strip_chars() != "")


def float_expr(col: str) -> tuple[pl.Expr, pl.Expr]:
    """A float column; NaN and ±inf are rejected (they poison quantiles)."""
    raw = pl.col(col).cast(pl.String).str.strip_chars()
    val = raw.cast(pl.Float64, strict=False)
    ok = val.is_not_null() & val.is_finite()
    return pl.when(ok).then(val).otherwise(None), present(col) & ~ok


def int_expr(col: str, dtype: pl.DataType) -> tuple[pl.Expr, pl.Expr]:
    """An integer column; accepts ``12``, ``12.0`` and ``1.2e10`` when integral."""
    raw = pl.col(col).cast(pl.String).str.strip_chars()
    as_int = raw.cast(pl.Int64, strict=False)
    as_float = raw.cast(pl.Float64, strict=False)
    from_float = (
        pl.when(as_float.is_finite() & (as_float == as_float.round(0)) & (as_float.abs() < 9.2e18))
        .then(as_float)
        .otherwise(None)
        .cast(pl.Int64, strict=False)
    )
    val = pl.coalesce(as_int, from_float).cast(dtype, strict=False)
    return val, present(col) & val.is_null()


def int_bounds(dtype: pl.DataType) -> tuple[int, int]:
    """The smallest and largest value of an integer type (``Int32``, ``Int64``)."""
    bits = 32 if dtype == pl.Int32 else 64
    return -(1 << (bits - 1)), (1 << (bits - 1)) - 1


def integral_expr(col: str) -> pl.Expr:
    """True where the raw value reads as a finite whole number (``12``, ``1.2e21``, a
    22-digit integer): where such a value is unreadable as an integer column, it is out of
    that column's range."""
    as_float = pl.col(col).cast(pl.String).str.strip_chars().cast(pl.Float64, strict=False)
    return (as_float.is_finite() & (as_float == as_float.round(0))).fill_null(False)


def string_expr(col: str) -> tuple[pl.Expr, pl.Expr]:
    """A trimmed string column; empty strings become null."""
    raw = pl.col(col).cast(pl.String).str.strip_chars()
    return pl.when(raw != "").then(raw).otherwise(None), pl.lit(False)


def timestamp_expr(col: str) -> tuple[pl.Expr, pl.Expr]:
    """ISO-8601 (offset or ``Z``; naive read as UTC) or epoch seconds/ms, to UTC microseconds."""
    raw = pl.col(col).cast(pl.String).str.strip_chars()
    num = raw.cast(pl.Float64, strict=False)
    epoch_s = pl.when(num.abs() > EPOCH_MS_ABOVE).then(num / 1000.0).otherwise(num)
    from_epoch = (
        pl.when(num.is_finite())
        .then((epoch_s * 1_000_000).round(0).cast(pl.Int64, strict=False))
        .otherwise(None)
        .cast(pl.Datetime("us", "UTC"))
    )
    iso = raw.str.replace(r"[Zz]$", "+00:00")
    parsed = [
        iso.str.to_datetime(f, strict=False, time_zone="UTC", time_unit="us") for f in ISO_FORMATS
    ]
    val = pl.coalesce(from_epoch, *parsed)
    year = val.dt.year()
    ok = val.is_not_null() & (year >= INGEST.min_year) & (year <= INGEST.max_year)
    return pl.when(ok).then(val).otherwise(None), present(col) & ~ok


def coerce_expr(col: str, dtype: pl.DataType) -> tuple[pl.Expr, pl.Expr]:
    """Dispatch on the canonical dtype."""
    if dtype == pl.Float64:
        return float_expr(col)
    if dtype in (pl.Int64, pl.Int32):
        return int_expr(col, dtype)
    if isinstance(dtype, pl.Datetime):
        return timestamp_expr(col)
    return string_expr(col)


def timestamp_series(s: pl.Series) -> tuple[pl.Series, pl.Series]:
    """``timestamp_expr`` evaluated on a Series, with the same values and flags.

    ``pl.coalesce`` in the expression form parses every row with every ISO format; here each
    format is tried only on the rows that no earlier reading (epoch, or an earlier format)
    read, so a column of epoch seconds or of one ISO spelling is parsed once, not five times.
    A text column that repeats its values (pool metrics: every metric of a target shares its
    time) is read once per distinct value (``DISTINCT_SHARE``).
    """
    if s.dtype == pl.String and s.len() >= 64:
        distinct = s.unique()
        if distinct.len() <= s.len() * DISTINCT_SHARE:
            value, bad = _timestamp_series(distinct)
            read = pl.DataFrame({"k": distinct, "v": value, "b": bad})
            got = s.to_frame("k").join(read, on="k", how="left", nulls_equal=True,
                                       maintain_order="left")
            return got["v"].alias(s.name), got["b"].alias(s.name)
    return _timestamp_series(s)


#: A text column of timestamps with at most this share of distinct values is read once per
#: distinct value (``timestamp_series``).
DISTINCT_SHARE = 0.25


def _timestamp_series(s: pl.Series) -> tuple[pl.Series, pl.Series]:
    if s.dtype.is_numeric():  # epoch numbers as read: no round trip through text
        raw = None
        num = s.cast(pl.Float64)
        present = s.is_not_null()
    else:
        frame = pl.DataFrame({"raw": s}).select(
            raw=pl.col("raw").cast(pl.String).str.strip_chars())
        raw = frame["raw"]
        num = raw.cast(pl.Float64, strict=False)
        present = raw.is_not_null() & (raw != "")
    epoch_s = pl.when(pl.col("n").abs() > EPOCH_MS_ABOVE).then(pl.col("n") / 1000.0) \
        .otherwise(pl.col("n"))
    val = pl.DataFrame({"n": num}).select(
        pl.when(pl.col("n").is_finite())
        .then((epoch_s * 1_000_000).round(0).cast(pl.Int64, strict=False))
        .otherwise(None)
        .cast(pl.Datetime("us", "UTC"))
    ).to_series()
    todo = (val.is_null() & raw.is_not_null()).arg_true() if raw is not None else None
    if raw is not None and todo is not None and todo.len():
        text = raw.gather(todo)
        got = _iso_at_once(text)
        if got is None:  # format by format, each on the values no earlier one read
            iso = text.str.replace(r"[Zz]$", "+00:00")
            got = pl.Series(dtype=pl.Datetime("us", "UTC")).extend_constant(None, todo.len())
            for f in ISO_FORMATS:
                left = got.is_null().arg_true()
                if not left.len():
                    break
                parsed = iso.gather(left).str.to_datetime(f, strict=False, time_zone="UTC",
                                                           time_unit="us")
                got = got.scatter(left, parsed)
        val = val.scatter(todo, got)
    ok = pl.DataFrame({"v": val}).select(
        ok=pl.col("v").is_not_null() & (pl.col("v").dt.year() >= INGEST.min_year)
        & (pl.col("v").dt.year() <= INGEST.max_year))["ok"]
    value = pl.select(pl.when(ok).then(val).otherwise(None)).to_series()
    return value.alias(s.name), (present & ~ok).alias(s.name)


#: The one ISO-8601 spelling ``_iso_at_once`` reads: date, ``T``, time to the second, up to
#: six fraction digits, ``Z`` or a ``+HH:MM`` offset. Every string of this shape that is a
#: time reads the same in Arrow's parser as in ``ISO_FORMATS``; the rest (a date that does not
#: exist, a leap second) Arrow refuses, and the formats read them.
_ISO_SHAPE = (r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d{1,6})?"
              r"(?:Z|[+-](?:[01]\d|2[0-3]):[0-5]\d)$")


def _iso_at_once(text: pl.Series) -> pl.Series | None:
    """``text`` (trimmed, no nulls) as UTC times read by Arrow's ISO-8601 cast in one pass,
    when every value has ``_ISO_SHAPE`` and Arrow reads them all; else None (the formats read
    them). Polars parses a time with an offset through chrono at ~3 us a value, Arrow at ~0.1:
    a 2 M-row checkpoint file's start and end times were a quarter of its ingest."""
    if not text.len() or not text.str.contains(_ISO_SHAPE).all():
        return None
    try:
        read = pl.from_arrow(text.to_arrow().cast(pa.timestamp("us", tz="UTC")))
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        return None
    return read if isinstance(read, pl.Series) else None


def typed_coerce_expr(col: str, dtype: pl.DataType,
                      source: pl.DataType) -> tuple[pl.Expr, pl.Expr]:
    """``coerce_expr`` for a column already read as ``source``: a column the reader typed as
    integer or float reaches a numeric canonical type by a cast, not by a round trip through
    text. The values and flags are those of ``coerce_expr`` (text of a number reads back as
    the same number); any other pairing is ``coerce_expr`` itself."""
    if source.is_integer() and dtype in (pl.Int64, pl.Int32):
        val = pl.col(col).cast(dtype, strict=False)
        return val, pl.col(col).is_not_null() & val.is_null()
    if (source.is_integer() or source == pl.Float64) and dtype == pl.Float64:
        val = pl.col(col).cast(pl.Float64)
        ok = val.is_not_null() & val.is_finite()
        return pl.when(ok).then(val).otherwise(None), pl.col(col).is_not_null() & ~ok
    return coerce_expr(col, dtype)


def _text(s: pl.Series) -> pl.Series:
    return s.cast(pl.String).str.strip_chars()


def int_series(s: pl.Series, dtype: pl.DataType) -> tuple[pl.Series, pl.Series]:
    """``int_expr`` on a Series, with the same values and flags; the float reading (``12.0``,
    ``1.2e10``) runs only on the rows that do not read as an integer."""
    raw = _text(s)
    val = raw.cast(pl.Int64, strict=False)
    todo = (val.is_null() & raw.is_not_null()).arg_true() if raw is not None else None
    if raw is not None and todo is not None and todo.len():
        as_float = raw.gather(todo).cast(pl.Float64, strict=False)
        from_float = pl.select(
            pl.when(as_float.is_finite() & (as_float == as_float.round(0))
                    & (as_float.abs() < 9.2e18))
            .then(as_float).otherwise(None).cast(pl.Int64, strict=False)).to_series()
        val = val.scatter(todo, from_float)
    val = val.cast(dtype, strict=False)
    present = raw.is_not_null() & (raw != "")
    return val.alias(s.name), (present & val.is_null()).alias(s.name)


def float_series(s: pl.Series) -> tuple[pl.Series, pl.Series]:
    """``float_expr`` on a Series, with the same values and flags."""
    raw = _text(s)
    val = raw.cast(pl.Float64, strict=False)
    ok = val.is_not_null() & val.is_finite()
    present = raw.is_not_null() & (raw != "")
    value = pl.select(pl.when(ok).then(val).otherwise(None)).to_series()
    return value.alias(s.name), (present & ~ok).alias(s.name)


def read_in_steps(source: pl.DataType, dtype: pl.DataType) -> bool:
    """Whether ``coerce_series`` reads a ``source`` column as ``dtype`` in steps (timestamps,
    numbers from text: each costly reading only where a cheaper one did not read the value);
    otherwise it is ``typed_coerce_expr``, one expression, which a caller can evaluate with
    other columns' in one pass."""
    return isinstance(dtype, pl.Datetime) or (
        source == pl.String and dtype in (pl.Int64, pl.Int32, pl.Float64))


def coerce_series(s: pl.Series, dtype: pl.DataType) -> tuple[pl.Series, pl.Series]:
    """``coerce_expr`` on a Series (values, and flags: present but unreadable), each column
    read once and the costly readings run only where a cheaper one did not read the value."""
    if read_in_steps(s.dtype, dtype):
        if isinstance(dtype, pl.Datetime):
            return timestamp_series(s)
        return float_series(s) if dtype == pl.Float64 else int_series(s, dtype)
    value, bad = typed_coerce_expr(s.name, dtype, s.dtype)
    out = s.to_frame().select(value.alias("v"), bad.alias("b"))
    return out["v"].alias(s.name), out["b"].alias(s.name)
