"""Scenario generator behind ``ckptwatch simulate``: a synthetic cluster's raw telemetry plus truth.

A cluster of nodes x 8 GPUs under leaf switches shares a disaggregated NVMe-oF pool. Jobs on the
``local`` and ``pool`` tiers checkpoint every few minutes; each rank's open/write/fsync/close time
follows the physics of its tier (pool writes share the targets' bandwidth with other jobs and
tenants and cross the fabric; local writes share one drive per few ranks). Incidents are then
injected on top (``ckptwatch.simulate.incidents``) - stalls by ``gc``, ``metadata``,
``fabric_pause`` or ``unknown``, and confounders that leave a signal but stall nothing - and the
raw files of DESIGN's input contract are written together with ``labels.json`` (the telemetry in
``ckptwatch.simulate.telemetry``). The truth in ``stalls`` is computed from the written data: a
checkpoint whose barrier time is at least twice its job's median, with the incidents that made it
so, primary cause first.

Everything derives from ``numpy.random.Generator(PCG64(seed))`` and the fixed ``--start``; the same
seed and options give byte-identical files.
"""

from __future__ import annotations

import json
import math
import shutil
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field, fields
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from ckptwatch.errors import SimulationConfigError
from ckptwatch.simulate.incidents import (
    GB,
    STALL_RATIO,
    IncidentPlanner,
    Job,
    apply_incidents,
    find_stalls,
)
from ckptwatch.simulate.telemetry import (
    Background,
    Cluster,
    Incident,
    WriteLoad,
    fabric_counters,
    pool_metrics,
    write_fabric,
    write_smart,
)

GENERATOR_VERSION = "1.1"
DEFAULT_START = "2026-11-28T00:00:00Z"
GPUS_PER_NODE = 8
#: Files and directories the generator owns inside OUT_DIR.
OUTPUTS = ("topology.csv", "jobs", "checkpoints", "pool", "smart", "fabric", "labels.json")
Progress = Callable[[str], None]


@dataclass(frozen=True)
class SimulationConfig:
    """Scenario knobs. ``None`` means: derive from the cluster size (see each field)."""

    nodes: int = 8
    hours: float = 4.0
    start: str = DEFAULT_START
    jobs: int | None = None  # None: 2-4 drawn from the seed
    incidents_per_hour: float = 2.0
    pool_targets: int | None = None  # None: nodes / 2, within 2..64
    pool_bandwidth_gbs: float | None = None  # aggregate GB/s; None: 6.25 per target
    nodes_per_leaf: int | None = None  # None: 4 below 64 nodes, else 16
    fabric: str = "mixed"  # mixed (alternate leaves RoCE / IB) | roce | ib
    fabric_format: str = "raw"  # raw (ethtool / perfquery envelopes) | canonical
    drives_per_node: int = 1
    drives_per_target: int = 2
    fabric_interval_s: float = 90.0
    pool_interval_s: float = 30.0
    smart_interval_s: float = 900.0

    def start_epoch(self) -> float:
        """``start`` as epoch seconds."""
        try:
            when = datetime.fromisoformat(self.start.replace("Z", "+00:00"))
        except ValueError as exc:
            raise SimulationConfigError(f"--start {self.start!r} is not ISO-8601; "
                                        "use e.g. 2026-11-28T00:00:00Z") from exc
        if when.tzinfo is None:
            raise SimulationConfigError(f"--start {self.start!r} has no UTC offset; "
                                        "append Z or +00:00")
        return when.timestamp()

    def validate(self) -> None:
        """Raise ``SimulationConfigError`` naming the first option out of range."""
        checks = [
            (self.nodes >= 2, "--nodes must be at least 2 (one local-tier and one pool-tier job)"),
            (0.25 <= self.hours <= 24 * 14, "--hours must be between 0.25 and 336"),
            (self.jobs is None or 2 <= self.jobs <= self.nodes,
             "--jobs must be between 2 and --nodes"),
            (self.incidents_per_hour >= 0, "--incidents-per-hour must be >= 0"),
            (self.pool_targets is None or 1 <= self.pool_targets <= 999,
             "--pool-targets must be between 1 and 999"),
            (self.pool_bandwidth_gbs is None or self.pool_bandwidth_gbs > 0,
             "--pool-bandwidth-gbs must be positive"),
            (self.nodes_per_leaf is None or self.nodes_per_leaf >= 1,
             "--nodes-per-leaf must be >= 1"),
            (self.fabric in ("mixed", "roce", "ib"), "--fabric must be mixed, roce or ib"),
            (self.fabric_format in ("raw", "canonical"),
             "--fabric-format must be raw or canonical"),
            (self.drives_per_node in (1, 2, 4, 8), "--drives-per-node must be 1, 2, 4 or 8"),
            (1 <= self.drives_per_target <= 16, "--drives-per-target must be between 1 and 16"),
            (min(self.fabric_interval_s, self.pool_interval_s, self.smart_interval_s) >= 5,
             "sample intervals must be at least 5 s"),
        ]
        for ok, message in checks:
            if not ok:
                raise SimulationConfigError(message)
        self.start_epoch()


