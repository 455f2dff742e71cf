"""Cumulative counters -> per-interval deltas and rates (resets, wraps, saturation).

Input: a long frame with one row per sample, keyed by (node, device, port, counter) and ordered
by ``ts`` within each key (the function sorts). For each sample after the first of its series:

* normal: ``delta = value - previous``;
* wrap: the value dropped and the series wraps at ``M`` (64-bit counters by default, or a
  ``wrap_at`` column, e.g. 2**32 for a 32-bit driver counter) and the drop is more than ``M/2``:
  ``delta = value + M - previous``;
* reset: any other drop (driver reload, reboot, ``perfquery -R``): the counter restarted from 0,
  so ``delta = value`` and ``reset = true``. A reset that leaves the value above the previous
  sample cannot be seen in the data (as in Prometheus' ``increase``);
* saturation: the value sits at the counter's ceiling (legacy 32-bit InfiniBand PortCounters
  stop at 2**32-1 instead of wrapping; see ``IB_SATURATION``, or a ``saturate_at`` column):
  ``delta`` is null and ``saturated = true`` -- the traffic in that interval is unknown, never 0.

``interval_s`` is the time since the previous sample; ``rate_per_s = delta / interval_s``
(null when the interval is not positive). Deltas and rates are never negative.

Values are float64 (the lake's type): counts above 2**53 lose precision there, and so do
wrap corrections at 2**64. Everything is vectorised polars expressions over the frame.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import polars as pl

KEYS: tuple[str, ...] = ("node", "device", "port", "counter")
U32_MAX = 2**32 - 1
WRAP_64 = float(2**64)

#: Legacy IBA PortCounters widths (the sysfs ``counters/`` files and plain ``perfquery``):
#: these saturate at 2**bits - 1. The byte forms are 4 x the word ceiling. The 4-bit counters
#: (local_link_integrity_errors, excessive_buffer_overrun_errors) are left out: a 64-bit
#: extended counter resting at 15 is too likely; pass ``saturate_at`` when the PMA is legacy.
IB_SATURATION: dict[str, float] = {
    **{name: float(U32_MAX) for name in (
        "port_xmit_data", "port_rcv_data", "port_xmit_packets", "port_rcv_packets",
        "port_xmit_wait")},
    "port_xmit_bytes": float(4 * U32_MAX),
    "port_rcv_bytes": float(4 * U32_MAX),
    **{name: float(2**16 - 1) for name in (
        "symbol_error", "port_rcv_errors", "port_rcv_remote_physical_errors",
        "port_rcv_switch_relay_errors", "port_xmit_discards", "VL15_dropped")},
    **{name: float(2**8 - 1) for name in (
        "link_error_recovery", "link_downed", "port_xmit_constraint_errors",
        "port_rcv_constraint_errors")},
}

OUTPUT_COLUMNS = ("delta", "interval_s", "rate_per_s", "reset", "saturated")


def cumulative_deltas(
    frame: pl.DataFrame | pl.LazyFrame,
    *,
    keys: Sequence[str] = KEYS,
    ts: str = "ts",
    value: str = "value",
    counter: str = "counter",
    saturation: Mapping[str, float] | None = IB_SATURATION,
    default_wrap: float | None = WRAP_64,
) -> pl.DataFrame:
    """Per-interval ``delta``, ``interval_s``, ``rate_per_s``, ``reset``, ``saturated``.

    ``frame`` holds cumulative samples with the ``keys`` columns, ``ts`` (datetime, or epoch
    seconds as a number) and ``value``. Optional columns ``saturate_at`` (the ceiling a series
    stops at) and ``wrap_at`` (the modulus it wraps at) override the defaults: ``saturation``
    maps counter names to ceilings (IB legacy widths by default) and series without a ceiling
    wrap at ``default_wrap`` (2**64; None: every drop is a reset). Returns the rows sorted by
    ``keys`` and ``ts`` with the five columns added; the first sample of a series has null
    delta/interval/rate.
    """
    lf = frame.lazy()
    schema = lf.collect_schema()
    key_cols = list(keys)
    v = pl.col(value).cast(pl.Float64)
    prev = v.shift(1).over(key_cols)
    t = pl.col(ts)
    prev_t = t.shift(1).over(key_cols)
    if isinstance(schema[ts], pl.Datetime):
        interval = (t - prev_t).dt.total_microseconds().cast(pl.Float64) / 1e6
    else:
        interval = (t.cast(pl.Float64) - prev_t.cast(pl.Float64))

    mapped: pl.Expr = pl.lit(None, dtype=pl.Float64)
    if saturation:
        mapped = pl.col(counter).replace_strict(dict(saturation), default=None,
                                                return_dtype=pl.Float64)
    ceiling = (pl.coalesce(pl.col("saturate_at").cast(pl.Float64), mapped)
               if "saturate_at" in schema else mapped)
    wrap_col = (pl.col("wrap_at").cast(pl.Float64) if "wrap_at" in schema
                else pl.lit(default_wrap, dtype=pl.Float64))
    modulus = pl.when(ceiling.is_null()).then(wrap_col).otherwise(None)

    lf = lf.sort([*key_cols, ts]).with_columns(
        _prev=prev, _interval=interval, _ceiling=ceiling, _modulus=modulus, _v=v,
    )
    first = pl.col("_prev").is_null() | pl.col("_v").is_null()
    saturated = pl.col("_ceiling").is_not_null() & (pl.col("_v") >= pl.col("_ceiling"))
    drop = ~first & (pl.col("_v") < pl.col("_prev"))
    wrapped = (drop & pl.col("_modulus").is_not_null()
               & ((pl.col("_prev") - pl.col("_v")) > pl.col("_modulus") / 2))
    reset = drop & ~wrapped & ~saturated
    delta = (
        pl.when(first | saturated).then(None)
        .when(wrapped).then(pl.col("_v") + (pl.col("_modulus") - pl.col("_prev")))
        .when(reset).then(pl.col("_v"))
        .otherwise(pl.col("_v") - pl.col("_prev"))
    )
    lf = lf.with_columns(
        delta=delta,
        interval_s=pl.col("_interval"),
        reset=reset.fill_null(False),
        saturated=saturated.fill_null(False),
    ).with_columns(
        rate_per_s=pl.when(pl.col("interval_s") > 0)
        .then(pl.col("delta") / pl.col("interval_s")).otherwise(None),
    )
    out = lf.drop(["_prev", "_interval", "_ceiling", "_modulus", "_v"]).collect()
    return out.select([*(c for c in out.columns if c not in OUTPUT_COLUMNS), *OUTPUT_COLUMNS])
