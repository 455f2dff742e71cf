"""Unfinished ranks (a start marker, no record) in the marts: checkpoint_latency's n_started,
n_unfinished, timed_out and lower-bound barrier; stalls; stall_ranks; stall_signals.

Literal rows in, exact numbers out. Times are seconds after T0 (tests.sql_seed.at)."""

from __future__ import annotations

from pathlib import Path

import pytest
from tests.sql.conftest import latency
from tests.sql.test_marts import query, write
from tests.sql_seed import at, marker, seed


def test_markers_of_finished_ranks_change_nothing_but_n_started(lake: Path) -> None:
    seed(lake, "checkpoint_writes", [write("j1", 1, r, d) for r, d in enumerate([10.0, 20.0])])
    seed(lake, "checkpoint_starts", [marker("j1", 1, r) for r in range(2)])
    [row] = latency(lake).values()
    assert (row["n_ranks"], row["n_started"], row["n_unfinished"]) == (2, 2, 0)
    assert (row["barrier_s"], row["max_s"], row["slowest_rank"]) == (20.0, 20.0, 1)
    assert row["timed_out"] is False and row["barrier_is_lower_bound"] is False
    assert row["end_ts"] == at(20.0)


def test_a_lake_without_markers_counts_none(lake: Path) -> None:
    seed(lake, "checkpoint_writes", [write("j1", 1, 0, 10.0)])
    [row] = latency(lake).values()
    assert (row["n_started"], row["n_unfinished"], row["timed_out"],
            row["barrier_is_lower_bound"], row["barrier_s"]) == (0, 0, False, False, 10.0)


def test_ranks_open_past_the_timeout_time_the_checkpoint_out(lake: Path) -> None:
    # j1 step 5 starts at T0 + 100: ranks 0 and 1 finish in 10 and 12 s; ranks 2 (started at
    # 100) and 3 (at 101) never do. Job j2's record ends at T0 + 400: the data reaches 300 s past
    # the start, beyond the 60 s timeout. The barrier is at least the timeout: 60 s.
    seed(lake, "checkpoint_writes", [write("j1", 5, 0, 10.0, start=100),
                                     write("j1", 5, 1, 12.0, start=100),
                                     write("j2", 1, 0, 10.0, start=390)])
    seed(lake, "checkpoint_starts", [marker("j1", 5, 0, start=100), marker("j1", 5, 1, start=100),
                                     marker("j1", 5, 3, start=101), marker("j1", 5, 2, start=100)])
    seed(lake, "jobs", [{"job_id": "j1", "n_ranks": 4, "checkpoint_timeout_s": 60.0},
                        {"job_id": "j2", "n_ranks": 1, "checkpoint_timeout_s": 60.0}])
    row = latency(lake)[("j1", 5)]
    assert (row["n_ranks"], row["n_started"], row["n_unfinished"]) == (2, 4, 2)
    assert row["timed_out"] is True and row["barrier_is_lower_bound"] is True
    assert (row["barrier_s"], row["max_s"], row["p50_s"]) == (60.0, 12.0, 11.0)
    assert (row["start_ts"], row["end_ts"], row["window_s"]) == (at(100), at(160), 60.0)
    assert row["slowest_rank"] == 2  # the unfinished rank that started first
    assert row["bytes"] == 2_000_000_000  # what the finished ranks wrote
    j2 = latency(lake)[("j2", 1)]
    assert (j2["n_unfinished"], j2["timed_out"], j2["barrier_s"]) == (0, False, 10.0)


