"""What a simulated pool does, read at the instants each tool samples it.

The storage systems' renderers (``pool_lustre``, ``pool_daos``, ``pool_spdk``, ``pool_gpfs``)
print the same physics in their own words; this module is that physics:

* **Writes per target**: the bytes the checkpoints and the other tenants write
  (``ckptwatch.simulate.cluster.Background``), in I/Os of the system's size (``IO_BYTES``:
  Lustre 4 MiB bulk RPCs, DAOS 1 MiB DFS chunks, SPDK 128 KiB NVMe-oF commands, GPFS 4 MiB
  NSD I/Os). Each I/O's latency over an interval: the target's own (``LATENCY_MS``: one draw
  for the pool, each target within 10 % of it: a pool's targets are alike) x its noise
  (log-normal, sigma 0.1) x (1 + 0.3 x its utilisation) x the GC factor.
* **GC** on a target takes a share b of its drives' bandwidth (the relocation rate of the
  incident over a drive's bandwidth, at most 0.9, as SMART's busy time is built): its host
  writes then take 1 / (1 - b) as long, pro rata of the interval the GC covers. A stall's GC
  slows its writes by about its slowdown; weak GC (``signal_strength`` weak) by little.
* **Metadata, pool-wide** (the metadata service: a Lustre MDT): the checkpoints' file
  operations (3 per file: create, open, close) and the other tenants' (300-2500/s per target,
  as the long CSV's), each operation kind with its own share of the mean latency
  (``META_KINDS``); the latency is the long CSV's model (the background latency x (1 + the
  rate per target / 40 000) x noise, plus a metadata incident's extra latency, pro rata of the
  interval), its operations storm multiplies the operations as it does there.

Counters are cumulative since their statistics started (before the day: drawn) and restart at
0 where the statistics are cleared (``Counters``).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numpy as np

from ckptwatch.simulate.cluster import (
    GB,
    Background,
    Cluster,
    Cumulative,
    Incident,
    WriteLoad,
    grouped,
    overlap,
    tenant_surges,
)
from ckptwatch.simulate.telemetry.pool_layout import PoolLayout
from ckptwatch.simulate.telemetry.sampling import Clocks, sample_times

MIB = 1024 * 1024
#: Bytes per write I/O of each system.
IO_BYTES = {"lustre": 4 * MIB, "daos": 1 * MIB, "spdk": 128 * 1024, "gpfs": 4 * MIB}
#: Range of a target's mean write latency per I/O when idle, ms.
LATENCY_MS = {"lustre": (2.0, 6.0), "daos": (1.1, 1.8), "spdk": (0.08, 0.25),
              "gpfs": (4.0, 12.0)}
#: Metadata operation kinds: (share of the tenants' operations, share of the checkpoints',
#: latency relative to the mean).
META_KINDS: dict[str, tuple[float, float, float]] = {
    "open": (0.15, 1 / 3, 1.4), "close": (0.15, 1 / 3, 0.6), "mknod": (0.05, 1 / 3, 1.8),
    "getattr": (0.45, 0.0, 0.5), "setattr": (0.05, 0.0, 1.0), "statfs": (0.15, 0.0, 0.2),
}


@dataclass(frozen=True)
class Counters:
    """Cumulative counters of one target at the sample instants ``ts`` (since the statistics
    started; 0 again after a clear): bytes, I/Os, the I/Os' summed latency (µs), the peak
    latency (ms, since the statistics started) and the mean latency of each interval (ms, of
    the interval that ends at each instant; 0 where it had no I/O)."""

    ts: np.ndarray
    bytes: np.ndarray
    ops: np.ndarray
    latency_us: np.ndarray
    peak_ms: np.ndarray
    mean_ms: np.ndarray
    #: I/Os per second over the interval that ends at each instant
    rate: np.ndarray
    #: when the statistics started, per instant (a clear moves it)
    started: np.ndarray


@dataclass(frozen=True)
class Metadata:
    """The metadata service's counters at ``ts``: per operation kind, operations and their
    summed latency (µs), cumulative since the statistics started; and the mean latency of each
    interval (ms, over every kind)."""

    ts: np.ndarray
    ops: dict[str, np.ndarray]
    latency_us: dict[str, np.ndarray]
    mean_ms: np.ndarray
    #: the highest interval mean since the statistics started (ms)
    peak_ms: np.ndarray
    rate: np.ndarray
    started: np.ndarray


def _with(ts: np.ndarray, at: float | None) -> tuple[np.ndarray, int | None]:
    """``ts`` with the instant ``at`` inserted (sorted), and the index it got (None: none)."""
    if at is None:
        return ts, None
    k = int(np.searchsorted(ts, at))
    return np.insert(ts, k, at), k


def _restart(values: np.ndarray, k: int | None, keep: np.ndarray | None = None) -> np.ndarray:
    """Cumulative ``values`` on a grid with the clear at index ``k``: from there on counted
    from the value at the clear (``keep``: the base before the day, added before it)."""
    out = values.copy()
    if keep is not None:
        out = out + (keep if k is None else np.where(np.arange(out.size) < k, keep, 0.0))
    if k is not None:
        out[k:] = values[k:] - values[k]
    return out


class PoolModel:
    """The pool's writes, GC and metadata (see the module doc), for format ``fmt``."""

    def __init__(self, fmt: str, cluster: Cluster, load: WriteLoad,
                 incidents: Sequence[Incident], bg: Background, t0: float,
                 rng: np.random.Generator) -> None:
        self.fmt, self.cluster, self.load, self.bg, self.t0 = fmt, cluster, load, bg, t0
        n_t = len(cluster.targets)
        sel = load.target >= 0
        self.ckpt = grouped(load.target[sel], n_t, load.write_start[sel], load.write_end[sel],
                            load.nbytes[sel])
        self.other = bg.load_bytes(cluster.target_bw)
        self.other0 = float(self.other(np.array([t0]))[0])
        self.surge = tenant_surges(incidents, n_t)
        self.saturated = [inc for inc in incidents if inc.cause == "saturation"]
        self.io = IO_BYTES[fmt]
        lo, hi = LATENCY_MS[fmt]
        # A pool's targets are alike: one latency for the pool, each target within 10 % of it.
        self.lat_ms = float(rng.uniform(lo, hi)) * rng.uniform(0.9, 1.1, n_t)
        self.base_bytes = rng.uniform(2e12, 6e13, n_t)
        self.started = t0 - rng.uniform(2, 40, n_t) * 86400.0
        self.drive_bw = cluster.target_bw / cluster.drives_per_target
        self.gc: dict[int, list[Incident]] = {}
        for inc in incidents:
            if inc.cause == "gc":
                for t in inc.targets:
                    self.gc.setdefault(t, []).append(inc)
        self.meta_inc = [inc for inc in incidents if inc.cause == "metadata"]
        self.meta_ckpt = Cumulative.build(load.open_start[sel], load.close_end[sel],
                                          load.meta_ops[sel])
        self.meta_bg = float(rng.uniform(300.0, 2500.0, n_t).sum())
        self.meta_started = t0 - float(rng.uniform(2, 40)) * 86400.0
        self.rng = rng

    # ------------------------------------------------------------------ writes

    def written(self, t: int, ts: np.ndarray) -> np.ndarray:
        """Bytes written to target ``t`` from the day's start to ``ts``."""
        return self.ckpt[t](ts) + self.other(ts) - self.other0 + self.surge[t](ts)

    def gc_share(self, t: int, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        """The share of each interval (a, b] during which target ``t`` runs GC (0..1)."""
        span = np.maximum(b - a, 1e-9)
        share = np.zeros(a.shape)
        for inc in self.gc.get(t, []):
            share += overlap(a, b, inc.start, inc.end) / span
        return np.clip(share, 0.0, 1.0)

    def gc_factor(self, t: int, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        """How much longer each write takes over (a, b] for the GC on target ``t``."""
        span = np.maximum(b - a, 1e-9)
        factor = np.ones(a.shape)
        for inc in self.gc.get(t, []):
            taken = min(0.9, inc.signal.get("relocation_gbs", 0.0) * GB / self.drive_bw)
            factor += (1.0 / (1.0 - taken) - 1.0) * overlap(a, b, inc.start, inc.end) / span
        return factor

    def saturation_factor(self, t: int, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        """How much longer each write to target ``t`` takes over (a, b] while the pool is
        saturated: demand over capacity (an I/O waits behind the others in the queues),
        pro rata of the interval the burst covers."""
        span = np.maximum(b - a, 1e-9)
        factor = np.ones(a.shape)
        for inc in self.saturated:
            if t in inc.targets:
                factor += (inc.slowdown - 1.0) * overlap(a, b, inc.start, inc.end) / span
        return factor

    def writes(self, t: int, ts: np.ndarray, clear_at: float | None = None) -> Counters:
        """Target ``t``'s write counters at the sorted instants ``ts`` (statistics cleared at
        ``clear_at``, when given)."""
        grid, k = _with(ts, clear_at)
        prev = np.concatenate([[grid[0] - 30.0], grid[:-1]])
        written = self.written(t, grid)
        ops = np.floor((written + self.base_bytes[t]) / self.io)
        d_ops = np.diff(ops, prepend=np.floor((self.written(t, prev[:1]) + self.base_bytes[t])
                                              / self.io))
        span = np.maximum(grid - prev, 1e-9)
        util = np.clip(np.diff(written, prepend=self.written(t, prev[:1])) / span
                       / self.cluster.target_bw, 0.0, 1.0)
        mean = (self.lat_ms[t] * self.rng.lognormal(0.0, 0.1, grid.shape) * (1.0 + 0.3 * util)
                * self.gc_factor(t, prev, grid) * self.saturation_factor(t, prev, grid))
        mean = np.where(d_ops > 0, mean, 0.0)
        tail = self.rng.lognormal(np.log(3.0), 0.3, grid.shape)
        base_ops = np.floor(self.base_bytes[t] / self.io)
        base_us = base_ops * self.lat_ms[t] * 1000.0 * float(self.rng.uniform(0.9, 1.1))
        lat_us = np.cumsum(d_ops * mean * 1000.0)
        peak0 = self.lat_ms[t] * float(self.rng.uniform(4.0, 8.0))
        peaks = np.maximum.accumulate(np.maximum(mean * tail, peak0))
        started = np.full(grid.shape, self.started[t])
        if k is not None:
            peaks[k:] = np.maximum.accumulate(np.where(np.arange(grid.size) >= k, mean * tail,
                                                       0.0))[k:]
            started[k:] = grid[k]
        counters = Counters(grid, _restart(written, k, self.base_bytes[t]),
                            _restart(ops - base_ops, k, base_ops), _restart(lat_us, k, base_us),
                            peaks, mean, d_ops / span, started)
        return _drop(counters, k)

    # ------------------------------------------------------------------ metadata

    def metadata(self, ts: np.ndarray, clear_at: float | None = None) -> Metadata:
        """The metadata service's counters at the sorted instants ``ts``."""
        grid, k = _with(ts, clear_at)
        prev = np.concatenate([[grid[0] - 30.0], grid[:-1]])
        span = np.maximum(grid - prev, 1e-9)
        ckpt = np.diff(self.meta_ckpt(grid), prepend=self.meta_ckpt(prev[:1]))
        tenants = self.meta_bg * span * self.rng.lognormal(0.0, 0.1, grid.shape)
        storm = np.ones(grid.shape)
        extra_s = np.zeros(grid.shape)
        for inc in self.meta_inc:
            frac = overlap(prev, grid, inc.start, inc.end) / span
            storm *= 1.0 + (inc.signal["metadata_ops_factor"] - 1.0) * frac
            extra_s += inc.signal["metadata_latency_extra_ms"] / 1000.0 * frac
        rate = (ckpt + tenants) * storm / span
        n_t = len(self.cluster.targets)
        base_s = (self.bg.meta_at((prev + grid) / 2) * (1.0 + rate / n_t / 40_000.0)
                  * self.rng.lognormal(0.0, 0.08, grid.shape))
        ops: dict[str, np.ndarray] = {}
        lat: dict[str, np.ndarray] = {}
        total_ops = np.zeros(grid.shape)
        total_us = np.zeros(grid.shape)
        for kind, (tenant_share, ckpt_share, factor) in META_KINDS.items():
            n = (tenants * tenant_share + ckpt * ckpt_share) * storm
            us = n * (base_s * factor + extra_s) * 1e6
            base_n = float(self.rng.uniform(1e5, 1e7)) * tenant_share
            ops[kind] = _restart(np.floor(np.cumsum(n)), k, np.floor(base_n))
            lat[kind] = _restart(np.floor(np.cumsum(us)), k,
                                 np.floor(base_n * float(base_s[0]) * factor * 1e6))
            total_ops += n
            total_us += us
        started = np.full(grid.shape, self.meta_started)
        mean = total_us / np.maximum(total_ops, 1e-9) / 1000.0
        peak = np.maximum.accumulate(np.maximum(mean, float(base_s[0]) * 1000.0
                                                * float(self.rng.uniform(3.0, 6.0))))
        if k is not None:
            started[k:] = grid[k]
            peak[k:] = np.maximum.accumulate(mean[k:])
        keep = np.arange(grid.size) != k if k is not None else np.ones(grid.size, bool)
        return Metadata(grid[keep], {o: v[keep] for o, v in ops.items()},
                        {o: v[keep] for o, v in lat.items()}, mean[keep], peak[keep],
                        rate[keep], started[keep])


def _drop(c: Counters, k: int | None) -> Counters:
    """``c`` without the instant inserted for the clear."""
    if k is None:
        return c
    keep = np.arange(c.ts.size) != k
    return Counters(*(getattr(c, f)[keep] for f in (
        "ts", "bytes", "ops", "latency_us", "peak_ms", "mean_ms", "rate", "started")))


def server_samples(layout: PoolLayout, model: PoolModel, clocks: Clocks,
                   rng: np.random.Generator, t0: float, t1: float,
                   every: float) -> Iterator[tuple[int, str, list[int], np.ndarray,
                                                   list[Counters]]]:
    """Each data server of ``layout``: its index, name, the targets it serves, its sample
    instants (every ``every`` s on its own clock) and each target's write counters there (the
    statistics cleared on the one server the layout clears)."""
    clear = layout.clear
    for s, server in enumerate(layout.servers):
        targets = layout.served_by(s)
        ts = clocks.sampled("pool", sample_times(rng, 1, t0, t1, every)[0], t0, t1 - t0)
        cleared = clear.at if clear is not None and clear.server == s else None
        yield s, server, targets, ts, [model.writes(t, ts, cleared) for t in targets]