@dataclass
class SimulationSummary:
    """What a run wrote: rows per file, incidents by cause and kind, stalls."""

    out_dir: Path
    seed: int
    files: dict[str, int] = field(default_factory=dict)
    incidents: dict[str, int] = field(default_factory=dict)
    stalls: int = 0

    @property
    def total_rows(self) -> int:
        """Rows (records, lines) over all files."""
        return sum(self.files.values())

    def format(self) -> str:
        """A short human summary: files and rows per directory, incidents, stalls."""
        groups: dict[str, list[int]] = {}
        for rel, rows in self.files.items():
            key = rel.split("/")[0] + ("/" if "/" in rel else "")
            groups.setdefault(key, [0, 0, 0])
            size = (self.out_dir / rel).stat().st_size
            groups[key] = [groups[key][0] + 1, groups[key][1] + rows, groups[key][2] + size]
        lines = [f"scenario seed {self.seed} -> {self.out_dir}"]
        for key, (n, rows, size) in sorted(groups.items()):
            lines.append(f"  {key:<16} {n:>5} file(s) {rows:>10,} rows {size / 1e6:>9.2f} MB")
        by = ", ".join(f"{k} {v}" for k, v in sorted(self.incidents.items())) or "none"
        lines.append(f"  incidents: {by}")
        lines.append(f"  labelled stalls: {self.stalls}")
        return "\n".join(lines)



