"""The slow_hosts mart: a host a few percent slow in every checkpoint is named, although no
checkpoint is a stall; a homogeneous job names none; 'unknown' is no host (issue 19, item 5)."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pytest
from tests.sql_seed import at, seed

from ckptwatch.lake.query import connect, run_sql
from ckptwatch.lake.store import Lake


def slow_host_rows(job: str = "j1", *, n_checkpoints: int = 10, n_hosts: int = 8,
                   ranks_per_host: int = 8, slow: dict[str, float] | None = None,
                   noise: float = 0.01, seed_: int = 7, base_s: float = 40.0,
                   node: str = "host{:02d}") -> list[dict[str, Any]]:
    """Checkpoint saves of ``job``: ``n_hosts`` x ``ranks_per_host`` ranks, each rank
    ``base_s`` x (1 + a N(0, noise) draw), times the host's factor in ``slow`` (e.g.
    ``{"host03": 1.06}``: 6 % slower). No checkpoint comes near a stall."""
    rng = random.Random(seed_)
    slow = slow or {}
    rows = []
    for step in range(1, n_checkpoints + 1):
        for rank in range(n_hosts * ranks_per_host):
            host = node.format(rank // ranks_per_host)
            d = base_s * (1 + rng.gauss(0, noise)) * slow.get(host, 1.0)
            start = 600.0 * step
            rows.append({"job_id": job, "step": step, "rank": rank, "node": host,
                         "tier": "pool", "target": "lustre0", "start_ts": at(start),
                         "end_ts": at(start + d), "duration_s": d, "bytes": 1 << 30,
                         "status": "ok"})
    return rows


def seeded_lake(root: Path, rows: list[dict[str, Any]]) -> Path:
    """An initialised lake holding ``rows`` as checkpoint saves."""
    Lake(root).init()
    seed(root, "checkpoint_writes", rows)
    return root


def mart(root: Path, sql: str = "select * from slow_hosts order by job_id, node",
         views: tuple[str, ...] = ("slow_hosts",)) -> list[dict[str, Any]]:
    con = connect(root, views=views)
    try:
        return run_sql(con, sql).to_dicts()
    finally:
        con.close()


def test_two_hosts_five_to_seven_percent_slow_in_ten_checkpoints_are_named(
        tmp_path: Path) -> None:
    # The example: 64 ranks on 8 hosts, two hosts +5-7 % in each of ten checkpoints.
    root = seeded_lake(tmp_path, slow_host_rows(slow={"host02": 1.05, "host06": 1.07}))
    rows = {r["node"]: r for r in mart(root)}
    assert len(rows) == 8
    named = sorted(n for n, r in rows.items() if r["is_slow"])
    assert named == ["host02", "host06"]
    for host, pct in (("host02", 5.0), ("host06", 7.0)):
        r = rows[host]
        assert (r["n_checkpoints"], r["n_above_median"]) == (10, 10)
        assert r["p_value"] == pytest.approx(0.5 ** 10)
        # The checkpoint's median lies among the six normal hosts: the excess is close to
        # the factor (within the noise of a median of 8 ranks).
        assert r["median_excess_pct"] == pytest.approx(pct, abs=1.0)
        assert r["median_excess_s"] == pytest.approx(40.0 * pct / 100, abs=0.4)
    assert all(r["p_value"] > 0.05 for n, r in rows.items() if n not in named)
    # Top decile = the 6.4 slowest of 64 ranks: host06's eight ranks fill it every time, so
    # host02 (slow too, but less) is named by the sign test, not by being the slowest.
    assert rows["host06"]["n_slowest"] == 10 and rows["host02"]["n_slowest"] < 10
    assert all(r["n_slowest"] == 0 for n, r in rows.items() if n not in named)


def test_no_checkpoint_is_a_stall_there(tmp_path: Path) -> None:
    root = seeded_lake(tmp_path, slow_host_rows(slow={"host02": 1.06}))
    stalls = mart(root, "select count(*) filter (where is_stall) as n from stalls",
                  views=("stalls",))
    assert stalls == [{"n": 0}]
    assert [r["node"] for r in mart(root, "select node from slow_hosts where is_slow")] == [
        "host02"]


@pytest.mark.parametrize("seed_", range(5))
def test_a_homogeneous_job_names_no_host(tmp_path: Path, seed_: int) -> None:
    root = seeded_lake(tmp_path, slow_host_rows(seed_=seed_, noise=0.02))
    rows = mart(root)
    assert len(rows) == 8
    assert [r["node"] for r in rows if r["is_slow"]] == []


def test_a_consistent_but_tiny_excess_is_not_named(tmp_path: Path) -> None:
    # +0.5 % every time: significant by the sign test, but below the 2 % that matters.
    root = seeded_lake(tmp_path, slow_host_rows(slow={"host01": 1.005}, noise=0.0005))
    [row] = [r for r in mart(root) if r["node"] == "host01"]
    assert row["p_value"] < 0.01 and row["median_excess_pct"] < 2.0
    assert row["is_slow"] is False


def test_thresholds_are_session_variables(tmp_path: Path) -> None:
    root = seeded_lake(tmp_path, slow_host_rows(slow={"host01": 1.005}, noise=0.0005))
    con = connect(root, views=("slow_hosts",))
    try:
        con.execute("set variable slow_host_min_excess_pct = 0.25").fetchall()
        named = run_sql(con, "select node from slow_hosts where is_slow").to_series().to_list()
    finally:
        con.close()
    assert named == ["host01"]


def test_few_checkpoints_name_no_host(tmp_path: Path) -> None:
    # 4 checkpoints: even 4 of 4 above the median (p = 0.0625) is not evidence enough.
    root = seeded_lake(tmp_path, slow_host_rows(n_checkpoints=4, slow={"host01": 1.10}))
    [row] = [r for r in mart(root) if r["node"] == "host01"]
    assert row["n_above_median"] == 4 and row["p_value"] == pytest.approx(0.0625)
    assert row["is_slow"] is False


def test_unknown_nodes_are_no_hosts_and_one_host_is_no_comparison(tmp_path: Path) -> None:
    rows = slow_host_rows("dlio", n_hosts=4, slow={"host01": 1.1}, node="unknown")
    rows += slow_host_rows("single", n_hosts=1)
    rows += slow_host_rows("mixed", n_hosts=3, slow={"host00": 1.1})
    for r in rows:
        if r["job_id"] == "mixed" and r["node"] == "host02":
            r["node"] = "unknown"
    root = seeded_lake(tmp_path, rows)
    got = mart(root)
    assert {(r["job_id"], r["node"]) for r in got} == {("mixed", "host00"), ("mixed", "host01")}
    assert [r["node"] for r in got if r["is_slow"]] == ["host00"]
