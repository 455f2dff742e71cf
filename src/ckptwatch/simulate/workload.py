"""The healthy workload of a simulated scenario: the cluster, its jobs and their checkpoints.

``build_cluster`` lays out nodes, leaves, NICs, drives and the pool; ``build_jobs`` places jobs on
the ``local`` and ``pool`` tiers with their checkpoint schedules; ``healthy_phases`` gives each
rank its open/write/fsync/close time before any incident, following the physics of its tier
(pool writes share the targets' bandwidth with other jobs and tenants and cross the fabric; local
writes share one drive per few ranks).
"""

from __future__ import annotations

import math

import numpy as np

from ckptwatch.errors import SimulationConfigError
from ckptwatch.simulate.cluster import GB, GPUS_PER_NODE, Background, Cluster, Job
from ckptwatch.simulate.config import SimulationConfig


def build_cluster(cfg: SimulationConfig, rng: np.random.Generator) -> Cluster:
    """Nodes under leaf switches (RoCE / InfiniBand per leaf), NICs, drives, the pool."""
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
    """``total`` split into ``parts`` sizes of at least 1, Dirichlet-distributed."""
    share = rng.dirichlet(np.full(parts, 2.0)) * (total - parts)
    sizes = 1 + np.floor(share).astype(int)
    for i in np.argsort(-(share - np.floor(share)), kind="stable")[: total - int(sizes.sum())]:
        sizes[i] += 1
    return [int(s) for s in sizes]


def _nominal(tier: str, rank_node: np.ndarray, rank_drive: np.ndarray, rank_target: np.ndarray,
             nbytes: np.ndarray, cluster: Cluster) -> float:
    """Seconds one checkpoint takes at full bandwidth (the tier's bottleneck)."""
    if tier == "pool":
        load = np.bincount(rank_target, weights=nbytes, minlength=len(cluster.targets))
        node_bytes = np.bincount(rank_node, weights=nbytes)
        return float(max(load.max() / (cluster.target_bw * 0.85),
                         node_bytes.max() / cluster.nic_bw))
    load = np.bincount(rank_drive, weights=nbytes, minlength=cluster.n_local_drives)
    return float((load / cluster.local_drive_bw)[rank_drive].max() * 1.08)


def build_jobs(cfg: SimulationConfig, cluster: Cluster, rng: np.random.Generator, t0: float,
               t1: float) -> list[Job]:
    """Jobs on disjoint node sets, at least one per tier, with their checkpoint schedules."""
    n = cfg.nodes
    n_jobs = min(cfg.jobs or int(rng.integers(2, 5)), n)
    idle = min(int(rng.integers(0, n // 8 + 1)), n - n_jobs)
    sizes = _split(rng, n - idle, n_jobs)
    # bursts need two pool jobs to collide (the pool jobs' phases: ``_saturation``)
    sure = ["pool", "pool", "local"] if cfg.bursts_per_hour > 0 and n_jobs >= 3 else [
        "pool", "local"]
    tiers = sure + [str(t) for t in rng.choice(["pool", "local"], n_jobs - len(sure))]
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
    pool = [job for job in jobs if job.tier == "pool"]
    if cfg.aligned_phases and len(pool) >= 2:
        # launched together: one schedule (the longest of their intervals, so that each
        # still fits), phases within seconds of the first pool job's
        common = max(job.interval_s for job in pool)
        start0 = float(pool[0].starts[0]) if pool[0].starts.size else t0 + 0.5 * common
        for job in pool:
            _reschedule(job, common, start0 + float(rng.uniform(0.0, 3.0)), t1, rng)
    offsets = dict(cfg.phase_offsets)
    unknown = sorted(set(offsets) - {job.job_id for job in jobs})
    if unknown:
        raise SimulationConfigError(
            f"--phase-offset: no job {', '.join(unknown)} in this scenario (its jobs: "
            f"{', '.join(sorted(job.job_id for job in jobs))})")
    for job in jobs:
        if job.job_id in offsets:
            keep = job.starts + offsets[job.job_id] < t1 - max(120.0, 8 * job.nominal_s)
            job.starts = job.starts[keep] + offsets[job.job_id]
            job.steps = job.steps[keep]
    return jobs


def _reschedule(job: Job, interval: float, t_first: float, t1: float,
                rng: np.random.Generator) -> None:
    """``job``'s checkpoints every ``interval`` from ``t_first`` (its steps re-counted)."""
    per_ckpt = max(1, round(interval / job.step_time_s))
    count = max(0, math.ceil((t1 - max(120.0, 8 * job.nominal_s) - t_first) / interval))
    job.interval_s = interval
    job.starts = (t_first + np.arange(count) * interval
                  + rng.uniform(0, min(5, job.step_time_s), count))
    job.steps = int(job.steps[0] // per_ckpt if job.steps.size else 10) * per_ckpt + (
        np.arange(count) + 1) * per_ckpt


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


def healthy_phases(jobs: list[Job], cluster: Cluster, bg: Background,
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
