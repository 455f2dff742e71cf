"""Fabric counters of a simulated scenario: ``ethtool -S`` / ``perfquery -x`` or canonical CSV.

Pause frames land on the NICs of the nodes in a ``fabric_pause`` incident's scope, integrated over
the part of each sample interval the incident covers; checkpoint writes themselves cause small,
harmless pause bumps. Cumulative counters never go below zero and only fall at a labelled NIC
counter reset, where they restart from about zero.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
import polars as pl

from ckptwatch.simulate.cluster import Cluster, Incident, WriteLoad, grouped, overlap
from ckptwatch.simulate.telemetry.mix import fabric_format, rail_name
from ckptwatch.simulate.telemetry.render import render_node_exporter, render_sysfs_ib_text
from ckptwatch.simulate.telemetry.sampling import (
    Clocks,
    Progress,
    envelope_line,
    iso_seconds,
    sample_times,
)
from ckptwatch.sources.ethtool import render_ethtool_s
from ckptwatch.sources.perfquery import render_perfquery_x

ROCE_COUNTERS = (
    "rx_bytes_phy", "tx_bytes_phy", "rx_discards_phy", "rx_pause_ctrl_phy", "tx_pause_ctrl_phy",
    *(f"{d}_prio{p}_pause" for p in range(8) for d in ("rx", "tx")),
)
#: InfiniBand counters (sysfs names) given to ``render_perfquery_x``; the rest print as 0.
IB_COUNTERS = (
    "port_xmit_data", "port_rcv_data", "port_xmit_packets", "port_rcv_packets",
    "unicast_xmit_packets", "unicast_rcv_packets", "multicast_xmit_packets",
    "multicast_rcv_packets", "port_xmit_wait",
)
#: Counters written in the canonical long form (``--fabric-format canonical``).
CANONICAL = {
    "roce": ("rx_prio3_pause", "tx_prio3_pause", "rx_pause_ctrl_phy", "tx_pause_ctrl_phy",
             "rx_bytes_phy", "tx_bytes_phy", "rx_discards_phy", "np_ecn_marked_roce_packets",
             "np_cnp_sent", "rp_cnp_handled"),
    "ib": ("port_xmit_wait", "port_xmit_data", "port_rcv_data", "port_xmit_packets",
           "port_rcv_packets"),
}


def fabric_counters(cluster: Cluster, load: WriteLoad, incidents: Sequence[Incident],
                    traffic_bps: np.ndarray, resets: Sequence[tuple[int, float]], t0: float,
                    t1: float, interval: float, rng: np.random.Generator,
                    clocks: Clocks | None = None) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """Sample instants (nodes x samples) and cumulative counters by canonical name; ``clocks``
    may move the instants (``Clocks.sampled``)."""
    n = len(cluster.nodes)
    ts = sample_times(rng, n, t0, t1, interval)
    ts = (clocks or Clocks()).sampled("fabric", ts, t0, ts.shape[1] * interval)
    prev = np.concatenate([ts[:, :1] - interval, ts[:, :-1]], axis=1)
    dt = ts - prev
    pool_sel = load.target >= 0
    ckpt = grouped(load.node[pool_sel], n, load.write_start[pool_sel], load.write_end[pool_sel],
                   load.nbytes[pool_sel])
    ckpt_bytes = np.stack([ckpt[i](ts[i]) - ckpt[i](prev[i]) for i in range(n)])
    tx = traffic_bps[:, None] * dt * rng.lognormal(0.0, 0.05, ts.shape) + ckpt_bytes
    rx = traffic_bps[:, None] * dt * rng.lognormal(0.0, 0.05, ts.shape) + 0.02 * ckpt_bytes
    per_gb = rng.uniform(2.0, 30.0, (n, 1)) * ckpt_bytes / 1e9
    rx_pause = rng.lognormal(0.5, 1.0, (n, 1)) * dt + per_gb
    tx_pause = rng.lognormal(-0.8, 1.0, (n, 1)) * dt + 0.2 * per_gb
    ecn = rng.lognormal(1.0, 1.0, (n, 1)) * dt + 3.0 * per_gb
    cnp_handled = rng.lognormal(0.5, 1.0, (n, 1)) * dt + 2.0 * per_gb
    wait = rng.lognormal(9.0, 0.8, (n, 1)) * dt + 2e3 * per_gb
    discards = np.zeros(ts.shape)
    for inc in incidents:
        if inc.cause != "fabric_pause":
            continue
        for node in inc.nodes:
            sec = overlap(prev[node], ts[node], inc.start, inc.end)
            k = float(rng.uniform(0.6, 1.4))
            rx_pause[node] += sec * inc.signal["pause_frames_per_s"] * k
            tx_pause[node] += sec * inc.signal["pause_frames_per_s"] * k * inc.signal["tx_frac"]
            ecn[node] += sec * inc.signal["cnp_per_s"] * k * 1.2
            cnp_handled[node] += sec * inc.signal["cnp_per_s"] * k
            wait[node] += sec * inc.signal["xmit_wait_per_s"] * k
            discards[node] += sec * inc.signal["pause_frames_per_s"] * 1e-3 * k
    deltas = {
        "rx_bytes_phy": np.floor(rx), "tx_bytes_phy": np.floor(tx),
        "rx_packets_phy": np.floor(rx / 3900.0), "tx_packets_phy": np.floor(tx / 3900.0),
        "rx_discards_phy": rng.poisson(discards + 1e-4 * dt).astype(float),
        "rx_prio3_pause": rng.poisson(rx_pause).astype(float),
        "tx_prio3_pause": rng.poisson(tx_pause).astype(float),
        "rx_prio0_pause": rng.poisson(0.01 * dt).astype(float),
        "np_ecn_marked_roce_packets": rng.poisson(ecn).astype(float),
        "rp_cnp_handled": rng.poisson(cnp_handled).astype(float),
        "port_xmit_wait": rng.poisson(wait).astype(float),
    }
    deltas["np_cnp_sent"] = np.floor(deltas["np_ecn_marked_roce_packets"] * 0.9)
    init_scale = rng.uniform(0.2, 1.0, (n, 1)) * 86400.0 * 30
    counters: dict[str, np.ndarray] = {}
    for name, d in deltas.items():
        rate0 = np.median(d / dt, axis=1, keepdims=True)
        counters[name] = np.floor(rate0 * init_scale) + np.cumsum(d, axis=1)
    for node, at in resets:
        _reset(counters, node, at, ts, dt)
    # Derived counters come after the resets: a NIC reset zeroes them together with their parts
    # (an alias reset twice, as tx_pause_ctrl_phy = tx_prio3_pause once was, went negative).
    counters["rx_pause_ctrl_phy"] = counters["rx_prio3_pause"] + counters["rx_prio0_pause"]
    counters["tx_pause_ctrl_phy"] = counters["tx_prio3_pause"].copy()
    counters["port_xmit_data"] = np.floor(counters["tx_bytes_phy"] / 4)
    counters["port_rcv_data"] = np.floor(counters["rx_bytes_phy"] / 4)
    counters["port_xmit_packets"] = counters["tx_packets_phy"]
    counters["port_rcv_packets"] = counters["rx_packets_phy"]
    return ts, counters


def _reset(counters: Mapping[str, np.ndarray], node: int, at: float, ts: np.ndarray,
           dt: np.ndarray) -> None:
    """Restart every cumulative counter of ``node``'s NIC from 0 at time ``at``, in place.

    The first sample after the reset holds only what was counted since ``at`` (the interval's
    increment times the share of the interval after the reset); later samples keep their
    increments. Counters stay non-negative and monotone on either side of the reset.
    """
    j = int(np.searchsorted(ts[node], at))
    if not 0 < j < ts.shape[1]:
        return
    after = (ts[node, j] - at) / dt[node, j]
    for values in {id(v): v for v in counters.values()}.values():  # an alias only once
        step = values[node, j] - values[node, j - 1]
        values[node, j:] -= values[node, j - 1] + np.floor(step * (1.0 - after))


def _node_samples(cluster: Cluster, node: int, lid: int, ts: np.ndarray,
                  counters: Mapping[str, np.ndarray], clocks: Clocks) -> list[str]:
    """One node's envelope lines: ``ethtool -S`` (RoCE) or ``perfquery -x`` (IB), stamped
    with the node's clock."""
    iso = iso_seconds(clocks.stamp(cluster.nodes[node], ts[node]))
    if cluster.fabric[node] == "roce":
        rows = np.stack(list(_roce_values(counters, node).values()), axis=1).tolist()
        return [envelope_line(cluster.nodes[node], cluster.nic[node], str(iso[i]), "ethtool",
                          render_ethtool_s("mlx5_core", dict(zip(ROCE_COUNTERS, row, strict=True)),
                                           only_given=True))
                for i, row in enumerate(rows)]
    rows = np.stack(list(_ib_values(counters, node).values()), axis=1).tolist()
    return [envelope_line(cluster.nodes[node], cluster.nic[node], str(iso[i]), "perfquery",
                      render_perfquery_x(lid, int(cluster.port),
                                         dict(zip(IB_COUNTERS, row, strict=True))),
                      port=cluster.port)
            for i, row in enumerate(rows)]


