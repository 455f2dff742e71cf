"""SPDK JSON-RPC statistics of an NVMe-oF target -> ``pool_metrics``.

* ``bdev_get_iostat`` (``scripts/rpc.py bdev_get_iostat``; source ``spdk-iostat``): per bdev,
  cumulative since the bdev was opened or its stats reset: ``bytes_written`` ->
  ``write_bytes``, ``num_write_ops`` -> ``write_ops``, ``write_latency_ticks`` ->
  ``write_latency_us_total`` (ticks × 10⁶ / ``tick_rate``; its delta over ``write_ops``' is
  the interval's mean write latency), and where present ``max_write_latency_ticks`` ->
  ``write_latency_peak_ms`` (the largest since the reset). ``queue_depth`` ->
  ``queue_depth.disk`` (the bdev's queue: the target's block-device queue) only when
  queue-depth sampling is on (``queue_depth_polling_period`` > 0, set by
  ``bdev_set_qd_sampling_period``): with it off SPDK reports 0, which is no reading.
* ``nvmf_get_stats`` (source ``spdk-nvmf-stats``): its ``pending_bdev_io`` and the RDMA
  ``pending_rdma_read``/``pending_rdma_write``/``pending_free_request`` are cumulative counts
  of the times a request had to wait (SPDK increments them and never decrements), not queue
  depths, and ``request_latency`` / ``requests`` is the latency of all requests, reads and
  writes together: none is a signal of the pool vocabulary, so the output is recognised and
  quarantined with that reason rather than read as something it is not.

Neither reports metadata or background (GC) work: an SPDK pool has no such signal. Targets
are host-local: ``<node>/<bdev>``; the pool is ``spdk`` (the iostat names no subsystem). The
outputs carry no time: the envelope's ``collected_at`` or the file's name or mtime is used.
A JSON-RPC response (``{"jsonrpc", "id", "result"}``) and the bare ``result`` that ``rpc.py``
prints are both read; an error response is quarantined with SPDK's message.
"""

from __future__ import annotations

import math
from typing import Any

import polars as pl

from ckptwatch.errors import RecordError
from ckptwatch.sources.base import ToolContext, register_json_bulk, register_tool
from ckptwatch.sources.pool_bulk import divided, row_major, row_targets
from ckptwatch.sources.pool_common import host_target, pool_row, ticks_to_us
from ckptwatch.sources.textkv import parse_number, shorten

IOSTAT_SOURCE = "spdk-iostat"
NVMF_SOURCE = "spdk-nvmf-stats"
DEFAULT_POOL = "spdk"


def _result(output: Any, what: str) -> dict[str, Any]:
    """The ``result`` object of a JSON-RPC response (or the bare result)."""
    if not isinstance(output, dict):
        raise RecordError(f"{what} output is not a JSON object (got {type(output).__name__})")
    if "error" in output and "result" not in output:
        err = output["error"]
        message = err.get("message") if isinstance(err, dict) else err
        raise RecordError(f"{what}: the RPC failed: {shorten(str(message))!r}")
    inner = output.get("result", output)
    if not isinstance(inner, dict):
        raise RecordError(f"{what}: 'result' is not an object (got {type(inner).__name__})")
    return inner


def detect_iostat(output: Any) -> bool:
    """``bdev_get_iostat``: ``tick_rate`` and a ``bdevs`` list."""
    if not isinstance(output, dict):
        return False
    inner = output.get("result", output)
    return isinstance(inner, dict) and "tick_rate" in inner and isinstance(
        inner.get("bdevs"), list)


def detect_nvmf(output: Any) -> bool:
    """``nvmf_get_stats``: ``tick_rate`` and a ``poll_groups`` list."""
    if not isinstance(output, dict):
        return False
    inner = output.get("result", output)
    return isinstance(inner, dict) and "tick_rate" in inner and isinstance(
        inner.get("poll_groups"), list)


def _count(bdev: dict[str, Any], key: str, where: str) -> float | None:
    """A bdev's counter (None when absent); a value that is not a number is an error."""
    if key not in bdev:
        return None
    value = parse_number(bdev[key])
    if value is None or value < 0:
        raise RecordError(f"{where}: {key} is not a non-negative number: "
                          f"{shorten(repr(bdev[key]), 40)}")
    return float(value)


