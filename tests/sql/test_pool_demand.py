"""Pool demand and correlated bursts (issue 45, items 1 and 3): the write demand the rank
records put on a shared pool, per second on a common time base, who made it, against the
pool's capacity (configured or estimated, with its source), and the bursts in which jobs
overlapped; ``ckptwatch bursts`` prints them.

Literal rows in, exact values out. Times are seconds after T0 (tests.sql_seed.at)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from tests.sql.test_marts import write
from tests.sql_seed import at, seed

from ckptwatch.lake.query import connect, run_sql

GB = 1e9


def _demand_lake(lake: Path) -> Path:
    """Job a: 4 ranks write 1 GB each over 10 s from T0+100.5 (0.4 GB/s together); job b: 2
    ranks write 1 GB each over 4 s from T0+105 (0.5 GB/s), overlapping a's seconds 105-108;
    job a again alone at T0+400 (a checkpoint 10 s long, its step 2). The targets belong to
    pool fs in the pool telemetry (two readings of fs-OST0000's bytes counter: 0.6 GB/s)."""
    rows = [write("a", 1, r, 10.0, start=100.5, target="fs-OST0000") for r in range(4)]
    rows += [write("b", 1, r, 4.0, start=105.0, target="fs-OST0001") for r in range(2)]
    rows += [write("a", 2, r, 10.0, start=400.0, target="fs-OST0000") for r in range(4)]
    seed(lake, "checkpoint_writes", rows)
    seed(lake, "pool_metrics", [
        {"ts": at(t), "pool": "fs", "target": tg, "metric": "write_bytes", "value": v}
        for tg in ("fs-OST0000", "fs-OST0001")
        for t, v in ((90.0, 0.0), (120.0, 18 * GB))])
    return lake


def _query(lake: Path, sql: str, bandwidth: list[dict[str, Any]] | None = None) -> list[dict]:
    con = connect(lake, views=("pool_demand", "pool_bursts"))
    try:
        if bandwidth is not None:
            con.execute("SET VARIABLE pool_write_bandwidth = cast(? as struct(pool varchar, "
                        "gbs double)[])", [bandwidth]).fetchall()
        return run_sql(con, sql).to_dicts()
    finally:
        con.close()


def test_demand_per_second_sums_the_ranks_on_a_common_time_base(lake: Path) -> None:
    rows = _query(_demand_lake(lake), "select * from pool_demand order by second_ts",
                  [{"pool": "fs", "gbs": 0.8}])
    by_s = {int((r["second_ts"] - at(0)).total_seconds()): r for r in rows}
    # a's ranks start at 100.5: half of second 100, then 0.4 GB/s; b adds 0.5 GB/s 105-108
    assert by_s[100]["demand_bps"] == pytest.approx(0.2 * GB)
    assert by_s[104]["demand_bps"] == pytest.approx(0.4 * GB)
    assert by_s[106]["demand_bps"] == pytest.approx(0.9 * GB)
    assert (by_s[106]["n_jobs"], by_s[106]["n_ranks"]) == (2, 6)
    assert [(j["job_id"], round(j["share"], 4)) for j in by_s[106]["jobs"]] == [
        ("b", 0.5556), ("a", 0.4444)]
    assert by_s[110]["demand_bps"] == pytest.approx(0.2 * GB)  # a ends at 110.5
    assert 111 not in by_s
    # every byte of the records is in some second
    assert sum(r["demand_bps"] for r in rows) == pytest.approx(10 * GB)
    # the pool of the records' targets, its bandwidth as configured; its own readings too
    assert {r["pool"] for r in rows} == {"fs"}
    assert (by_s[106]["capacity_bps"], by_s[106]["capacity_source"]) == (0.8 * GB, "configured")
    assert by_s[106]["utilisation"] == pytest.approx(0.9 / 0.8)
    assert by_s[106]["is_saturated"] and not by_s[104]["is_saturated"]
    assert by_s[106]["measured_bps"] == pytest.approx(1.2 * GB)  # 0.6 GB/s on each OST
    assert by_s[400]["measured_bps"] is None  # no reading covers it


def test_capacity_is_estimated_with_its_source_when_not_configured(lake: Path) -> None:
    rows = _query(_demand_lake(lake), "select distinct capacity_bps, capacity_source "
                                      "from pool_demand")
    # the records reached 0.9 GB/s (their 99th percentile: ~0.9), more than the pool's
    # readings (1.2 GB/s only over seconds where they cover; their 99th percentile wins)
    [row] = rows
    assert row["capacity_source"] in ("telemetry", "records")
    assert row["capacity_bps"] >= 0.88 * GB


def test_a_burst_is_the_jobs_overlapping_on_a_pool(lake: Path) -> None:
    [burst] = _query(_demand_lake(lake), "select * from pool_bursts",
                     [{"pool": "fs", "gbs": 0.8}])
    assert (burst["pool"], burst["start_ts"], burst["end_ts"]) == ("fs", at(105), at(109))
    assert (burst["n_jobs"], burst["peak_jobs"], burst["peak_ranks"]) == (2, 2, 6)
    assert burst["bytes"] == pytest.approx(3.6 * GB)  # 4 s x 0.9 GB/s
    assert [(j["job_id"], round(j["share"], 4)) for j in burst["jobs"]] == [
        ("b", 0.5556), ("a", 0.4444)]
    assert burst["saturated_s"] == 4 and burst["peak_utilisation"] == pytest.approx(1.125)
    assert (burst["stalled_s"], burst["stalled_saturated_s"]) == (0, 0)


def test_stall_seconds_in_saturated_windows_are_counted(lake: Path) -> None:
    # job a's earlier checkpoints took 10 s; its step 1 is slow (30 s): a stall overlapping
    # the burst with b
    rows = [write("a", s, r, 10.0, start=300.0 * s - 3000.0, target="fs-OST0000")
            for s in range(-5, 0) for r in range(4)]
    seed(lake, "checkpoint_writes", rows, part="before")
    seed(lake, "checkpoint_writes",
         [write("a", 1, r, 30.0 if r == 0 else 10.0, start=100.5, target="fs-OST0000")
          for r in range(4)]
         + [write("b", 1, r, 4.0, start=105.0, target="fs-OST0001") for r in range(2)])
    [burst] = _query(lake, "select * from pool_bursts", [{"pool": "pool", "gbs": 0.5}])
    assert burst["pool"] == "pool"  # no telemetry names the targets' pool
    assert burst["stalled_s"] == 4 and burst["stalled_saturated_s"] == 4


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "ckptwatch.cli.main", *args], capture_output=True,
                          text=True, timeout=120, check=False)


