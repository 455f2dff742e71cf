"""Planning inputs measured in the lake: one job's checkpoint barrier times, and calibration.

The numbers come from the ``plan_measurements`` mart (``sql/marts/plan_measurements.sql``), read
through :func:`ckptwatch.lake.query.connect`, so planning sees the lake exactly as every other
view does: staged and de-duplicated by ``stg_checkpoint_writes``, barrier p50/p99 as the
``job_latency`` mart computes them. :func:`calibrate` then sets the model's bandwidth and tail
factor of the measured tier so that the model reproduces the measurement.

duckdb and the lake modules are imported inside :func:`measure_from_lake`, so that importing
this module (and ``ckptwatch --help``) stays fast.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ckptwatch.errors import LakeError, PlanInputError
from ckptwatch.planning.model import SECONDS_PER_YEAR, PlanInputs
from ckptwatch.planning.tails import TailFit, fit_tail

if TYPE_CHECKING:
    import duckdb

#: Each asked-for job's main tier (the tier with more rank writes) in ``plan_measurements``
#: (one query for every job: the mart costs the same for one job as for all of them).
_MEASUREMENT_SQL = """
select
    job_id,
    tier,
    n_checkpoints,
    n_ranks,
    gpus_per_node,
    bytes_per_rank,
    barrier_p50_s,
    barrier_p99_s,
    timeout_s,
    checkpoint_interval_s,
    measured_interval_s,
    n_timed_out,
    observed_s,
from plan_measurements
where is_main_tier and list_contains($job_ids, job_id)
"""

#: Barrier time of each of the jobs' checkpoints, per tier (for the tail fit; the job's main
#: tier is kept). A checkpoint whose ranks never finished has only a lower bound and is left
#: out.
_BARRIERS_SQL = """
select
    job_id,
    tier,
    barrier_s,
from checkpoint_latency
where list_contains($job_ids, job_id) and not barrier_is_lower_bound
order by job_id, tier, step
"""

#: Restores of each job (DLIO ``load_ckptN``, the ``stg_checkpoint_loads`` view): one restore
#: per step = its slowest rank's load; the median over steps, on the tier with the most
#: restores (ties: by name).
_RESTORE_SQL = """
with
loads as (
    select * from stg_checkpoint_loads
    where list_contains($job_ids, job_id)
),

restores as (
    select
        job_id,
        tier,
        step,
        max(duration_s) as restore_s,
    from loads
    group by job_id, tier, step
),

per_tier as (
    select
        job_id,
        tier,
        count(*) as n_restores,
        median(restore_s) as restore_p50_s,
    from restores
    group by job_id, tier
),

ranked as (
    select
        *,
        row_number() over (
            partition by job_id order by n_restores desc, tier
        ) as tier_rank,
    from per_tier
)

