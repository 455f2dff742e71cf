"""Vectorised coercion of raw columns into canonical types, with a reason for every failure.

Each ``*_expr`` returns ``(value_expr, bad_expr)``: the coerced value, and a boolean that is true
where the raw value was present but could not be read. Nothing here loops per row.
"""

from __future__ import annotations

import polars as pl

from ckptwatch.config import INGEST

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
