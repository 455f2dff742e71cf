"""Effects of a simulated scenario's incidents on the checkpoints, and the truth they make.

``apply_incidents`` turns each incident into extra seconds per phase on the ranks it reaches
(plus the watchdog timeout and rare I/O errors); ``labelled_stalls`` then derives the truth of
``labels.json``: which checkpoints became stalls and which incidents made them so, primary first.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ckptwatch.simulate.cluster import Effect, Incident, Job, overlap

#: A checkpoint is a labelled stall when its barrier time is at least this many times its job's
#: median barrier time.
STALL_RATIO = 2.0


def _scope(inc: Incident, job: Job, j: int) -> tuple[np.ndarray, np.ndarray] | None:
    """Ranks of ``job`` the incident reaches, and a per-rank intensity."""
    ones = np.ones(job.n_ranks)
    if inc.cause == "gc":
        if job.tier == "pool" and inc.targets:
            return np.isin(job.rank_target, inc.targets), ones
        if job.tier == "local" and inc.drives:
            return np.isin(job.rank_drive, inc.drives), ones
        return None
    if inc.cause == "fabric_pause":
        return np.isin(job.rank_node, inc.nodes), ones
    if inc.cause == "saturation":  # every rank of the burst's jobs shares the pool
        return (np.full(job.n_ranks, job.job_id in inc.jobs), ones) if inc.jobs else None
    if inc.cause == "metadata":
        if job.tier != "pool":
            return None
        g = np.random.Generator(np.random.PCG64([int(inc.signal["_seed"]), j]))
        return g.random(job.n_ranks) < inc.signal["rank_fraction"], g.uniform(0.7, 1.3, job.n_ranks)
    if inc.job_id == job.job_id:
        return np.isin(np.arange(job.n_ranks), inc.ranks), ones
    return None


def _effect(i: int, inc: Incident, job: Job, j: int) -> Effect | None:
    """Extra seconds per phase the incident adds to the ranks it reaches.

    A reached rank is held up by ``slowdown - 1`` times the job's normal barrier (scaled by how
    much of the rank's write the incident covers), so the barrier grows to about ``slowdown``
    times normal; the extra time goes where the cause puts it (gc: write and fsync,
    fabric_pause and saturation: mostly write, unknown: write or fsync). Metadata adds latency
    x operations to open and close.
    """
    d0 = job.d0
    rows = np.nonzero((job.starts < inc.end) & (job.starts + d0.max(axis=1) + 0.05 > inc.start))[0]
    scope = _scope(inc, job, j) if rows.size else None
    if scope is None or not scope[0].any():
        return None
    mask, weight = scope
    rs = job.starts[rows, None] + job.skew[rows]
    ov = overlap(rs, rs + d0[rows], inc.start, inc.end) / d0[rows] * mask[None, :]
    if not (ov > 0).any():
        return None
    _, w0, f0, _ = (x[rows] for x in job.healthy)
    zero = np.zeros_like(ov)
    extra = (inc.slowdown - 1.0) * job.baseline_s * ov
    oa, wa, fa, ca = zero, extra, zero, zero
    if inc.cause == "gc":
        wa = extra * w0 / (w0 + f0 * inc.signal["fsync_ratio"])
        fa = extra - wa
    elif inc.cause == "fabric_pause" and job.tier == "pool":
        wa, fa = 0.9 * extra, 0.1 * extra
    elif inc.cause == "saturation":  # the data waits in the pool's queues: writes and fsync
        wa, fa = 0.85 * extra, 0.15 * extra
    elif inc.cause == "fabric_pause":
        wa = inc.signal.get("local_slowdown", 0.02) * w0 * ov
    elif inc.cause == "metadata":
        wa = zero
        ca = inc.signal["metadata_latency_extra_ms"] / 1000.0 * job.files * weight[None, :] * ov
        oa = 2 * ca
    elif inc.variant.endswith("fsync"):
        wa, fa = zero, extra
    return Effect(i, rows, oa, wa, fa, ca)


def apply_incidents(jobs: list[Job], incidents: list[Incident], rng: np.random.Generator) -> None:
    """Final phases: incidents on top of healthy ones, the watchdog timeout, rare I/O errors."""
    for j, job in enumerate(jobs):
        job.effects = [e for i, inc in enumerate(incidents) if (e := _effect(i, inc, job, j))]
        o, w, f, c = (x.copy() for x in job.healthy)
        for e in job.effects:
            for phase, add in zip((o, w, f, c), (e.oa, e.wa, e.fa, e.ca), strict=True):
                phase[e.rows] += add
        status = np.zeros(o.shape, dtype=np.int8)
        over = (o + w + f + c) > job.timeout_s
        if over.any():
            o2 = np.minimum(o, job.timeout_s)
            w2 = np.minimum(w, job.timeout_s - o2)
            f2 = np.minimum(f, job.timeout_s - o2 - w2)
            c2 = np.clip(job.timeout_s - o2 - w2 - f2, 0.0, c)
            o, w, f, c = (np.where(over, a, b) for a, b in ((o2, o), (w2, w), (f2, f), (c2, c)))
            status[over] = 1
        touched = {int(x) for e in job.effects for x in e.rows}
        quiet = [k for k in range(job.starts.size) if k not in touched]
        for _ in range(int(rng.poisson(0.6)) if quiet else 0):
            k, r = int(rng.choice(quiet)), int(rng.integers(job.n_ranks))
            w[k, r] *= rng.uniform(0.05, 0.9)
            f[k, r] = 0.0
            status[k, r] = 2
        job.final, job.status = (o, w, f, c), status
        job.gap = rng.uniform(1e-4, 2e-3, o.shape)  # bookkeeping between the phases


def labelled_stalls(job: Job, incidents: list[Incident]) -> list[dict[str, Any]]:
    """The job's checkpoints whose barrier is at least ``STALL_RATIO`` x its median, each with
    the incidents that made it so (largest contribution first) and their causes."""
    barrier = (sum(job.final[1:], job.final[0]) + job.gap).max(axis=1)
    if barrier.size == 0:
        return []
    median = float(np.median(barrier))
    o0, w0, f0, c0 = job.healthy
    b0 = job.b0
    out = []
    for k in np.nonzero(barrier >= STALL_RATIO * median)[0]:
        contrib = []
        for e in job.effects:
            hit = np.nonzero(e.rows == k)[0]
            if hit.size:
                h = int(hit[0])
                alone = (o0[k] + w0[k] + f0[k] + c0[k]
                         + e.oa[h] + e.wa[h] + e.fa[h] + e.ca[h]).max()
                contrib.append((float(alone - b0[k]), e.incident))
        contrib.sort(key=lambda x: (-x[0], x[1]))
        kept = [x for x in contrib if x[0] >= 0.5 * median] or contrib[:1]
        causes = list(dict.fromkeys(incidents[i].cause for _, i in kept)) or ["unknown"]
        out.append({"job_id": job.job_id, "step": int(job.steps[k]), "causes": causes,
                    "incidents": [incidents[i].id for _, i in kept],
                    "barrier_s": round(float(barrier[k]), 3), "baseline_s": round(median, 3),
                    "ratio": round(float(barrier[k]) / median, 3),
                    "timed_out": bool((job.status[k] == 1).any()),
                    **({} if kept else {"unplanned": True})})
    return out
