"""The pool's per-job statistics (Lustre job_stats) joined to the checkpoint jobs: int_pool_jobs
maps Lustre's job ids (jobid_var, jobid_name patterns) to the records' job ids, and
stall_pool_jobs gives a stall's job its own write and metadata latency on the pool beside its
usual level; attribution quotes it (tests/analysis: the stall_cases metadata stall).

Literal rows in, exact values out. Times are seconds after T0 (tests.sql_seed.at)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.sql.test_marts import query, write
from tests.sql_seed import at, seed
from tests.stall_cases import Case, build

from ckptwatch.analysis.findings import find_stalls


def _pool_jobs(lake: Path, record_jobs: list[str], pool_jobs: list[str]) -> dict[str, str]:
    seed(lake, "checkpoint_writes", [write(j, 1, 0, 10.0) for j in record_jobs])
    rows = []
    for k, job in enumerate(pool_jobs):  # two readings of each job's counters on an OST
        for t, (ops, us) in enumerate(((10, 5_000), (20, 10_000))):
            rows += [{"ts": at(60.0 * t + k), "pool": "fs", "target": "fs-OST0000",
                      "metric": f"{name}.job={job}", "value": float(v)}
                     for name, v in (("write_ops", ops), ("write_latency_us_total", us))]
    seed(lake, "pool_metrics", rows)
    got = query(lake, "select pool_job_id, job_id, matched_by from int_pool_jobs")
    return {r["pool_job_id"]: f"{r['job_id']} ({r['matched_by']})" for r in got}


def test_lustre_job_ids_join_the_records_jobs_by_the_schedulers_id(lake: Path) -> None:
    got = _pool_jobs(
        lake, ["job-10", "4242", "train-7", "exact name", "a-55", "b-55"],
        ["SLURM_JOB10:0:es18kxe-co-client",  # jobid_name SLURM_JOB%j:%u:%H (the genuine sample)
         "4242",  # jobid_var=SLURM_JOB_ID
         "7:1001:node01",  # %j:%u:%H
         "exact name",  # the same text joins whatever the patterns say
         "python.1001",  # %e.%u: an executable and a uid name no job
         "55",  # two records' jobs end in 55: no guess between them
         "99"])  # no checkpoint job
    assert got == {"SLURM_JOB10:0:es18kxe-co-client": "job-10 (key)", "4242": "4242 (id)",
                   "7:1001:node01": "train-7 (key)", "exact name": "exact name (id)"}


def _metadata_stall_with_job_stats(root: Path, *, job_ms: float) -> Path:
    """stall_cases' metadata stall, plus the MDT's job_stats for job j (Lustre's id
    ``SLURM_JOB77:0:client``; the records' job is ``j``, so joined by the same text only when
    mapped: here the id is ``j`` itself): 0.5 ms a metadata operation, ``job_ms`` during the
    stalled checkpoint."""
    from tests.stall_cases import INTERVAL_S, N_CKPT, STALL_STEP, T0

    lake = build(root, Case(stall="metadata"))
    rows: list[dict[str, Any]] = []
    ops = us = 0.0
    stall_start = 60 + STALL_STEP * INTERVAL_S
    from datetime import timedelta
    for s in range(0, 60 + N_CKPT * INTERVAL_S, 30):
        in_checkpoint = (s - 60) % INTERVAL_S < 30 and s >= 60
        n = 400.0 if in_checkpoint else 2.0
        ms = job_ms if stall_start <= s < stall_start + 30 else 0.5
        ops += n
        us += n * ms * 1000.0
        rows += [{"ts": T0 + timedelta(seconds=s + 30), "pool": "fs", "target": "fs-MDT0000",
                  "metric": f"{name}.job=j", "value": v}
                 for name, v in (("metadata_ops_total", ops), ("metadata_latency_us_total", us))]
    seed(lake, "pool_metrics", rows, part="jobstats")
    return lake


def test_a_stall_carries_its_jobs_own_metadata_latency(tmp_path: Path) -> None:
    lake = _metadata_stall_with_job_stats(tmp_path / "lake", job_ms=40.0)
    [row] = query(lake, "select * from stall_pool_jobs")
    assert (row["job_id"], row["target"], row["signal"], row["pool_job_id"]) == (
        "j", "fs-MDT0000", "metadata_latency_ms", "j")
    assert row["baseline_ms"] == 0.5
    # the intervals overlapping the stalled checkpoint: its 30 s at 40 ms, idle ones at 0.5 ms
    assert 30.0 < row["level_ms"] <= 40.0
    [stall] = find_stalls(lake).stalls
    top = stall.causes[0]
    assert top.cause == "metadata"
    assert any(e.startswith("the job's own metadata latency on fs-MDT0000 (the pool's "
                            "per-job statistics, job j): ") for e in top.evidence)


def test_the_jobs_own_latency_at_its_usual_level_is_not_quoted(tmp_path: Path) -> None:
    lake = _metadata_stall_with_job_stats(tmp_path / "lake", job_ms=0.5)
    [stall] = find_stalls(lake).stalls
    assert not [e for c in stall.causes for e in c.evidence if "the job's own" in e]
