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

from ckptwatch.errors import LakeError
from ckptwatch.planning.model import PlanInputs

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

#: The views the measurement reads: all its connection needs to build.
MEASUREMENT_VIEWS = ("plan_measurements",)

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

    @property
    def tail_factor(self) -> float:
        """Measured p99/p50 of the barrier time (at least 1)."""
        return max(self.p99_s / self.p50_s, 1.0)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready mapping."""
        return {**asdict(self), "tail_factor": self.tail_factor}


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
    db = con if con is not None else connect(store.root, views=MEASUREMENT_VIEWS)
    try:
        rows = run_sql(db, _MEASUREMENT_SQL, {"job_id": job}).rows()
        if not rows:
            jobs = run_sql(db, _JOBS_SQL)["job_id"].to_list()
            raise LakeError(
                f"job {job!r} has no checkpoint writes in {pattern}; check --job (jobs there "
                f"include: {', '.join(map(str, jobs)) or 'none'})")
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
        p99_s=float(p99), source=pattern)


def calibrate(inputs: PlanInputs, m: LakeMeasurement) -> PlanInputs:
    """Inputs that reproduce a measurement: job size and bytes from the lake, and the measured
    tier's bandwidth and tail factor chosen so that the model's p50 equals the measured p50.

    ``pool`` tier: pool bandwidth = total bytes / p50 (and the NIC raised to at least
    bytes per node / p50 so it does not bind); ``local`` tier: local bandwidth = bytes per node
    / p50. The other tier keeps its configured values.
    """
    out = replace(inputs, ranks=m.ranks, gpus_per_node=m.gpus_per_node,
                  bytes_per_rank=m.bytes_per_rank)
    if m.tier == "pool":
        nic = max(out.nic_bandwidth_bytes_s, out.bytes_per_node / m.p50_s)
        return replace(out, pool_bandwidth_bytes_s=out.total_bytes / m.p50_s,
                       nic_bandwidth_bytes_s=nic, tail_factor=m.tail_factor)
    if m.tier == "local":
        return replace(out, local_bandwidth_bytes_s=out.bytes_per_node / m.p50_s,
                       local_tail_factor=m.tail_factor)
    raise LakeError(f"job {m.job_id!r} in {m.source}: unknown tier {m.tier!r} "
                    "(expected local or pool)")