@register_tool(IOSTAT_SOURCE, detect_iostat, needs=())  # (JSON only)
def parse_iostat(output: Any, ctx: ToolContext) -> dict[str, list[dict[str, Any]]]:
    """``bdev_get_iostat`` -> per-bdev write counters, latency and queue depth."""
    inner = _result(output, "bdev_get_iostat")
    if "channels" in inner:
        raise RecordError("bdev_get_iostat per-channel output (-c) is not read: collect it "
                          "without -c (per bdev)")
    tick_rate = parse_number(inner.get("tick_rate"))
    if tick_rate is None or tick_rate <= 0:
        raise RecordError(f"bdev_get_iostat: tick_rate is not a positive number: "
                          f"{shorten(repr(inner.get('tick_rate')), 40)}")
    bdevs = inner.get("bdevs")
    if not isinstance(bdevs, list) or not bdevs:
        raise RecordError("bdev_get_iostat: no bdevs (is the target serving any?)")
    pool = DEFAULT_POOL
    rows = []
    for k, bdev in enumerate(bdevs):
        if not isinstance(bdev, dict) or not isinstance(bdev.get("name"), str) \
                or not bdev["name"].strip():
            raise RecordError(f"bdev_get_iostat: bdevs[{k}] has no name")
        where = f"bdev_get_iostat bdev {bdev['name']!r}"
        target = host_target(ctx, bdev["name"].strip())
        written = _count(bdev, "bytes_written", where)
        ops = _count(bdev, "num_write_ops", where)
        ticks = _count(bdev, "write_latency_ticks", where)
        if written is None or ops is None or ticks is None:
            raise RecordError(f"{where} lacks bytes_written, num_write_ops or "
                              "write_latency_ticks")
        rows += [pool_row(ctx.ts, pool, target, "write_bytes", written),
                 pool_row(ctx.ts, pool, target, "write_ops", ops),
                 pool_row(ctx.ts, pool, target, "write_latency_us_total",
                          ticks_to_us(ticks, tick_rate))]
        longest = _count(bdev, "max_write_latency_ticks", where)
        if longest is not None and ops > 0:
            rows.append(pool_row(ctx.ts, pool, target, "write_latency_peak_ms",
                                 ticks_to_us(longest, tick_rate) / 1000))
        period = _count(bdev, "queue_depth_polling_period", where)
        depth = _count(bdev, "queue_depth", where)
        if period and depth is not None:
            rows.append(pool_row(ctx.ts, pool, target, "queue_depth.disk", depth))
    return {"pool_metrics": rows}


#: The counters of a bdev ``parse_iostat`` reads, in the order of its rows (the first three
#: required; the peak only when there were writes; the depth only when sampled).
_IOSTAT_KEYS = ("bytes_written", "num_write_ops", "write_latency_ticks",
                "max_write_latency_ticks", "queue_depth_polling_period", "queue_depth")
_ABSENT = object()
#: Counters read in bulk: below 2**63.
_LIMIT = 1 << 63


