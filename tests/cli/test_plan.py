"""`ckptwatch plan`: flags, config files, the lake, JSON contract, sweep, plot, errors."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from tests.sql_seed import seed

from ckptwatch.cli.main import main
from ckptwatch.lake.query import connect, run_sql
from ckptwatch.lake.store import Lake
from ckptwatch.planning.model import SECONDS_PER_YEAR

PROJECT_ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = PROJECT_ROOT / "examples" / "plan.yaml"

STRATEGY_KEYS = {"name", "checkpoint_s_p50", "checkpoint_s_p99", "mtbf_s", "restart_s",
                 "young_interval_s", "daly_interval_s", "optimal_interval_s",
                 "lost_work_per_failure_s", "overhead_fraction", "lost_gpu_hours_per_year"}


def run_plan(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    """Run ``ckptwatch plan ARGS``; return (exit code, stdout, stderr)."""
    code = main(["plan", *args])
    out, err = capsys.readouterr()
    return code, out, err


def plan_json(capsys: pytest.CaptureFixture[str], *args: str) -> dict[str, object]:
    """The JSON output of ``ckptwatch plan ARGS --format json``."""
    code, out, err = run_plan(capsys, *args, "--format", "json")
    assert code == 0, err
    data: dict[str, object] = json.loads(out)
    return data


def test_help_lists_units_and_sweep_parameters(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["plan", "--help"])
    assert exc.value.code == 0
    out = capsys.readouterr().out
    for text in ("--pool-bandwidth-gb-s", "--node-mtbf-h", "--bytes-per-rank-gb",
                 "--from-lake", "--sweep PARAM=LO:HI[:N]", "--plot FILE", "pool_bandwidth",
                 "drive_loss_fraction", "--objective {cost,overhead}", "--failures FILE",
                 "--sweep2 P1=LO:HI[:N] P2=LO:HI[:N]", "--checkpoint-timeout-s",
                 "--gpu-hour-usd", "--pool-fixed-usd", "--strategies"):
        assert text in out


def test_json_contract(capsys: pytest.CaptureFixture[str]) -> None:
    data = plan_json(capsys)
    assert set(data) >= {"inputs", "strategies", "best", "flips"}
    strategies = data["strategies"]
    assert isinstance(strategies, list)
    assert [s["name"] for s in strategies] == ["local", "local+replica", "pool", "tiered"]
    for s in strategies:
        assert set(s) >= STRATEGY_KEYS
    assert data["best"] in {s["name"] for s in strategies}
    flips = data["flips"]
    assert isinstance(flips, list) and flips
    for f in flips:
        assert {"parameter", "value", "from", "to"} <= set(f)
    inputs = data["inputs"]
    assert isinstance(inputs, dict)
    assert inputs["pool_bandwidth_bytes_s"] == 400e9
    assert inputs["node_mtbf_s"] == 5000 * 3600.0


def test_flags_override_config_file(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    cfg = tmp_path / "plan.toml"
    cfg.write_text("ranks = 1024\npool_bandwidth_gb_s = 800\nnode_mtbf_h = 2000\n")
    data = plan_json(capsys, "--config", str(cfg), "--pool-bandwidth-gb-s", "100")
    inputs = data["inputs"]
    assert isinstance(inputs, dict)
    assert inputs["ranks"] == 1024
    assert inputs["pool_bandwidth_bytes_s"] == 100e9
    assert inputs["node_mtbf_s"] == 2000 * 3600.0


def test_json_output_feeds_back_as_config(capsys: pytest.CaptureFixture[str],
                                          tmp_path: Path) -> None:
    first = plan_json(capsys, "--ranks", "256", "--tail-factor", "2")
    saved = tmp_path / "plan.json"
    saved.write_text(json.dumps(first))
    again = plan_json(capsys, "--config", str(saved))
    assert again["inputs"] == first["inputs"]
    assert again["strategies"] == first["strategies"]


def test_readme_example_sweep_prints_the_flip_and_writes_the_plot(
        capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    png = tmp_path / "plan.png"
    code, out, err = run_plan(capsys, "--config", str(EXAMPLE), "--objective", "overhead",
                              "--sweep", "pool_bandwidth=40:4000", "--plot", str(png))
    assert code == 0, err
    assert "best: local+replica (by overhead, --objective) — " in out
    assert "where the verdict flips (sweep of pool_bandwidth, 40 GB/s .. 4,000 GB/s):" in out
    assert "pool_bandwidth = 1,691 GB/s: local+replica -> pool   (now 400 GB/s)" in out
    assert "overhead (% of wall time) vs pool_bandwidth:" in out
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert png.stat().st_size > 20_000


def test_sweep_json_and_svg_plot(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    svg = tmp_path / "plan.svg"
    data = plan_json(capsys, "--sweep", "node_mtbf=500:50000:9", "--plot", str(svg))
    sw = data["sweep"]
    assert isinstance(sw, dict)
    assert sw["parameter"] == "node_mtbf" and len(sw["values"]) == 9
    assert sw["values"][0] == pytest.approx(500 * 3600.0)
    for f in data["flips"]:  # type: ignore[attr-defined]
        assert f["parameter"] == "node_mtbf"
        assert 500 * 3600.0 < f["value"] < 50000 * 3600.0
    assert "<svg" in svg.read_text()[:2000]


def _write_lake(root: Path, *, timeout_s: float | None = 120.0,
                interval_s: float | None = None) -> Path:
    """Job train-7 on the pool: 6 checkpoints x 16 ranks on 2 nodes, 4 GB per rank, one every
    600 s; barriers 30, 30, 32, 34, 90, 31 s (rank 5); with ``timeout_s`` its jobs row (that
    timeout, and ``interval_s``); the 90 s checkpoint's rank 5 reports "timeout"."""
    Lake(root).init()
    start = datetime(2026, 11, 1, tzinfo=UTC)
    rows = []
    for step, barrier in enumerate([30.0, 30.0, 32.0, 34.0, 90.0, 31.0]):
        at = start + timedelta(seconds=600 * step)
        for rank in range(16):
            d = barrier if rank == 5 else 25.0
            rows.append({"job_id": "train-7", "step": step * 100, "rank": rank,
                         "node": f"n{rank // 8}", "tier": "pool", "start_ts": at,
                         "end_ts": at + timedelta(seconds=d), "duration_s": d,
                         "bytes": 4_000_000_000,
                         "status": "timeout" if d == 90.0 else "ok"})
    part = root / "checkpoint_writes" / "date=2026-11-02"
    part.mkdir(parents=True)
    pq.write_table(pa.Table.from_pylist(rows), part / "part-a.parquet")
    if timeout_s is not None:
        seed(root, "jobs", [{"job_id": "train-7", "n_ranks": 16,
                             "checkpoint_timeout_s": timeout_s,
                             "checkpoint_interval_s": interval_s}])
    return root


