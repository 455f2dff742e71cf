"""Incident planning of a simulated scenario: where and when each incident strikes.

``ckptwatch.simulate.workload`` builds the cluster and the jobs' healthy checkpoints; the
``IncidentPlanner`` here then draws the incidents: stalls by ``gc``, ``metadata``,
``fabric_pause`` or ``unknown`` anchored on chosen checkpoints, a two-cause overlap, and
confounders that leave a signal but stall nothing (a pause burst between checkpoints, GC on an
idle pool target, a mild metadata bump, a pause storm on local-tier nodes) and, with
``background_per_stall``, background episodes during stalls on hosts they do not slow.

What an incident does to the checkpoints, and which checkpoints became stalls, is
``ckptwatch.simulate.effects``; the signals each cause leaves behind are
``ckptwatch.simulate.telemetry``. Both read the same ``Incident`` records
(``ckptwatch.simulate.cluster``).
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any

import numpy as np

from ckptwatch.simulate.cluster import GB, Background, Cluster, Incident, Job

STALL_KINDS = ("gc", "metadata", "fabric_pause", "unknown", "overlap")
CONFOUNDER_KINDS = ("pause_between", "gc_idle", "metadata_mild", "fabric_local")
_EXTRA_KINDS = STALL_KINDS + CONFOUNDER_KINDS
_EXTRA_WEIGHTS = np.array([22, 15, 18, 6, 9, 10, 8, 6, 6], dtype=float) / 100.0


def _loguniform(rng: np.random.Generator, lo: float, hi: float) -> float:
    """A log-uniform draw in [lo, hi]."""
    return float(math.exp(rng.uniform(math.log(lo), math.log(hi))))


class IncidentPlanner:
    """Draws incidents: stalls anchored on chosen checkpoints, confounders placed around them."""

    def __init__(self, cluster: Cluster, jobs: list[Job], bg: Background,
                 rng: np.random.Generator, t0: float, t1: float, *, expected: float,
                 smart_interval_s: float, gc_evidence: str = "full",
                 signal_strength: str = "strong", background_per_stall: float = 0.0,
                 variety_rng: np.random.Generator | None = None,
                 bursts: float = 0.0, collide: bool = True) -> None:
        """``expected``: mean number of incidents over [t0, t1]. ``gc_evidence``,
        ``signal_strength``, ``background_per_stall``: ``SimulationConfig``'s; their own draws
        come from ``variety_rng`` (so the default scenario stays as it was). ``bursts``: mean
        number of correlated checkpoint bursts that saturate the pool (and as many that stay
        under its capacity), planned before every other incident. ``collide``: a burst moves
        the pool jobs' nearest checkpoints to one moment; else it happens only where their
        checkpoints already overlap (their schedules collide: ``aligned_phases``)."""
        self.cluster, self.jobs, self.bg, self.rng = cluster, jobs, bg, rng
        self.gc_evidence, self.weak = gc_evidence, signal_strength == "weak"
        self.background_per_stall = background_per_stall
        self.vrng = variety_rng if variety_rng is not None else np.random.default_rng(0)
        self.t0, self.t1, self.expected, self.bursts = t0, t1, expected, bursts
        self.collide = collide
        #: Incidents end before the last SMART interval so that every drive can show them.
        self.t_end = t1 - min(1.4 * smart_interval_s + 100.0, 0.3 * (t1 - t0))
        self.used: dict[tuple[int, int], float] = {}  # (job, checkpoint) -> planned slowdown
        self._required = True
        self.out: list[Incident] = []
        self._target_drive_bw = cluster.target_bw / cluster.drives_per_target

    def plan(self) -> list[Incident]:
        """All incidents, ids in order of start time."""
        expected = self.expected
        if self.bursts > 0:
            for _ in range(max(1, int(self.rng.poisson(self.bursts)))):
                self._saturation()
                self._saturation(under=True)
        if expected <= 0:
            return self._numbered()
        base = ["gc", "metadata", "fabric_pause", "pause_between", "gc_idle", "metadata_mild",
                "unknown", "fabric_local"] + (["overlap"] if expected >= 8 else [])
        n_min = min(len(base), math.ceil(expected) + 1)
        total = max(int(self.rng.poisson(expected)), n_min)
        kinds = base[:n_min] + [str(k) for k in self.rng.choice(
            _EXTRA_KINDS, total - n_min, p=_EXTRA_WEIGHTS)]
        required = len(kinds) - (total - n_min)
        ordered = [(i < required, k) for i, k in enumerate(kinds) if k in STALL_KINDS]
        ordered += [(i < required, k) for i, k in enumerate(kinds) if k in CONFOUNDER_KINDS]
        for required_kind, kind in ordered:
            self._required = required_kind
            getattr(self, f"_{kind}")(1 if required_kind else self._span())
        if self.background_per_stall > 0:
            for inc in [x for x in self.out if x.kind == "stall"]:
                if self.vrng.random() < self.background_per_stall:
                    self._background(inc)
        return self._numbered()

    def _numbered(self) -> list[Incident]:
        """The incidents in order of start time, numbered so."""
        self.out.sort(key=lambda inc: (inc.start, inc.cause))
        return [replace(inc, id=f"inc-{i + 1:03d}") for i, inc in enumerate(self.out)]

    def _background(self, stall: Incident) -> None:
        """An episode during ``stall`` on hosts it does not slow: a pause burst on the stalled
        job's other nodes, or GC on a target (pool) or drive (local) its hit ranks do not
        use. It slows nothing (``slowdown`` 1): activity that singles out no slow rank."""
        r = self.vrng
        job = next(jb for jb in self.jobs if jb.job_id == stall.job_id)
        hit_nodes = set(stall.nodes)
        if stall.cause == "gc" and job.tier == "pool":
            hit_nodes |= {int(job.rank_node[x]) for x in range(job.n_ranks)
                          if int(job.rank_target[x]) in stall.targets}
        elif stall.cause in ("metadata",):
            hit_nodes = set()
        start, end = stall.start, stall.end
        if r.random() < 0.5 or stall.cause == "fabric_pause":
            spare = [int(x) for x in job.nodes if int(x) not in hit_nodes]
            if stall.cause == "unknown" or not spare:
                spare = [int(x) for x in range(len(self.cluster.nodes)) if int(x) not in
                         hit_nodes and int(x) not in job.nodes] or spare
            if not spare:
                return
            nodes = tuple(sorted(int(x) for x in r.choice(spare, min(len(spare), int(
                r.integers(1, 3))), replace=False)))
            # Weaker than a pause storm that stalls (a background of congestion): a share of
            # the stall's own rates when it is a fabric stall.
            own = stall.signal if stall.cause == "fabric_pause" else {
                "pause_frames_per_s": 4e3, "xmit_wait_per_s": 4e6}
            share = r.uniform(0.03, 0.3)
            sig = {"pause_frames_per_s": share * own["pause_frames_per_s"],
                   "tx_frac": r.uniform(0.05, 0.4), "cnp_per_s": r.uniform(50, 500),
                   "xmit_wait_per_s": share * own["xmit_wait_per_s"], "local_slowdown": 0.0}
            self._add(cause="fabric_pause", kind="background", variant="during_stall",
                      job_id=None, start=start, end=end, nodes=nodes, signal=sig)
            return
        if job.tier == "pool":
            used = set(stall.targets) | {int(job.rank_target[x]) for x in stall.ranks}
            spare = [int(t) for t in np.unique(job.rank_target) if int(t) not in used]
            if not spare:
                return
            self._add(cause="gc", kind="background", variant="during_stall_target", job_id=None,
                      start=start, end=end, targets=(int(r.choice(spare)),),
                      signal=self._gc_signal(self._target_drive_bw, 1.0))
        else:
            used_d = set(stall.drives) | {int(job.rank_drive[x]) for x in stall.ranks}
            used_d |= {int(d) for d in job.rank_drive if int(d) // self.cluster.drives_per_node
                       in hit_nodes}
            spare = [int(d) for d in np.unique(job.rank_drive) if int(d) not in used_d]
            if not spare:
                return
            d = int(r.choice(spare))
            self._add(cause="gc", kind="background", variant="during_stall_drive", job_id=None,
                      start=start, end=end, drives=(d,),
                      nodes=(d // self.cluster.drives_per_node,),
                      signal=self._gc_signal(float(self.cluster.local_drive_bw[d]), 1.0))

    def _slowdown(self, j: int, lo: float, hi: float) -> float:
        """Most stalls stay below the job's timeout; about one in eight runs into it."""
        limit = self.jobs[j].timeout_s / self.jobs[j].baseline_s
        if self.rng.random() < 0.12:
            return float(self.rng.uniform(1.05, 1.5) * limit)
        return float(self.rng.uniform(lo, max(lo + 0.2, min(hi, 0.85 * limit))))

    def _span(self) -> int:
        """Checkpoints one optional stall covers: mostly 1, sometimes 2 or 3."""
        return int(self.rng.choice([1, 2, 3], p=[0.75, 0.18, 0.07]))

    def _pick(self, tiers: tuple[str, ...], span: int = 1) -> tuple[int, int] | None:
        """A free (job, first checkpoint) on ``tiers`` for a stall over ``span`` checkpoints."""
        cands = []
        for j, job in enumerate(self.jobs):
            taken = sum(1 for (jj, _) in self.used if jj == j)
            if job.tier not in tiers or taken + span > max(1, job.starts.size // 4):
                continue  # keep stalls a minority: the job's median stays its normal
            for k in range(job.starts.size - span + 1):
                near = any((j, x) in self.used for x in range(k - 1, k + span + 1))
                last = job.starts[k + span - 1] + 2.2 * job.timeout_s + 60.0
                if not near and job.starts[k] - 200 > self.t0 and last < self.t_end:
                    cands.append((j, k))
        return cands[int(self.rng.integers(len(cands)))] if cands else None

    def _window(self, j: int, k: int, span: int, slowdown: float) -> tuple[float, float]:
        """Reserve the checkpoints and return the incident's (start, end) around them."""
        job, last = self.jobs[j], k + span - 1
        for x in range(k, k + span):
            self.used[(j, x)] = max(self.used.get((j, x), 1.0), slowdown)
        onset = -self.rng.uniform(20, 150)
        if not self._required and self.rng.random() < 0.3:  # begins while ranks are writing
            onset = self.rng.uniform(0.05, 0.3) * job.b0[k]
        held = job.b0[last] + (slowdown - 1.0) * job.baseline_s  # the slowed ranks' duration
        return (float(job.starts[k] + onset),
                float(job.starts[last] + held * self.rng.uniform(1.05, 1.3)
                      + self.rng.uniform(10, 60)))

    def _add(self, **kw: Any) -> None:
        """Record one incident (its id is given in ``plan``)."""
        self.out.append(Incident(id="", **kw))

    def _gc_signal(self, drive_bw: float, slowdown: float,
                   local: bool = False) -> dict[str, float]:
        """GC relocation takes the share of the drive's bandwidth that host writes lose."""
        r = self.rng
        busy = 1.0 - 1.0 / slowdown if slowdown > 1.0 else r.uniform(0.5, 0.9)
        sig = {"write_amplification": r.uniform(2.0, 5.0), "free_blocks_pct": r.uniform(1.5, 8),
               "busy_share": r.uniform(0.6, 0.95),
               "relocation_gbs": drive_bw * busy * r.uniform(0.7, 1.0) / GB,
               "fsync_ratio": r.uniform(0.8, 1.5), "lead_s": r.uniform(120, 600),
               "recovery_s": r.uniform(300, 1200)}
        if local and self.gc_evidence == "wa_only":
            # A drive that shows GC only by what it writes to NAND: a modest write
            # amplification rise (1.15-1.6), no free-block dip, no busy time, no heat.
            sig.update(write_amplification=1.0 + 0.15 * (sig["write_amplification"] - 1.0),
                       relocation_gbs=0.0, wa_only=1.0)
        elif self.weak:
            sig.update(write_amplification=1.0 + 0.2 * (sig["write_amplification"] - 1.0),
                       relocation_gbs=0.1 * sig["relocation_gbs"])
        return sig

    def _fabric_signal(self) -> dict[str, float]:
        """Pause-frame, CNP and xmit-wait rates of a fabric incident."""
        r = self.rng
        sig = {"pause_frames_per_s": _loguniform(r, 2e3, 4e4), "tx_frac": r.uniform(0.05, 0.4),
               "cnp_per_s": r.uniform(300, 5000), "xmit_wait_per_s": _loguniform(r, 4e6, 4e7)}
        if self.weak:  # a tenth: still far outside the background, close to checkpoint traffic
            sig.update(pause_frames_per_s=0.1 * sig["pause_frames_per_s"],
                       xmit_wait_per_s=0.1 * sig["xmit_wait_per_s"])
        return sig

    def _gc(self, span: int, at: tuple[int, int] | None = None) -> None:
        """A GC stall on the job's pool targets or local drives."""
        pick = at or self._pick(("pool", "local"), span)
        if pick is None:
            return
        j, k = pick
        job, r = self.jobs[j], self.rng
        slowdown = self._slowdown(j, 2.8, 5.0)
        start, end = self._window(j, k, span, slowdown)
        if k + span < job.starts.size:  # GC keeps cleaning after the burst that triggered it
            end = max(end, min(end + r.uniform(30, 180), float(job.starts[k + span]) - 20))
        targets: tuple[int, ...] = ()
        drives: tuple[int, ...] = ()
        if job.tier == "pool":
            mine = np.unique(job.rank_target)
            many = r.random() >= 0.6 and mine.size > 1
            pick_n = int(r.integers(2, min(mine.size, 4) + 1)) if many else 1
            targets = tuple(int(t) for t in np.sort(r.choice(mine, pick_n, replace=False)))
            variant = "pool_targets" if many else "pool_target"
            bw = self._target_drive_bw
        else:
            u = r.random()
            variant = "local_drive" if u < 0.5 else ("node_drives" if u < 0.8 else "nodes_drives")
            if variant == "local_drive":
                drives = (int(job.rank_drive[r.integers(job.n_ranks)]),)
            else:
                count = 1 if variant == "node_drives" else min(job.nodes.size,
                                                               int(r.integers(2, 4)))
                variant = "node_drives" if count == 1 else variant
                hosts = r.choice(job.nodes, count, replace=False)
                dpn = self.cluster.drives_per_node
                drives = tuple(int(h) * dpn + x for h in np.sort(hosts) for x in range(dpn))
            bw = float(self.cluster.local_drive_bw[list(drives)].mean())
        nodes = sorted({d // self.cluster.drives_per_node for d in drives})
        self._add(cause="gc", kind="stall", variant=variant, job_id=job.job_id, start=start,
                  end=end, nodes=tuple(nodes), targets=targets, drives=drives,
                  slowdown=slowdown, signal=self._gc_signal(bw, slowdown,
                                                            local=job.tier == "local"))

    def _metadata(self, span: int, at: tuple[int, int] | None = None) -> None:
        """A metadata stall: an operations storm or a degraded metadata service."""
        pick = at or self._pick(("pool",), span)
        if pick is None:
            return
        j, k = pick
        job, r = self.jobs[j], self.rng
        slowdown = self._slowdown(j, 2.8, 4.5)
        start, end = self._window(j, k, span, slowdown)
        storm = r.random() < 0.65
        self._add(cause="metadata", kind="stall", variant="ops_storm" if storm else "degraded",
                  job_id=job.job_id, start=start, end=end, slowdown=slowdown, signal={
                      "metadata_latency_extra_ms":
                          (slowdown - 1.0) * job.baseline_s / (3 * job.files) * 1000.0,
                      "metadata_ops_factor": r.uniform(4, 15) if storm else r.uniform(0.4, 0.8),
                      "rank_fraction": r.uniform(0.5, 1.0), "_seed": float(r.integers(2**31))})

    def _fabric_pause(self, span: int, at: tuple[int, int] | None = None) -> None:
        """A pause-frame stall on a leaf or a few nodes of a pool job."""
        pick = at or self._pick(("pool",), span)
        if pick is None:
            return
        j, k = pick
        job = self.jobs[j]
        slowdown = self._slowdown(j, 2.8, 4.5)
        start, end = self._window(j, k, span, slowdown)
        nodes, leaf, variant = self._fabric_scope(job.nodes)
        self._add(cause="fabric_pause", kind="stall", variant=variant, job_id=job.job_id,
                  start=start, end=end, nodes=nodes, leaf=leaf, slowdown=slowdown,
                  signal=self._fabric_signal())

    def _fabric_scope(self, pool_nodes: np.ndarray,
                      within: bool = False) -> tuple[tuple[int, ...], int | None, str]:
        """Nodes hit by a pause storm: a whole leaf (``leaf``) or 1-3 nodes (``nodes``)."""
        r = self.rng
        node = int(r.choice(pool_nodes))
        leaf = int(self.cluster.leaf[node])
        if r.random() < 0.55:
            members = np.nonzero(self.cluster.leaf == leaf)[0]
            if within:
                members = np.intersect1d(members, pool_nodes)
            return tuple(int(x) for x in members), leaf, "leaf"
        count = min(pool_nodes.size, int(r.integers(1, 4)))
        chosen = np.sort(r.choice(pool_nodes, count, replace=False))
        return tuple(int(x) for x in chosen), None, "nodes"

    def _unknown(self, span: int) -> None:
        """A stall with no telemetry signal: one rank, one node or scattered ranks."""
        pick = self._pick(("pool", "local"), span)
        if pick is None:
            return
        j, k = pick
        job, r = self.jobs[j], self.rng
        u = r.random()
        if u < 0.4:
            variant, ranks = "one_rank", [int(r.integers(job.n_ranks))]
        elif u < 0.8:
            node = int(r.choice(job.nodes))
            variant, ranks = "one_node", np.nonzero(job.rank_node == node)[0].tolist()
        else:
            count = min(job.n_ranks, int(r.integers(2, 9)))
            variant = "scattered"
            ranks = sorted(r.choice(job.n_ranks, count, replace=False).tolist())
        slowdown = self._slowdown(j, 3.2, 5.0)
        start, end = self._window(j, k, span, slowdown)
        phase = "fsync" if r.random() < 0.3 else "write"
        self._add(cause="unknown", kind="stall", variant=f"{variant}_{phase}", job_id=job.job_id,
                  start=start, end=end, nodes=tuple(sorted({int(job.rank_node[x]) for x in ranks})),
                  ranks=tuple(ranks), slowdown=slowdown)

    def _saturation(self, under: bool = False) -> None:
        """A correlated burst: every pool job's checkpoint nearest one of a pool job's is moved
        to start within seconds of it (the jobs' phases collide), and the pool's bandwidth is
        shared by all their ranks and by the other tenants' burst: each gets capacity over
        demand of what it asks, so every rank of every job in the burst is slowed by demand /
        capacity (``slowdown``). The pool writes at its ceiling over the burst (the tenants
        make up what the ranks leave), its latency and queues rise on every target, and the
        incast raises pause frames / PortXmitWait on every writer's node (a ``background``
        fabric episode that slows nothing itself). ``under``: a burst that stays under the
        capacity (no tenants' burst: the jobs' own demand, slowed at most 1.6x): a
        confounder."""
        r, cl = self.rng, self.cluster
        pool = [j for j, job in enumerate(self.jobs) if job.tier == "pool" and job.starts.size]
        if len(pool) < 2:
            return
        pick = self._pick(("pool",), 1)
        if pick is None:
            return
        j, k = pick
        at = float(self.jobs[j].starts[k])
        members = [(j, k)]
        for o in pool:
            other = self.jobs[o]
            taken = sum(1 for (jj, _) in self.used if jj == o)
            if o == j or taken + 1 > max(1, other.starts.size // 4):
                continue
            if not other.starts.size:
                continue
            kk = int(np.argmin(np.abs(other.starts - at)))
            move = at + float(r.uniform(0.0, 4.0)) - float(other.starts[kk])
            near = any((o, x) in self.used for x in range(kk - 1, kk + 2))
            if near or abs(move) > 0.4 * other.interval_s:
                continue
            if not self.collide:  # only checkpoints whose writes already overlap
                if abs(float(other.starts[kk]) - at) >= min(float(other.b0[kk]),
                                                            float(self.jobs[j].b0[k])):
                    continue
            else:
                other.starts[kk] += move
            members.append((o, kk))
        if len(members) < 2:
            self.used.pop((j, k), None)
            return
        capacity = cl.target_bw * len(cl.targets)
        demand = sum(float(self.jobs[o].nbytes.sum() / self.jobs[o].b0[kk])
                     for o, kk in members)
        if under:
            slowdown = float(min(1.6, max(1.05, demand / capacity)))
            tenants = 0.0
        else:
            slowdown = max(self._slowdown(j, 2.6, 4.2), demand / capacity)
            tenants = slowdown * capacity - demand
        for o, kk in members:
            self.used[(o, kk)] = max(self.used.get((o, kk), 1.0), slowdown)
        start = at - float(r.uniform(5.0, 40.0))
        # each job's writes over the burst: from its start, slowed (its barrier's length)
        spans = [(float(self.jobs[o].starts[kk]), float(self.jobs[o].starts[kk]) + (
            float(self.jobs[o].b0[kk]) + (slowdown - 1.0) * self.jobs[o].baseline_s),
            float(self.jobs[o].nbytes.sum() / self.jobs[o].b0[kk]) / slowdown)
            for o, kk in members]
        end = max(b for _, b, _ in spans) + float(r.uniform(5.0, 30.0))
        jobs = tuple(self.jobs[o].job_id for o, _ in members)
        # The other tenants take what the ranks leave of the pool's bandwidth: the pool writes
        # at its ceiling over the whole burst (segments: start, end, bytes/s)
        surges: list[tuple[float, float, float]] = []
        if not under:
            cuts = sorted({start, end, *(min(max(x, start), end) for a, b, _ in spans
                                         for x in (a, b))})
            for a, b in zip(cuts, cuts[1:], strict=False):
                ranks = sum(rate for s0, s1, rate in spans if s0 <= (a + b) / 2 < s1)
                surges.append((a, b, max(0.0, capacity - ranks)))
        nodes = tuple(sorted(int(x) for o, _ in members for x in self.jobs[o].nodes))
        self._add(cause="saturation", kind="confounder" if under else "stall",
                  variant="under_capacity" if under else f"burst_{len(members)}_jobs",
                  job_id=self.jobs[j].job_id, start=start, end=end, nodes=nodes,
                  targets=tuple(range(len(cl.targets))), slowdown=slowdown, jobs=jobs,
                  surges=tuple(surges),
                  signal={"demand_gbs": (demand + tenants) / GB, "capacity_gbs": capacity / GB,
                          "jobs_gbs": demand / GB, "tenants_gbs": tenants / GB})
        if not under:  # the incast: pauses on every writer, a consequence that slows nothing
            sig = self._fabric_signal()
            share = float(r.uniform(0.3, 1.0))
            sig.update(pause_frames_per_s=share * sig["pause_frames_per_s"],
                       xmit_wait_per_s=share * sig["xmit_wait_per_s"], local_slowdown=0.0)
            self._add(cause="fabric_pause", kind="background", variant="incast", job_id=None,
                      start=start, end=end, nodes=nodes, signal=sig)

    def _overlap(self, span: int) -> None:
        """Two different causes on the same pool checkpoint."""
        pick = self._pick(("pool",), 1)
        if pick is None:
            return
        first, second = self.rng.choice(["gc", "fabric_pause", "metadata"], 2, replace=False)
        for cause in (first, second):
            getattr(self, f"_{cause}")(1, at=pick)

    def _busy(self, jobs: list[int]) -> list[tuple[float, float]]:
        """When these jobs' ranks may be writing, counting every stall planned so far."""
        stalls = [(inc.start, inc.end, inc.slowdown) for inc in self.out if inc.kind == "stall"]
        out = []
        for j in jobs:
            job = self.jobs[j]
            for k in range(job.starts.size):
                s, b = float(job.starts[k]), float(job.b0[k])
                slow = max([self.used.get((j, k), 1.0)]
                           + [r for a, e, r in stalls if a < s + 3 * b and e > s])
                out.append((s - 15.0, s + (b + (slow - 1) * job.baseline_s) * 1.3 + 20.0))
        return sorted(out)

    def _slot(self, busy: list[tuple[float, float]], length: float) -> float | None:
        """A random start for ``length`` seconds that touches none of ``busy``, if any."""
        free, cursor = [], self.t0 + 60.0
        for s, e in sorted([*busy, (self.t_end, math.inf)]):
            if s - cursor >= length:
                free.append((cursor, s - length))
            cursor = max(cursor, e)
        if not free:
            return None
        lo, hi = free[int(self.rng.integers(len(free)))]
        return float(self.rng.uniform(lo, hi))

    def _pause_between(self, _span: int) -> None:
        """A confounder: a pause burst while no rank under it is writing."""
        r, cl = self.rng, self.cluster
        for attempt in range(4):
            if r.random() < 0.6:
                leaf: int | None = int(r.integers(len(cl.leaves)))
                nodes = np.nonzero(cl.leaf == leaf)[0]
            else:
                leaf = None
                nodes = np.sort(r.choice(len(cl.nodes), int(r.integers(1, 4)), replace=False))
            touching = [j for j, job in enumerate(self.jobs)
                        if np.intersect1d(job.nodes, nodes).size]
            length = float(r.uniform(30, 240)) * 0.6**attempt
            start = self._slot(self._busy(touching), length)
            if start is not None:
                self._add(cause="fabric_pause", kind="confounder", variant="between_checkpoints",
                          job_id=None, start=start, end=start + length,
                          nodes=tuple(int(x) for x in nodes), leaf=leaf,
                          signal=self._fabric_signal())
                return

    def _gc_idle(self, _span: int) -> None:
        """A confounder: GC on a pool target while nobody writes to it."""
        for attempt in range(6):
            target = int(self.rng.integers(len(self.cluster.targets)))
            writers = [j for j, job in enumerate(self.jobs) if np.any(job.rank_target == target)]
            length = float(self.rng.uniform(120, 400)) * 0.7**attempt
            start = self._slot(self._busy(writers), length)
            if start is not None:
                self._add(cause="gc", kind="confounder", variant="idle_target", job_id=None,
                          start=start, end=start + length, targets=(target,),
                          signal=self._gc_signal(self._target_drive_bw, 1.0))
                return

    def _metadata_mild(self, _span: int) -> None:
        """A confounder: a metadata bump too small to stall a checkpoint."""
        r = self.rng
        pool = [job for job in self.jobs if job.tier == "pool"]
        if not pool:
            return
        pick = self._pick(("pool",)) if r.random() < 0.7 else None
        if pick is not None:
            job = self.jobs[pick[0]]
            start = float(job.starts[pick[1]] - r.uniform(10, 60))
            end = max(start + 60.0, float(job.starts[pick[1]] + job.b0[pick[1]] * r.uniform(1, 2)))
            self.used[pick] = 1.3
        else:
            start = float(r.uniform(self.t0 + 60, max(self.t0 + 61, self.t_end - 600)))
            end = start + float(r.uniform(60, 600))
        bound = 0.2 * min(j.baseline_s / (3 * j.files) for j in pool)
        extra = min(bound, float(self.bg.meta_at(np.array(start))) * r.uniform(1.0, 3.0))
        self._add(cause="metadata", kind="confounder", variant="mild", job_id=None,
                  start=start, end=end, signal={
                      "metadata_latency_extra_ms": extra * 1000.0,
                      "metadata_ops_factor": r.uniform(1.5, 3.0),
                      "rank_fraction": r.uniform(0.5, 1.0), "_seed": float(r.integers(2**31))})

    def _fabric_local(self, _span: int) -> None:
        """A confounder: a pause storm on local-tier nodes, which barely slows them."""
        pick = self._pick(("local",))
        if pick is None:
            return
        j, k = pick
        job, r = self.jobs[j], self.rng
        self.used[pick] = 1.1
        nodes, leaf, variant = self._fabric_scope(job.nodes, within=True)
        signal = {**self._fabric_signal(), "local_slowdown": r.uniform(0.0, 0.05)}
        self._add(cause="fabric_pause", kind="confounder", variant=f"local_tier_{variant}",
                  job_id=job.job_id, start=float(job.starts[k] - r.uniform(20, 120)),
                  end=float(job.starts[k] + job.b0[k] * r.uniform(1.2, 2.5) + r.uniform(10, 60)),
                  nodes=nodes, leaf=leaf, signal=signal)