def test_ranks_still_open_before_the_timeout_give_a_lower_bound_only(lake: Path) -> None:
    # Rank 1 started at T0 and is still open; the data ends at T0 + 45 (rank 0's end, a marker
    # of step 2 at T0 + 30): open 45 s of a 60 s timeout, not timed out; the barrier >= 45 s.
    seed(lake, "checkpoint_writes", [write("j1", 1, 0, 45.0)])
    seed(lake, "checkpoint_starts", [marker("j1", 1, 0), marker("j1", 1, 1),
                                     marker("j1", 2, 0, start=30)])
    seed(lake, "jobs", [{"job_id": "j1", "n_ranks": 2, "checkpoint_timeout_s": 60.0}])
    got = latency(lake)
    row = got[("j1", 1)]
    assert (row["n_unfinished"], row["timed_out"], row["barrier_is_lower_bound"]) == (
        1, False, True)
    assert (row["barrier_s"], row["end_ts"]) == (45.0, at(45))
    # Step 2: only a marker, opened 15 s before the data end: here, with no rank finished.
    step2 = got[("j1", 2)]
    assert (step2["n_ranks"], step2["n_started"], step2["n_unfinished"]) == (0, 1, 1)
    assert (step2["p50_s"], step2["max_s"], step2["barrier_s"]) == (None, None, 15.0)
    assert (step2["tier"], step2["bytes"], step2["slowest_rank"], step2["timed_out"]) == (
        "pool", 0, 0, False)


def test_a_checkpoint_no_rank_finished_is_there_and_times_out(lake: Path) -> None:
    # Every rank of step 9 hung (markers at T0 + 1000); the data reaches T0 + 2000.
    seed(lake, "checkpoint_writes", [write("j1", 8, r, 10.0) for r in range(2)]
         + [write("j2", 1, 0, 5.0, start=1995)])
    seed(lake, "checkpoint_starts", [marker("j1", 9, r, start=1000, tier="local")
                                     for r in range(2)])
    seed(lake, "jobs", [{"job_id": "j1", "n_ranks": 2, "checkpoint_timeout_s": 420.0}])
    row = latency(lake)[("j1", 9)]
    assert (row["n_ranks"], row["n_unfinished"], row["timed_out"], row["tier"]) == (
        0, 2, True, "local")
    assert (row["barrier_s"], row["start_ts"], row["end_ts"]) == (420.0, at(1000), at(1420))


def test_without_a_timeout_an_unfinished_checkpoint_is_open_at_the_data_end(lake: Path) -> None:
    # No job metadata: rank 1 is open from T0 to the data end at T0 + 50.
    seed(lake, "checkpoint_writes", [write("j1", 1, 0, 50.0)])
    seed(lake, "checkpoint_starts", [marker("j1", 1, 1)])
    [row] = latency(lake).values()
    assert (row["n_ranks_expected"], row["timed_out"], row["barrier_s"]) == (None, True, 50.0)


def seed_history_and_hang(lake: Path, *, hang_start: float, timeout: float) -> None:
    """j1: 5 checkpoints of 10 s every 100 s (steps 0-4), then step 5 at T0 + hang_start with
    rank 0 done in 10 s and ranks 1 (node n0) and 3 (node n1, leaf01) never finishing;
    j2's record ends at T0 + 1000 (the data end). Ranks are 0-3 on n0 (0, 1) and n1 (2, 3)."""
    rows = [write("j1", s, r, 10.0, start=100.0 * s, open_s=0.2, write_s=9.0, fsync_s=0.6,
                  close_s=0.2) for s in range(5) for r in range(4)]
    rows += [write("j1", 5, r, 10.0, start=hang_start, open_s=0.2, write_s=9.0, fsync_s=0.6,
                   close_s=0.2) for r in (0, 2)]
    seed(lake, "checkpoint_writes", rows + [write("j2", 1, 0, 10.0, start=990)])
    seed(lake, "checkpoint_starts", [marker("j1", 5, r, start=hang_start) for r in range(4)])
    seed(lake, "jobs", [{"job_id": "j1", "n_ranks": 4, "checkpoint_timeout_s": timeout}])
    seed(lake, "topology", [{"node": "n1", "leaf_switch": "leaf01", "nic": "mlx5_0",
                             "port": "1"}])


def test_a_timed_out_checkpoint_is_a_stall_whatever_the_ratio(lake: Path) -> None:
    # Timeout 15 s: the hang's lower bound is 15 s, x1.5 the 10 s baseline (below the 2x
    # factor), yet it is a stall because it timed out.
    seed_history_and_hang(lake, hang_start=500, timeout=15.0)
    [stall] = query(lake, "select * from stalls where is_stall")
    assert (stall["step"], stall["timed_out"], stall["barrier_is_lower_bound"]) == (5, True, True)
    assert (stall["barrier_s"], stall["baseline_s"], stall["n_unfinished"]) == (15.0, 10.0, 2)


