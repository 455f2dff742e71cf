"""Planning from the lake: the plan_measurements mart, job_latency's numbers, calibration."""

from __future__ import annotations

import json
import shutil
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import duckdb
import pytest
from tests.sql_seed import INGESTED, seed

from ckptwatch.errors import LakeError, PlanInputError
from ckptwatch.ingest.run import ingest
from ckptwatch.lake.query import connect, run_sql
from ckptwatch.lake.store import Lake
from ckptwatch.planning.measure import (
    LakeMeasurement,
    calibrate,
    measure_from_lake,
    measure_jobs_from_lake,
    resolve_timeouts,
    timeouts_of,
)
from ckptwatch.planning.model import SECONDS_PER_YEAR, PlanInputs, evaluate_strategy


def _write_lake(root: Path) -> Path:
    """Job j1 on the pool: 5 checkpoints x 8 ranks on 2 nodes, 2 GB per rank; barriers
    20, 22, 24, 26, 100 s (one straggler each); an errored record of one write that a later
    ingest superseded (``stg_checkpoint_writes`` keeps the latest, so it must not count); and a
    second job j2."""
    Lake(root).init()
    start = datetime(2026, 11, 1, tzinfo=UTC)
    rows: list[dict[str, object]] = []
    for step, barrier in enumerate([20.0, 22.0, 24.0, 26.0, 100.0]):
        for rank in range(8):
            duration = barrier if rank == 3 else 10.0 + rank * 0.1
            rows.append({"job_id": "j1", "step": step, "rank": rank, "node": f"n{rank // 4}",
                         "tier": "pool", "start_ts": start,
                         "end_ts": start + timedelta(seconds=duration),
                         "duration_s": duration, "bytes": 2_000_000_000, "status": "ok"})
    superseded = {**rows[0], "rank": 7, "duration_s": 999.0, "status": "error",
                  "ingested_ts": INGESTED - timedelta(days=1)}
    rows.append({**rows[0], "job_id": "j2", "tier": "local"})
    seed(root, "checkpoint_writes", rows, part="0")
    seed(root, "checkpoint_writes", [superseded], part="earlier")
    return root


def test_measure_from_lake(tmp_path: Path) -> None:
    m = measure_from_lake(_write_lake(tmp_path), "j1")
    assert (m.tier, m.checkpoints, m.ranks, m.gpus_per_node) == ("pool", 5, 8, 4)
    assert m.bytes_per_rank == 2e9
    assert m.p50_s == pytest.approx(24.0)
    # quantile_cont at 0.99 of [20, 22, 24, 26, 100]: 26 + 0.96 * 74
    assert m.p99_s == pytest.approx(97.04)
    assert m.tail_factor == pytest.approx(97.04 / 24.0)


def test_calibrated_model_reproduces_the_measured_p50(tmp_path: Path) -> None:
    m = measure_from_lake(_write_lake(tmp_path), "j1")
    inputs = calibrate(PlanInputs(), m).validate()
    assert (inputs.ranks, inputs.gpus_per_node) == (8, 4)
    pool = evaluate_strategy("pool", inputs)
    assert pool.checkpoint_s_p50 == pytest.approx(24.0)
    assert pool.checkpoint_s_p99 == pytest.approx(97.04)


def test_lake_missing_names_the_path(tmp_path: Path) -> None:
    with pytest.raises(LakeError, match=r"no checkpoint_writes Parquet under .*nolake"):
        measure_from_lake(tmp_path / "nolake", "j1")


def test_lake_job_missing_names_the_job_and_lists_others(tmp_path: Path) -> None:
    with pytest.raises(LakeError, match=r"job 'j9' has no checkpoint writes in .*include: j1, j2"):
        measure_from_lake(_write_lake(tmp_path), "j9")


# -- the same numbers as job_latency -----------------------------------------------------------


def job_latency_row(lake: Path, job: str, tier: str) -> dict[str, Any]:
    """The ``job_latency`` row of (job, tier)."""
    con = connect(lake, views=("job_latency",))  # that view and what it reads
    try:
        [row] = run_sql(con, "select * from job_latency where job_id = $job and tier = $tier",
                        {"job": job, "tier": tier}).to_dicts()
    finally:
        con.close()
    return row


def assert_is_job_latency(lake: Path, m: LakeMeasurement) -> None:
    """The measurement's barrier p50/p99 and checkpoint count are job_latency's, exactly."""
    row = job_latency_row(lake, m.job_id, m.tier)
    assert (m.p50_s, m.p99_s, m.checkpoints) == (
        row["barrier_p50_s"], row["barrier_p99_s"], row["n_checkpoints"])


