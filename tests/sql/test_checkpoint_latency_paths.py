"""checkpoint_latency over staging's two paths: checkpoints read without node/tier/target (no
repeated rank, no identifier over the limit) and those staging checks row by row."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from tests.sql_seed import INGESTED, at, seed

from ckptwatch.lake.query import connect, run_sql
from ckptwatch.lake.store import Lake

LONG = "x" * 300  # over the default field limit (256)


@pytest.fixture
def lake(tmp_path: Path) -> Path:
    """An initialised, empty lake."""
    Lake(tmp_path).init()
    return tmp_path


def rows(root: Path, sql: str) -> list[dict[str, Any]]:
    con = connect(root, views=("checkpoint_latency",))
    try:
        return run_sql(con, sql).to_dicts()
    finally:
        con.close()


def write(step: int, rank: int, duration: float, **extra: Any) -> dict[str, Any]:
    """One rank's checkpoint write of job j1."""
    return {"job_id": "j1", "step": step, "rank": rank, "node": f"n{rank}", "tier": "pool",
            "target": "t0", "start_ts": at(0), "end_ts": at(duration), "duration_s": duration,
            "bytes": 1000, "status": "ok", **extra}


def test_a_rank_with_a_long_node_or_target_is_left_out_of_its_checkpoint_only(lake: Path) -> None:
    seed(lake, "checkpoint_writes", [
        write(1, 0, 10.0), write(1, 1, 99.0, node=LONG),  # the slow rank is left out
        write(2, 0, 12.0), write(2, 1, 14.0),             # untouched
        write(3, 0, 11.0, target=LONG), write(3, 1, 13.0),
    ])
    got = rows(lake, "select step, n_ranks, max_s, barrier_s from checkpoint_latency "
                     "order by step")
    assert got == [{"step": 1, "n_ranks": 1, "max_s": 10.0, "barrier_s": 10.0},
                   {"step": 2, "n_ranks": 2, "max_s": 14.0, "barrier_s": 14.0},
                   {"step": 3, "n_ranks": 1, "max_s": 13.0, "barrier_s": 13.0}]


def test_a_long_job_id_leaves_out_its_rows_and_no_other(lake: Path) -> None:
    seed(lake, "checkpoint_writes", [write(1, 0, 10.0), write(1, 0, 50.0, job_id=LONG)])
    got = rows(lake, "select job_id, n_ranks, max_s from checkpoint_latency")
    assert got == [{"job_id": "j1", "n_ranks": 1, "max_s": 10.0}]


def test_a_resent_rank_whose_newer_copy_has_a_long_target_keeps_the_older(lake: Path) -> None:
    """The limit comes before the duplicate rule: the newer copy is left out, so the older one
    is the rank's record (as before the two paths)."""
    seed(lake, "checkpoint_writes", [write(1, 0, 10.0), write(1, 1, 20.0)], part="a")
    later = INGESTED + timedelta(hours=1)
    seed(lake, "checkpoint_writes", [write(1, 1, 40.0, target=LONG, ingested_ts=later),
                                     write(1, 0, 12.0, ingested_ts=later)], part="b")
    got = rows(lake, "select rank, duration_s, source_file from stg_checkpoint_writes "
                     "order by rank")
    assert got == [{"rank": 0, "duration_s": 12.0, "source_file": "seed/b"},
                   {"rank": 1, "duration_s": 20.0, "source_file": "seed/a"}]
    assert rows(lake, "select n_ranks, max_s from checkpoint_latency") == [
        {"n_ranks": 2, "max_s": 20.0}]