def _ib_values(counters: Mapping[str, np.ndarray], node: int) -> dict[str, np.ndarray]:
    """One IB node's ``IB_COUNTERS`` (sysfs names), the uni/multicast split derived."""
    own = {name: values[node].astype(np.int64) for name, values in counters.items()}
    for d in ("xmit", "rcv"):
        own[f"multicast_{d}_packets"] = own[f"port_{d}_packets"] // 4096
        own[f"unicast_{d}_packets"] = own[f"port_{d}_packets"] - own[f"multicast_{d}_packets"]
    return {name: own[name] for name in IB_COUNTERS}


def _roce_values(counters: Mapping[str, np.ndarray], node: int) -> dict[str, np.ndarray]:
    """One RoCE node's ``ROCE_COUNTERS`` (mlx5 names; the ones not modelled 0)."""
    zero = np.zeros(next(iter(counters.values())).shape[1], dtype=np.int64)
    return {c: counters[c][node].astype(np.int64) if c in counters else zero
            for c in ROCE_COUNTERS}


def _rails(cluster: Cluster, node: int, counters: Mapping[str, np.ndarray], nics: int,
           rng: np.random.Generator) -> list[tuple[str, dict[str, np.ndarray]]]:
    """(device, counters) of each of the node's ``nics`` NICs: the modelled one, and rails
    carrying its series scaled by a factor of their own (0.85-1.15; monotone and reset where it
    is, so every incident and reset of the node shows on every rail)."""
    kind = cluster.fabric[node]
    base = (_roce_values if kind == "roce" else _ib_values)(counters, node)
    out = [(cluster.nic[node], base)]
    for rail in range(1, nics):
        k = float(rng.uniform(0.85, 1.15))
        out.append((rail_name(cluster.nic[node], kind, rail),
                    {c: np.floor(v * k).astype(np.int64) for c, v in base.items()}))
    return out