def test_measurement_is_job_latencys_barrier_p50_p99(tmp_path: Path) -> None:
    lake = _write_lake(tmp_path)
    assert_is_job_latency(lake, measure_from_lake(lake, "j1"))
    assert_is_job_latency(lake, measure_from_lake(lake, "j2"))
    con = connect(lake)  # a caller's connection, reused and left open
    try:
        assert measure_from_lake(lake, "j1", con=con) == measure_from_lake(lake, "j1")
        assert run_sql(con, "select 1 as one")["one"][0] == 1
    finally:
        con.close()


def _raw_checkpoints(job: str) -> list[str]:
    """JSONL lines of a job: 6 checkpoints x 4 ranks on 2 nodes, 3 GB per rank; rank 1 is the
    slowest, barriers 30, 31, 33, 36, 40, 80 s."""
    lines = []
    for n, barrier in enumerate([30.0, 31.0, 33.0, 36.0, 40.0, 80.0]):
        start = datetime(2026, 11, 28, 1, tzinfo=UTC) + timedelta(minutes=10 * n)
        for rank in range(4):
            d = barrier if rank == 1 else 20.0 + rank
            lines.append(json.dumps({
                "job_id": job, "step": 100 * n, "rank": rank, "node": f"n{rank // 2}",
                "tier": "pool", "start_time": start.isoformat(),
                "end_time": (start + timedelta(seconds=d)).isoformat(),
                "bytes": 3_000_000_000, "status": "ok"}))
    return lines


def test_duplicated_raw_records_do_not_change_the_measurement(tmp_path: Path) -> None:
    raw, lake = tmp_path / "raw", tmp_path / "lake"
    (raw / "checkpoints").mkdir(parents=True)
    lines = _raw_checkpoints("train-9")
    (raw / "checkpoints" / "train-9.jsonl").write_text("\n".join(lines) + "\n")
    ingest(raw, lake)
    first = measure_from_lake(lake, "train-9")
    # barriers 30, 31, 33, 36, 40, 80: p50 = (33 + 36) / 2; p99 at 4.95 = 40 + 0.95 * 40
    assert (first.checkpoints, first.ranks, first.gpus_per_node) == (6, 4, 2)
    assert first.p50_s == pytest.approx(34.5)
    assert first.p99_s == pytest.approx(78.0)
    assert first.bytes_per_rank == 3e9
    assert_is_job_latency(lake, first)

    # the same content under a second name, and every record re-sent in another file (other
    # bytes: the lines in reverse order, one of them twice)
    shutil.copy(raw / "checkpoints" / "train-9.jsonl", raw / "checkpoints" / "copy.jsonl")
    resent = [*reversed(lines), lines[5]]
    (raw / "checkpoints" / "resent.jsonl").write_text("\n".join(resent) + "\n")
    ingest(raw, lake)
    con = connect(lake, views=("checkpoint_writes",))
    try:
        n_raw = run_sql(con, "select count(*) as n from checkpoint_writes where job_id = $j",
                        {"j": "train-9"})["n"][0]
    finally:
        con.close()
    assert n_raw > len(lines)  # the duplicates did reach the lake
    again = measure_from_lake(lake, "train-9")
    assert again == first
    assert_is_job_latency(lake, again)


def test_an_errored_write_counts_in_the_barrier_as_in_job_latency(tmp_path: Path) -> None:
    # job_latency counts every rank whatever its status: it held the barrier. Barriers 10, 12,
    # 50 (rank 1 errored after 50 s): p50 = 12.
    Lake(tmp_path).init()
    start = datetime(2026, 11, 28, tzinfo=UTC)
    rows = [{"job_id": "j1", "step": step, "rank": rank, "node": "n0", "tier": "local",
             "start_ts": start, "end_ts": start + timedelta(seconds=d), "duration_s": d,
             "bytes": 1_000_000_000, "status": "error" if d == 50.0 else "ok"}
            for step, ds in enumerate([(10.0, 9.0), (11.0, 12.0), (8.0, 50.0)])
            for rank, d in enumerate(ds)]
    seed(tmp_path, "checkpoint_writes", rows)
    m = measure_from_lake(tmp_path, "j1")
    assert m.p50_s == 12.0
    assert m.p99_s == pytest.approx(12.0 + 0.98 * 38.0)
    assert_is_job_latency(tmp_path, m)