def simulate(out_dir: Path, seed: int, nodes: int = 8, hours: float = 4.0, *,
             progress: Progress | None = None, overwrite: bool = False,
             **opts: Any) -> SimulationSummary:
    """Write one scenario under ``out_dir``; ``opts`` are ``SimulationConfig`` fields."""
    known = {f.name for f in fields(SimulationConfig)}
    unknown = sorted(set(opts) - known)
    if unknown:
        raise SimulationConfigError(f"unknown simulate option(s): {', '.join(unknown)}")
    cfg = SimulationConfig(nodes=nodes, hours=hours, **opts)
    cfg.validate()
    _prepare(Path(out_dir), overwrite)
    say = progress or (lambda _msg: None)
    t0 = cfg.start_epoch()
    t1 = t0 + cfg.hours * 3600.0
    (r_topo, r_jobs, r_ckpt, r_inc, r_bg, r_pool, r_smart, r_fab,
     r_misc) = np.random.Generator(np.random.PCG64(seed)).spawn(9)
    cluster = _build_cluster(cfg, r_topo)
    bg = Background.build(r_bg, t0, t1)
    jobs = _build_jobs(cfg, cluster, r_jobs, t0, t1)
    _healthy(jobs, cluster, bg, r_ckpt)
    incidents = IncidentPlanner(cluster, jobs, bg, r_inc, t0, t1,
                                expected=cfg.incidents_per_hour * cfg.hours,
                                smart_interval_s=cfg.smart_interval_s).plan()
    apply_incidents(jobs, incidents, r_misc)
    say(f"simulate: {len(jobs)} jobs, {sum(j.steps.size * j.n_ranks for j in jobs):,} rank rows, "
        f"{len(incidents)} incidents")
    resets = []
    if cfg.hours >= 2:
        resets.append((int(r_misc.integers(cfg.nodes)), t0 + r_misc.uniform(0.3, 0.8) * (t1 - t0)))
    summary = SimulationSummary(out_dir=Path(out_dir), seed=seed)
    out = Path(out_dir)

    def record(path: Path, rows: int) -> None:
        summary.files[path.relative_to(out).as_posix()] = rows

    record(*_write_topology(out, cluster))
    record(*_write_jobs(out, jobs))
    for job in jobs:
        record(*_write_checkpoints(out, job, cluster, r_misc))
    say("simulate: checkpoints written")
    load = _write_load(jobs)
    pool = pool_metrics(cluster, load, incidents, bg, t0, t1, cfg.pool_interval_s, r_pool)
    (out / "pool").mkdir(exist_ok=True)
    pool.write_csv(out / "pool" / "pool_metrics.csv")
    record(out / "pool" / "pool_metrics.csv", pool.height)
    say("simulate: pool metrics written")
    for path, rows in write_smart(out / "smart", cluster, load, incidents, bg, t0, t1,
                                  cfg.smart_interval_s, r_smart, progress).items():
        record(path, rows)
    traffic = np.full(cfg.nodes, 0.05 * GB)
    for job in jobs:
        traffic[job.nodes] = job.traffic_bps
    ts, counters = fabric_counters(cluster, load, incidents, traffic, resets, t0, t1,
                                   cfg.fabric_interval_s, r_fab)
    for path, rows in write_fabric(out / "fabric", cluster, ts, counters, cfg.fabric_format,
                                   r_fab, progress).items():
        record(path, rows)
    labels = _labels(cfg, seed, cluster, jobs, incidents, resets)
    (out / "labels.json").write_text(json.dumps(labels, indent=1) + "\n", encoding="utf-8")
    record(out / "labels.json", len(labels["incidents"]) + len(labels["stalls"]))
    summary.incidents = dict(Counter(f"{i['cause']}/{i['kind']}" for i in labels["incidents"]))
    summary.stalls = len(labels["stalls"])
    return summary


def _prepare(out: Path, overwrite: bool) -> None:
    if out.exists() and not out.is_dir():
        raise SimulationConfigError(f"{out} exists and is not a directory; choose another OUT_DIR")
    present = [name for name in OUTPUTS if (out / name).exists()]
    if present and not overwrite:
        raise SimulationConfigError(f"{out} already holds a scenario ({', '.join(present)}); "
                             "pass --force to replace it or choose an empty OUT_DIR")
    for name in present:
        target = out / name
        if target.is_dir():
            shutil.rmtree(target)
        else:
            target.unlink()
    for sub in ("jobs", "checkpoints"):
        (out / sub).mkdir(parents=True, exist_ok=True)


# ------------------------------------------------------------------------------ cluster & jobs


