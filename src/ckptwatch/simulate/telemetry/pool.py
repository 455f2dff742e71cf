"""Pool telemetry of a simulated scenario: the long CSV ``ts,pool,target,metric,value``.

Gauges are averaged over the sample interval, ``write_bytes`` is cumulative; GC drops the free
blocks of its targets and metadata incidents raise latency and operations pool-wide.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import polars as pl

from ckptwatch.simulate.cluster import (
    Background,
    Cluster,
    Cumulative,
    Incident,
    WriteLoad,
    grouped,
    overlap,
    tenant_surges,
)
from ckptwatch.simulate.telemetry.sampling import Clocks, gc_dip, iso_seconds, sample_times


def pool_metrics(cluster: Cluster, load: WriteLoad, incidents: Sequence[Incident],
                 bg: Background, t0: float, t1: float, interval: float,
                 rng: np.random.Generator, clocks: Clocks | None = None) -> pl.DataFrame:
    """Long pool telemetry: gc_active, free_blocks_pct, metadata latency/ops, write_bytes.

    Each target's exporter samples on its own phase and stamps with its target's clock
    (``clocks``)."""
    clocks = clocks or Clocks()
    n_t = len(cluster.targets)
    ts = sample_times(rng, n_t, t0, t1, interval)
    ts = clocks.sampled("pool", ts, t0, ts.shape[1] * interval)
    prev = ts - interval
    pool_sel = load.target >= 0
    ckpt_bytes = grouped(load.target[pool_sel], n_t, load.write_start[pool_sel],
                         load.write_end[pool_sel], load.nbytes[pool_sel])
    ops = Cumulative.build(load.open_start[pool_sel], load.close_end[pool_sel],
                           load.meta_ops[pool_sel] / n_t)
    ops_rate = (ops(ts) - ops(prev)) / interval
    other = bg.load_bytes(cluster.target_bw)
    surge = tenant_surges(incidents, n_t)
    base_free = rng.uniform(18.0, 36.0, (n_t, 1)) + rng.normal(0.0, 0.4, ts.shape)
    base_free += 2.0 * np.sin((ts - t0) / rng.uniform(3000, 9000, (n_t, 1)))
    gc_active = np.zeros(ts.shape)
    free = base_free.copy()
    lat = bg.meta_at(ts) * (1.0 + ops_rate / 40_000.0) * rng.lognormal(0.0, 0.08, ts.shape)
    bg_ops = rng.uniform(300.0, 2500.0, (n_t, 1)) * rng.lognormal(0.0, 0.1, ts.shape)
    meta_ops = bg_ops + ops_rate
    for inc in incidents:
        frac = overlap(prev, ts, inc.start, inc.end) / interval
        if inc.cause == "gc" and inc.targets:
            for t in inc.targets:
                gc_active[t] = np.maximum(gc_active[t], frac[t] > 0)
                free[t] = np.minimum(free[t], gc_dip(ts[t], base_free[t], inc))
        elif inc.cause == "metadata":
            spread = rng.uniform(0.75, 1.25, (n_t, 1))
            lat += inc.signal["metadata_latency_extra_ms"] / 1000.0 * spread * frac
            meta_ops *= 1.0 + (inc.signal["metadata_ops_factor"] - 1.0) * spread * frac
    write_bytes = np.stack([ckpt_bytes[t](ts[t]) + other(ts[t]) + surge[t](ts[t])
                            for t in range(n_t)])
    write_bytes += rng.uniform(1e13, 4e14, (n_t, 1))
    metrics = {
        "gc_active": gc_active.astype(np.int64),
        "free_blocks_pct": np.round(np.clip(free, 0.5, 100.0), 1),
        "metadata_latency_ms": np.round(lat * 1000.0, 3),
        "metadata_ops": np.round(meta_ops).astype(np.int64),
        "write_bytes": np.floor(write_bytes).astype(np.int64),
    }
    names = np.array(cluster.targets)
    stamped = np.stack([clocks.stamp(name, ts[t]) for t, name in enumerate(cluster.targets)])
    frames = []
    for order, (metric, values) in enumerate(metrics.items()):
        frames.append(pl.DataFrame({
            "_t": stamped.ravel(), "_o": np.full(ts.size, order),
            "ts": iso_seconds(stamped.ravel()), "pool": np.full(ts.size, cluster.pool),
            "target": np.repeat(names, ts.shape[1]), "metric": np.full(ts.size, metric),
            "value": pl.Series(values.ravel()).cast(pl.Utf8),
        }))
    return pl.concat(frames).sort(["_t", "target", "_o"]).drop(["_t", "_o"])
