"""bench/targets.py: the issue 18 table reads what the benchmarks wrote and says, beside a miss,
what the same run measured next to it (a format's hand-written pipeline, the bare lag() pass)."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"


@pytest.fixture
def targets(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    spec = importlib.util.spec_from_file_location("bench_targets", BENCH / "targets.py")
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, "bench_targets", mod)
    spec.loader.exec_module(mod)
    monkeypatch.setattr(mod, "OUT", tmp_path)
    return mod


def _write(out: Path, name: str, doc: dict[str, object]) -> None:
    (out / name).write_text(json.dumps(doc))


def test_a_format_miss_names_its_floor_and_the_hand_written_pipeline(targets: ModuleType) -> None:
    _write(targets.OUT, "formats.json", {"results": {
        "ethtool -S text": {"seconds": 1.0, "polars_s": 0.1, "encode_s": 0.2, "hand_s": 0.5},
        "smartctl JSON": {"seconds": 1.5, "polars_s": 1.0, "encode_s": 0.2},
    }})
    rows = {r.target: r for r in targets.rows()}
    eth = rows["ingest ethtool -S text <= 2x bare polars"]
    assert eth.held is False
    verdict = eth.verdict()
    assert "10x against <= 2x" in verdict
    assert "floor 3.00x: out of reach" in verdict
    assert "2.00x a hand-written pipeline to rows, itself 5.00x bare polars" in verdict
    smart = rows["ingest smartctl JSON <= 2x bare polars"]
    assert smart.held is True and smart.verdict() == "held"


def test_time_targets_say_how_fast_the_machine_was(targets: ModuleType) -> None:
    _write(targets.OUT, "results.json", {"results": [
        {"stage": "bare lag() pass, DuckDB 2GB", "seconds": 25.2},
        {"stage": "attribution, DuckDB 2GB", "seconds": 33.4, "ratio": 1.18},
        {"stage": "nightly flow (whole, DuckDB 3GB)", "seconds": 80.0, "rss_mb": 1700.0},
    ]})
    rows = {r.target: r for r in targets.rows()}
    attribution = rows["attribution (512 nodes) <= 15 s within a 2 GiB cap"]
    assert attribution.held is False
    assert "bare lag() pass 25.2 s" in attribution.verdict()
    assert rows["attribution <= 3x a bare lag() pass (CPU)"].held is True
    assert rows["512-node nightly flow <= 90 s (default cap)"].verdict() == "held"
    not_measured = rows["checkpoint_latency <= 1.2x the same columns by hand (CPU)"]
    assert not_measured.held is None and "marts.json: missing" in not_measured.verdict()


def test_misses_beyond_the_hand_written_pipeline_are_named(
        targets: ModuleType, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A miss that the same run's hand-written pipeline (or the floor) misses too is counted
    apart: no pipeline that makes the rows meets that target. A miss within their reach is
    not."""
    _write(targets.OUT, "formats.json", {"results": {
        # the hand-written pipeline itself 3x bare polars (floor under the limit)
        "perfquery -x text": {"seconds": 1.0, "polars_s": 0.1, "encode_s": 0.05,
                              "hand_s": 0.3},
        # the floor over the limit, no hand-written pipeline
        "DLIO per-rank stats JSON": {"seconds": 1.0, "polars_s": 0.1, "encode_s": 0.3},
        # within reach: the hand-written pipeline 1.2x, the floor 1.5x
        "nvme-cli smart-log JSON": {"seconds": 0.3, "polars_s": 0.1, "encode_s": 0.05,
                                    "hand_s": 0.12},
    }})
    rows = {r.target: r for r in targets.rows()}
    assert rows["ingest perfquery -x text <= 2x bare polars"].beyond_reference
    assert rows["ingest DLIO per-rank stats JSON <= 2x bare polars"].beyond_reference
    within = rows["ingest nvme-cli smart-log JSON <= 2x bare polars"]
    assert within.held is False and not within.beyond_reference
    monkeypatch.setattr(sys, "argv", ["targets.py"])
    assert targets.main() == 1
    last = capsys.readouterr().out.strip().splitlines()[-1]
    assert last.startswith("2 of the misses are beyond")
    assert "perfquery -x text, DLIO per-rank stats JSON" in last
    assert "nvme-cli" not in last


def test_a_pool_format_is_held_to_its_hand_written_pipeline(targets: ModuleType) -> None:
    """Issue 44: a pool format's row is ours against the hand-written pipeline to the same
    rows, not against bare polars (which only splits a tool's text into lines)."""
    _write(targets.OUT, "formats.json", {"results": {
        "pool Lustre lctl text": {"seconds": 0.6, "polars_s": 0.03, "encode_s": 0.05,
                                  "hand_s": 0.32, "hand_ratio": 1.875, "hand_target": 2.0,
                                  "hand_held": True, "hand_rows_equal": True},
        "pool GPFS mm* text": {"seconds": 1.5, "polars_s": 0.1, "encode_s": 0.1,
                               "hand_s": 0.3, "hand_ratio": 5.0, "hand_target": 2.0,
                               "hand_held": False, "hand_rows_equal": False},
    }})
    rows = {r.target: r for r in targets.rows()}
    assert not any("bare polars" in t and t.startswith("ingest pool") for t in rows)
    assert rows["ingest pool Lustre lctl text <= 2x a hand-written pipeline to its rows"] \
        .verdict() == "held"
    gpfs = rows["ingest pool GPFS mm* text <= 2x a hand-written pipeline to its rows"]
    assert gpfs.held is False
    assert "2.5x (5x against <= 2x; 15.0x bare polars; its rows differ in number)" \
        in gpfs.verdict()