def _build_cluster(cfg: SimulationConfig, rng: np.random.Generator) -> Cluster:
    n = cfg.nodes
    per_leaf = cfg.nodes_per_leaf or (4 if n < 64 else 16)
    width = max(3, len(str(n)))
    leaf = np.arange(n) // per_leaf
    n_leaves = int(leaf.max()) + 1
    kinds = [("roce" if j % 2 == 0 else "ib") if cfg.fabric == "mixed" else cfg.fabric
             for j in range(n_leaves)]
    fabric = tuple(kinds[j] for j in leaf)
    n_t = cfg.pool_targets or max(2, min(64, n // 2))
    pool_bw = (cfg.pool_bandwidth_gbs or 6.25 * n_t) * GB
    return Cluster(
        nodes=tuple(f"node{i + 1:0{width}d}" for i in range(n)), leaf=leaf,
        leaves=tuple(f"leaf{j + 1:02d}" for j in range(n_leaves)), fabric=fabric,
        nic=tuple("ens1f0np0" if f == "roce" else "mlx5_0" for f in fabric), port="1",
        pool="pool0", targets=tuple(f"pool0-tgt{j + 1:02d}" for j in range(n_t)),
        target_bw=pool_bw / n_t, nic_bw=50 * GB, drives_per_node=cfg.drives_per_node,
        drives_per_target=cfg.drives_per_target,
        local_drive_bw=rng.uniform(3.0, 6.5, n * cfg.drives_per_node) * GB,
    )


def _split(rng: np.random.Generator, total: int, parts: int) -> list[int]:
    share = rng.dirichlet(np.full(parts, 2.0)) * (total - parts)
    sizes = 1 + np.floor(share).astype(int)
    for i in np.argsort(-(share - np.floor(share)), kind="stable")[: total - int(sizes.sum())]:
        sizes[i] += 1
    return [int(s) for s in sizes]


def _nominal(tier: str, rank_node: np.ndarray, rank_drive: np.ndarray, rank_target: np.ndarray,
             nbytes: np.ndarray, cluster: Cluster) -> float:
    if tier == "pool":
        load = np.bincount(rank_target, weights=nbytes, minlength=len(cluster.targets))
        node_bytes = np.bincount(rank_node, weights=nbytes)
        return float(max(load.max() / (cluster.target_bw * 0.85),
                         node_bytes.max() / cluster.nic_bw))
    load = np.bincount(rank_drive, weights=nbytes, minlength=cluster.n_local_drives)
    return float((load / cluster.local_drive_bw)[rank_drive].max() * 1.08)


def _build_jobs(cfg: SimulationConfig, cluster: Cluster, rng: np.random.Generator, t0: float,
                t1: float) -> list[Job]:
    n = cfg.nodes
    n_jobs = min(cfg.jobs or int(rng.integers(2, 5)), n)
    idle = min(int(rng.integers(0, n // 8 + 1)), n - n_jobs)
    sizes = _split(rng, n - idle, n_jobs)
    tiers = ["pool", "local"] + [str(t) for t in rng.choice(["pool", "local"], n_jobs - 2)]
    rng.shuffle(tiers)
    n_t = len(cluster.targets)
    jobs: list[Job] = []
    ids: set[str] = set()
    first = 0
    for j, (size, tier) in enumerate(zip(sizes, tiers, strict=True)):
        node_idx = np.arange(first, first + size)
        first += size
        rank_node = np.repeat(node_idx, GPUS_PER_NODE)
        local_rank = np.tile(np.arange(GPUS_PER_NODE), size)
        rank_drive = rank_node * cfg.drives_per_node + local_rank * cfg.drives_per_node // 8
        n_ranks = rank_node.size
        rank_target = np.full(n_ranks, -1)
        if tier == "pool":
            k = n_t if rng.random() < 0.6 else int(rng.integers(max(1, n_t // 2), n_t + 1))
            subset = np.sort(rng.choice(n_t, k, replace=False))
            rank_target = subset[(np.arange(n_ranks) + int(rng.integers(k))) % k]
        per_rank = math.exp(rng.uniform(0.0, math.log(20.0))) * GB
        nbytes = np.round(per_rank * (1 + rng.normal(0, 0.01, n_ranks)) / 4096) * 4096
        nbytes[0] = np.round(nbytes[0] * 1.04 / 4096) * 4096
        nominal = _nominal(tier, rank_node, rank_drive, rank_target, nbytes, cluster)
        interval = max(float(rng.integers(30, 91) * 10), math.ceil(9.5 * nominal / 10) * 10.0)
        step_time = round(float(rng.uniform(0.4, 6.0)), 2)
        per_ckpt = max(1, round(interval / step_time))
        t_first = t0 + rng.uniform(0.05, 1.0) * interval
        count = max(0, math.ceil((t1 - max(120.0, 8 * nominal) - t_first) / interval))
        starts = t_first + np.arange(count) * interval + rng.uniform(0, min(5, step_time), count)
        job_id = f"job-{int(rng.integers(10000, 99999))}"
        while job_id in ids:
            job_id = f"job-{int(rng.integers(10000, 99999))}"
        ids.add(job_id)
        encoding = ("iso", "epoch", "csv", "iso_offset")[j] if j < 4 else (
            "iso", "epoch", "iso_offset")[j % 3]
        jobs.append(Job(
            job_id=job_id, tier=tier, nodes=node_idx, encoding=encoding, rank_node=rank_node,
            rank_drive=rank_drive, rank_target=rank_target, nbytes=nbytes,
            files=int(rng.integers(20, 200) if tier == "pool" else rng.integers(8, 64)),
            interval_s=interval, step_time_s=step_time,
            steps=int(rng.integers(10, 400)) * per_ckpt + (np.arange(count) + 1) * per_ckpt,
            starts=starts, nominal_s=nominal, traffic_bps=float(rng.uniform(3.0, 20.0)) * GB))
    return jobs


def _contention(jobs: list[Job], cluster: Cluster) -> list[np.ndarray]:
    """Slowdown of each pool checkpoint from other pool jobs writing to the same targets."""
    out = [np.ones(job.starts.size) for job in jobs]
    n_t = len(cluster.targets)
    for a, ja in enumerate(jobs):
        if ja.tier != "pool":
            continue
        la = np.bincount(ja.rank_target, weights=ja.nbytes, minlength=n_t)
        for jb in jobs:
            if jb is ja or jb.tier != "pool":
                continue
            lb = np.bincount(jb.rank_target, weights=jb.nbytes, minlength=n_t)
            shared = lb[la > 0].sum() / la.sum()
            ov = np.clip(np.minimum(ja.starts[:, None] + ja.nominal_s,
                                    jb.starts[None, :] + jb.nominal_s)
                         - np.maximum(ja.starts[:, None], jb.starts[None, :]), 0.0, None)
            out[a] += ov.sum(axis=1) / ja.nominal_s * shared
    return [np.clip(c, 1.0, 1.5) for c in out]


def _healthy(jobs: list[Job], cluster: Cluster, bg: Background,
             rng: np.random.Generator) -> None:
    """Per-rank phase times without incidents; tails bounded to 1.4-1.6x the job median."""
    for job, cont in zip(jobs, _contention(jobs, cluster), strict=True):
        k, n = job.starts.size, job.n_ranks
        node_local = job.rank_node - job.nodes[0]
        noise = (np.clip(rng.lognormal(0.0, 0.06, (k, 1)), 0.85, 1.2)
                 * np.clip(rng.lognormal(0.0, 0.04, (k, job.nodes.size)), 0.9, 1.12)[:, node_local]
                 * np.clip(rng.lognormal(0.0, 0.05, (k, n)), 0.88, 1.2))
        jitter = np.clip(rng.lognormal(0.0, 0.25, (3, k, n)), 0.5, 2.0)
        if job.tier == "pool":
            load = np.bincount(job.rank_target, weights=job.nbytes, minlength=len(cluster.targets))
            share = cluster.target_bw * (1.0 - bg.load_at(job.starts))[:, None]
            node_bytes = np.bincount(node_local, weights=job.nbytes)[node_local]
            w = np.maximum(load[job.rank_target][None, :] / share,
                           (node_bytes / cluster.nic_bw)[None, :]) * cont[:, None] * noise
            f = (rng.uniform(0.05, 0.3) + 0.01 * w) * jitter[0]
            lat = bg.meta_at(job.starts)[:, None] * (1.0 + n / 4096)
            o = job.files * 2 * lat * jitter[1]
            c = job.files * lat * jitter[2]
        else:
            load = np.bincount(job.rank_drive, weights=job.nbytes, minlength=cluster.n_local_drives)
            w = (load / cluster.local_drive_bw)[job.rank_drive][None, :] * noise
            f = w * rng.uniform(0.02, 0.1) * jitter[0]
            o = job.files * 3 * 40e-6 * jitter[1]
            c = job.files * 25e-6 * jitter[2]
        hit = np.nonzero(rng.random(k) < 0.2)[0]
        w[hit, rng.integers(n, size=hit.size)] *= rng.uniform(1.15, 1.45, hit.size)
        d = o + w + f + c
        cap = np.median(d.max(axis=1)) * rng.uniform(1.4, 1.6, (k, 1)) if k else d
        scale = np.where(d > cap, (cap - o - c) / (w + f), 1.0)
        job.healthy = (o, w * scale, f * scale, c)
        job.d0 = o + w * scale + f * scale + c
        job.b0 = job.d0.max(axis=1)
        job.skew = rng.uniform(0.0, 0.03, (k, n))
        job.baseline_s = float(np.median(job.b0)) if k else job.nominal_s
        job.timeout_s = math.ceil(job.baseline_s * rng.uniform(3.0, 6.0) / 5.0) * 5.0


def _labels(cfg: SimulationConfig, seed: int, cluster: Cluster, jobs: list[Job],
            incidents: list[Incident], resets: list[tuple[int, float]]) -> dict[str, Any]:
    stalls = [s for job in jobs for s in find_stalls(job, incidents)]
    by_incident: dict[str, list[dict[str, Any]]] = {}
    for s in stalls:
        for iid in s["incidents"]:
            by_incident.setdefault(iid, []).append({"job_id": s["job_id"], "step": s["step"]})

    def target_names(idx: tuple[int, ...]) -> list[str]:
        return [cluster.targets[t] for t in idx]

    out_incidents = []
    for inc in incidents:
        stalled = by_incident.get(inc.id, [])
        kind, variant = inc.kind, inc.variant
        if kind == "stall" and not stalled:  # its effect stayed below the stall threshold
            kind, variant = "confounder", f"{variant}_subthreshold"
        out_incidents.append({
            "id": inc.id, "cause": inc.cause, "kind": kind, "variant": variant,
            "job_id": inc.job_id,
            "steps": [s["step"] for s in stalled if s["job_id"] == inc.job_id],
            "stalled": stalled, "start": _iso(inc.start), "end": _iso(inc.end),
            "scope": {"nodes": [cluster.nodes[n] for n in inc.nodes],
                      "leaf": None if inc.leaf is None else cluster.leaves[inc.leaf],
                      "targets": target_names(inc.targets),
                      "devices": ["{}:{}".format(*cluster.drive_name(d)) for d in inc.drives]
                      + [f"{h}:{dev}" for t in inc.targets
                         for h, dev in map(cluster.drive_name, cluster.target_drives(t))],
                      **({"ranks": list(inc.ranks)} if inc.ranks else {})},
            "magnitude": {"slowdown": round(inc.slowdown, 3),
                          **{k: round(v, 3) for k, v in inc.signal.items()
                             if not k.startswith("_")}},
        })
    return {
        "seed": seed, "generator_version": GENERATOR_VERSION, "start": _iso(cfg.start_epoch()),
        "nodes": cfg.nodes, "hours": cfg.hours, "stall_ratio": STALL_RATIO,
        "pool": {"name": cluster.pool, "targets": list(cluster.targets),
                 "bandwidth_gbs": round(cluster.target_bw * len(cluster.targets) / GB, 3)},
        "fabric_format": cfg.fabric_format,
        "jobs": [{"job_id": job.job_id, "tier": job.tier,
                  "nodes": [cluster.nodes[n] for n in job.nodes], "n_ranks": job.n_ranks,
                  "checkpoint_interval_s": job.interval_s, "checkpoint_timeout_s": job.timeout_s,
                  "baseline_barrier_s": round(job.baseline_s, 3), "checkpoints": job.steps.size,
                  "bytes_per_rank": int(np.median(job.nbytes)), "time_encoding": job.encoding,
                  "file": _ckpt_name(job)} for job in jobs],
        "incidents": out_incidents, "stalls": stalls,
        "counter_resets": [{"node": cluster.nodes[n], "device": cluster.nic[n], "at": _iso(t)}
                           for n, t in resets],
    }


# ------------------------------------------------------------------------------ raw files


def _iso(t: float) -> str:
    return str(np.datetime_as_string(np.datetime64(int(round(t * 1000)), "ms"), unit="ms")) + "Z"


def _ckpt_name(job: Job) -> str:
    return f"checkpoints/{job.job_id}.{'csv' if job.encoding == 'csv' else 'jsonl'}"


def _write_topology(out: Path, cluster: Cluster) -> tuple[Path, int]:
    path = out / "topology.csv"
    pl.DataFrame({"node": cluster.nodes, "leaf_switch": [cluster.leaves[x] for x in cluster.leaf],
                  "nic": cluster.nic, "port": [cluster.port] * len(cluster.nodes)}).write_csv(path)
    return path, len(cluster.nodes)


def _write_jobs(out: Path, jobs: list[Job]) -> tuple[Path, int]:
    path = out / "jobs" / "jobs.csv"
    pl.DataFrame({
        "job_id": [j.job_id for j in jobs], "n_ranks": [j.n_ranks for j in jobs],
        "checkpoint_timeout_s": [j.timeout_s for j in jobs],
        "checkpoint_interval_s": [j.interval_s for j in jobs],
        "step_time_s": [j.step_time_s for j in jobs], "gpus_per_node": [GPUS_PER_NODE] * len(jobs),
        "tier": [j.tier for j in jobs],
    }).write_csv(path)
    return path, len(jobs)


def _iso_column(epoch: np.ndarray, offset_s: int, suffix: pl.Expr | str) -> pl.Expr:
    us = pl.Series(np.round((epoch + offset_s) * 1e6).astype(np.int64))
    text = pl.lit(pl.from_epoch(us, time_unit="us").dt.strftime("%Y-%m-%dT%H:%M:%S%.6f"))
    return pl.concat_str([text, suffix if isinstance(suffix, pl.Expr) else pl.lit(suffix)])


def _write_checkpoints(out: Path, job: Job, cluster: Cluster,
                       rng: np.random.Generator) -> tuple[Path, int]:
    k, n = job.starts.size, job.n_ranks
    o, w, f, c = (np.round(x, 6) for x in job.final)
    start = job.starts[:, None] + job.skew
    end = start + o + w + f + c + job.gap
    targets = (np.array(cluster.targets)[job.rank_target] if job.tier == "pool" else
               np.array([f"{h}:{d}" for h, d in map(cluster.drive_name, job.rank_drive)]))
    df = pl.DataFrame({
        "job_id": np.full(k * n, job.job_id), "step": np.repeat(job.steps, n).astype(np.int64),
        "rank": np.tile(np.arange(n), k),
        "node": np.tile(np.array(cluster.nodes)[job.rank_node], k),
        "tier": np.full(k * n, job.tier), "start_time": np.round(start.ravel(), 6),
        "end_time": np.round(end.ravel(), 6), "bytes": np.tile(job.nbytes.astype(np.int64), k),
        "target": np.tile(targets, k), "open_s": o.ravel(), "write_s": w.ravel(),
        "fsync_s": f.ravel(), "close_s": c.ravel(),
        "status": np.array(["ok", "timeout", "error"])[job.status.ravel()],
    })
    if job.encoding != "epoch":
        offset, suffix = (3600, "+01:00") if job.encoding == "iso_offset" else (0, "+00:00")
        mixed: pl.Expr | str = suffix
        if job.encoding == "iso":
            mixed = pl.when(pl.Series(rng.random(k * n) < 0.15)).then(pl.lit("Z")).otherwise(
                pl.lit(suffix))
        elif job.encoding == "csv":
            mixed = "Z"
        df = df.with_columns(_iso_column(start.ravel(), offset, mixed).alias("start_time"),
                             _iso_column(end.ravel(), offset, mixed).alias("end_time"))
    path = out / _ckpt_name(job)
    if job.encoding == "csv":
        df.write_csv(path)
    else:
        df.write_ndjson(path)
    return path, df.height


def _write_load(jobs: list[Job]) -> WriteLoad:
    parts: dict[str, list[np.ndarray]] = {}
    for job in jobs:
        o, w, f, c = job.final
        start = job.starts[:, None] + job.skew
        shape = o.shape
        cols = {
            "node": np.broadcast_to(job.rank_node, shape),
            "drive": np.broadcast_to(job.rank_drive if job.tier == "local" else -1, shape),
            "target": np.broadcast_to(job.rank_target, shape),
            "open_start": start, "write_start": start + o, "write_end": start + o + w,
            "close_end": start + o + w + f + c,
            "nbytes": np.broadcast_to(job.nbytes, shape) * np.where(job.status == 2, 0.5, 1.0),
            "meta_ops": np.full(shape, 3.0 * job.files if job.tier == "pool" else 0.0),
        }
        for name, values in cols.items():
            parts.setdefault(name, []).append(np.asarray(values).ravel())
    return WriteLoad(**{k: np.concatenate(v) for k, v in parts.items()})
