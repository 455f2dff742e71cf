"""A stagger plan: the checkpoint phase offsets that spread jobs' bursts on a shared pool.

Each job of a pool (``pool_job_schedules``: measured from the lake) writes ``bytes`` every
``interval_s`` for ``duration_s`` at ``rate_bps``; its phase today is its latest checkpoint's
start. Over a horizon (four of the longest interval, between 1 and 24 hours, in 1 s steps)
the pool's demand is the sum of the jobs' rectangular pulses.

**Offsets.** Greedily, the job of the highest rate first keeps its phase; each next job takes
the delay (a multiple of ``interval_s / 240``, at least 1 s) that gives the lowest peak of the
demand so far plus its pulses; among those, the one where the others' demand while it writes
is least (under the peak, jobs that still meet share the pool: a burst other tenants push
over); the smallest such delay on a tie (a job already apart stays).

**Slowdown model** (stated, simple): fluid sharing. While the writing jobs' rates add up to
more than the capacity, each gets its rate's share of the capacity; a checkpoint ends when its
bytes are written. A checkpoint's predicted barrier is the job's measured barrier p50 times its
slowdown (the fluid duration over ``duration_s``); a job's predicted barrier p99 is the 99th
percentile of those over the horizon, with today's phases (before) and with the offsets
(after).

**Tiering.** When even the staggered peak is above the capacity, the jobs of the highest rate
move to node-local drives for their frequent snapshots (the essay's tiering answer) until the
rest fits; the plan names them and the bandwidth the pool would need for all.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

#: Candidate delays per interval (the grid step is interval / this, at least 1 s).
DELAY_STEPS = 240
#: The horizon: this many of the longest interval, clipped to [MIN_H, MAX_H] seconds.
HORIZON_INTERVALS = 4
MIN_HORIZON_S = 3600
MAX_HORIZON_S = 86400


@dataclass(frozen=True)
class JobSchedule:
    """A job's measured checkpoint schedule on a pool (a ``pool_job_schedules`` row)."""

    job_id: str
    interval_s: float
    duration_s: float
    bytes: float
    phase_s: float  # its latest checkpoint's start, epoch seconds
    barrier_p50_s: float | None = None
    barrier_p99_s: float | None = None
    #: how far its checkpoints' starts stray from the schedule (a guard band around them)
    jitter_s: float = 0.0

    @property
    def rate_bps(self) -> float:
        return self.bytes / self.duration_s


@dataclass(frozen=True)
class JobAdvice:
    """One job's line of the plan."""

    job_id: str
    interval_s: float
    duration_s: float
    bytes: float
    rate_bps: float
    delay_s: float
    advice: str
    barrier_p99_s: float | None
    predicted_p99_before_s: float | None
    predicted_p99_after_s: float | None
    to_local: bool = False


@dataclass(frozen=True)
class StaggerPlan:
    """A pool's plan: the peaks before and after, the capacity, each job's advice."""

    pool: str
    capacity_bps: float
    capacity_source: str
    horizon_s: int
    peak_before_bps: float
    peak_after_bps: float
    jobs: tuple[JobAdvice, ...] = field(default_factory=tuple)
    #: Jobs whose frequent snapshots belong on node-local drives (the staggered peak is above
    #: the capacity), and the bandwidth the pool would need for every job staggered.
    to_local: tuple[str, ...] = ()
    needed_bps: float = 0.0

    @property
    def fits(self) -> bool:
        return self.peak_after_bps <= self.capacity_bps

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["fits"] = self.fits
        return out


def _horizon(jobs: list[JobSchedule]) -> int:
    longest = max(j.interval_s for j in jobs)
    return int(min(MAX_HORIZON_S, max(MIN_HORIZON_S, HORIZON_INTERVALS * longest)))


def _pulses(job: JobSchedule, phase: float, horizon: int, t0: float,
            guard: float = 0.0) -> np.ndarray:
    """The job's demand per second over [t0, t0 + horizon): its rate while a checkpoint writes
    (``guard`` seconds more on either side: where it may write, its start straying)."""
    t = np.arange(horizon, dtype=float) + t0
    inside = np.mod(t - phase + guard, job.interval_s) < job.duration_s + 2 * guard
    return np.where(inside, job.rate_bps, 0.0)