select job_id, tier, n_restores, restore_p50_s from ranked
where tier_rank = 1
"""

_HAS_VIEW_SQL = "select count(*) from duckdb_views() where view_name = $name"

#: The optional view of measured restores (made by the DLIO load ingest).
RESTORE_VIEW = "stg_checkpoint_loads"

#: The views the measurement reads: all its connection needs to build (with
#: :data:`RESTORE_VIEW` where the SQL directory has it: :func:`measurement_views`).
MEASUREMENT_VIEWS = ("plan_measurements", "checkpoint_latency")

#: A few jobs that can be planned, for the message when the asked-for one cannot.
_JOBS_SQL = """
select distinct job_id
from plan_measurements
order by job_id
limit 8
"""


#: The highest timeout probability per checkpoint taken from a measurement: at 1 no segment of
#: work ever completes and the model's wall time is infinite.
MAX_MEASURED_TIMEOUT_PROBABILITY = 0.99


def timeout_probability_of_rate(per_year: float | None, interval_s: float | None) -> float | None:
    """Timeouts per checkpoint from timeouts per year at a checkpoint interval: ``per_year x
    interval_s / a year`` (at most :data:`MAX_MEASURED_TIMEOUT_PROBABILITY`); None without
    both."""
    if per_year is None or interval_s is None or interval_s <= 0:
        return None
    return min(per_year * interval_s / SECONDS_PER_YEAR, MAX_MEASURED_TIMEOUT_PROBABILITY)


@dataclass(frozen=True)
class TimeoutInputs:
    """The checkpoint timeout, interval and timeout rate a plan from the lake uses, each with
    where it comes from (the job's row in the lake, a measurement, a flag or the config)."""

    timeout_s: float | None
    timeout_source: str
    interval_s: float | None
    interval_source: str
    per_year: float | None
    per_year_source: str

    @property
    def probability(self) -> float | None:
        """Timeouts per checkpoint (:func:`timeout_probability_of_rate`)."""
        return timeout_probability_of_rate(self.per_year, self.interval_s)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready mapping."""
        return {**asdict(self), "probability": self.probability}


@dataclass(frozen=True)
class LakeMeasurement:
    """One job's checkpoint barrier times on its main tier, from the ``plan_measurements`` mart.

    Barrier time of a checkpoint (job_id, step) = max ``duration_s`` over its ranks, every rank
    counted whatever its status (it held the barrier); ``p50_s`` / ``p99_s`` = ``quantile_cont``
    of the barrier time over the job's checkpoints: ``job_latency``'s ``barrier_p50_s`` /
    ``barrier_p99_s``. A write sent twice counts once (``stg_checkpoint_writes``). If the job
    wrote to both tiers, the tier with more rank writes is used.
    """

    job_id: str
    tier: str
    checkpoints: int
    ranks: int
    gpus_per_node: int
    bytes_per_rank: float
    p50_s: float
    p99_s: float
    source: str
    #: Barrier time of each checkpoint on the tier (seconds), for the tail fit.
    barrier_s: tuple[float, ...] = ()
    #: Median restore (slowest rank's load per step) from ``stg_checkpoint_loads``; None: the
    #: view is absent or has no loads of the job, and the configured restart cost is used.
    restore_s: float | None = None
    restore_tier: str | None = None
    restores: int = 0
    #: The job's checkpoint timeout and interval (``jobs`` table; None without them), the
    #: interval measured instead (median gap between checkpoint starts), its timed-out
    #: checkpoints and the span they were seen over (first start to last end), all on the tier.
    timeout_s: float | None = None
    checkpoint_interval_s: float | None = None
    measured_interval_s: float | None = None
    n_timed_out: int = 0
    observed_s: float = 0.0
    #: What the plan uses (:func:`resolve_timeouts`: the measurement, or the flags over it);
    #: None until resolved.
    timeouts: TimeoutInputs | None = None

    @property
    def interval_s(self) -> float | None:
        """The job's checkpoint interval: the ``jobs`` table's, else measured (None: neither)."""
        if self.checkpoint_interval_s is not None and self.checkpoint_interval_s > 0:
            return self.checkpoint_interval_s
        return self.measured_interval_s or None

    @property
    def interval_source(self) -> str:
        """Where :attr:`interval_s` comes from, in words."""
        if self.checkpoint_interval_s is not None and self.checkpoint_interval_s > 0:
            return "jobs.checkpoint_interval_s"
        if self.measured_interval_s:
            return f"measured: median gap between the {self.checkpoints} checkpoint starts"
        return "unknown (no checkpoint_interval_s and a single checkpoint)"

    @property
    def timeouts_per_year(self) -> float | None:
        """Timed-out checkpoints per year: ``n_timed_out`` over the observed span, scaled to a
        year (None when the span is empty)."""
        if self.observed_s <= 0:
            return None
        return self.n_timed_out / self.observed_s * SECONDS_PER_YEAR

    @property
    def timeouts_how(self) -> str:
        """How :attr:`timeouts_per_year` is computed, in words."""
        return (f"{self.n_timed_out} of {self.checkpoints} checkpoints timed out in the "
                f"{self.observed_s / 3600:.3g} h observed, first checkpoint start to last end, "
                "scaled to a year")

    @property
    def tail_factor(self) -> float:
        """Measured p99/p50 of the barrier time (at least 1)."""
        return max(self.p99_s / self.p50_s, 1.0)

    @property
    def restart_source(self) -> str:
        """Where the restart cost of the measured restore's tier comes from, in words."""
        if self.restore_s is None:
            return f"configured (no {RESTORE_VIEW} rows for job {self.job_id})"
        return (f"measured: median of {self.restores} restores of job {self.job_id} "
                f"({self.restore_tier} tier, {RESTORE_VIEW})")

    def tail_fit(self) -> TailFit | None:
        """Lognormal and Pareto fits of the barrier times (None with fewer than 5)."""
        if len(self.barrier_s) < 5:
            return None
        try:
            return fit_tail(self.barrier_s, origin=self.source)
        except PlanInputError:
            return None

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready mapping."""
        d = {**asdict(self), "tail_factor": self.tail_factor,
             "restart_source": self.restart_source, "interval_s": self.interval_s,
             "interval_source": self.interval_source,
             "timeouts_per_year": self.timeouts_per_year, "timeouts_how": self.timeouts_how}
        d["barrier_s"] = list(self.barrier_s)
        d["timeouts"] = None if self.timeouts is None else self.timeouts.to_dict()
        fit = self.tail_fit()
        d["tail_fit"] = None if fit is None else fit.to_dict()
        return d


def measurement_views() -> tuple[str, ...]:
    """The views a connection for :func:`measure_jobs_from_lake` builds:
    :data:`MEASUREMENT_VIEWS`, and the measured restores' view when the SQL directory has it."""
    from ckptwatch.lake.query import view_files

    if any(f.stem == RESTORE_VIEW for f in view_files()):
        return (*MEASUREMENT_VIEWS, RESTORE_VIEW)
    return MEASUREMENT_VIEWS


def measure_from_lake(lake: Path | str, job: str, *,
                      con: duckdb.DuckDBPyConnection | None = None) -> LakeMeasurement:
    """Measured p50/p99 barrier time, tier, ranks and bytes per rank of one job in the lake.

    ``con``: a connection from :func:`ckptwatch.lake.query.connect` over ``lake`` (every day)
    to reuse when measuring many jobs; None: open one and close it again. Many jobs at once:
    :func:`measure_jobs_from_lake` (one pass over the lake for all of them).
    """
    found = measure_jobs_from_lake(lake, [job], con=con)[job]
    if isinstance(found, LakeError):
        raise found
    return found


def measure_jobs_from_lake(lake: Path | str, jobs: Sequence[str], *,
                           con: duckdb.DuckDBPyConnection | None = None
                           ) -> dict[str, LakeMeasurement | LakeError]:
    """:func:`measure_from_lake` of each job of ``jobs``, from one query per view for all of
    them: each job's measurement, or the :class:`LakeError` saying why it has none (no
    checkpoint writes, or a barrier p50 or bytes per rank that is not > 0). A lake without
    checkpoint writes raises that error for every job. ``con``: as for
    :func:`measure_from_lake`."""
    from ckptwatch.lake.query import connect, run_sql
    from ckptwatch.lake.store import Lake

    store = Lake(lake)
    table_dir = store.table_dir("checkpoint_writes")
    pattern = store.glob("checkpoint_writes")
    if not any(table_dir.glob("*/*.parquet")):
        raise LakeError(
            f"no checkpoint_writes Parquet under {table_dir} (expected "
            f"{table_dir}/date=YYYY-MM-DD/*.parquet); check --from-lake or ingest telemetry "
            "into that lake first")
    wanted = list(dict.fromkeys(jobs))
    if not wanted:
        return {}
    db = con if con is not None else connect(store.root, views=measurement_views())
    try:
        params = {"job_ids": wanted}
        rows = {r[0]: r[1:] for r in run_sql(db, _MEASUREMENT_SQL, params).rows()}
        barriers: dict[tuple[str, str], list[float]] = {}
        for job_id, tier, barrier in run_sql(db, _BARRIERS_SQL, params).rows():
            if barrier is not None:
                barriers.setdefault((job_id, tier), []).append(float(barrier))
        restores: dict[str, tuple[Any, ...]] = {}
        if run_sql(db, _HAS_VIEW_SQL, {"name": RESTORE_VIEW}).rows()[0][0]:
            restores = {r[0]: r[1:] for r in run_sql(db, _RESTORE_SQL, params).rows()
                        if r[3] is not None}
        missing = [j for j in wanted if j not in rows]
        known = run_sql(db, _JOBS_SQL)["job_id"].to_list() if missing else []
    finally:
        if con is None:
            db.close()
    out: dict[str, LakeMeasurement | LakeError] = {}
    for job in wanted:
        if job not in rows:
            out[job] = LakeError(
                f"job {job!r} has no checkpoint writes in {pattern}; check --job (jobs there "
                f"include: {', '.join(map(str, known)) or 'none'})")
            continue
        (tier, checkpoints, ranks, gpn, bytes_per_rank, p50, p99, timeout, interval,
         measured_interval, n_timed_out, observed) = rows[job]
        if not p50 or p50 <= 0 or not bytes_per_rank or bytes_per_rank <= 0:
            out[job] = LakeError(
                f"job {job!r} in {pattern}: barrier p50 {p50} s and bytes per rank "
                f"{bytes_per_rank} must both be > 0 to plan from them")
            continue
        restore = restores.get(job)
        out[job] = LakeMeasurement(
            job_id=job, tier=str(tier), checkpoints=int(checkpoints), ranks=int(ranks),
            gpus_per_node=int(gpn), bytes_per_rank=float(bytes_per_rank), p50_s=float(p50),
            p99_s=float(p99), source=pattern, barrier_s=tuple(barriers.get((job, tier), ())),
            restore_s=None if restore is None else float(restore[2]),
            restore_tier=None if restore is None else str(restore[0]),
            restores=0 if restore is None else int(restore[1]),
            timeout_s=None if timeout is None else float(timeout),
            checkpoint_interval_s=None if interval is None else float(interval),
            measured_interval_s=None if measured_interval is None else float(measured_interval),
            n_timed_out=int(n_timed_out or 0), observed_s=float(observed or 0.0))
    return out


def timeouts_of(m: LakeMeasurement, *, timeout_flag: float | None = None,
                config_timeout: float | None = None, interval_flag: float | None = None,
                per_year_flag: float | None = None) -> TimeoutInputs:
    """The timeout inputs of ``m``: the checkpoint timeout from its flag, else the job's row in
    the lake, else the config file (None: none of them); the interval and the timeouts per
    year from their flags, else the lake. A measured rate is used only when a checkpoint
    timed out (none in a short history says little: the tail gives the probability then), and
    only at the timeout it was measured at."""
    for name, value in (("--checkpoint-interval-s", interval_flag),
                        ("--timeouts-per-year", per_year_flag)):
        if value is not None and not 0 <= value < float("inf"):
            raise PlanInputError(f"{name} must be >= 0 and finite (got {value:g})")
    timeout: float | None
    interval: float | None
    if timeout_flag is not None:
        timeout, timeout_source = timeout_flag, "--checkpoint-timeout-s"
    elif m.timeout_s is not None:
        timeout, timeout_source = m.timeout_s, "jobs.checkpoint_timeout_s"
    else:
        timeout, timeout_source = config_timeout, "--config"
    if interval_flag is not None:
        interval, interval_source = interval_flag, "--checkpoint-interval-s"
    else:
        interval, interval_source = m.interval_s, m.interval_source
    per_year = m.timeouts_per_year
    if per_year_flag is not None:
        per_year, per_year_source = per_year_flag, "--timeouts-per-year"
    elif timeout_flag is not None and m.timeout_s is not None and timeout_flag != m.timeout_s:
        per_year, per_year_source = None, (
            f"not used: measured at the job's {m.timeout_s:g} s timeout, not "
            f"--checkpoint-timeout-s {timeout_flag:g} s; the tail gives the probability")
    elif per_year is None or m.n_timed_out == 0:
        per_year, per_year_source = None, (
            f"none measured: {m.timeouts_how}; the tail gives the probability")
    else:
        per_year_source = m.timeouts_how
    return TimeoutInputs(timeout, timeout_source, interval, interval_source, per_year,
                         per_year_source)


def resolve_timeouts(m: LakeMeasurement, *, timeout_flag: float | None = None,
                     config_timeout: float | None = None, interval_flag: float | None = None,
                     per_year_flag: float | None = None) -> LakeMeasurement:
    """``m`` with :attr:`LakeMeasurement.timeouts` set (:func:`timeouts_of`). Raises
    :class:`PlanInputError` when no timeout is known: planning from the lake takes no default
    timeout."""
    t = timeouts_of(m, timeout_flag=timeout_flag, config_timeout=config_timeout,
                    interval_flag=interval_flag, per_year_flag=per_year_flag)
    if t.timeout_s is None:
        raise PlanInputError(
            f"job {m.job_id!r} has no checkpoint_timeout_s in the lake's jobs table; give "
            "--checkpoint-timeout-s S (0: no timeout) or checkpoint_timeout_s in --config")
    return replace(m, timeouts=t)


def calibrate(inputs: PlanInputs, m: LakeMeasurement) -> PlanInputs:
    """Inputs that reproduce a measurement: job size and bytes from the lake, and the measured
    tier's bandwidth and tail factor chosen so that the model's p50 equals the measured p50.

    ``pool`` tier: pool bandwidth = total bytes / p50 (and the NIC raised to at least
    bytes per node / p50 so it does not bind); ``local`` tier: local bandwidth = bytes per node
    / p50. The other tier keeps its configured values. With 5 or more barrier times the tier's
    tail (for timeouts) is the better of the lognormal and Pareto fits; with a measured restore
    the restart cost of the restore's tier is its median. The job's own checkpoint timeout
    replaces the configured one, and its timeouts per year at its interval give the measured
    tier's timeout probability per checkpoint (:attr:`LakeMeasurement.timeouts` when resolved,
    else :func:`timeouts_of` the lake's values).
    """
    out = replace(inputs, ranks=m.ranks, gpus_per_node=m.gpus_per_node,
                  bytes_per_rank=m.bytes_per_rank)
    t = m.timeouts or timeouts_of(m)
    if t.timeout_s is not None:
        out = replace(out, checkpoint_timeout_s=t.timeout_s)
    q = t.probability
    if q is not None:
        out = replace(out, measured_timeout_tier=m.tier, measured_timeout_probability=q)
    fit = m.tail_fit()
    tail = None if fit is None else fit.best
    if m.restore_s is not None:
        if m.restore_tier == "pool":
            out = replace(out, restart_pool_s=m.restore_s)
        elif m.restore_tier == "local":
            out = replace(out, restart_local_s=m.restore_s)
    if m.tier == "pool":
        nic = max(out.nic_bandwidth_bytes_s, out.bytes_per_node / m.p50_s)
        return replace(out, pool_bandwidth_bytes_s=out.total_bytes / m.p50_s,
                       nic_bandwidth_bytes_s=nic, tail_factor=m.tail_factor, pool_tail=tail)
    if m.tier == "local":
        return replace(out, local_bandwidth_bytes_s=out.bytes_per_node / m.p50_s,
                       local_tail_factor=m.tail_factor, local_tail=tail)
    raise LakeError(f"job {m.job_id!r} in {m.source}: unknown tier {m.tier!r} "
                    "(expected local or pool)")