def test_bursts_command_prints_days_and_bursts(lake: Path, tmp_path: Path) -> None:
    _demand_lake(lake)
    config = tmp_path / "ckptwatch.toml"
    config.write_text("[pool]\nwrite_bandwidth_gbs = { fs = 0.8 }\n")
    out = _cli("bursts", "--lake", str(lake), "--config", str(config))
    assert out.returncode == 0, out.stderr
    assert "| fs   | 2026-11-28 |" in out.stdout
    assert "configured" in out.stdout and "b 56%, a 44%" in out.stdout
    assert "(1 burst;" in out.stdout
    data = json.loads(_cli("bursts", "--lake", str(lake), "--config", str(config),
                           "--format", "json").stdout)
    [day] = data["days"]
    assert (day["pool"], day["n_bursts"], day["saturated_s"]) == ("fs", 1, 4)
    assert day["capacity_source"] == "configured"
    [burst] = data["bursts"]
    assert [j["job_id"] for j in burst["jobs"]] == ["b", "a"]
    none = _cli("bursts", "--lake", str(lake), "--pool", "other")
    assert none.returncode == 0 and "no checkpoint wrote to pool other" in none.stdout


def test_bursts_command_errors_are_one_line(lake: Path, tmp_path: Path) -> None:
    missing = _cli("bursts", "--lake", str(tmp_path / "nolake"))
    assert missing.returncode == 2 and "no lake at" in missing.stderr
    assert "Traceback" not in missing.stderr
    bad = tmp_path / "bad.toml"
    bad.write_text("[pool]\nwrite_bandwidth_gbs = { fs = -1 }\n")
    out = _cli("bursts", "--lake", str(lake), "--config", str(bad))
    assert out.returncode == 2 and "write_bandwidth_gbs.fs must be a positive" in out.stderr
    assert "Traceback" not in out.stderr
