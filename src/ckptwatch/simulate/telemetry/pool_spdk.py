"""A simulated SPDK NVMe-oF pool as ``bdev_get_iostat`` reports it, on each target host.

Each target host answers ``bdev_get_iostat`` every half pool interval (15 s at the default
30 s); the response carries no time, so it arrives as JSON Lines envelopes
(``pool/<host>/bdev_get_iostat.jsonl``: node, ``collected_at``, the JSON-RPC response as
``output``, no ``source``: the reader recognises the content), as ``ckptwatch collect``
writes it. The response is laid out as the genuine sample
(``tests/fixtures/real/pool_telemetry/spdk/bdev_get_iostat_example_response.json``):
``jsonrpc``, ``id``, ``result`` with ``tick_rate`` and per bdev ``name``, ``bytes_read``,
``num_read_ops``, ``bytes_written``, ``num_write_ops``, ``bytes_unmapped``, ``num_unmap_ops``,
``read/write/unmap_latency_ticks``, ``queue_depth_polling_period``, ``queue_depth`` (sampled:
the I/Os outstanding), ``io_time`` and ``weighted_io_time`` (ms). Counters are cumulative
since the bdev was opened; a stats clear (``bdev_reset_iostat`` on one host) restarts them.

SPDK has no metadata and no background-work signal: GC shows as slower writes and in the
drives' SMART (under the bdev's target name).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from ckptwatch.simulate.telemetry.pool_layout import PoolLayout
from ckptwatch.simulate.telemetry.pool_model import Counters, PoolModel, server_samples
from ckptwatch.simulate.telemetry.sampling import Clocks, envelope_line, iso_seconds

CADENCE_X = 0.5
TICK_RATE = 2_200_000_000
#: The queue-depth sampling period the hosts were given (bdev_set_qd_sampling_period).
QD_PERIOD = 10
#: Reads of the other tenants, bytes per second per bdev; their latency, µs.
READ_BPS = 40e6
READ_US = 90.0


def _restarted(values: np.ndarray, started: np.ndarray) -> np.ndarray:
    """A running sum restarted where ``started`` changes (a clear)."""
    out = np.cumsum(values)
    for k in np.nonzero(np.diff(started))[0] + 1:
        out[k:] -= out[k - 1]
    return out


def _bdev(name: str, c: Counters, i: int, depth: int, reads: float, io_ms: float,
          weighted_ms: float) -> dict[str, Any]:
    read_ops = int(reads // 131_072)
    return {
        "name": name, "bytes_read": int(reads), "num_read_ops": read_ops,
        "bytes_written": int(c.bytes[i]), "num_write_ops": int(c.ops[i]),
        "bytes_unmapped": 0, "num_unmap_ops": 0,
        "read_latency_ticks": int(read_ops * READ_US * TICK_RATE / 1e6),
        "write_latency_ticks": int(c.latency_us[i] * TICK_RATE / 1e6),
        "unmap_latency_ticks": 0, "queue_depth_polling_period": QD_PERIOD,
        "queue_depth": depth, "io_time": int(io_ms), "weighted_io_time": int(weighted_ms),
    }


def write_spdk(pool_dir: Path, layout: PoolLayout, model: PoolModel, clocks: Clocks,
               rng: np.random.Generator, t0: float, t1: float,
               interval: float) -> dict[Path, int]:
    """Every target host's ``bdev_get_iostat`` envelopes, one file per host."""
    every = max(5.0, CADENCE_X * interval)
    files: dict[Path, int] = {}
    for _, server, targets, ts, counters in server_samples(layout, model, clocks, rng, t0, t1,
                                                              every):
        span = np.diff(ts, prepend=ts[0] - every) * 1000.0
        busy = []
        for c in counters:
            in_flight = c.rate * c.mean_ms / 1000.0
            first = (c.started[0] < t0) * (t0 - c.started[0]) * 1000.0
            busy.append((_restarted((1.0 - np.exp(-in_flight)) * span, c.started)
                         + np.where(c.started < t0, 0.02 * first, 0.0),
                         _restarted(in_flight * span, c.started)
                         + np.where(c.started < t0, 0.03 * first, 0.0),
                         rng.poisson(in_flight),
                         READ_BPS * (ts - c.started) * rng.uniform(0.5, 1.5)))
        iso = iso_seconds(clocks.stamp(layout.targets[targets[0]], ts))
        lines = []
        for i in range(ts.size):
            bdevs = [_bdev(layout.local[t], c, i, int(depth[i]), float(reads[i]), io[i],
                           weighted[i])
                     for t, c, (io, weighted, depth, reads) in zip(targets, counters, busy,
                                                                   strict=True)]
            response = {"jsonrpc": "2.0", "id": 1,
                        "result": {"tick_rate": TICK_RATE, "bdevs": bdevs}}
            lines.append(envelope_line(server, None, str(iso[i]), None, response))
        path = pool_dir / server / "bdev_get_iostat.jsonl"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
        files[path] = len(lines)
    return files
