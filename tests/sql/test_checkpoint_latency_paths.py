"""checkpoint_latency over staging's two paths: checkpoints read without node/tier/target (no
repeated rank, no identifier over the limit) and those staging checks row by row; and over its
two paths for start markers: checkpoints proven finished from per-checkpoint aggregates and
those whose ranks are looked up one by one (int_unfinished_ranks_of)."""

from __future__ import annotations

import random
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


# -- start markers: the checkpoint-level proof vs the rank-level lookup ------------------------

INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1


def marker_row(step: int, rank: int, start: float, *, node: str | None = None,
               tier: str = "pool", ingested: float = 0.0) -> dict[str, Any]:
    """One start marker of job j1, ingested ``ingested`` s after INGESTED."""
    return {"job_id": "j1", "step": step, "rank": rank, "node": node or f"n{rank}",
            "tier": tier, "target": f"t{rank % 3}", "start_ts": at(start),
            "ingested_ts": INGESTED + timedelta(seconds=ingested)}


def generated_checkpoints(seed_value: int) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Markers and records of many checkpoints of job j1, each a mix of what a lake holds: every
    rank finished, ranks that never finished, a gap in the records, a marker outside them,
    markers re-sent (a later ingest, another node and start), a record re-sent, negative ranks,
    ranks across blocks of 1024 and at the ends of int32, a long node on a marker or a long
    target on a rank's only record, markers without records, records without markers."""
    rng = random.Random(seed_value)
    markers: list[dict[str, Any]] = []
    records: list[dict[str, Any]] = []
    layouts = [list(range(4)), list(range(8)), [0], list(range(-3, 3)),
               list(range(1018, 1030)), [INT32_MIN, 0, INT32_MAX], [5, 7, 9]]
    for step in range(1, 161):
        ranks = rng.choice(layouts)
        start = 100.0 * step
        marked = [r for r in ranks if rng.random() < 0.9] if rng.random() < 0.8 else []
        finished = [r for r in ranks if rng.random() < (0.7 if rng.random() < 0.4 else 1.0)]
        if rng.random() < 0.15 and max(ranks) < INT32_MAX:  # a record of an unmarked rank
            finished.append(max(ranks) + 1)
        for r in marked:
            offset = rng.uniform(0.0, 2.0)
            long_node = rng.random() < 0.03
            markers.append(marker_row(step, r, start + offset, node=LONG if long_node else None,
                                      tier=rng.choice(["pool", "local"]), ingested=offset))
            if rng.random() < 0.1:  # re-sent: later ingest, another node, maybe earlier start
                markers.append(marker_row(step, r, start + offset + rng.uniform(-1.0, 1.0),
                                          node=f"m{r}", ingested=10.0 + offset))
        for r in finished:
            duration = round(rng.uniform(5.0, 20.0), 3)
            target = LONG if rng.random() < 0.03 else "t0"
            records.append(write(step, r, duration, start_ts=at(start + 1.0),
                                 end_ts=at(start + 1.0 + duration), target=target))
            if rng.random() < 0.05:
                records.append(write(step, r, duration + 1.0, start_ts=at(start + 1.0),
                                     end_ts=at(start + 2.0 + duration),
                                     ingested_ts=INGESTED + timedelta(hours=1)))
    return markers, records


def expected_unfinished(markers: list[dict[str, Any]],
                        records: list[dict[str, Any]]) -> dict[tuple[int, int], dict[str, Any]]:
    """The oracle, by hand: per (step, rank) started and never finished, the staged marker (the
    earliest start; node, tier and target of the latest ingest; long identifiers left out)."""
    finished = {(r["step"], r["rank"]) for r in records}  # any record, long target or not
    kept = [m for m in markers if len(m["node"]) <= 256]
    staged: dict[tuple[int, int], dict[str, Any]] = {}
    for m in sorted(kept, key=lambda m: m["ingested_ts"]):
        key = (m["step"], m["rank"])
        earliest = min(m["start_ts"], staged[key]["start_ts"]) if key in staged else m["start_ts"]
        staged[key] = {**m, "start_ts": earliest}
    return {k: m for k, m in staged.items() if k not in finished}