def test_an_open_checkpoint_is_a_stall_when_its_lower_bound_is_far_above(lake: Path) -> None:
    # Timeout 1000 s: step 5 opened at T0 + 900 is open 100 s at the data end (T0 + 1000), not
    # timed out, but 100 s >= 2 x the 10 s baseline: a stall on its lower bound.
    seed_history_and_hang(lake, hang_start=900, timeout=1000.0)
    [stall] = query(lake, "select * from stalls where is_stall")
    assert (stall["step"], stall["timed_out"], stall["barrier_s"]) == (5, False, 100.0)
    assert stall["ratio_to_baseline"] == pytest.approx(10.0)


def test_unfinished_ranks_are_the_slow_ranks_of_their_stall(lake: Path) -> None:
    seed_history_and_hang(lake, hang_start=500, timeout=60.0)
    ranks = {r["rank"]: r for r in query(lake, "select * from stall_ranks where step = 5")}
    assert sorted(ranks) == [0, 1, 2, 3]
    assert [r for r in ranks if ranks[r]["is_unfinished"]] == [1, 3]
    hung = ranks[3]
    assert (hung["status"], hung["is_slow"], hung["node"], hung["leaf_switch"]) == (
        "unfinished", True, "n1", "leaf01")
    assert (hung["target"], hung["target_host"], hung["open_s"]) == ("t1", "t1", None)
    # Open from T0 + 500 to the timeout at T0 + 560: at least 60 s, 50 s over the normal 10 s.
    assert (hung["duration_s"], hung["normal_rank_s"], hung["excess_s"]) == (60.0, 10.0, 50.0)
    assert ranks[0]["is_slow"] is False and ranks[0]["status"] == "ok"


def test_stall_signals_look_at_the_unfinished_ranks_hosts_during_the_hang(lake: Path) -> None:
    # Pause frames on n0 and n1 every 10 s, 1/s, but 500/s on n1 while step 5 hangs (T0 + 500
    # to the timeout at T0 + 560); gc_active on t0 and t1. Unfinished ranks 1 (n0) and 3 (n1)
    # both wrote to t1: the slow hosts are n0, n1 and t1, not t0.
    seed_history_and_hang(lake, hang_start=500, timeout=60.0)
    pause = {"n0": 0.0, "n1": 0.0}
    fabric = []
    for t in range(0, 1001, 10):
        for node in pause:
            pause[node] += 10 * (500.0 if node == "n1" and 500 < t <= 560 else 1.0)
            fabric.append({"ts": at(t), "node": node, "device": "mlx5_0", "port": "1",
                           "counter": "rx_prio3_pause", "value": pause[node],
                           "source": "ethtool"})
    seed(lake, "fabric_counters", fabric)
    seed(lake, "pool_metrics", [
        {"ts": at(t), "pool": "p0", "target": tg, "metric": "gc_active", "value": 0.0}
        for tg in ("t0", "t1") for t in range(0, 1001, 30)])
    hosts = {r["host"]: r for r in query(lake, "select * from stall_signals where step = 5")}
    roles = {h: (r["is_slow_host"], r["n_slow_ranks"], r["n_ranks"]) for h, r in hosts.items()}
    assert roles == {"n0": (True, 1, 2), "n1": (True, 1, 2), "t0": (False, 0, 2),
                     "t1": (True, 2, 2)}
    # The window is the hang, to the timeout: six 10 s intervals of 500/s in (500, 560]. The
    # 1/s one ending at 500 touches the window (stall_signals counts its sample) but spends no
    # time inside it, so it weighs nothing: 500/s, against a 1/s baseline.
    assert hosts["n1"]["n_samples"] == 7
    assert hosts["n1"]["level"] == pytest.approx(500.0)
    assert hosts["n1"]["baseline_level"] == pytest.approx(1.0)
    assert hosts["n0"]["level"] == pytest.approx(1.0)
