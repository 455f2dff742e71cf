"""Telemetry of a simulated scenario: pool metrics, NVMe SMART (smartctl + OCP) and fabric counters.

The scenario model (``ckptwatch.simulate.scenario``) decides the cluster, the rank writes and
the incidents;
this module turns them into the signals real collectors record, in their raw formats:

- pool: long CSV ``ts,pool,target,metric,value`` (gauges averaged over the sample interval,
  ``write_bytes`` cumulative);
- SMART: JSON Lines envelopes per host with ``smartctl -j -a`` documents and nvme-cli
  ``ocp smart-add-log -o json`` documents (cumulative counters, 1 data unit = 512,000 bytes,
  OCP physical media units in bytes);
- fabric: JSON Lines envelopes per node with raw ``ethtool -S`` (RoCE) or ``perfquery -x``
  (InfiniBand) text, or the canonical long CSV ``ts,node,device,port,counter,value``.

Physics kept on purpose: GC multiplies media writes over host writes and keeps the controller busy
even with no host I/O (busy time never outruns the clock); pause frames land on the NICs of the
nodes in the incident's scope, integrated over the part of each sample interval the incident
covers, so a short checkpoint inside a long interval still sees them; checkpoint writes themselves
cause small, harmless pause and metadata bumps. Cumulative counters never go below zero and only
fall at a labelled NIC counter reset, where they restart from about zero.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import polars as pl

from ckptwatch.sources.ethtool import render_ethtool_s
from ckptwatch.sources.nvme_cli import render_ocp_smart_json
from ckptwatch.sources.perfquery import render_perfquery_x
from ckptwatch.sources.smartctl import HEALTH_LOG_METRICS, render_smartctl_json

DATA_UNIT_BYTES = 512_000
Progress = Callable[[str], None]


@dataclass(frozen=True)
class Cluster:
    """The physical cluster: nodes under leaf switches, their NICs and drives, the pool."""

    nodes: tuple[str, ...]
    leaf: np.ndarray  # leaf index per node
    leaves: tuple[str, ...]
    fabric: tuple[str, ...]  # "roce" | "ib" per node
    nic: tuple[str, ...]
    port: str
    pool: str
    targets: tuple[str, ...]
    target_bw: float  # bytes/s per pool target
    nic_bw: float  # bytes/s per node NIC
    drives_per_node: int
    drives_per_target: int
    local_drive_bw: np.ndarray  # bytes/s per local drive, node-major

    @property
    def n_local_drives(self) -> int:
        """Number of node-local drives (they come first in the drive numbering)."""
        return len(self.nodes) * self.drives_per_node

    @property
    def n_drives(self) -> int:
        """Number of drives: node-local ones, then the pool targets' ones."""
        return self.n_local_drives + len(self.targets) * self.drives_per_target

    def drive_name(self, drive: int) -> tuple[str, str]:
        """(host, device) of a drive; a pool target's drives sit under host = target name."""
        if drive < self.n_local_drives:
            return self.nodes[drive // self.drives_per_node], f"nvme{drive % self.drives_per_node}"
        rel = drive - self.n_local_drives
        return self.targets[rel // self.drives_per_target], f"nvme{rel % self.drives_per_target}"

    def target_drives(self, target: int) -> list[int]:
        """Drive indices behind a pool target."""
        first = self.n_local_drives + target * self.drives_per_target
        return list(range(first, first + self.drives_per_target))


@dataclass(frozen=True)
class Incident:
    """An injected episode: cause, scope, window and the magnitudes of its signals."""

    id: str
    cause: str  # gc | metadata | fabric_pause | unknown
    kind: str  # stall | confounder
    variant: str
    job_id: str | None
    start: float
    end: float
    nodes: tuple[int, ...] = ()
    leaf: int | None = None
    targets: tuple[int, ...] = ()
    drives: tuple[int, ...] = ()
    ranks: tuple[int, ...] = ()
    slowdown: float = 1.0
    signal: dict[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class WriteLoad:
    """Every rank write of the scenario, flattened: one entry per rank per checkpoint."""

    node: np.ndarray
    drive: np.ndarray  # local drive index, -1 for pool-tier writes
    target: np.ndarray  # pool target index, -1 for local-tier writes
    open_start: np.ndarray
    write_start: np.ndarray
    write_end: np.ndarray
    close_end: np.ndarray
    nbytes: np.ndarray
    meta_ops: np.ndarray  # pool metadata operations (create/open/close) of the record


@dataclass(frozen=True)
class Background:
    """Slowly varying pool-wide background: other tenants' load and metadata latency."""

    grid: np.ndarray
    load_frac: np.ndarray  # fraction of pool bandwidth used by other tenants
    meta_latency_s: np.ndarray  # baseline metadata latency per operation

    @staticmethod
    def build(rng: np.random.Generator, t0: float, t1: float) -> Background:
        """An AR(1) walk on a 60 s grid covering [t0 - 1 h, t1 + 1 h]."""
        grid = np.arange(t0 - 3600.0, t1 + 3660.0, 60.0)
        z = np.zeros((2, grid.size))
        eps = rng.normal(0.0, 1.0, (2, grid.size))
        for i in range(1, grid.size):
            z[:, i] = 0.97 * z[:, i - 1] + 0.24 * eps[:, i]
        load = np.clip(0.06 + 0.03 * z[0], 0.01, 0.15)
        lat = float(rng.uniform(0.6e-3, 1.6e-3)) * np.exp(np.clip(0.15 * z[1], -0.4, 0.4))
        return Background(grid=grid, load_frac=load, meta_latency_s=lat)

    def load_at(self, t: np.ndarray) -> np.ndarray:
        """Other tenants' share of pool bandwidth at times ``t``."""
        return np.interp(t, self.grid, self.load_frac)

    def meta_at(self, t: np.ndarray) -> np.ndarray:
        """Baseline metadata latency (seconds per operation) at times ``t``."""
        return np.interp(t, self.grid, self.meta_latency_s)

    def load_bytes(self, bw: float) -> Cumulative:
        """Cumulative bytes the other tenants write through ``bw`` bytes/s of pool bandwidth."""
        return Cumulative.build(self.grid[:-1], self.grid[1:], self.load_frac[:-1] * bw * 60.0)


@dataclass(frozen=True)
class Cumulative:
    """Piecewise-linear cumulative sum of amounts spread uniformly over their windows."""

    edges: np.ndarray
    slope: np.ndarray
    value: np.ndarray

    @staticmethod
    def build(starts: np.ndarray, ends: np.ndarray, amounts: np.ndarray) -> Cumulative:
        """Cumulative of ``amounts[i]`` spread over ``[starts[i], ends[i]]``."""
        if starts.size == 0:
            return Cumulative(np.zeros(1), np.zeros(1), np.zeros(1))
        dur = np.maximum(ends - starts, 1e-6)
        rate = amounts / dur
        edges = np.concatenate([starts, starts + dur])
        order = np.argsort(edges, kind="stable")
        edges = edges[order]
        slope = np.maximum(np.cumsum(np.concatenate([rate, -rate])[order]), 0.0)
        value = np.concatenate([[0.0], np.cumsum(slope[:-1] * np.diff(edges))])
        return Cumulative(edges, slope, value)

    def __call__(self, at: np.ndarray) -> np.ndarray:
        idx = np.searchsorted(self.edges, at, side="right") - 1
        ok = idx >= 0
        idx = np.clip(idx, 0, None)
        out = np.where(ok, self.value[idx] + self.slope[idx] * (at - self.edges[idx]), 0.0)
        return np.maximum.accumulate(out, axis=-1) if out.ndim else out


def grouped(group: np.ndarray, n_groups: int, starts: np.ndarray, ends: np.ndarray,
            amounts: np.ndarray) -> list[Cumulative]:
    """One ``Cumulative`` per group index in ``range(n_groups)``."""
    order = np.argsort(group, kind="stable")
    bounds = np.searchsorted(group[order], np.arange(n_groups + 1))
    out = []
    for g in range(n_groups):
        sel = order[bounds[g]:bounds[g + 1]]
        out.append(Cumulative.build(starts[sel], ends[sel], amounts[sel]))
    return out


def overlap(a0: np.ndarray, a1: np.ndarray, s: float, e: float) -> np.ndarray:
    """Seconds of each interval ``[a0, a1]`` that fall inside ``[s, e]``."""
    return np.clip(np.minimum(a1, e) - np.maximum(a0, s), 0.0, None)


def iso_seconds(ts: np.ndarray) -> np.ndarray:
    """ISO-8601 UTC strings (``2026-11-28T00:00:05Z``) for epoch seconds."""
    secs = np.floor(ts).astype("int64").astype("datetime64[s]")
    return np.char.add(np.datetime_as_string(secs, unit="s"), "Z")


def sample_times(rng: np.random.Generator, n: int, t0: float, t1: float, interval: float,
                 jitter: float = 1.0, first: float | None = None) -> np.ndarray:
    """``n`` rows of whole-second sample times in [t0, t1] every ``interval`` s.

    Each row starts at its own phase, within ``first`` seconds of t0 (default: one interval).
    """
    first = interval if first is None else min(first, interval)
    count = max(1, int((t1 - t0 - jitter - first) // interval) + 1)
    phase = rng.uniform(jitter, first, (n, 1))
    noise = rng.uniform(-jitter, jitter, (n, count))
    return np.floor(t0 + phase + np.arange(count) * interval + noise)


def gc_dip(ts: np.ndarray, baseline: np.ndarray, inc: Incident) -> np.ndarray:
    """Free-blocks percentage around a GC episode: falls before it, low during, recovers after.

    The drop is measured from the baseline's median, so the low plateau keeps the baseline's
    sample noise and drift (each drive or target sits a little apart around the incident's
    ``free_blocks_pct``), never below 0.
    """
    low = inc.signal["free_blocks_pct"]
    lead, rec = inc.signal["lead_s"], inc.signal["recovery_s"]
    falling = np.clip((ts - (inc.start - lead)) / lead, 0.0, 1.0)
    rising = np.clip((ts - inc.end) / rec, 0.0, 1.0)
    frac = np.where(ts <= inc.end, falling, 1.0 - rising)
    level = float(np.median(baseline))
    return np.maximum(baseline - (level - low) * frac, 0.0)


# --------------------------------------------------------------------------------------- pool


def pool_metrics(cluster: Cluster, load: WriteLoad, incidents: Sequence[Incident],
                 bg: Background, t0: float, t1: float, interval: float,
                 rng: np.random.Generator) -> pl.DataFrame:
    """Long pool telemetry: gc_active, free_blocks_pct, metadata latency/ops, write_bytes."""
    n_t = len(cluster.targets)
    ts = sample_times(rng, n_t, t0, t1, interval)
    prev = ts - interval
    pool_sel = load.target >= 0
    ckpt_bytes = grouped(load.target[pool_sel], n_t, load.write_start[pool_sel],
                         load.write_end[pool_sel], load.nbytes[pool_sel])
    ops = Cumulative.build(load.open_start[pool_sel], load.close_end[pool_sel],
                           load.meta_ops[pool_sel] / n_t)
    ops_rate = (ops(ts) - ops(prev)) / interval
    other = bg.load_bytes(cluster.target_bw)
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
    write_bytes = np.stack([ckpt_bytes[t](ts[t]) + other(ts[t]) for t in range(n_t)])
    write_bytes += rng.uniform(1e13, 4e14, (n_t, 1))
    metrics = {
        "gc_active": gc_active.astype(np.int64),
        "free_blocks_pct": np.round(np.clip(free, 0.5, 100.0), 1),
        "metadata_latency_ms": np.round(lat * 1000.0, 3),
        "metadata_ops": np.round(meta_ops).astype(np.int64),
        "write_bytes": np.floor(write_bytes).astype(np.int64),
    }
    names = np.array(cluster.targets)
    frames = []
    for order, (metric, values) in enumerate(metrics.items()):
        frames.append(pl.DataFrame({
            "_t": ts.ravel(), "_o": np.full(ts.size, order),
            "ts": iso_seconds(ts.ravel()), "pool": np.full(ts.size, cluster.pool),
            "target": np.repeat(names, ts.shape[1]), "metric": np.full(ts.size, metric),
            "value": pl.Series(values.ravel()).cast(pl.Utf8),
        }))
    return pl.concat(frames).sort(["_t", "target", "_o"]).drop(["_t", "_o"])


# --------------------------------------------------------------------------------------- SMART

_LOCAL_MODELS = (
    ("SAMSUNG MZQL23T8HCLS-00A07", "GDC5902Q", 3_840_755_982_336),
    ("Micron_7450_MTFDKCC3T8TFR", "E2MU200", 3_840_755_982_336),
    ("INTEL SSDPF2KX038TZ", "JCV10100", 3_840_755_982_336),
)
_TARGET_MODELS = (
    ("SAMSUNG MZPLJ6T4HALA-00007", "EPK9AB5Q", 6_401_252_745_216),
    ("Micron_7400_MTFDKCB3T2TFC", "E1MU23BC", 3_200_631_791_616),
)


def _smartctl_doc(device: str, model: str, serial: str, firmware: str, ts: float,
                  health: Mapping[str, int]) -> dict[str, object]:
    """``smartctl -j -a`` for one sample: the shared renderer plus the sample's local_time."""
    values = {metric: health[key] * scale for key, (metric, scale) in HEALTH_LOG_METRICS.items()
              if key in health}
    doc = render_smartctl_json(model, serial, firmware, device, values, version=(7, 4))
    asctime = datetime.fromtimestamp(ts, UTC).strftime("%a %b %d %H:%M:%S %Y UTC")
    doc["local_time"] = {"time_t": int(ts), "asctime": asctime}
    return doc


def _envelope(host: str, device: str, ts: str, source: str, output: object,
              port: str | None = None) -> str:
    head = {"node": host, "device": device}
    if port is not None:
        head["port"] = port
    body = json.dumps(output, separators=(",", ":"))
    return json.dumps(head, separators=(",", ":"))[:-1] + (
        f',"collected_at":"{ts}","source":"{source}","output":{body}}}')


def write_smart(smart_dir: Path, cluster: Cluster, load: WriteLoad,
                incidents: Sequence[Incident], bg: Background, t0: float, t1: float,
                interval: float, rng: np.random.Generator,
                progress: Progress | None = None) -> dict[Path, int]:
    """SMART envelopes (smartctl + OCP) for every drive, one JSON Lines file per host.

    Returns the lines written per file.
    """
    smart_dir.mkdir(parents=True, exist_ok=True)
    n_loc = cluster.n_local_drives
    drive_of = np.where(load.drive >= 0, load.drive, -1)
    local_host = grouped(np.where(drive_of >= 0, drive_of, n_loc), n_loc + 1, load.write_start,
                         load.write_end, load.nbytes)
    tsel = load.target >= 0
    target_host = grouped(load.target[tsel], len(cluster.targets), load.write_start[tsel],
                          load.write_end[tsel], load.nbytes[tsel] / cluster.drives_per_target)
    tenant_bw = cluster.target_bw / cluster.drives_per_target
    other = bg.load_bytes(tenant_bw)
    other0 = other(np.array([t0]))
    gc_by_drive: dict[int, list[Incident]] = {}
    for inc in incidents:
        if inc.cause == "gc":
            drives = list(inc.drives) + [d for t in inc.targets for d in cluster.target_drives(t)]
            for d in drives:
                gc_by_drive.setdefault(d, []).append(inc)
    lines: dict[str, list[tuple[float, str, str]]] = {}
    for d in range(cluster.n_drives):
        host, dev = cluster.drive_name(d)
        is_local = d < n_loc
        models = _LOCAL_MODELS if is_local else _TARGET_MODELS
        model, fw, cap = models[int(rng.integers(len(models)))]
        serial = f"S{int(rng.integers(10**9, 10**10))}"
        every = float(rng.uniform(0.67, 1.33)) * interval
        ts = sample_times(rng, 1, t0, t1, every, jitter=5.0, first=90.0)[0]
        never = np.full(ts.shape, -np.inf)
        if is_local:
            ckpt, bw = local_host[d], float(cluster.local_drive_bw[d])
            other_rate = float(rng.uniform(1e6, 2e7))  # logs, caches, scratch
        else:
            ckpt, bw = target_host[(d - n_loc) // cluster.drives_per_target], tenant_bw
            other_rate = 0.0

        def host_bytes(at: np.ndarray, ckpt: Cumulative = ckpt, rate: float = other_rate,
                 tenants: bool = not is_local) -> np.ndarray:
            """Cumulative host bytes written to this drive since t0."""
            return ckpt(at) + rate * (at - t0) + (other(at) - other0 if tenants else 0.0)

        written = host_bytes(ts)
        base_wa = float(rng.uniform(1.02, 1.09))
        media = np.cumsum(np.diff(written, prepend=0.0) * base_wa
                          * rng.lognormal(0.0, 0.01, ts.shape))
        busy_s = written / bw * float(rng.uniform(1.1, 1.4))
        free_base = float(rng.uniform(15.0, 38.0)) + rng.normal(0.0, 0.5, ts.shape)
        free = free_base.copy()
        temp = float(rng.uniform(33.0, 42.0)) + rng.normal(0.0, 0.6, ts.shape)
        for inc in gc_by_drive.get(d, []):
            sig = inc.signal
            gc_s = overlap(never, ts, inc.start, inc.end)
            host_in = np.where(ts > inc.start, host_bytes(np.minimum(ts, inc.end))
                               - host_bytes(np.array([inc.start])), 0.0)
            media = (media + (sig["write_amplification"] - base_wa) * host_in
                     + sig["relocation_gbs"] * 1e9 * gc_s)
            busy_s = busy_s + sig["busy_share"] * gc_s
            free = np.minimum(free, gc_dip(ts, free_base, inc))
            temp = temp + 4.0 * (overlap(ts - every, ts, inc.start, inc.end) > 0)
        media = np.maximum.accumulate(media)
        # Controller busy time counts wall-clock time with I/O outstanding: it cannot grow faster
        # than the clock, whatever host writes and GC add up to.
        span = np.diff(ts, prepend=t0)
        busy_s = np.cumsum(np.minimum(np.diff(busy_s, prepend=0.0), 0.97 * span))
        dw0 = int(rng.integers(2 * 10**7, 6 * 10**8))
        poh0 = int(rng.integers(2000, 30000))
        media0 = int(dw0 * DATA_UNIT_BYTES * rng.uniform(1.05, 1.25))
        iso = iso_seconds(ts)
        for i, t_i in enumerate(ts):
            dw = dw0 + int(np.ceil(written[i] / DATA_UNIT_BYTES))
            health = {
                "critical_warning": 0, "temperature": int(round(temp[i])),
                "available_spare": 100, "available_spare_threshold": 10,
                "percentage_used": min(100, media0 // cap // 30),
                "data_units_read": dw0 // 3 + int((t_i - t0) * 40), "data_units_written": dw,
                "host_reads": dw0 * 2 + int((t_i - t0) * 300),
                "host_writes": dw0 * 4 + int(written[i] // 131_072),
                "controller_busy_time": 9000 + poh0 // 3 + int(busy_s[i] // 60),
                "power_cycles": 40 + poh0 // 2000, "power_on_hours": poh0 + int((t_i - t0) // 3600),
                "unsafe_shutdowns": 3, "media_errors": 0, "num_err_log_entries": 0,
            }
            mw = media0 + int(media[i])
            ocp = {
                "media_written": mw, "media_read": dw0 * DATA_UNIT_BYTES // 3,
                "soft_ecc": 0, "system_used": 0, "refresh": 1000 + poh0,
                "erase_max": int(mw * 1.15 // cap) + 3, "erase_min": int(mw * 0.85 // cap),
                "free_blocks": int(round(free[i])), "nuse": cap // 4096 // 2,
                "plp": 40 + poh0 // 2000, "endurance": cap * 3500,
                "power_changes": 40 + poh0 // 2000,
            }
            doc = _smartctl_doc(dev, model, serial, fw, float(t_i), health)
            lines.setdefault(host, []).extend([
                (float(t_i), dev + "0", _envelope(host, dev, str(iso[i]), "smartctl", doc)),
                (float(t_i), dev + "1", _envelope(host, dev, str(iso[i]), "nvme-ocp-smart",
                                                  render_ocp_smart_json(ocp))),
            ])
        if progress and d % 256 == 255:
            progress(f"smart: {d + 1}/{cluster.n_drives} drives")
    files = {}
    for host, entries in lines.items():
        entries.sort(key=lambda e: (e[0], e[1]))
        path = smart_dir / f"{host}.jsonl"
        path.write_text("".join(e[2] + "\n" for e in entries), encoding="utf-8")
        files[path] = len(entries)
    return files


# --------------------------------------------------------------------------------------- fabric

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
                    t1: float, interval: float,
                    rng: np.random.Generator) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """Sample times (nodes x samples) and cumulative counters by canonical name."""
    n = len(cluster.nodes)
    ts = sample_times(rng, n, t0, t1, interval)
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
                  counters: Mapping[str, np.ndarray]) -> list[str]:
    iso = iso_seconds(ts[node])
    zero = np.zeros(ts.shape[1], dtype=np.int64)
    if cluster.fabric[node] == "roce":
        cols = [counters[c][node].astype(np.int64) if c in counters else zero
                for c in ROCE_COUNTERS]
        rows = np.stack(cols, axis=1).tolist()
        return [_envelope(cluster.nodes[node], cluster.nic[node], str(iso[i]), "ethtool",
                          render_ethtool_s("mlx5_core", dict(zip(ROCE_COUNTERS, row, strict=True)),
                                           only_given=True))
                for i, row in enumerate(rows)]
    own = {name: values[node].astype(np.int64) for name, values in counters.items()}
    for d in ("xmit", "rcv"):
        own[f"multicast_{d}_packets"] = own[f"port_{d}_packets"] // 4096
        own[f"unicast_{d}_packets"] = own[f"port_{d}_packets"] - own[f"multicast_{d}_packets"]
    rows = np.stack([own[name] for name in IB_COUNTERS], axis=1).tolist()
    return [_envelope(cluster.nodes[node], cluster.nic[node], str(iso[i]), "perfquery",
                      render_perfquery_x(lid, int(cluster.port),
                                         dict(zip(IB_COUNTERS, row, strict=True))),
                      port=cluster.port)
            for i, row in enumerate(rows)]


def write_fabric(fabric_dir: Path, cluster: Cluster, ts: np.ndarray,
                 counters: Mapping[str, np.ndarray], fmt: str, rng: np.random.Generator,
                 progress: Progress | None = None) -> dict[Path, int]:
    """Fabric files: per-node envelopes (``raw``) or ``counters.csv`` (``canonical``).

    Returns the lines (rows) written per file.
    """
    fabric_dir.mkdir(parents=True, exist_ok=True)
    n = len(cluster.nodes)
    if fmt == "canonical":
        frames = []
        for kind, names in CANONICAL.items():
            idx = np.array([i for i in range(n) if cluster.fabric[i] == kind], dtype=np.int64)
            if idx.size == 0:
                continue
            for order, name in enumerate(names):
                frames.append(pl.DataFrame({
                    "_t": ts[idx].ravel(), "_o": np.full(ts[idx].size, order),
                    "ts": iso_seconds(ts[idx].ravel()),
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
    for node in range(n):
        lines = _node_samples(cluster, node, int(lids[node]), ts, counters)
        path = fabric_dir / f"{cluster.nodes[node]}.jsonl"
        path.write_text("\n".join(lines) + "\n", encoding="utf-8")
        files[path] = len(lines)
        if progress and node % 64 == 63:
            progress(f"fabric: {node + 1}/{n} nodes")
    return files