def test_from_lake_uses_measured_times(capsys: pytest.CaptureFixture[str],
                                       tmp_path: Path) -> None:
    lake = _write_lake(tmp_path / "lake")
    data = plan_json(capsys, "--from-lake", str(lake), "--job", "train-7")
    measured = data["measured"]
    assert isinstance(measured, dict)
    assert measured["p50_s"] == pytest.approx(31.5)
    assert measured["checkpoints"] == 6
    pool = next(s for s in data["strategies"] if s["name"] == "pool")  # type: ignore[attr-defined]
    assert pool["checkpoint_s_p50"] == pytest.approx(31.5)
    assert pool["checkpoint_s_p99"] == pytest.approx(measured["p99_s"])
    assert data["inputs"]["ranks"] == 16  # type: ignore[index]


def test_from_lake_is_job_latency_and_ignores_a_duplicated_record(
        capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    lake = _write_lake(tmp_path / "lake")
    before = plan_json(capsys, "--from-lake", str(lake), "--job", "train-7")["measured"]
    # the same file's content again under another name: every record arrives twice
    part = lake / "checkpoint_writes" / "date=2026-11-02"
    (part / "part-b.parquet").write_bytes((part / "part-a.parquet").read_bytes())
    after = plan_json(capsys, "--from-lake", str(lake), "--job", "train-7")["measured"]
    assert after == before
    con = connect(lake)
    try:
        [row] = run_sql(con, "select barrier_p50_s, barrier_p99_s, n_checkpoints "
                             "from job_latency where job_id = 'train-7'").rows()
    finally:
        con.close()
    assert isinstance(after, dict)
    assert (after["p50_s"], after["p99_s"], after["checkpoints"]) == row


def test_from_lake_table_says_what_was_measured(capsys: pytest.CaptureFixture[str],
                                                tmp_path: Path) -> None:
    lake = _write_lake(tmp_path / "lake")
    code, out, _ = run_plan(capsys, "--from-lake", str(lake), "--job", "train-7")
    assert code == 0
    assert out.startswith("measured: job train-7 (pool tier), 6 checkpoints in ")
    assert "  tail fit over 6 checkpoints: lognormal KS " in out
    assert "used for timeouts" in out
    assert "  restart cost: configured (no stg_checkpoint_loads rows for job train-7)" in out
    assert "barrier p50 31.5 s" in out


@pytest.mark.parametrize(("args", "message"), [
    (["--plot", "x.png"], "ckptwatch plan: error: --plot needs --sweep PARAM=LO:HI"),
    (["--sweep", "pool_bw=1:2"], "ckptwatch plan: error: unknown parameter 'pool_bw'; use one "
     "of: ranks, gpus_per_node"),
    (["--sweep", "pool_bandwidth=400"], "ckptwatch plan: error: --sweep 'pool_bandwidth=400': "
     "expected PARAM=LO:HI or PARAM=LO:HI:N"),
    (["--sweep", "pool_bandwidth=400:40"], "--sweep 'pool_bandwidth=400:40': LO must be below "
     "HI"),
    (["--job", "j1"], "ckptwatch plan: error: --from-lake LAKE and --job J go together"),
    (["--pool-bandwidth-gb-s", "0"], "ckptwatch plan: error: pool_bandwidth_gb_s must be > 0 "
     "and finite (got 0); fix --pool-bandwidth-gb-s or the config file"),
    (["--tail-factor", "0.5"], "tail_factor must be >= 1 (it is p99/p50)"),
    (["--sweep", "drive_loss_fraction=0:2"], "the sweep of drive_loss_fraction leaves the valid "
     "range: drive_loss_fraction must be in [0, 1] and finite (got 2)"),
    (["--failures-days", "54"], "--failures-days and --failures-gpus describe a --failures FILE"),
    (["--failures", "nope.csv"], "failures file nope.csv not found; check --failures"),
    (["--sweep", "ranks=8:16", "--sweep2", "ranks=8:16", "node_mtbf=1:2"],
     "--sweep and --sweep2 go one at a time"),
    (["--strategies", "local,nvme"], "--strategies: unknown strategy nvme; use a "
     "comma-separated subset of: local, local+replica, pool, tiered"),
    (["--checkpoint-timeout-s", "-1"], "checkpoint_timeout_s must be >= 0 (0 = no timeout)"),
])
def test_errors_are_one_actionable_line(capsys: pytest.CaptureFixture[str], args: list[str],
                                        message: str) -> None:
    code, out, err = run_plan(capsys, *args)
    assert code == 2
    assert out == ""
    assert message in err
    assert err.count("\n") == 1


def test_unwritable_plot_is_one_line(capsys: pytest.CaptureFixture[str],
                                     tmp_path: Path) -> None:
    target = tmp_path / "no" / "such" / "dir" / "plan.png"
    code, _, err = run_plan(capsys, "--sweep", "pool_bandwidth=100:1000:3", "--plot",
                            str(target))
    assert code == 2
    assert f"--plot {target}: cannot write it (" in err
    assert err.count("\n") == 1


def test_config_errors_name_the_file(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    bad_key = tmp_path / "a.yaml"
    bad_key.write_text("pool_bandwith_gb_s: 400\n")
    code, _, err = run_plan(capsys, "--config", str(bad_key))
    assert code == 2
    assert f"{bad_key}: unknown input 'pool_bandwith_gb_s'; valid keys: ranks," in err
    bad_value = tmp_path / "b.yaml"
    bad_value.write_text("ranks: lots\n")
    code, _, err = run_plan(capsys, "--config", str(bad_value))
    assert f"{bad_value}: ranks must be a number (got 'lots')" in err
    code, _, err = run_plan(capsys, "--config", str(tmp_path / "missing.yaml"))
    assert code == 2 and "missing.yaml not found; check --config" in err


def test_lake_errors_name_path_and_job(capsys: pytest.CaptureFixture[str],
                                       tmp_path: Path) -> None:
    code, _, err = run_plan(capsys, "--from-lake", str(tmp_path / "nope"), "--job", "j1")
    assert code == 2
    assert f"no checkpoint_writes Parquet under {tmp_path / 'nope' / 'checkpoint_writes'}" in err
    lake = _write_lake(tmp_path / "lake")
    code, _, err = run_plan(capsys, "--from-lake", str(lake), "--job", "j1")
    assert code == 2
    assert "job 'j1' has no checkpoint writes in" in err
    assert "include: train-7" in err


BILL_KEYS = {"committed_usd_per_year", "per_unit_usd_per_year", "lost_work_usd_per_year",
             "timeout_usd_per_year", "total_usd_per_year"}
LLAMA3 = PROJECT_ROOT / "tests" / "fixtures" / "real" / "failure_stats" / (
    "llama3_405b_54day_interruptions.csv")


def test_json_carries_the_bill_and_says_which_objective(
        capsys: pytest.CaptureFixture[str]) -> None:
    data = plan_json(capsys)
    assert (data["objective"], data["objective_reason"]) == ("overhead", "no prices given")
    for s in data["strategies"]:  # type: ignore[attr-defined]
        assert set(s) >= BILL_KEYS
        assert s["total_usd_per_year"] == pytest.approx(
            sum(s[k] for k in BILL_KEYS - {"total_usd_per_year"}))
    priced = plan_json(capsys, "--gpu-hour-usd", "3")
    assert (priced["objective"], priced["objective_reason"]) == ("cost", "prices given")
    strategies = priced["strategies"]
    assert isinstance(strategies, list)
    assert priced["best"] == min(strategies, key=lambda s: s["total_usd_per_year"])["name"]
    forced = plan_json(capsys, "--gpu-hour-usd", "3", "--objective", "overhead")
    assert forced["objective_reason"] == "--objective"


def test_example_config_prints_the_bill_by_cost(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run_plan(capsys, "--config", str(EXAMPLE))
    assert code == 0, err
    assert "yearly bill, USD a year:" in out
    assert "committed  per-unit  lost work  timeouts    total" in out
    assert "best: local+replica (by cost, prices given) — " in out
    # the pool's committed cost: 500,000 USD over 5 years + 150,000 USD of staff a year
    assert "  pool               250,000" in out


def test_failures_file_sets_the_node_mtbf(capsys: pytest.CaptureFixture[str]) -> None:
    data = plan_json(capsys, "--failures", str(LLAMA3), "--failures-days", "54",
                     "--failures-gpus", "16384")
    failures = data["failures"]
    assert isinstance(failures, dict)
    assert failures["interruptions"] == 419
    assert failures["fleet_mtbf_s"] / 3600 == pytest.approx(3.09, abs=0.005)
    inputs = data["inputs"]
    assert isinstance(inputs, dict)
    assert inputs["node_mtbf_s"] == pytest.approx(failures["node_mtbf_s"])
    lo, hi = failures["node_mtbf_ci_s"]
    assert lo < inputs["node_mtbf_s"] < hi
    code, out, _ = run_plan(capsys, "--failures", str(LLAMA3), "--failures-days", "54",
                            "--failures-gpus", "16384", "--node-mtbf-h", "100")
    assert "419 interruptions in 54 days on 16,384 GPUs (2,048 nodes): one every 3.09 h" in out
    assert "node MTBF 100 h" in out  # an explicit flag still wins


def test_sweep2_map_json_and_png(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    png = tmp_path / "map.png"
    data = plan_json(capsys, "--strategies", "local,pool", "--sweep2", "ranks=64:16384:4",
                     "pool_fixed_cost=100000:5000000:3", "--plot", str(png))
    assert data["objective"] == "cost"  # a price is swept
    assert data["compared"] == ["local", "pool"]
    m = data["sweep2"]
    assert isinstance(m, dict)
    assert len(m["best"]) == 3 and {b for row in m["best"] for b in row} == {"local", "pool"}
    assert len(m["boundary"]) == 3
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    code, out, _ = run_plan(capsys, "--strategies", "local,pool", "--sweep2",
                            "ranks=64:16384:4", "pool_fixed_cost=100000:5000000:3")
    assert "best strategy by cost over ranks (across" in out
    assert "LLPP" in out or "LLLP" in out


# -- the job's own timeout, interval and measured timeouts ----------------------------------------

def _timeouts(data: dict[str, object]) -> dict[str, object]:
    measured = data["measured"]
    assert isinstance(measured, dict)
    timeouts: dict[str, object] = measured["timeouts"]
    return timeouts


def _pool(data: dict[str, object]) -> dict[str, object]:
    strategies = data["strategies"]
    assert isinstance(strategies, list)
    pool: dict[str, object] = next(s for s in strategies if s["name"] == "pool")
    return pool


def test_from_lake_uses_the_jobs_timeout_interval_and_measured_timeouts(
        capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    # 1 timed-out checkpoint in 5 x 600 s + 31 s observed; the interval measured: 600 s.
    lake = _write_lake(tmp_path / "lake")
    data = plan_json(capsys, "--from-lake", str(lake), "--job", "train-7")
    assert data["inputs"]["checkpoint_timeout_s"] == 120.0  # type: ignore[index]
    t = _timeouts(data)
    assert (t["timeout_s"], t["timeout_source"]) == (120.0, "jobs.checkpoint_timeout_s")
    assert t["interval_s"] == pytest.approx(600.0)
    assert str(t["interval_source"]).startswith("measured: median gap between the 6 checkpoint")
    assert t["per_year"] == pytest.approx(1 / 3031 * SECONDS_PER_YEAR)
    assert t["probability"] == pytest.approx(600 / 3031)
    assert _pool(data)["timeout_probability"] == pytest.approx(600 / 3031)
    assert _pool(data)["timeouts_per_year"] > 0  # type: ignore[operator]
    code, out, _ = run_plan(capsys, "--from-lake", str(lake), "--job", "train-7")
    assert "\n  checkpoint timeout: 120 s (jobs.checkpoint_timeout_s)\n" in out
    assert ("\n  timeouts: 10,404 a year (1 of 6 checkpoints timed out in the 0.842 h "
            "observed, first checkpoint start to last end, scaled to a year) -> 0.198 of pool "
            "checkpoints time out") in out


def test_flags_override_the_lakes_timeout_interval_and_rate(
        capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    lake = _write_lake(tmp_path / "lake", interval_s=900.0)
    t = _timeouts(plan_json(capsys, "--from-lake", str(lake), "--job", "train-7"))
    assert (t["interval_s"], t["interval_source"]) == (900.0, "jobs.checkpoint_interval_s")
    data = plan_json(capsys, "--from-lake", str(lake), "--job", "train-7",
                     "--checkpoint-interval-s", "300", "--timeouts-per-year", "100")
    t = _timeouts(data)
    assert (t["interval_source"], t["per_year_source"]) == ("--checkpoint-interval-s",
                                                            "--timeouts-per-year")
    assert _pool(data)["timeout_probability"] == pytest.approx(100 * 300 / SECONDS_PER_YEAR)
    # another timeout: the rate measured at 120 s does not apply; the tail gives it
    data = plan_json(capsys, "--from-lake", str(lake), "--job", "train-7",
                     "--checkpoint-timeout-s", "60")
    t = _timeouts(data)
    assert (t["timeout_s"], t["per_year"], t["probability"]) == (60.0, None, None)
    assert data["inputs"]["checkpoint_timeout_s"] == 60.0  # type: ignore[index]
    assert 0 < _pool(data)["timeout_probability"] < 600 / 3031  # type: ignore[operator]


def test_from_lake_without_a_timeout_asks_for_one(capsys: pytest.CaptureFixture[str],
                                                  tmp_path: Path) -> None:
    lake = _write_lake(tmp_path / "lake", timeout_s=None)
    code, _, err = run_plan(capsys, "--from-lake", str(lake), "--job", "train-7")
    assert code == 2
    assert ("job 'train-7' has no checkpoint_timeout_s in the lake's jobs table; give "
            "--checkpoint-timeout-s S (0: no timeout) or checkpoint_timeout_s in --config") in err
    data = plan_json(capsys, "--from-lake", str(lake), "--job", "train-7",
                     "--checkpoint-timeout-s", "150")
    assert _timeouts(data)["timeout_source"] == "--checkpoint-timeout-s"
    config = tmp_path / "plan.toml"
    config.write_text("checkpoint_timeout_s = 200\n")
    data = plan_json(capsys, "--config", str(config), "--from-lake", str(lake), "--job",
                     "train-7")
    assert (_timeouts(data)["timeout_s"], _timeouts(data)["timeout_source"]) == (200.0,
                                                                                  "--config")
    code, _, err = run_plan(capsys, "--timeouts-per-year", "3")
    assert code == 2 and "give --from-lake LAKE --job J too" in err
