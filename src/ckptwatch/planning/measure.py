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

from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ckptwatch.errors import LakeError, PlanInputError
from ckptwatch.planning.model import PlanInputs
from ckptwatch.planning.tails import TailFit, fit_tail

if TYPE_CHECKING:
    import duckdb

#: The job's main tier (the tier with more rank writes) in ``plan_measurements``.
_MEASUREMENT_SQL = """
select
    tier,
    n_checkpoints,
    n_ranks,
    gpus_per_node,
    bytes_per_rank,
    barrier_p50_s,
    barrier_p99_s,
from plan_measurements
where job_id = $job_id and is_main_tier
"""

#: Barrier time of each of the job's checkpoints on a tier (for the tail fit). A checkpoint
#: whose ranks never finished has only a lower bound and is left out.
_BARRIERS_SQL = """
select barrier_s
from checkpoint_latency
where job_id = $job_id and tier = $tier and not barrier_is_lower_bound
order by step
"""

#: Restores of a job (DLIO ``load_ckptN``, the ``stg_checkpoint_loads`` view): one restore per
#: step = its slowest rank's load; the median over steps, on the tier with the most restores.
_RESTORE_SQL = """
with
loads as (
    select * from stg_checkpoint_loads
    where job_id = $job_id
),

restores as (
    select
        tier,
        step,
        max(duration_s) as restore_s,
    from loads
    group by tier, step
),

per_tier as (
    select
        tier,
        count(*) as n_restores,
        median(restore_s) as restore_p50_s,
    from restores
    group by tier
)

select * from per_tier
order by n_restores desc, tier
limit 1
"""

_HAS_VIEW_SQL = "select count(*) from duckdb_views() where view_name = $name"

#: The optional view of measured restores (made by the DLIO load ingest).
RESTORE_VIEW = "stg_checkpoint_loads"

#: The views the measurement reads: all its connection needs to build.
MEASUREMENT_VIEWS = ("plan_measurements", "checkpoint_latency")

#: A few jobs that can be planned, for the message when the asked-for one cannot.
_JOBS_SQL = """
select distinct job_id
from plan_measurements
order by job_id
limit 8
"""


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
             "restart_source": self.restart_source}
        d["barrier_s"] = list(self.barrier_s)
        fit = self.tail_fit()
        d["tail_fit"] = None if fit is None else fit.to_dict()
        return d


def measure_from_lake(lake: Path | str, job: str, *,
                      con: duckdb.DuckDBPyConnection | None = None) -> LakeMeasurement:
    """Measured p50/p99 barrier time, tier, ranks and bytes per rank of one job in the lake.

    ``con``: a connection from :func:`ckptwatch.lake.query.connect` over ``lake`` (every day)
    to reuse when measuring many jobs; None: open one and close it again.
    """
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
    from ckptwatch.lake.query import view_files

    views: tuple[str, ...] = MEASUREMENT_VIEWS
    if any(f.stem == RESTORE_VIEW for f in view_files()):
        views = (*views, RESTORE_VIEW)
    db = con if con is not None else connect(store.root, views=views)
    try:
        rows = run_sql(db, _MEASUREMENT_SQL, {"job_id": job}).rows()
        if not rows:
            jobs = run_sql(db, _JOBS_SQL)["job_id"].to_list()
            raise LakeError(
                f"job {job!r} has no checkpoint writes in {pattern}; check --job (jobs there "
                f"include: {', '.join(map(str, jobs)) or 'none'})")
        tier = rows[0][0]
        barriers = tuple(float(v) for v in run_sql(
            db, _BARRIERS_SQL, {"job_id": job, "tier": tier})["barrier_s"].to_list()
            if v is not None)
        restore: tuple[Any, ...] | None = None
        if run_sql(db, _HAS_VIEW_SQL, {"name": RESTORE_VIEW}).rows()[0][0]:
            found = run_sql(db, _RESTORE_SQL, {"job_id": job}).rows()
            restore = found[0] if found and found[0][2] is not None else None
    finally:
        if con is None:
            db.close()
    tier, checkpoints, ranks, gpn, bytes_per_rank, p50, p99 = rows[0]
    if not p50 or p50 <= 0 or not bytes_per_rank or bytes_per_rank <= 0:
        raise LakeError(f"job {job!r} in {pattern}: barrier p50 {p50} s and bytes per rank "
                        f"{bytes_per_rank} must both be > 0 to plan from them")
    return LakeMeasurement(
        job_id=job, tier=str(tier), checkpoints=int(checkpoints), ranks=int(ranks),
        gpus_per_node=int(gpn), bytes_per_rank=float(bytes_per_rank), p50_s=float(p50),
        p99_s=float(p99), source=pattern, barrier_s=barriers,
        restore_s=None if restore is None else float(restore[2]),
        restore_tier=None if restore is None else str(restore[0]),
        restores=0 if restore is None else int(restore[1]))


def calibrate(inputs: PlanInputs, m: LakeMeasurement) -> PlanInputs:
    """Inputs that reproduce a measurement: job size and bytes from the lake, and the measured
    tier's bandwidth and tail factor chosen so that the model's p50 equals the measured p50.

    ``pool`` tier: pool bandwidth = total bytes / p50 (and the NIC raised to at least
    bytes per node / p50 so it does not bind); ``local`` tier: local bandwidth = bytes per node
    / p50. The other tier keeps its configured values. With 5 or more barrier times the tier's
    tail (for timeouts) is the better of the lognormal and Pareto fits; with a measured restore
    the restart cost of the restore's tier is its median.
    """
    out = replace(inputs, ranks=m.ranks, gpus_per_node=m.gpus_per_node,
                  bytes_per_rank=m.bytes_per_rank)
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
