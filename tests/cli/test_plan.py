"""`ckptwatch plan`: flags, config files, the lake, JSON contract, sweep, plot, errors."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from ckptwatch.cli.main import main
from ckptwatch.lake.query import connect, run_sql
from ckptwatch.lake.store import Lake

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
                 "drive_loss_fraction"):
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
    code, out, err = run_plan(capsys, "--config", str(EXAMPLE),
                              "--sweep", "pool_bandwidth=40:4000", "--plot", str(png))
    assert code == 0, err
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


def _write_lake(root: Path) -> Path:
    """Job train-7 on the pool: 6 checkpoints x 16 ranks on 2 nodes, 4 GB per rank; barriers
    30, 30, 32, 34, 90, 31 s (rank 5)."""
    Lake(root).init()
    start = datetime(2026, 11, 1, tzinfo=UTC)
    rows = []
    for step, barrier in enumerate([30.0, 30.0, 32.0, 34.0, 90.0, 31.0]):
        for rank in range(16):
            d = barrier if rank == 5 else 25.0
            rows.append({"job_id": "train-7", "step": step * 100, "rank": rank,
                         "node": f"n{rank // 8}", "tier": "pool", "start_ts": start,
                         "end_ts": start + timedelta(seconds=d), "duration_s": d,
                         "bytes": 4_000_000_000})
    part = root / "checkpoint_writes" / "date=2026-11-02"
    part.mkdir(parents=True)
    pq.write_table(pa.Table.from_pylist(rows), part / "part-a.parquet")
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