def test_main_tier_is_the_tier_with_more_rank_writes(tmp_path: Path) -> None:
    # pool: 3 checkpoints x 2 ranks = 6 writes; local: 2 checkpoints x 4 ranks = 8 writes
    Lake(tmp_path).init()
    start = datetime(2026, 11, 28, tzinfo=UTC)
    rows = [{"job_id": "j1", "step": step, "rank": rank, "node": f"n{rank // 2}", "tier": tier,
             "start_ts": start, "end_ts": start + timedelta(seconds=5.0), "duration_s": 5.0,
             "bytes": 1_000_000_000, "status": "ok"}
            for tier, steps, ranks in (("pool", range(3), 2), ("local", range(10, 12), 4))
            for step in steps for rank in range(ranks)]
    seed(tmp_path, "checkpoint_writes", rows)
    m = measure_from_lake(tmp_path, "j1")
    assert (m.tier, m.checkpoints, m.ranks, m.gpus_per_node) == ("local", 2, 4, 2)
    assert_is_job_latency(tmp_path, m)


def test_barrier_times_feed_the_tail_fit_and_no_restore_view_means_configured(
        tmp_path: Path) -> None:
    root = _write_lake(tmp_path)
    con = connect(root, views=("plan_measurements", "checkpoint_latency"))
    try:
        m = measure_from_lake(root, "j1", con=con)
    finally:
        con.close()
    assert m.barrier_s == (20.0, 22.0, 24.0, 26.0, 100.0)
    assert m.restore_s is None
    assert m.restart_source.startswith("configured")
    fit = m.tail_fit()
    assert fit is not None and fit.n == 5
    assert {c.family for c in fit.candidates} == {"lognormal", "pareto"}
    assert all(c.ks_distance is not None for c in fit.candidates)
    inputs = calibrate(PlanInputs(), m)
    assert inputs.pool_tail == fit.best
    assert inputs.restart_pool_s == PlanInputs().restart_pool_s
    assert json.dumps(m.to_dict())  # JSON-ready


def _with_loads(root: Path, loads: list[tuple[str, int, int, str, str, float]]
                ) -> duckdb.DuckDBPyConnection:
    """A connection to ``root`` whose ``stg_checkpoint_loads`` (helper C's view) holds
    ``loads``: (job_id, step, rank, node, tier, duration_s)."""
    con = connect(root, views=("plan_measurements", "checkpoint_latency"))
    con.execute("create or replace table __loads (job_id varchar, step bigint, rank bigint, "
                "node varchar, tier varchar, duration_s double)")
    con.executemany("insert into __loads values (?, ?, ?, ?, ?, ?)", loads)
    con.execute("create or replace view stg_checkpoint_loads as select * from __loads")
    return con


def test_measured_restores_set_the_restart_cost(tmp_path: Path) -> None:
    """``stg_checkpoint_loads`` (helper C's view) seeded on the connection: per step the slowest
    rank's load is one restore; the median over steps is the restart cost of that tier."""
    root = _write_lake(tmp_path)
    con = _with_loads(root, [
        ("j1", 1, 0, "n0", "pool", 40.0), ("j1", 1, 1, "n0", "pool", 55.0),
        ("j1", 2, 0, "n0", "pool", 70.0), ("j1", 2, 1, "n1", "pool", 65.0),
        ("j1", 3, 0, "n0", "pool", 90.0),
        ("j2", 1, 0, "n0", "local", 5.0)])
    try:
        m = measure_from_lake(root, "j1", con=con)
    finally:
        con.close()
    # restores: step 1 -> 55, step 2 -> 70, step 3 -> 90; median 70
    assert (m.restore_s, m.restore_tier, m.restores) == (70.0, "pool", 3)
    assert m.restart_source.startswith("measured: median of 3 restores")
    assert calibrate(PlanInputs(), m).restart_pool_s == 70.0


def test_restores_from_the_lakes_checkpoint_loads_table(tmp_path: Path) -> None:
    """End to end through helper C's ``stg_checkpoint_loads`` over a seeded
    ``checkpoint_loads`` table: two restores of 30 and 50 s (slowest rank each) -> 40 s."""
    root = _write_lake(tmp_path)
    start = datetime(2026, 11, 1, tzinfo=UTC)
    rows = [{"job_id": "j1", "step": step, "rank": rank, "node": "n0", "tier": "pool",
             "start_ts": start, "end_ts": start + timedelta(seconds=d), "duration_s": d,
             "bytes": 2_000_000_000}
            for step, durations in ((1, (20.0, 30.0)), (2, (50.0, 10.0)))
            for rank, d in enumerate(durations)]
    seed(root, "checkpoint_loads", rows, part="0")
    m = measure_from_lake(root, "j1")
    assert (m.restore_s, m.restore_tier, m.restores) == (40.0, "pool", 2)