@register_json_bulk(IOSTAT_SOURCE)
def parse_iostat_bulk(env: pl.DataFrame, outputs: list[dict[str, Any]]) -> tuple[
        dict[str, pl.DataFrame], pl.Series]:
    """``parse_iostat`` over many outputs at once (``base.JsonBulkParser``; target: the
    envelope's ``node`` and the bdev). Read: a response (or bare result) whose ``tick_rate``
    is an integer in 1 .. 2**53 and whose bdevs each have a name and their counters as JSON
    numbers it reads as ``_count`` does: an integer (not a boolean) in 0 .. 2**63 - 1 or a
    finite non-negative float (polars' float of such an integer is ``float()``'s). Declined,
    for ``parse_iostat``: an error response, the per-channel form, any other value (a string,
    a boolean, a null, a negative or huge number, a counter missing), no bdevs."""
    declined: list[int] = []
    ids: list[int] = []
    names: list[str] = []
    rates: list[int] = []
    columns: list[list[Any]] = [[] for _ in _IOSTAT_KEYS]
    required = len(_IOSTAT_KEYS[:3])
    for e, node, out in zip(env["__env"].to_list(), env["node"].to_list(), outputs,
                            strict=True):
        inner = out.get("result", out)
        if ("error" in out and "result" not in out) or type(inner) is not dict \
                or "channels" in inner:
            declined.append(e)
            continue
        rate, bdevs = inner.get("tick_rate"), inner.get("bdevs")
        if type(rate) is not int or not 0 < rate < (1 << 53) or type(bdevs) is not list \
                or not bdevs:
            declined.append(e)
            continue
        got: list[tuple[str, list[Any]]] = []
        for bdev in bdevs:
            name = bdev.get("name") if type(bdev) is dict else None
            if type(name) is not str or not name.strip():
                break
            values = [bdev.get(k, _ABSENT) for k in _IOSTAT_KEYS]
            for k, v in enumerate(values):  # _bulk_count, inline: a hot loop
                kind = type(v)
                if kind is int:
                    if 0 <= v < _LIMIT:
                        continue
                elif kind is float:
                    if v >= 0.0 and v != math.inf:
                        continue
                elif v is _ABSENT and k >= required:
                    values[k] = None
                    continue
                break  # (a counter given as null is not absent: parse_iostat says so)
            else:
                got.append((f"{node}/{name.strip()}", values))
                continue
            break
        else:
            for target, values in got:
                ids.append(e)
                names.append(target)
                rates.append(rate)
                for column, v in zip(columns, values, strict=True):
                    column.append(v)
            continue
        declined.append(e)
    if not ids:
        return {}, pl.Series(declined, dtype=pl.Int64)
    frame = pl.DataFrame(
        {"__env": ids, "target": names, "rate": rates,
         **{k: pl.Series(v, dtype=pl.Float64) for k, v in zip(_IOSTAT_KEYS, columns,
                                                               strict=True)}},
        schema_overrides={"__env": pl.Int64, "target": pl.String, "rate": pl.Float64})
    frame = frame.with_columns(  # ticks_to_us: ticks * 1e6 / tick_rate, as Python divides
        (pl.col("write_latency_ticks") * 1e6 / pl.col("rate")).alias("write_latency_us_total"),
        pl.when(pl.col("num_write_ops") > 0).then(
            pl.col("max_write_latency_ticks") * 1e6 / pl.col("rate"))
        .alias("write_latency_peak_ms"),
        pl.when(pl.col("queue_depth_polling_period").fill_null(0.0) != 0.0)
        .then(pl.col("queue_depth")).alias("queue_depth.disk"))
    frame = divided(frame, 1000, "write_latency_peak_ms")
    metrics = ["write_bytes", "write_ops", "write_latency_us_total", "write_latency_peak_ms",
               "queue_depth.disk"]
    wide = frame.select("__env", "target", pl.col("bytes_written").alias("write_bytes"),
                        pl.col("num_write_ops").alias("write_ops"), *metrics[2:])
    rows = row_major(wide, ["__env", "target"], metrics, metrics).with_columns(
        pl.lit(DEFAULT_POOL).alias("pool"))
    return {"pool_metrics": row_targets(rows)}, pl.Series(declined, dtype=pl.Int64)


@register_tool(NVMF_SOURCE, detect_nvmf, needs=())  # (JSON only)
def parse_nvmf_stats(output: Any, ctx: ToolContext) -> dict[str, list[dict[str, Any]]]:
    """``nvmf_get_stats``: recognised, and quarantined with the reason it gives no signal."""
    inner = _result(output, "nvmf_get_stats")
    groups = inner.get("poll_groups")
    n = len(groups) if isinstance(groups, list) else 0
    raise RecordError(
        f"nvmf_get_stats ({n} poll group(s)) is not read: its pending_* fields count the times "
        "a request had to wait (cumulative, not a queue depth) and request_latency covers "
        "reads and writes together; collect bdev_get_iostat (with bdev_set_qd_sampling_period "
        "for queue depth) from the target instead")