def _mixed_samples(cluster: Cluster, node: int, fmt: str, lid: int, ts: np.ndarray,
                   rails: list[tuple[str, dict[str, np.ndarray]]], clocks: Clocks,
                   lags: Sequence[float] = ()) -> list[str]:
    """One node's envelope lines in format ``fmt`` (``telemetry.mix``), in time order; per-NIC
    formats (ethtool, perfquery) write one envelope per NIC and sample, whole-node outputs
    (sysfs, a node_exporter scrape) one per sample. ``lags``: seconds after the sample instant
    each NIC's own command reads it (tools apart; the values are the instant's, the counters
    moving little in a few seconds)."""
    host, port = cluster.nodes[node], cluster.port
    at = clocks.stamp(host, ts[node])
    iso = iso_seconds(at)
    rail_iso = [iso_seconds(at + lag) if lag else iso for lag in lags] or [iso] * len(rails)
    names = list(rails[0][1])
    table = [(dev, np.stack([vals[c] for c in names], axis=1).tolist()) for dev, vals in rails]
    lines: list[str] = []
    for i in range(ts.shape[1]):
        at_i = str(iso[i])
        per = [(dev, dict(zip(names, rows[i], strict=True))) for dev, rows in table]
        if fmt == "ethtool":
            lines += [envelope_line(host, dev, str(rail_iso[r][i]), "ethtool",
                                    render_ethtool_s("mlx5_core", c, only_given=True))
                      for r, (dev, c) in enumerate(per)]
        elif fmt == "perfquery":
            lines += [envelope_line(host, dev, str(rail_iso[r][i]), "perfquery",
                                    render_perfquery_x(lid + r, int(port), c), port=port)
                      for r, (dev, c) in enumerate(per)]
        elif fmt == "sysfs-ib":
            lines.append(envelope_line(host, None, at_i, "sysfs-ib", render_sysfs_ib_text(
                [(dev, port, c) for dev, c in per])))
        elif cluster.fabric[node] == "roce":
            lines.append(envelope_line(host, None, at_i, "prometheus",
                                       render_node_exporter(ethtool=per)))
        else:
            lines.append(envelope_line(host, None, at_i, "prometheus", render_node_exporter(
                infiniband=[(dev, port, c) for dev, c in per])))
    return lines