def test_many_jobs_at_once_are_each_jobs_measurement(tmp_path: Path) -> None:
    """One pass for every job (the daily report's): per job what ``measure_from_lake`` says,
    its own restores and main tier, and the error of a job the lake does not have."""
    root = _write_lake(tmp_path)
    con = _with_loads(root, [
        ("j1", 1, 0, "n0", "pool", 40.0), ("j1", 2, 0, "n0", "pool", 70.0),
        ("j1", 3, 0, "n0", "pool", 90.0), ("j1", 3, 0, "n0", "local", 9.0),
        ("j2", 1, 0, "n0", "local", 5.0), ("j2", 2, 0, "n0", "local", 7.0)])
    try:
        both = measure_jobs_from_lake(root, ["j2", "j9", "j1", "j2"], con=con)
        one_by_one = {j: measure_from_lake(root, j, con=con) for j in ("j1", "j2")}
    finally:
        con.close()
    assert list(both) == ["j2", "j9", "j1"]
    assert (both["j1"], both["j2"]) == (one_by_one["j1"], one_by_one["j2"])
    j1, j2 = one_by_one["j1"], one_by_one["j2"]
    assert (j1.tier, j1.barrier_s, j1.restore_s, j1.restore_tier, j1.restores) == (
        "pool", (20.0, 22.0, 24.0, 26.0, 100.0), 70.0, "pool", 3)
    assert (j2.tier, j2.restore_s, j2.restore_tier, j2.restores) == ("local", 6.0, "local", 2)
    error = both["j9"]
    assert isinstance(error, LakeError)
    assert "job 'j9' has no checkpoint writes" in str(error) and "include: j1, j2" in str(error)
    assert measure_jobs_from_lake(root, []) == {}


# -- the job's timeout, interval and measured timeouts -------------------------------------------

def _measured(**kw: Any) -> LakeMeasurement:
    """A pool job of 20 checkpoints over 10,000 s observed, 2 of them timed out."""
    base: dict[str, Any] = {
        "job_id": "j", "tier": "pool", "checkpoints": 20, "ranks": 16, "gpus_per_node": 8,
        "bytes_per_rank": 1e9, "p50_s": 10.0, "p99_s": 30.0, "source": "lake",
        "timeout_s": 60.0, "checkpoint_interval_s": None, "measured_interval_s": 500.0,
        "n_timed_out": 2, "observed_s": 10_000.0}
    return LakeMeasurement(**{**base, **kw})


def test_calibrate_takes_the_jobs_timeout_and_its_measured_timeout_probability() -> None:
    m = _measured()
    assert m.timeouts_per_year == pytest.approx(2 / 10_000 * SECONDS_PER_YEAR)
    assert (m.interval_s, m.interval_source) == (
        500.0, "measured: median gap between the 20 checkpoint starts")
    inputs = calibrate(PlanInputs(), m)
    assert inputs.checkpoint_timeout_s == 60.0
    # 2 per 10,000 s at one checkpoint per 500 s: 0.1 of the checkpoints time out
    assert inputs.measured_timeout_probability == pytest.approx(0.1)
    assert evaluate_strategy("pool", inputs).timeout_probability == pytest.approx(0.1)
    assert evaluate_strategy("local", inputs).timeout_probability < 0.1  # from its own tail
    # the jobs table's interval wins over the measured one
    inputs = calibrate(PlanInputs(), _measured(checkpoint_interval_s=1000.0))
    assert inputs.measured_timeout_probability == pytest.approx(0.2)


def test_no_timeout_seen_leaves_the_probability_to_the_tail() -> None:
    m = _measured(n_timed_out=0)
    t = timeouts_of(m)
    assert (t.per_year, t.probability) == (None, None)
    assert t.per_year_source.startswith("none measured: 0 of 20 checkpoints timed out")
    inputs = calibrate(PlanInputs(), m)
    assert inputs.measured_timeout_probability is None
    tail_q = evaluate_strategy("pool", inputs).timeout_probability
    assert 0 < tail_q < 0.1


def test_resolving_without_any_timeout_is_an_error_naming_the_fix() -> None:
    m = _measured(timeout_s=None)
    with pytest.raises(PlanInputError, match=r"^job 'j' has no checkpoint_timeout_s in the "
                       r"lake's jobs table; give --checkpoint-timeout-s S"):
        resolve_timeouts(m)
    assert resolve_timeouts(m, config_timeout=90.0).timeouts == timeouts_of(
        m, config_timeout=90.0)
    assert timeouts_of(m, config_timeout=90.0).timeout_source == "--config"
    with pytest.raises(PlanInputError, match="--timeouts-per-year must be >= 0"):
        timeouts_of(m, per_year_flag=-1.0)
    # a probability near 1 is held below it: the model's wall time stays finite
    assert timeouts_of(_measured(observed_s=100.0)).probability == 0.99  # 2 per 100 s
