"""The simulated cluster and what runs on it: the data types every simulate module shares.

``Cluster`` (nodes, leaves, NICs, drives, the pool), ``Job`` (ranks, checkpoint schedule, phase
times), ``Incident`` and its ``Effect`` on a job, ``WriteLoad`` (every rank write, flattened),
``Background`` (other tenants' pool load and metadata latency), and the interval arithmetic they
are built on (``Cumulative``, ``grouped``, ``overlap``). The modules above import from here and
never the other way: scenario -> workload, incidents, effects, telemetry -> cluster.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

GB = 1e9
GPUS_PER_NODE = 8


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
    cause: str  # gc | metadata | fabric_pause | saturation | unknown
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
    #: the jobs a pool-wide incident slows (``saturation``: the burst's jobs, all their ranks)
    jobs: tuple[str, ...] = ()
    #: ``saturation``: the other tenants' writes over the burst, (start, end, bytes/s) segments
    surges: tuple[tuple[float, float, float], ...] = ()


@dataclass
class Job:
    """One job: its ranks, checkpoint schedule, phase times before and after incidents."""

    job_id: str
    tier: str
    nodes: np.ndarray
    encoding: str
    rank_node: np.ndarray
    rank_drive: np.ndarray
    rank_target: np.ndarray
    nbytes: np.ndarray
    files: int
    interval_s: float
    step_time_s: float
    steps: np.ndarray
    starts: np.ndarray
    nominal_s: float
    traffic_bps: float
    healthy: tuple[np.ndarray, ...] = ()  # O, W, F, C before incidents
    final: tuple[np.ndarray, ...] = ()
    skew: np.ndarray = field(default_factory=lambda: np.zeros((0, 0)))
    status: np.ndarray = field(default_factory=lambda: np.zeros((0, 0), dtype=np.int8))
    gap: np.ndarray = field(default_factory=lambda: np.zeros((0, 0)))
    baseline_s: float = 0.0
    timeout_s: float = 0.0
    effects: list[Effect] = field(default_factory=list)

    d0: np.ndarray = field(default_factory=lambda: np.zeros((0, 0)))  # healthy rank durations
    b0: np.ndarray = field(default_factory=lambda: np.zeros(0))  # healthy barrier times

    @property
    def n_ranks(self) -> int:
        """Ranks of the job (GPUs over its nodes)."""
        return int(self.rank_node.size)


@dataclass(frozen=True)
class Effect:
    """Extra seconds per phase (open, write, fsync, close) on the checkpoints ``rows``."""

    incident: int
    rows: np.ndarray
    oa: np.ndarray
    wa: np.ndarray
    fa: np.ndarray
    ca: np.ndarray



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
        """Cumulative amount at times ``at`` (0 before the first window, never falling)."""
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


def tenant_surges(incidents: Sequence[Incident], n_targets: int) -> list[Cumulative]:
    """Per pool target, the cumulative bytes the other tenants of a saturated pool write
    during its bursts (``saturation`` incidents: each of its ``surges`` segments' bytes/s,
    spread evenly over the burst's targets)."""
    rows = [(t, a, b, bps / len(inc.targets) * (b - a))
            for inc in incidents if inc.targets for a, b, bps in inc.surges for t in inc.targets]
    group = np.array([r[0] for r in rows], dtype=np.int64)
    starts, ends, amounts = (np.array([r[k] for r in rows], dtype=float) for k in (1, 2, 3))
    return grouped(group, n_targets, starts, ends, amounts)


def overlap(a0: np.ndarray, a1: np.ndarray, s: float, e: float) -> np.ndarray:
    """Seconds of each interval ``[a0, a1]`` that fall inside ``[s, e]``."""
    return np.clip(np.minimum(a1, e) - np.maximum(a0, s), 0.0, None)

