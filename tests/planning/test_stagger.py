"""The stagger plan (issue 45, item 4): phase offsets that spread jobs' checkpoint bursts on a
shared pool, the peak before and after, the predicted barrier p99 by fluid sharing, tiering
advice when offsets are not enough; from the lake (pool_job_schedules) through
``ckptwatch plan stagger``."""

from __future__ import annotations

import json
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from tests.sql.test_marts import write
from tests.sql_seed import seed

from ckptwatch.lake.store import Lake
from ckptwatch.planning.stagger import JobSchedule, config_snippet, fluid_slowdowns, stagger

GB = 1e9


@pytest.fixture
def lake(tmp_path: Path) -> Path:
    """An initialised, empty lake."""
    Lake(tmp_path / "lake").init()
    return tmp_path / "lake"


def _job(name: str, *, rate_gbs: float = 10.0, interval: float = 600.0, duration: float = 60.0,
         phase: float = 0.0, p50: float | None = None) -> JobSchedule:
    return JobSchedule(name, interval, duration, rate_gbs * GB * duration, phase,
                       barrier_p50_s=p50 if p50 is not None else duration)


def test_two_jobs_in_phase_are_spread_apart_and_stop_sharing() -> None:
    plan = stagger("p", [_job("a"), _job("b")], 12 * GB, "configured")
    assert plan.peak_before_bps == pytest.approx(20 * GB)
    assert plan.peak_after_bps == pytest.approx(10 * GB) and plan.fits
    [a, b] = sorted(plan.jobs, key=lambda j: j.job_id)
    assert a.delay_s == 0.0 and a.advice == "keep its phase"
    assert b.delay_s == pytest.approx(60.0)  # the smallest delay that clears a's write
    assert b.advice == "start its checkpoints 1 min 0 s later"
    # fluid sharing: 20 GB/s asked of 12: each job gets 6 GB/s, 600 GB take 100 s, not 60
    assert a.predicted_p99_before_s == pytest.approx(100.0, rel=0.02)
    assert a.predicted_p99_after_s == pytest.approx(60.0, rel=0.02)
    assert not plan.to_local


def test_a_job_already_apart_keeps_its_phase() -> None:
    plan = stagger("p", [_job("a"), _job("b", phase=300.0)], 12 * GB, "configured")
    assert plan.peak_before_bps == plan.peak_after_bps == pytest.approx(10 * GB)
    assert {j.advice for j in plan.jobs} == {"keep its phase"}


def test_jobs_that_meet_under_the_peak_are_moved_apart_by_their_jitter() -> None:
    # b's writes start 1 s after a's end: apart on paper, the peak is a's alone; but b's starts
    # stray by 10 s (jitter_s), so it meets a's checkpoints now and then: it is moved clear of
    # them (9 s more, on the 2.5 s grid of delays), and no further than that
    a, b = _job("a"), _job("b", rate_gbs=5.0, phase=61.0)
    plan = stagger("p", [a, b], 12 * GB, "configured")
    assert {j.advice for j in plan.jobs} == {"keep its phase"}
    b = JobSchedule(b.job_id, b.interval_s, b.duration_s, b.bytes, b.phase_s, jitter_s=10.0)
    plan = stagger("p", [a, b], 12 * GB, "configured")
    moved = {j.job_id: j.delay_s for j in plan.jobs}
    assert moved["a"] == 0.0 and 9.0 <= moved["b"] <= 12.5
    assert plan.peak_after_bps == pytest.approx(10 * GB)


def test_a_delay_past_half_the_interval_is_said_as_earlier() -> None:
    # a writes 480 s of every 600; b (60 s from 550) fits only in 480-540: 530 s later is
    # 70 s earlier
    plan = stagger("p", [_job("a", duration=480.0), _job("b", rate_gbs=5.0, phase=550.0)],
                   12 * GB, "configured")
    [b] = [j for j in plan.jobs if j.job_id == "b"]
    assert b.delay_s == pytest.approx(530.0)
    assert b.advice == "start its checkpoints 1 min 10 s earlier" and plan.fits


def test_when_offsets_are_not_enough_the_biggest_jobs_go_to_local_drives() -> None:
    # three jobs that write half of every interval: no offset keeps two of them apart
    jobs = [_job(n, rate_gbs=r, duration=300.0) for n, r in (("a", 10.0), ("b", 6.0),
                                                             ("c", 4.0))]
    plan = stagger("p", jobs, 8 * GB, "configured")
    assert not plan.fits and plan.peak_after_bps > 8 * GB
    assert plan.to_local and plan.to_local[0] == "a"
    assert plan.needed_bps == plan.peak_after_bps
    assert [j.job_id for j in plan.jobs if j.to_local] == list(plan.to_local)


def test_fluid_sharing_under_capacity_slows_nothing() -> None:
    slowdowns = fluid_slowdowns([_job("a", rate_gbs=4.0), _job("b", rate_gbs=4.0)], [0.0, 0.0],
                                10 * GB, 3600, 0.0)
    assert all(s == pytest.approx(1.0) for per_job in slowdowns for s in per_job)
    assert [len(s) for s in slowdowns] == [6, 6]  # a checkpoint every 600 s of the hour


def test_the_config_snippet_is_toml_a_scheduler_reads() -> None:
    plan = stagger("pool0", [_job("job-A"), _job("job-B")], 12 * GB, "configured")
    data = tomllib.loads(config_snippet([plan]))
    assert data["stagger"]["pool0"]["job-B"] == {"interval_s": 600, "delay_s": 60}
    assert data["stagger"]["pool0"]["job-A"]["delay_s"] == 0


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "ckptwatch.cli.main", *args],
                          capture_output=True, text=True, timeout=120, check=False)


def test_plan_stagger_reads_the_lake(lake: Path, tmp_path: Path) -> None:
    # jobs a and b checkpoint every 600 s at the same moments: 4 ranks x 1 GB over 10 s each
    rows = [write(j, s, r, 10.0, start=600.0 * s) for j in ("a", "b") for s in range(6)
            for r in range(4)]
    seed(lake, "checkpoint_writes", rows)
    config = tmp_path / "ckptwatch.toml"
    config.write_text("[pool]\nwrite_bandwidth_gbs = { pool = 0.5 }\n")
    out = _cli("plan", "stagger", "--lake", str(lake), "--config", str(config))
    assert out.returncode == 0, out.stderr
    assert "pool: peak demand 0.80 GB/s today -> 0.40 GB/s staggered, against 0.50 GB/s " \
        "(configured)" in out.stdout
    assert "start its checkpoints 10 s later" in out.stdout
    [plan] = json.loads(_cli("plan", "stagger", "--lake", str(lake), "--config", str(config),
                             "--format", "json").stdout)
    assert plan["fits"] and plan["capacity_source"] == "configured"
    assert {j["job_id"]: j["delay_s"] for j in plan["jobs"]} == {"a": 0.0, "b": 10.0}
    snippet = tomllib.loads(_cli("plan", "stagger", "--lake", str(lake), "--config",
                                 str(config), "--format", "config").stdout)
    assert snippet["stagger"]["pool"]["b"] == {"interval_s": 600, "delay_s": 10}
    none = _cli("plan", "stagger", "--lake", str(lake), "--pool", "other")
    assert none.returncode == 0 and "nothing to stagger" in none.stdout
    missing = _cli("plan", "stagger", "--lake", str(tmp_path / "nolake"))
    assert missing.returncode == 2 and "no lake at" in missing.stderr
    assert "Traceback" not in missing.stderr
