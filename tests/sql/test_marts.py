"""Marts: literal rows in, exact numbers out; each mart's contract; build order; the duckdb CLI.

The numbers are worked out by hand in the comments (quantile_cont interpolates linearly between
order statistics: position (n - 1) * q over the sorted values).
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml
from tests.conftest import PROJECT_ROOT
from tests.sql_seed import INGESTED, at, seed, views_read

from ckptwatch.analysis.detection import DetectionSettings, session_defaults
from ckptwatch.lake.query import SESSION_FILE, connect, run_sql, view_files
from ckptwatch.lake.store import Lake
from ckptwatch.settings import sql_dir

MARTS = sorted(p.name.removesuffix(".contract.yml")
               for p in (sql_dir() / "marts").glob("*.contract.yml"))



def write(job: str, step: int, rank: int, duration: float, *, start: float = 0.0,
          tier: str = "pool", **extra: Any) -> dict[str, Any]:
    """One rank's checkpoint write; node n<rank // 2>, target t<rank % 2>, 1 GB."""
    return {"job_id": job, "step": step, "rank": rank, "node": f"n{rank // 2}", "tier": tier,
            "target": f"t{rank % 2}", "start_ts": at(start), "end_ts": at(start + duration),
            "duration_s": duration, "bytes": 1_000_000_000, "status": "ok", **extra}


@pytest.fixture
def lake(tmp_path: Path) -> Path:
    """An initialised, empty lake."""
    Lake(tmp_path).init()
    return tmp_path


