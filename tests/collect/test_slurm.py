"""Slurm adapter: genuine sacct --json / squeue --json -> the jobs table, host lists, and the
checkpoint timeout from a source the site names (never a made-up one)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ckptwatch.collect.slurm import (
    SlurmInputError,
    TimeoutSource,
    expand_hostlist,
    jobs_from_slurm,
    parse_duration_s,
    read_slurm_json,
)
from ckptwatch.ingest.discover import table_for_columns

REAL = Path(__file__).resolve().parents[1] / "fixtures" / "real" / "slurm"
#: sacct --json from Compute Canada's cedar (Slurm 21.08.8-2, dbv0.0.37), via mila-iqia/clockwork.
SACCT = REAL / "clockwork_cedar_sacct_1.json"
#: squeue --json from Rivos (Slurm 21.08.5, one running job; one pending job in the 23.02+
#: {set, infinite, number} layout), via rivosinc/prometheus-slurm-exporter.
SQUEUE = REAL / "rivosinc_squeue_out.json"


def _doc(path: Path) -> object:
    return read_slurm_json(path.read_text(encoding="utf-8"), str(path))


@pytest.mark.parametrize(("text", "hosts"), [
    ("gpu[001-004,010]", ["gpu001", "gpu002", "gpu003", "gpu004", "gpu010"]),
    ("cdr247", ["cdr247"]),
    ("node[8-10],login1", ["node8", "node9", "node10", "login1"]),
    ("r[1-2]n[01-02]", ["r1n01", "r1n02", "r2n01", "r2n02"]),
    ("a[1],b", ["a1", "b"]),
    ("", []),
])
def test_hostlists_expand(text: str, hosts: list[str]) -> None:
    assert expand_hostlist(text) == hosts


@pytest.mark.parametrize("bad", ["gpu[1-3", "gpu1-3]", "gpu[3-1]", "gpu[a-b]"])
def test_bad_hostlists_are_refused_with_the_text(bad: str) -> None:
    with pytest.raises(SlurmInputError, match="host list"):
        expand_hostlist(bad)


def test_genuine_sacct_json_gives_jobs_rows_with_the_fixed_timeout() -> None:
    jobs = jobs_from_slurm(_doc(SACCT), timeout=TimeoutSource(fixed_s=600.0))
    assert jobs.layout == "sacct"
    assert jobs.rows == [
        {"job_id": "63768795", "n_ranks": 1, "checkpoint_timeout_s": 600.0,
         "gpus_per_node": 1},
        {"job_id": "63694682", "n_ranks": 1, "checkpoint_timeout_s": 600.0,
         "gpus_per_node": 1},
    ]
    assert jobs.skipped == [] and jobs.pending == []
    assert table_for_columns(jobs.rows[0]) == "jobs"  # the ingest files it as the jobs table


def test_sacct_job_ids_follow_the_recorders_spelling() -> None:
    jobs = jobs_from_slurm(_doc(SACCT), timeout=TimeoutSource(fixed_s=60.0), tier="pool",
                           job_id_format="{array_job_id}_{array_task_id}")
    assert [(r["job_id"], r["tier"]) for r in jobs.rows] == [("63752790_7", "pool"),
                                                             ("63692861_0", "pool")]


def test_sacct_without_a_timeout_source_covering_a_job_leaves_it_out_named() -> None:
    # cedar's jobs have no comment (comment.job is null): nothing to read the timeout from.
    jobs = jobs_from_slurm(_doc(SACCT), timeout=TimeoutSource(comment_key="ckpt_timeout"))
    assert jobs.rows == []
    assert jobs.skipped == [
        ("63768795", "no checkpoint timeout: no ckpt_timeout= in its comment"),
        ("63694682", "no checkpoint timeout: no ckpt_timeout= in its comment"),
    ]


def test_sacct_ranks_per_node_and_tasks() -> None:
    doc = _doc(SACCT)
    per_node = jobs_from_slurm(doc, timeout=TimeoutSource(fixed_s=1.0), ranks_per_node=8)
    assert [r["n_ranks"] for r in per_node.rows] == [8, 8]
    # cedar's jobs never started a step (steps: []): no task count to take.
    tasks = jobs_from_slurm(doc, timeout=TimeoutSource(fixed_s=1.0), ranks="tasks")
    assert tasks.rows == [] and [why for _, why in tasks.skipped] == [
        "no ranks from tasks (pass --ranks or --ranks-per-node)"] * 2


def test_genuine_squeue_json_running_and_pending() -> None:
    doc = _doc(SQUEUE)
    jobs = jobs_from_slurm(doc, timeout=TimeoutSource(fixed_s=300.0), ranks="tasks")
    assert jobs.layout == "squeue"
    assert jobs.rows == [{"job_id": "26515966", "n_ranks": 1, "checkpoint_timeout_s": 300.0}]
    assert jobs.pending == ["58948420"]  # PENDING, nodes "": nothing to say yet
    # The running job is a CPU job (tres_alloc_str has no gres/gpu): no ranks by GPUs.
    by_gpus = jobs_from_slurm(doc, timeout=TimeoutSource(fixed_s=300.0))
    assert by_gpus.rows == [] and by_gpus.skipped == [
        ("26515966", "no ranks from allocated GPUs (pass --ranks or --ranks-per-node)")]


def _job(**fields: object) -> dict[str, object]:
    base: dict[str, object] = {
        "job_id": 4242, "name": "llama", "nodes": "gpu[001-004]", "allocation_nodes": 4,
        "comment": {"administrator": "", "job": "", "system": ""},
        "tres": {"allocated": [{"type": "gres", "name": "gpu", "id": 1001, "count": 32}]},
        "steps": [{"step": {"id": "4242.batch", "name": "batch"}, "tasks": {"count": 1}},
                  {"step": {"id": "4242.0", "name": "python"}, "tasks": {"count": 32}}]}
    base.update(fields)
    return base


def _sacct(*jobs: dict[str, object]) -> dict[str, object]:
    return {"meta": {"plugin": {"type": "openapi/slurmdbd"}}, "errors": [], "jobs": list(jobs)}


def test_timeout_sources_in_order_comment_env_fixed() -> None:
    source = TimeoutSource(comment_key="ckpt_timeout", env_var="CKPT_TIMEOUT", fixed_s=600.0)
    doc = _sacct(
        _job(job_id=1, comment={"job": "team=llm, ckpt_timeout=15m"}),
        _job(job_id=2, environment={"CKPT_TIMEOUT": "900"}),
        _job(job_id=3, environment=["PATH=/bin", "CKPT_TIMEOUT=1.5h"]),
        _job(job_id=4))
    jobs = jobs_from_slurm(doc, timeout=source)
    assert [(r["job_id"], r["checkpoint_timeout_s"]) for r in jobs.rows] == [
        ("1", 900.0), ("2", 900.0), ("3", 5400.0), ("4", 600.0)]
    assert jobs.rows[0]["n_ranks"] == 32 and jobs.rows[0]["gpus_per_node"] == 8
    tasks = jobs_from_slurm(doc, timeout=source, ranks="tasks")
    assert {r["n_ranks"] for r in tasks.rows} == {32}  # the batch step's 1 task is not it


def test_a_bad_timeout_value_is_named_not_guessed() -> None:
    doc = _sacct(_job(job_id=7, comment={"job": "ckpt_timeout=soon"}))
    jobs = jobs_from_slurm(doc, timeout=TimeoutSource(comment_key="ckpt_timeout",
                                                      fixed_s=600.0))
    assert jobs.rows == []
    assert jobs.skipped == [("7", "comment ckpt_timeout='soon' is not a duration (seconds, "
                                  "or a number with s, m or h)")]


def test_environment_absent_says_how_to_get_it() -> None:
    jobs = jobs_from_slurm(_sacct(_job()), timeout=TimeoutSource(env_var="CKPT_TIMEOUT"))
    assert "AccountingStoreFlags=job_env" in jobs.skipped[0][1]


@pytest.mark.parametrize(("text", "seconds"), [("600", 600.0), ("600s", 600.0),
                                               ("10m", 600.0), ("1.5h", 5400.0),
                                               ("ten", None), ("", None)])
def test_durations(text: str, seconds: float | None) -> None:
    assert parse_duration_s(text) == seconds


def test_not_slurm_json_is_one_clear_error() -> None:
    with pytest.raises(SlurmInputError, match=r"x\.json: not JSON"):
        read_slurm_json("JobID|State\n1|RUNNING\n", "x.json")
    with pytest.raises(SlurmInputError, match="no top-level 'jobs' list"):
        read_slurm_json(json.dumps({"nodes": []}), "sinfo.json")
    with pytest.raises(SlurmInputError, match="Slurm reported 1 error"):
        read_slurm_json(json.dumps({"jobs": [], "errors": [{"description": "denied"}]}), "e")