def _best_delay(current: np.ndarray, job: JobSchedule, horizon: int, t0: float) -> float:
    """The delay of ``job``'s phase giving the lowest peak with ``current``; among those, the
    least of the others' demand while it writes (a job that stays under the peak but still
    meets another's checkpoints shares the pool with it: the burst a tenant's surge pushes
    over); the smallest delay on a tie (a job already apart stays)."""
    step = max(1.0, job.interval_s / DELAY_STEPS)

    def cost(delay: float) -> tuple[float, float]:
        pulses = _pulses(job, job.phase_s + delay, horizon, t0)
        near = _pulses(job, job.phase_s + delay, horizon, t0, guard=job.jitter_s)
        return float(np.max(current + pulses)), float(current[near > 0].sum())

    best = 0.0
    best_peak, best_shared = cost(0.0)
    for k in range(1, max(1, int(job.interval_s // step))):
        delay = k * step
        peak, shared = cost(delay)
        if peak < best_peak * (1 - 1e-9) or (
                peak <= best_peak * (1 + 1e-9) and shared < best_shared * (1 - 1e-9)):
            best, best_peak, best_shared = delay, peak, shared
    return best


def fluid_slowdowns(jobs: list[JobSchedule], phases: list[float], capacity_bps: float,
                    horizon: int, t0: float) -> list[list[float]]:
    """Each job's checkpoints' slowdowns (fluid duration / ``duration_s``) over the horizon
    under fluid sharing of ``capacity_bps``: the checkpoints that start in it."""
    n = len(jobs)
    rates = np.array([j.rate_bps for j in jobs])
    starts = [list(np.arange(p + math.ceil((t0 - p) / j.interval_s) * j.interval_s,
                             t0 + horizon, j.interval_s)) for j, p in zip(jobs, phases,
                                                                           strict=True)]
    remaining = np.zeros(n)
    began = np.full(n, np.nan)
    nxt = [0] * n
    out: list[list[float]] = [[] for _ in jobs]
    dt = 1.0
    t = t0
    end = t0 + horizon + 4 * max(j.duration_s for j in jobs)
    while t < end:
        for i in range(n):
            if nxt[i] < len(starts[i]) and starts[i][nxt[i]] <= t and remaining[i] <= 0:
                remaining[i] = jobs[i].bytes
                began[i] = starts[i][nxt[i]]
                nxt[i] += 1
        active = remaining > 0
        if not active.any():
            upcoming = [starts[i][nxt[i]] for i in range(n) if nxt[i] < len(starts[i])]
            if not upcoming:
                break
            t = max(t + dt, math.floor(min(upcoming)))
            continue
        demand = float(rates[active].sum())
        scale = min(1.0, capacity_bps / demand) if demand > 0 else 1.0
        written = rates * scale * dt
        for i in (int(k) for k in np.nonzero(active)[0]):
            if written[i] >= remaining[i]:
                done = t + remaining[i] / (rates[i] * scale)
                out[i].append(max(1.0, (done - began[i]) / jobs[i].duration_s))
                remaining[i] = 0.0
            else:
                remaining[i] -= written[i]
        t += dt
    return out


def _p99(values: list[float]) -> float | None:
    return float(np.quantile(values, 0.99)) if values else None


def _delay_text(delay: float, interval: float) -> str:
    if delay < 1.0:
        return "keep its phase"
    later = delay <= interval / 2
    d = delay if later else interval - delay
    minutes, seconds = divmod(round(d), 60)
    when = f"{minutes} min {seconds} s" if minutes else f"{seconds} s"
    return f"start its checkpoints {when} {'later' if later else 'earlier'}"


def stagger(pool: str, jobs: list[JobSchedule], capacity_bps: float,
            capacity_source: str) -> StaggerPlan:
    """The plan for one pool's jobs (see the module doc)."""
    if not jobs:
        return StaggerPlan(pool, capacity_bps, capacity_source, 0, 0.0, 0.0)
    horizon = _horizon(jobs)
    t0 = max(j.phase_s for j in jobs)
    order = sorted(jobs, key=lambda j: (-j.rate_bps, j.job_id))
    before = sum((_pulses(j, j.phase_s, horizon, t0) for j in jobs), np.zeros(horizon))
    current = np.zeros(horizon)
    delays: dict[str, float] = {}
    for k, job in enumerate(order):
        delays[job.job_id] = 0.0 if k == 0 else _best_delay(current, job, horizon, t0)
        current = current + _pulses(job, job.phase_s + delays[job.job_id], horizon, t0)
    after_phases = [j.phase_s + delays[j.job_id] for j in jobs]
    slow_before = fluid_slowdowns(jobs, [j.phase_s for j in jobs], capacity_bps, horizon, t0)
    slow_after = fluid_slowdowns(jobs, after_phases, capacity_bps, horizon, t0)
    peak_after = float(current.max())
    to_local: list[str] = []
    if peak_after > capacity_bps:
        rest = current.copy()
        for job in order:
            if float(rest.max()) <= capacity_bps:
                break
            rest = rest - _pulses(job, job.phase_s + delays[job.job_id], horizon, t0)
            to_local.append(job.job_id)
    advice = []
    for j, sb, sa in zip(jobs, slow_before, slow_after, strict=True):
        base = j.barrier_p50_s if j.barrier_p50_s is not None else j.duration_s
        advice.append(JobAdvice(
            j.job_id, j.interval_s, j.duration_s, j.bytes, j.rate_bps, delays[j.job_id],
            _delay_text(delays[j.job_id], j.interval_s), j.barrier_p99_s,
            _p99([base * s for s in sb]), _p99([base * s for s in sa]),
            to_local=j.job_id in to_local))
    advice.sort(key=lambda a: (-a.rate_bps, a.job_id))
    return StaggerPlan(pool, capacity_bps, capacity_source, horizon, float(before.max()),
                       peak_after, tuple(advice), tuple(to_local), peak_after)


def config_snippet(plans: list[StaggerPlan]) -> str:
    """The plans as TOML a scheduler or a job launcher can read: per pool and job, the
    interval and the delay to add to the job's current checkpoint phase."""
    lines = ["# ckptwatch plan stagger: delay each job's checkpoints by delay_s (seconds) from",
             "# their current phase; interval_s is the job's measured checkpoint interval."]
    for plan in plans:
        lines.append(f'\n[stagger."{plan.pool}"]')
        for a in plan.jobs:
            local = ", local_snapshots = true" if a.to_local else ""
            lines.append(f'"{a.job_id}" = {{ interval_s = {a.interval_s:.0f}, '
                         f"delay_s = {a.delay_s:.0f}{local} }}")
    return "\n".join(lines) + "\n"