def write_fabric(fabric_dir: Path, cluster: Cluster, ts: np.ndarray,
                 counters: Mapping[str, np.ndarray], fmt: str, rng: np.random.Generator,
                 progress: Progress | None = None, *, mix: str = "default", nics: int = 1,
                 mix_rng: np.random.Generator | None = None,
                 clocks: Clocks | None = None) -> dict[Path, int]:
    """Fabric files: per-node envelopes (``raw``) or ``counters.csv`` (``canonical``).

    ``mix`` (``telemetry.mix``) and ``nics`` (NICs per node) choose the raw envelopes' formats;
    ``mix_rng`` draws what only they need (the rails' factors). ``clocks``: each node stamps
    with its own clock; with tools apart, a node's NICs are read in turn (the n-th rail 1-3 s
    after the one before). Returns the lines (rows) written per file.
    """
    clocks = clocks or Clocks()
    fabric_dir.mkdir(parents=True, exist_ok=True)
    n = len(cluster.nodes)
    if fmt == "canonical":
        frames = []
        for kind, names in CANONICAL.items():
            idx = np.array([i for i in range(n) if cluster.fabric[i] == kind], dtype=np.int64)
            if idx.size == 0:
                continue
            at = np.stack([clocks.stamp(cluster.nodes[i], ts[i]) for i in idx])
            for order, name in enumerate(names):
                frames.append(pl.DataFrame({
                    "_t": at.ravel(), "_o": np.full(ts[idx].size, order),
                    "ts": iso_seconds(at.ravel()),
                    "node": np.repeat(np.array(cluster.nodes)[idx], ts.shape[1]),
                    "device": np.repeat(np.array(cluster.nic)[idx], ts.shape[1]),
                    "port": np.full(ts[idx].size, cluster.port),
                    "counter": np.full(ts[idx].size, name),
                    "value": counters[name][idx].ravel().astype(np.int64),
                }))
        df = pl.concat(frames).sort(["_t", "node", "_o"]).drop(["_t", "_o"])
        path = fabric_dir / "counters.csv"
        df.write_csv(path)
        return {path: df.height}
    lids = rng.permutation(np.arange(100, 100 + 4 * n))[:n]
    files = {}
    plain = mix == "default" and nics == 1
    extra = mix_rng or np.random.Generator(np.random.PCG64(0))
    nth = {"roce": 0, "ib": 0}
    for node in range(n):
        if plain:
            lines = _node_samples(cluster, node, int(lids[node]), ts, counters, clocks)
        else:
            kind = cluster.fabric[node]
            node_fmt = fabric_format(mix, kind, nth[kind])
            nth[kind] += 1
            lags = (np.cumsum(np.concatenate([[0.0], clocks.draws().uniform(1.0, 3.0, nics - 1)]))
                    if clocks.apart else ())
            lines = _mixed_samples(cluster, node, node_fmt, 8 * int(lids[node]), ts,
                                   _rails(cluster, node, counters, nics, extra), clocks,
                                   list(lags))
        path = fabric_dir / f"{cluster.nodes[node]}.jsonl"
        path.write_text("\n".join(lines) + "\n", encoding="utf-8")
        files[path] = len(lines)
        if progress and node % 64 == 63:
            progress(f"fabric: {node + 1}/{n} nodes")
    return files