def query(root: Path, sql: str, params: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    """Build the views the query reads over ``root`` and return its rows as dicts."""
    con = connect(root, views=views_read(sql))
    try:
        return run_sql(con, sql, params).to_dicts()
    finally:
        con.close()


# -- checkpoint_latency ----------------------------------------------------------------------

def test_checkpoint_latency_quantiles_barrier_and_bandwidth(lake: Path) -> None:
    # Durations 10, 20, 30, 40, 100 (sorted): p50 = 30; p90 at 3.6 = 40 + 0.6 * 60 = 76;
    # p99 at 3.96 = 97.6; p99.9 at 3.996 = 99.76; max = barrier = 100.
    # All start at T0, the last ends at T0 + 100 s: 5 GB over 100 s = 5e7 B/s.
    phases = [(0.1, 8.0, 1.5, 0.4), (0.2, 17.0, 2.4, 0.4), (0.3, 26.0, 3.3, 0.4),
              (0.4, 35.0, 4.2, 0.4), (5.0, 80.0, 14.6, 0.4)]
    seed(lake, "checkpoint_writes", [
        write("j1", 100, r, d, open_s=o, write_s=w, fsync_s=f, close_s=c)
        for r, (d, (o, w, f, c)) in enumerate(zip([20.0, 10.0, 40.0, 100.0, 30.0], phases,
                                                  strict=True))])
    seed(lake, "jobs", [{"job_id": "j1", "n_ranks": 5, "checkpoint_timeout_s": 120.0}])
    [row] = query(lake, "select * from checkpoint_latency")
    assert row["n_ranks"] == 5 and row["n_ranks_expected"] == 5 and row["n_ranks_not_ok"] == 0
    assert row["tier"] == "pool" and row["bytes"] == 5_000_000_000
    assert row["p50_s"] == pytest.approx(30.0, rel=1e-12)
    assert row["p90_s"] == pytest.approx(76.0, rel=1e-12)
    assert row["p99_s"] == pytest.approx(97.6, rel=1e-12)
    assert row["p999_s"] == pytest.approx(99.76, rel=1e-12)
    assert row["max_s"] == row["barrier_s"] == 100.0
    assert row["slowest_rank"] == 3
    assert row["window_s"] == 100.0
    assert row["effective_bandwidth_bytes_per_s"] == pytest.approx(5e7, rel=1e-12)
    assert row["p99_over_p50"] == pytest.approx(97.6 / 30.0, rel=1e-12)
    # Phase medians over ranks: the middle of five.
    assert (row["open_p50_s"], row["write_p50_s"], row["fsync_p50_s"], row["close_p50_s"]) == (
        pytest.approx(0.3), pytest.approx(26.0), pytest.approx(3.3), pytest.approx(0.4))


def test_checkpoint_latency_counts_a_resent_rank_once(lake: Path) -> None:
    # Rank 1 first reported 100 s, then a corrected file says 20 s: the barrier is 20 s.
    seed(lake, "checkpoint_writes", [write("j1", 1, 0, 10.0), write("j1", 1, 1, 100.0)], "a")
    seed(lake, "checkpoint_writes", [write("j1", 1, 1, 20.0,
                                           ingested_ts=INGESTED + timedelta(hours=1))], "b")
    [row] = query(lake, "select n_ranks, p50_s, barrier_s from checkpoint_latency")
    assert row == {"n_ranks": 2, "p50_s": 15.0, "barrier_s": 20.0}


def test_checkpoint_latency_window_spans_staggered_starts(lake: Path) -> None:
    # Ranks start 0 s and 5 s apart and take 10 s: barrier 10 s, window 15 s, 2 GB / 15 s.
    seed(lake, "checkpoint_writes", [write("j1", 1, 0, 10.0), write("j1", 1, 1, 10.0, start=5),
                                     write("j1", 1, 2, 4.0, start=1, status="error")])
    [row] = query(lake, "select barrier_s, window_s, effective_bandwidth_bytes_per_s as bw, "
                        "n_ranks_not_ok from checkpoint_latency")
    assert row == {"barrier_s": 10.0, "window_s": 15.0, "bw": pytest.approx(3e9 / 15),
                   "n_ranks_not_ok": 1}


# -- job_latency and tier_latency ------------------------------------------------------------

def seed_three_checkpoints(lake: Path) -> None:
    """Job j1 (pool): barriers 10, 20, 60 s at T0, T0 + 1 h, T0 + 2 h; job j2 (local): 5 s."""
    rows = []
    for step, (hour, durations) in enumerate([(0, (5.0, 10.0)), (1, (8.0, 20.0)),
                                              (2, (12.0, 60.0))]):
        rows += [write("j1", step, r, d, start=3600.0 * hour) for r, d in enumerate(durations)]
    rows += [write("j2", 7, r, d, tier="local") for r, d in enumerate((4.0, 5.0))]
    seed(lake, "checkpoint_writes", rows)
    seed(lake, "jobs", [{"job_id": "j1", "n_ranks": 2, "checkpoint_timeout_s": 100.0},
                        {"job_id": "j2", "n_ranks": 2, "checkpoint_timeout_s": 30.0}])


def test_job_latency_over_checkpoints(lake: Path) -> None:
    seed_three_checkpoints(lake)
    got = {r["job_id"]: r for r in query(lake, "select * from job_latency")}
    j1 = got["j1"]
    # Barriers 10, 20, 60: p50 = 20; p90 at 1.8 = 20 + 0.8 * 40 = 52; p99 at 1.98 = 59.2.
    assert j1["n_checkpoints"] == 3 and j1["tier"] == "pool"
    assert j1["barrier_p50_s"] == pytest.approx(20.0)
    assert j1["barrier_p90_s"] == pytest.approx(52.0)
    assert j1["barrier_p99_s"] == pytest.approx(59.2)
    assert j1["barrier_max_s"] == 60.0 and j1["worst_step"] == 2
    # Rank p50 per checkpoint: 7.5, 14, 36 -> median 14.
    assert j1["rank_p50_s"] == pytest.approx(14.0)
    # Least squares through (0 h, 10), (1 h, 20), (2 h, 60): slope 25 s per hour.
    assert j1["barrier_trend_s_per_h"] == pytest.approx(25.0)
    assert j1["timeout_s"] == 100.0
    assert j1["headroom_s"] == pytest.approx(40.0)
    assert j1["headroom_p99_s"] == pytest.approx(40.8)
    assert j1["p99_fraction_of_timeout"] == pytest.approx(0.592)
    assert j1["max_fraction_of_timeout"] == pytest.approx(0.6)
    j2 = got["j2"]
    assert (j2["tier"], j2["n_checkpoints"], j2["barrier_max_s"], j2["headroom_s"]) == (
        "local", 1, 5.0, 25.0)
    assert j2["barrier_trend_s_per_h"] is None


def test_tier_latency_pools_checkpoints_of_every_job(lake: Path) -> None:
    seed_three_checkpoints(lake)
    got = {r["tier"]: r for r in query(lake, "select * from tier_latency")}
    assert got["pool"]["n_jobs"] == 1 and got["pool"]["n_checkpoints"] == 3
    assert got["pool"]["n_rank_writes"] == 6
    assert got["pool"]["barrier_p99_s"] == pytest.approx(59.2)
    assert got["local"]["barrier_p50_s"] == 5.0 and got["local"]["rank_p50_s"] == 4.5


# -- stragglers --------------------------------------------------------------------------------

def test_stragglers_far_above_p50_with_node_leaf_target_and_phase(lake: Path) -> None:
    # Durations 10, 10, 10, 10, 30: p50 = 10; rank 4 (node n2, target t0) is 3x p50, 20 s over,
    # and its extra time went to fsync (fsync median 1 s, rank 4: 19 s).
    seed(lake, "checkpoint_writes", [
        write("j1", 5, r, d, open_s=0.1, write_s=8.5, fsync_s=f, close_s=0.4)
        for r, (d, f) in enumerate([(10.0, 1.0)] * 4 + [(30.0, 19.0)])])
    seed(lake, "topology", [{"node": "n2", "leaf_switch": "leaf07", "nic": "mlx5_0",
                             "port": "1"},
                            {"node": "n2", "leaf_switch": "leaf03", "nic": "mlx5_1",
                             "port": "1"}])
    [row] = query(lake, "select * from stragglers")
    assert (row["rank"], row["node"], row["leaf_switch"], row["target"]) == (
        4, "n2", "leaf03,leaf07", "t0")
    assert (row["p50_s"], row["ratio_to_p50"], row["excess_s"]) == (10.0, 3.0, 20.0)
    assert (row["slowness_order"], row["is_barrier"], row["n_ranks"]) == (1, True, 5)
    assert (row["dominant_phase"], row["dominant_excess_s"]) == ("fsync", 18.0)


def test_straggler_thresholds_are_session_variables(lake: Path) -> None:
    seed(lake, "checkpoint_writes", [write("j1", 5, r, d)
                                     for r, d in enumerate([10.0, 10.0, 10.0, 25.0, 30.0])])
    from ckptwatch.analysis.latency import set_straggler_thresholds, stragglers

    con = connect(lake)
    assert stragglers(con)["rank"].to_list() == [4, 3]
    set_straggler_thresholds(con, factor=2.8)
    assert stragglers(con)["rank"].to_list() == [4]
    set_straggler_thresholds(con, factor=1.1, min_excess_s=25.0)
    assert stragglers(con).is_empty()
    con.close()


# -- counter_windows ---------------------------------------------------------------------------

def seed_window_scenario(lake: Path) -> None:
    """Checkpoint j1/1: ranks on n0 writing to t0, window [T0 + 5, T0 + 25] (20 s)."""
    seed(lake, "checkpoint_writes", [write("j1", 1, 0, 20.0, start=5.0),
                                     write("j1", 1, 1, 10.0, start=5.0)])
    fab = [("rx_prio3_pause", [0, 100, 300, 400]),  # 10/s, 20/s, 10/s
           ("tx_prio3_pause", [0, 100, 50, 150]),  # reset at T0 + 20: +50, then +100
           ("port_xmit_wait", [0, 10, 4294967295, 4294967295]),  # saturates in the window
           ("port_xmit_bytes", [0, 1, 2, 3])]
    seed(lake, "fabric_counters", [
        {"ts": at(10 * i), "node": "n0", "device": "mlx5_0", "port": "1", "counter": c,
         "value": float(v), "source": "ethtool"}
        for c, values in fab for i, v in enumerate(values)] + [
        {"ts": at(10 * i), "node": "n9", "device": "mlx5_0", "port": "1",
         "counter": "rx_prio3_pause", "value": 1e6 * i, "source": "ethtool"}
        for i in range(4)])  # n9 ran no rank: not in the window
    seed(lake, "pool_metrics", [
        {"ts": at(t), "pool": "p0", "target": "t0", "metric": "gc_active", "value": v}
        for t, v in [(0, 0.0), (20, 1.0), (40, 0.0)]])
    seed(lake, "topology", [{"node": "n0", "leaf_switch": "leaf01", "nic": "mlx5_0",
                             "port": "1"}])


def test_counter_windows_overlap_counters_and_gauges(lake: Path) -> None:
    seed_window_scenario(lake)
    got = {r["signal"]: r for r in query(lake, "select * from counter_windows")}
    assert set(got) == {"rx_prio3_pause", "tx_prio3_pause", "port_xmit_wait",
                        "port_xmit_bytes", "gc_active"}
    rx = got["rx_prio3_pause"]
    # (0,10]: 100 over 10 s, 5 s inside -> 50; (10,20]: 200, all inside; (20,30]: 100, 5 s
    # inside -> 50. Increase 300 over the 20 s window: 15/s; the busiest interval 20/s.
    assert (rx["family"], rx["kind"], rx["host"], rx["leaf_switch"]) == (
        "pause", "counter", "n0", "leaf01")
    assert (rx["n_samples"], rx["covered_s"], rx["coverage"]) == (3, 20.0, 1.0)
    assert rx["increase"] == pytest.approx(300.0)
    assert rx["rate_per_s"] == pytest.approx(15.0)
    assert rx["rate_max_per_s"] == pytest.approx(20.0)
    assert rx["level"] == pytest.approx(15.0) and rx["level_vs_baseline"] == pytest.approx(1.0)
    assert rx["is_rank_node"] and not rx["is_target"] and rx["n_ranks_on_node"] == 2
    tx = got["tx_prio3_pause"]
    # 100 * 5/10 + 50 (reset: the counter restarted, 50 since) + 100 * 5/10 = 150.
    assert tx["increase"] == pytest.approx(150.0) and tx["any_reset"]
    wait = got["port_xmit_wait"]
    assert wait["family"] == "xmit_wait" and wait["any_saturated"]
    assert wait["increase"] is None and wait["rate_per_s"] is None
    gc = got["gc_active"]
    # gc_active = 1 for (0,20] (15 s inside), 0 for (20,40] (5 s inside): mean 0.75.
    assert (gc["family"], gc["kind"], gc["host"], gc["pool"]) == ("gc", "gauge", "t0", "p0")
    assert gc["is_target"] and gc["n_ranks_to_target"] == 1  # rank 1 wrote to t1
    assert gc["value_avg"] == pytest.approx(0.75)
    assert (gc["value_min"], gc["value_max"]) == (0.0, 1.0)
    assert gc["increase"] is None


def test_counter_windows_baseline_is_the_median_over_the_jobs_checkpoints(lake: Path) -> None:
    # Three checkpoints of j1 on n0, each 10 s, at 100 s, 200 s, 300 s; pause rates 1, 2, 9 /s.
    seed(lake, "checkpoint_writes", [write("j1", s, 0, 10.0, start=100.0 * s)
                                     for s in (1, 2, 3)])
    values, total = [], 0.0
    for t in range(0, 320, 10):
        values.append((t, total))
        total += {100: 10, 200: 20, 300: 90}.get(t, 0)
    seed(lake, "fabric_counters", [
        {"ts": at(t), "node": "n0", "device": "mlx5_0", "port": "1",
         "counter": "rx_prio3_pause", "value": v, "source": "ethtool"} for t, v in values])
    got = query(lake, "select step, level, baseline_level, level_vs_baseline "
                      "from counter_windows order by step")
    assert [(r["step"], r["level"], r["baseline_level"]) for r in got] == [
        (1, 1.0, 2.0), (2, 2.0, 2.0), (3, 9.0, 2.0)]
    assert got[2]["level_vs_baseline"] == pytest.approx(4.5)


# -- int_window_samples: the one window-to-samples join of counter_windows and stall_signals --

def seed_window_edges(lake: Path) -> None:
    """Job j1 on n0 -> t0: steps 1-3 take 5 s, step 4 (a stall) [T0 + 1005, T0 + 1025].

    Samples touch the stall's window at its edges: rx_prio3_pause (n0) at 1005 (first sample, at
    the start), 1015, 1025, 1035 (its interval starts at the end); port_xmit_wait (n0) at 1000,
    1005 (its interval ends at the start), 1030; gc_active (pool target t0) at 1025 (first
    sample, at the end), 1040.
    """
    seed(lake, "checkpoint_writes", [write("j1", s, 0, 5.0, start=100.0 * s) for s in (1, 2, 3)]
         + [write("j1", 4, 0, 20.0, start=1005.0)])
    seed(lake, "fabric_counters", [
        {"ts": at(t), "node": "n0", "device": "mlx5_0", "port": "1", "counter": c,
         "value": v, "source": "ethtool"}
        for c, points in (("rx_prio3_pause", [(1005, 0.0), (1015, 100.0), (1025, 300.0),
                                              (1035, 400.0)]),
                          ("port_xmit_wait", [(1000, 0.0), (1005, 50.0), (1030, 300.0)]))
        for t, v in points])
    seed(lake, "pool_metrics", [
        {"ts": at(t), "pool": "p0", "target": "t0", "metric": "gc_active", "value": v}
        for t, v in [(1025, 1.0), (1040, 0.0)]])


def test_int_window_samples_pairs_every_interval_that_touches_the_window(lake: Path) -> None:
    seed_window_edges(lake)
    got = query(lake, """
        with
        windows as (
            select job_id, step, start_ts as window_start_ts, end_ts as window_end_ts, host,
            from checkpoint_latency
            inner join int_checkpoint_hosts using (job_id, step)
            where step = 4
        ),
        samples as (select * from int_signal_samples)
        select signal, epoch(ts - $t0) as t, overlap_s, outside_s
        from int_window_samples('windows', 'samples')
        order by signal, t
    """, {"t0": at(0)})
    # Touching the window widened by the clock skew (5 s): ts >= start - 5 (1000) and
    # coalesce(prev_ts, ts) <= end + 5 (1030); overlap_s: the seconds of the interval inside the
    # window (a first sample has none); outside_s: how far it misses the window itself
    # (port_xmit_wait's first sample, 5 s before it).
    assert [(r["signal"], r["t"], r["overlap_s"], r["outside_s"]) for r in got] == [
        ("gc_active", 1025.0, 0.0, 0.0), ("gc_active", 1040.0, 0.0, 0.0),
        ("port_xmit_wait", 1000.0, 0.0, 5.0),
        ("port_xmit_wait", 1005.0, 0.0, 0.0), ("port_xmit_wait", 1030.0, 20.0, 0.0),
        ("rx_prio3_pause", 1005.0, 0.0, 0.0), ("rx_prio3_pause", 1015.0, 10.0, 0.0),
        ("rx_prio3_pause", 1025.0, 10.0, 0.0), ("rx_prio3_pause", 1035.0, 0.0, 0.0)]


@pytest.mark.parametrize("seed_n", range(6))
def test_int_window_samples_equals_a_plain_range_join(lake: Path, seed_n: int) -> None:
    # Short intervals meet windows on the bucket of their ts alone, long ones over every bucket
    # they cover, and only samples near a window go on (near_samples): the pairs must be those
    # of a plain join on host and the touching rule, whatever the intervals (inside one 5-minute
    # bucket, over two, exactly one bucket long, over many: a gap) and windows (seconds to 20
    # minutes, on bucket edges), with the windows widened by a clock skew (none, seconds, more
    # than a bucket).
    import random

    rng = random.Random(seed_n)
    skew_s = [0.0, 5.0, 2.5, 301.0, 0.0, 5.0][seed_n]
    samples = []
    for host in ("n0", "n1", "t0"):
        t, prev = float(rng.randrange(0, 600)), None
        while t < 7200:
            samples.append((host, t, prev))
            prev = t
            t += rng.choice([1.0, 30.0, 60.0, 120.0, 299.0, 300.0, 301.0, 450.0, 900.0, 2000.0])
    windows = []
    for i in range(24):
        start = rng.choice([float(rng.randrange(0, 7200)), 300.0 * rng.randrange(0, 24)])
        windows.append((i, rng.choice(["n0", "n1", "t0", "n9"]), start,
                        start + rng.choice([0.0, 1.0, 20.0, 299.0, 300.0, 1200.0])))
    con = connect(lake)
    try:
        con.execute("set variable clock_skew_s = ?", [skew_s])
        con.execute("create temp table w (window_id int, host varchar, "
                    "window_start_ts timestamptz, window_end_ts timestamptz)")
        con.executemany("insert into w values (?, ?, ?, ?)",
                        [(i, h, at(a), at(b)) for i, h, a, b in windows])
        con.execute("create temp table s (host varchar, ts timestamptz, prev_ts timestamptz)")
        con.executemany("insert into s values (?, ?, ?)",
                        [(h, at(t), None if p is None else at(p)) for h, t, p in samples])
        got = con.execute("select window_id, host, ts, prev_ts, overlap_s, outside_s "
                          "from int_window_samples('w', 's') order by all").fetchall()
        want = con.execute("""
            select w.window_id, w.host, s.ts, s.prev_ts,
                case when s.prev_ts is null then 0.0
                    else greatest(epoch(least(s.ts, w.window_end_ts)
                                        - greatest(s.prev_ts, w.window_start_ts)), 0.0)
                end as overlap_s,
                greatest(epoch(w.window_start_ts - s.ts),
                         epoch(coalesce(s.prev_ts, s.ts) - w.window_end_ts), 0.0) as outside_s,
            from s inner join w on s.host = w.host
                and s.ts >= w.window_start_ts - to_seconds($skew)
                and coalesce(s.prev_ts, s.ts) <= w.window_end_ts + to_seconds($skew)
            order by all
        """, {"skew": skew_s}).fetchall()
    finally:
        con.close()
    # The windows do meet samples, some of them over intervals longer than a bucket.
    assert any(p is not None and (t - p).total_seconds() > 300 for _, _, t, p, _, _ in want)
    assert got == want


def test_counter_windows_and_stall_signals_count_the_touching_intervals_by_their_rules(
        lake: Path) -> None:
    seed_window_edges(lake)
    windows = {r["signal"]: r["n_samples"] for r in query(
        lake, "select signal, n_samples from counter_windows where step = 4")}
    # counter_windows: intervals that overlap the window (prev_ts < end, ts > start), and first
    # samples inside [start, end]: not the interval ending at the start or starting at the end.
    assert windows == {"rx_prio3_pause": 3, "port_xmit_wait": 1, "gc_active": 1}
    con = connect(lake, views=("stall_signals",))
    try:
        stall = {}
        for skew_s in (0.0, 5.0):
            con.execute("set variable clock_skew_s = ?", [skew_s]).fetchall()
            stall[skew_s] = {r["signal"]: r["n_samples"] for r in run_sql(
                con, "select signal, n_samples from stall_signals where step = 4").to_dicts()}
    finally:
        con.close()
    on_the_clock, skewed = stall[0.0], stall[5.0]
    # stall_signals: every touching interval begun before the end, whole (the one ending at the
    # start too); a first sample only inside [start, end): gc_active's two are not counted on
    # the records' clock...
    assert on_the_clock == {"pause": 3, "xmit_wait": 2}
    # ... and within the clock skew (5 s) gc_active, which the window does not reach on its
    # clock, counts its first sample (at the window's end) and the interval begun there: its
    # host's clock may be 5 s ahead. The others count as before.
    assert skewed == {"pause": 3, "xmit_wait": 2, "gc_active": 2}


def test_stall_signals_weigh_each_interval_by_its_seconds_inside_the_window(lake: Path) -> None:
    # The stall's window is [1005, 1025]. A coarse series: a 101 s interval (905, 1006] at rate
    # 0 that spends 1 s inside it, then (1006, 1026] at 100/s that spends 19 s inside it. The
    # window saw ~95/s; the increase over the intervals' whole length (2000 / 121 s = 16.5/s)
    # would drown the burst in the quiet minutes before it. The gauge likewise: 0 for 1 s, 1 for
    # 19 s.
    seed(lake, "checkpoint_writes", [write("j1", s, 0, 5.0, start=100.0 * s) for s in (1, 2, 3)]
         + [write("j1", 4, 0, 20.0, start=1005.0)])
    seed(lake, "fabric_counters", [
        {"ts": at(t), "node": "n0", "device": "mlx5_0", "port": "1", "counter": "rx_prio3_pause",
         "value": v, "source": "ethtool"}
        for t, v in [(905, 0.0), (1006, 0.0), (1026, 2000.0)]])
    seed(lake, "pool_metrics", [
        {"ts": at(t), "pool": "p0", "target": "t0", "metric": "gc_active", "value": v}
        for t, v in [(905, 0.0), (1006, 0.0), (1026, 1.0)]])
    got = {r["signal"]: r for r in query(
        lake, "select signal, level, n_samples from stall_signals where step = 4")}
    assert got["pause"]["n_samples"] == 2
    assert got["pause"]["level"] == pytest.approx((0.0 * 1 + 100.0 * 19) / 20)
    assert got["gc_active"]["level"] == pytest.approx((0.0 * 1 + 1.0 * 19) / 20)


def test_stall_signals_baseline_and_noise_are_one_per_series_median_without_resets(
        lake: Path) -> None:
    # One pause counter on n0 around the stall's window [1005, 1025]: rates 1, 1, 3, 3 /s over
    # four 10 s intervals, then a reset (80 -> 1: delta 1, rate 0.1/s). Without the reset
    # interval the median rate is (1 + 3) / 2 = 2 and the MAD 1; with it, it would be 1.
    seed(lake, "checkpoint_writes", [write("j1", s, 0, 5.0, start=100.0 * s) for s in (1, 2, 3)]
         + [write("j1", 4, 0, 20.0, start=1005.0)])
    seed(lake, "fabric_counters", [
        {"ts": at(t), "node": "n0", "device": "mlx5_0", "port": "1", "counter": "rx_prio3_pause",
         "value": v, "source": "ethtool"}
        for t, v in [(1000, 0.0), (1010, 10.0), (1020, 20.0), (1030, 50.0), (1040, 80.0),
                     (1050, 1.0)]])
    series = query(lake, "select signal, n_samples, median_x, mad_x from int_signal_series()")
    assert series == [{"signal": "rx_prio3_pause", "n_samples": 4, "median_x": 2.0,
                       "mad_x": 1.0}]
    signals = query(lake, "select baseline_level, any_reset from stall_signals "
                          "where step = 4 and signal = 'pause'")
    assert signals == [{"baseline_level": 2.0, "any_reset": False}]
    noise = query(lake, "select median_level, mad_level, n_samples from int_signal_noise "
                        "where signal = 'pause'")
    assert noise == [{"median_level": 2.0, "mad_level": 1.0, "n_samples": 4}]


def test_both_window_marts_read_the_one_window_to_samples_join() -> None:
    for mart in ("counter_windows", "stall_signals"):
        text = re.sub(r"--[^\n]*", "", (sql_dir() / "marts" / f"{mart}.sql").read_text())
        assert "from int_window_samples(" in text, mart
        assert "unnest(range(" not in text, f"{mart} joins windows to samples itself"


# -- contracts ---------------------------------------------------------------------------------

def load_contract(mart: str) -> dict[str, Any]:
    """The parsed ``sql/marts/<mart>.contract.yml``."""
    return yaml.safe_load((sql_dir() / "marts" / f"{mart}.contract.yml").read_text())


def check_contract(con: Any, mart: str) -> int:
    """Assert a built mart meets its contract; returns its row count.

    The contract's SQL (column names, invariant expressions) is our own text from sql/marts;
    no value is interpolated.
    """
    contract = load_contract(mart)
    assert contract["mart"] == mart
    check_session_variables(con, contract)
    described = run_sql(con, f"describe {mart}").select("column_name", "column_type").rows()
    declared = [(name, spec["type"]) for name, spec in contract["columns"].items()]
    assert described == declared, f"{mart}: columns or types differ from its contract"
    key = ", ".join(contract["key"])
    # The mart's rows computed once (a temp table of the view's types), then checked.
    con.execute(f"create or replace temp table contract_rows as select * from {mart}")
    dupes = run_sql(con, f"select {key}, count(*) as n from contract_rows group by all "
                    "having n > 1")
    assert dupes.is_empty(), f"{mart}: key ({key}) repeats:\n{dupes}"
    checks = {f"{name} is null": f"{name} is null"
              for name, spec in contract["columns"].items() if spec.get("not_null")}
    checks |= {inv["name"]: f"not coalesce(({inv['sql']}), true)"
               for inv in contract["invariants"]}
    counts = run_sql(con, "select count(*) as n_rows, " + ", ".join(
        f"count(*) filter (where {cond}) as c{i}" for i, cond in enumerate(checks.values()))
        + " from contract_rows").row(0)
    con.execute("drop table contract_rows")
    failed = [name for name, n in zip(checks, counts[1:], strict=True) if n]
    assert not failed, f"{mart}: broken: {failed}"
    return int(counts[0])


def check_session_variables(con: Any, contract: dict[str, Any]) -> None:
    """The thresholds a contract's invariants read are the session's (``getvariable``), never
    a number repeated: each one it reads is named under ``session:``, set by sql/session.sql
    and set on this connection."""
    named = set(contract.get("session") or ())
    read = {v for inv in contract["invariants"]
            for v in re.findall(r"getvariable\('(\w+)'\)", inv["sql"])}
    assert read <= named, f"{contract['mart']}: invariants read {sorted(read - named)} unnamed"
    assert named <= session_defaults().keys(), (
        f"{contract['mart']}: {sorted(named - session_defaults().keys())} not in sql/session.sql")
    unset = [v for v in sorted(named)
             if con.execute(f"select getvariable('{v}')").fetchall()[0][0] is None]
    assert not unset, f"{contract['mart']}: session variables not set: {unset}"


@pytest.fixture(scope="module")
def synthetic_lake(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two jobs, both tiers, stragglers, fabric / SMART / pool signals: every mart has rows."""
    root = tmp_path_factory.mktemp("synthetic")
    Lake(root).init()
    rows = []
    for step in range(6):
        rows += [write("j1", step, r, 10.0 + r + (25.0 if r == 3 and step % 2 else 0.0),
                       start=60.0 * step, open_s=0.1, write_s=8.0 + r, fsync_s=1.5, close_s=0.4)
                 for r in range(6)]
        rows += [write("j2", 10 * step, r, 4.0 + 0.5 * r, start=60.0 * step + 7, tier="local",
                       target=f"n{r // 2}:nvme0") for r in range(4)]
        # j3 checkpoints to the same pool while j1 does: a correlated burst (pool_bursts)
        rows += [write("j3", step, r, 6.0, start=60.0 * step + 2) for r in range(2)]
    seed(root, "checkpoint_writes", rows)
    seed(root, "jobs", [{"job_id": "j1", "n_ranks": 6, "checkpoint_timeout_s": 90.0},
                        {"job_id": "j2", "n_ranks": 4, "checkpoint_timeout_s": 30.0}])
    seed(root, "topology", [{"node": f"n{i}", "leaf_switch": f"leaf{i % 2}", "nic": "mlx5_0",
                             "port": "1"} for i in range(3)])
    seed(root, "fabric_counters", [
        {"ts": at(t), "node": f"n{i}", "device": "mlx5_0", "port": "1", "counter": c,
         "value": float(t * (i + 1) % 977 if c == "tx_prio3_pause" else t * (i + 1)),
         "source": "ethtool"}
        for i in range(3) for t in range(0, 400, 15)
        for c in ("rx_prio3_pause", "tx_prio3_pause", "port_xmit_wait")])
    seed(root, "nvme_smart", [
        {"ts": at(t), "node": n, "device": "nvme0", "source": "smartctl", "metric": m,
         "value": v}
        for n in ("n0", "t1") for t in range(0, 400, 30)
        for m, v in (("host_written_bytes", 1e9 * t), ("media_written_bytes", 3e9 * t),
                     ("free_blocks_pct", 30.0 - t / 100), ("temperature_c", 40.0))])
    seed(root, "pool_metrics", [
        {"ts": at(t), "pool": "p0", "target": tg, "metric": m, "value": v}
        for tg in ("t0", "t1") for t in range(0, 400, 10)
        for m, v in (("gc_active", float(t % 40 == 0)), ("metadata_latency_ms", 2.0 + t % 7),
                     ("write_bytes", 1e8 * t), ("metadata_ops", 500.0))])
    # j1's own statistics on t0 (Lustre job_stats' form): 5 writes per 10 s, 2 ms each, 9 ms
    # while its odd (stalled) steps write
    ops, us, rows = 0.0, 0.0, []
    for t in range(0, 400, 10):
        ops += 5
        us += 5 * (9000.0 if (t // 60) % 2 else 2000.0)
        rows += [{"ts": at(t), "pool": "p0", "target": "t0", "metric": m, "value": v}
                 for m, v in (("write_ops.job=j1", ops), ("write_latency_us_total.job=j1", us))]
    seed(root, "pool_metrics", rows, part="jobs")
    return root


@pytest.mark.parametrize("mart", MARTS)
def test_contract_holds_on_a_synthetic_build(synthetic_lake: Path, mart: str) -> None:
    con = connect(synthetic_lake, views=(mart,))
    try:
        assert check_contract(con, mart) > 0
    finally:
        con.close()


#: Thresholds below sql/session.sql's: the synthetic build then has stalls, slow ranks and
#: stragglers between these and the defaults, which a contract repeating a default rejects.
OTHER_THRESHOLDS = {"stall_factor": 1.1, "stall_min_excess_s": 0.5, "slow_rank_factor": 1.2,
                    "slow_rank_min_excess_s": 0.2, "straggler_factor": 1.1,
                    "straggler_min_excess_s": 0.5}


@pytest.mark.parametrize("mart", [m for m in MARTS if load_contract(m).get("session")])
def test_contract_holds_with_other_thresholds(synthetic_lake: Path, mart: str) -> None:
    con = connect(synthetic_lake, views=(mart,))
    try:
        DetectionSettings(**OTHER_THRESHOLDS).apply(con)
        assert check_contract(con, mart) > 0
    finally:
        con.close()


@pytest.mark.parametrize("mart", MARTS)
def test_contract_holds_on_the_sample_build(sample_lake: Path, mart: str) -> None:
    con = connect(sample_lake, views=(mart,))
    try:
        n = check_contract(con, mart)
    finally:
        con.close()
    if mart in ("checkpoint_latency", "job_latency", "tier_latency"):
        assert n > 0, f"{mart} is empty on the sample build"


def test_stall_signals_agree_with_counter_windows_on_the_sample_build(sample_lake: Path) -> None:
    # Both marts count the pairs of int_window_samples; stall_signals keeps whole intervals
    # (and the one ending at the window's start), counter_windows the overlapping part. So each
    # stall_signals row meets the counter_windows series it sums (traffic aside): as many series,
    # at least as many samples, a gauge range that contains theirs; and the reverse holds. Write
    # amplification, a ratio of two counters on their common time base, is no series of its own.
    con = connect(sample_lake)
    try:
        [row] = run_sql(con, """
            with
            signals as (
                select * from stall_signals where kind <> 'ratio'
            ),
            windows as (
                select
                    job_id,
                    step,
                    host,
                    family,
                    case
                        when family in ('pause', 'xmit_wait', 'cnp') then family else signal
                    end as signal,
                    count(*) as n_series,
                    sum(n_samples) as n_samples,
                    min(value_min) as value_min,
                    max(value_max) as value_max,
                from counter_windows
                semi join (select job_id, step from stalls where is_stall) using (job_id, step)
                where family <> 'traffic'
                group by all
            )
            select
                count(*) as n_rows,
                count(*) filter (where signals.job_id is null) as only_in_windows,
                count(*) filter (where windows.job_id is null) as only_in_signals,
                count(*) filter (where signals.n_series <> windows.n_series) as series_differ,
                count(*) filter (where signals.n_samples < windows.n_samples) as fewer_samples,
                count(*) filter (
                    where signals.kind = 'gauge'
                    and (signals.level_min > windows.value_min
                         or signals.level_max < windows.value_max)
                ) as range_outside,
            from signals
            full join windows using (job_id, step, host, family, signal)
        """).to_dicts()
    finally:
        con.close()
    assert row["n_rows"] > 0
    assert {k: v for k, v in row.items() if k != "n_rows"} == {
        "only_in_windows": 0, "only_in_signals": 0, "series_differ": 0, "fewer_samples": 0,
        "range_outside": 0}


def test_every_mart_has_a_contract() -> None:
    marts = sorted(p.stem for p in (sql_dir() / "marts").glob("*.sql"))
    assert marts == MARTS


# -- the ad-hoc queries of sql/README.md -----------------------------------------------------

def readme_queries() -> list[str]:
    """The ```sql blocks of sql/README.md."""
    text = (sql_dir() / "README.md").read_text()
    return re.findall(r"```sql\n(.*?)```", text, flags=re.S)


def test_readme_has_three_ad_hoc_queries() -> None:
    assert len(readme_queries()) == 3


@pytest.mark.parametrize("n", range(3))
def test_readme_query_runs(synthetic_lake: Path, n: int) -> None:
    con = connect(synthetic_lake)
    try:
        got = run_sql(con, readme_queries()[n])
    finally:
        con.close()
    if n > 0:  # the first depends on today's date; stragglers and pause frames do not
        assert not got.is_empty()


# -- build order and the duckdb CLI ------------------------------------------------------------

def test_build_sql_reads_every_view_in_the_runners_order() -> None:
    lines = [line for line in (sql_dir() / "build.sql").read_text().splitlines()
             if line.strip() and not line.startswith("--")]
    expected = [f".read sql/{SESSION_FILE}"]
    expected += [f".read sql/{f.parent.name}/{f.name}" for f in view_files()]
    assert lines == expected


def duckdb_cli() -> str | None:
    """The duckdb CLI next to this interpreter (pip duckdb-cli), else on PATH."""
    here = Path(sys.executable).parent / "duckdb"
    return str(here) if here.exists() else shutil.which("duckdb")


@pytest.mark.skipif(duckdb_cli() is None, reason="duckdb CLI not installed (pip duckdb-cli)")
def test_the_duckdb_cli_builds_the_same_views(lake: Path) -> None:
    seed_three_checkpoints(lake)
    cli = duckdb_cli()
    assert cli is not None
    out = subprocess.run(
        [cli, "-json", "-cmd", f"SET VARIABLE lake = '{lake}'", "-cmd", ".read sql/build.sql",
         "-c", "select job_id, barrier_p99_s, headroom_s from job_latency order by job_id"],
        cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=60, check=True)
    got = json.loads(out.stdout)
    assert [(r["job_id"], round(r["barrier_p99_s"], 9), r["headroom_s"]) for r in got] == [
        ("j1", 59.2, 40.0), ("j2", 5.0, 25.0)]