@pytest.mark.parametrize("seed_value", [1, 2])
def test_generated_markers_give_the_unfinished_ranks_of_the_rank_level_oracle(
        lake: Path, seed_value: int) -> None:
    markers, records = generated_checkpoints(seed_value)
    seed(lake, "checkpoint_starts", markers)
    seed(lake, "checkpoint_writes", records)
    oracle = expected_unfinished(markers, records)
    kept = [m for m in markers if len(m["node"]) <= 256]
    n_started: dict[int, set[int]] = {}
    for m in kept:
        n_started.setdefault(m["step"], set()).add(m["rank"])
    con = connect(lake, views=("checkpoint_latency", "int_unfinished_ranks"))
    try:
        got_ranks = run_sql(con, "select step, rank, node, tier, target, start_ts "
                                 "from int_unfinished_ranks").to_dicts()
        latency = {r["step"]: r for r in run_sql(
            con, "select step, n_started, n_unfinished, slowest_rank, barrier_is_lower_bound "
                 "from checkpoint_latency").to_dicts()}
    finally:
        con.close()
    assert {(r["step"], r["rank"]): (r["node"], r["tier"], r["target"], r["start_ts"])
            for r in got_ranks} == {k: (m["node"], m["tier"], m["target"], m["start_ts"])
                                    for k, m in oracle.items()}
    assert len(got_ranks) == len(oracle)
    by_step: dict[int, list[dict[str, Any]]] = {}
    for m in oracle.values():
        by_step.setdefault(m["step"], []).append(m)
    assert {s: (r["n_started"], r["n_unfinished"]) for s, r in latency.items()} == {
        s: (len(n_started.get(s, ())), len(by_step.get(s, []))) for s in latency}
    assert set(by_step) <= set(latency)
    for step, hung in by_step.items():  # the unfinished rank that started first
        first = min(hung, key=lambda m: (m["start_ts"], m["rank"]))
        assert latency[step]["slowest_rank"] == first["rank"]
        assert latency[step]["barrier_is_lower_bound"] is True
    assert len(oracle) > 10 and len(by_step) < len(n_started)  # both paths were taken


def test_a_gap_in_the_records_without_a_marker_is_no_unfinished_rank(lake: Path) -> None:
    """Ranks 0 and 2 finished, rank 1 has neither marker nor record: the records are no single
    run, so the checkpoint takes the rank-level lookup, which finds nothing."""
    seed(lake, "checkpoint_starts", [marker_row(1, 0, 0.0), marker_row(1, 2, 0.0)])
    seed(lake, "checkpoint_writes", [write(1, 0, 10.0), write(1, 2, 12.0)])
    assert rows(lake, "select n_started, n_unfinished, slowest_rank from checkpoint_latency") == [
        {"n_started": 2, "n_unfinished": 0, "slowest_rank": 2}]


def test_a_marker_beyond_the_records_run_is_unfinished(lake: Path) -> None:
    """Ranks 0-2 finished (one run), rank 3 started and did not: outside the run."""
    seed(lake, "checkpoint_starts", [marker_row(1, r, float(r)) for r in range(4)])
    seed(lake, "checkpoint_writes", [write(1, r, 10.0) for r in range(3)])
    assert rows(lake, "select n_started, n_unfinished, slowest_rank from checkpoint_latency") == [
        {"n_started": 4, "n_unfinished": 1, "slowest_rank": 3}]


def test_ranks_at_both_ends_of_int32_do_not_overflow_the_run_check(lake: Path) -> None:
    seed(lake, "checkpoint_starts", [marker_row(1, r, 0.0) for r in (INT32_MIN, INT32_MAX)])
    seed(lake, "checkpoint_writes", [write(1, r, 10.0) for r in (INT32_MIN, 0, INT32_MAX)])
    assert rows(lake, "select n_started, n_unfinished from checkpoint_latency") == [
        {"n_started": 2, "n_unfinished": 0}]


def test_a_re_sent_marker_counts_once_and_keeps_its_earliest_start(lake: Path) -> None:
    seed(lake, "checkpoint_starts", [marker_row(1, 0, 5.0), marker_row(1, 1, 5.0)], part="a")
    seed(lake, "checkpoint_starts", [marker_row(1, 1, 3.0, node="m1", ingested=60.0)],
         part="b")
    seed(lake, "checkpoint_writes", [write(1, 0, 10.0, start_ts=at(6), end_ts=at(16))])
    assert rows(lake, "select n_started, n_unfinished, start_ts from checkpoint_latency") == [
        {"n_started": 2, "n_unfinished": 1, "start_ts": at(3)}]
    assert rows(lake, "select rank, node, start_ts from int_unfinished_ranks") == [
        {"rank": 1, "node": "m1", "start_ts": at(3)}]
