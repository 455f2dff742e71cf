"""bench/scale.py (``make bench-scale``): the growth exponent's fit and issue 47's held / missed
verdicts, on made-up figures (no day generated, nothing run)."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"


def _load(name: str, file: str, monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, BENCH / file)
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, name, mod)
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture
def scale(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    monkeypatch.syspath_prepend(str(BENCH))  # scale.py imports bench/targets.py as `targets`
    _load("targets", "targets.py", monkeypatch)
    mod = _load("bench_scale", "scale.py", monkeypatch)
    monkeypatch.setattr(mod, "OUT", tmp_path)
    return mod


def _size(wall: float, rss: float, *, lag: float = 20.0, stalls: float = 4.0,
          ingest_rss: float = 600.0) -> dict[str, Any]:
    """One size's rows as bench/scale.py saves them: the nightly, two of its steps, the lag()
    pass and find_stalls alone."""
    return {"steps": [
        {"step": "nightly flow", "rows": 1000, "unit": "rows", "wall_s": wall,
         "cpu_s": 1.5 * wall, "rss_mb": rss},
        {"step": "start and rest", "rows": None, "unit": "", "wall_s": 5.0, "cpu_s": 6.0,
         "rss_mb": None},
        {"step": "ingest", "rows": 1000, "unit": "rows", "wall_s": wall / 2, "cpu_s": wall,
         "rss_mb": ingest_rss, "child_rss_mb": 400},
        {"step": "stalls", "rows": 3, "unit": "stalls", "wall_s": stalls, "cpu_s": stalls,
         "rss_mb": rss, "child_rss_mb": 400},
        {"step": "bare lag() pass", "rows": 500, "unit": "samples", "wall_s": lag,
         "cpu_s": lag, "rss_mb": 900.0},
        {"step": "stalls alone", "rows": 3, "unit": "stalls", "wall_s": stalls + 1,
         "cpu_s": stalls + 2, "rss_mb": rss - 100},
    ]}


def _doc(sizes: dict[int, dict[str, Any]]) -> dict[str, Any]:
    return {"hours": 24.0, "cap": "3GB", "measured_at": "2026-12-07T00:00:00Z",
            "sizes": {str(n): rec for n, rec in sizes.items()}}


def test_the_exponent_is_the_log_log_slope(scale: ModuleType) -> None:
    assert scale.fit_exponent([(128, 10.0), (512, 40.0), (2048, 160.0)]) == pytest.approx(1.0)
    assert scale.fit_exponent([(128, 10.0), (512, 80.0)]) == pytest.approx(1.5)  # 8x for 4x
    # least squares over three sizes: quadratic growth, whatever the constant
    assert scale.fit_exponent([(128, 1.0), (512, 16.0), (2048, 256.0)]) == pytest.approx(2.0)
    assert scale.fit_exponent([(128, 10.0)]) is None
    assert scale.fit_exponent([(128, 10.0), (512, None)]) is None


def test_targets_held_and_missed(scale: ModuleType) -> None:
    doc = _doc({128: _size(10.0, 1536.0), 512: _size(40.0, 2560.0, ingest_rss=700.0),
                2048: _size(160.0, 1800.0)})
    rows = {r.target: r for r in scale.targets(doc)}
    exponent = rows["nightly wall ~ nodes^k, k <= 1.1 (128 to 2,048 nodes)"]
    assert exponent.held is True and exponent.measured == pytest.approx(1.0)
    assert rows["128-node nightly peak RSS <= 2 GiB (default cap)"].held is True
    rss = rows["512-node nightly peak RSS <= 2 GiB (default cap)"]
    assert rss.held is False
    assert rss.verdict().startswith("MISSED by 1.2x (2560 MB against <= 2048 MB")
    assert "its stalls step (2,560 MB" in rss.why
    assert rows["512-node nightly <= 60 s wall"].held is True
    ratio = rows["512-node nightly <= 3x the bare lag() pass (wall)"]
    assert ratio.held is True and ratio.measured == pytest.approx(2.0)
    assert rows["512-node nightly's stall step <= 5 s"].held is True
    hourly = rows["nightly over an hourly-ingested 512-node day <= 30 s"]
    assert hourly.held is None and "not recorded by this run" in hourly.verdict()
    lines, status = scale.target_lines(list(rows.values()))
    assert status == 1
    assert lines[-1] == "6 of 7 measured targets held; 1 not measured"
    # the nightly again over the ingested day: its steps' seconds against 30 s
    doc["sizes"]["512"]["ingested_day"] = scale.ingested_day_record(
        {"seconds": 41.0, "cpu_s": 40.0, "rss_mb": 900.0, "rows": 0,
         "steps_s": {"ingest": 9.0, "deltas": 0.1, "stalls": 14.0, "report": 4.9}})
    again = {r.target: r for r in scale.targets(doc)}[
        "nightly over an hourly-ingested 512-node day <= 30 s"]
    assert again.held is True and again.measured == pytest.approx(28.0)
    assert "Prefect's start and the imports 13.0 s (whole run 41.0 s" in again.context
    doc["sizes"]["512"]["ingested_day"]["steps_s"]["stalls"] = 24.0
    doc["sizes"]["512"]["ingested_day"] = scale.ingested_day_record(
        {"seconds": 51.0, "steps_s": doc["sizes"]["512"]["ingested_day"]["steps_s"]})
    assert {r.target: r for r in scale.targets(doc)}[
        "nightly over an hourly-ingested 512-node day <= 30 s"].held is False
    assert any("nightly again" in line for line in scale.table_lines(doc))
    # the stall step raised the flow's peak by 936 MB at 128 nodes, by 1,200 at 2,048
    assert scale.rss_growth(doc) == ("stalls", pytest.approx(1200.0 - 936.0))


def test_a_slow_512_node_run_misses_with_its_steps(scale: ModuleType) -> None:
    doc = _doc({128: _size(10.0, 1000.0), 512: _size(90.0, 1200.0, lag=20.0, stalls=12.0)})
    rows = {r.target: r for r in scale.targets(doc)}
    wall = rows["512-node nightly <= 60 s wall"]
    assert wall.held is False
    assert "the same run's bare lag() pass 20.0 s" in wall.verdict()
    assert wall.why == ("its steps: ingest 45.0 s, stalls 12.0 s (the largest: ingest, 50% of "
                        "the run)")
    assert rows["512-node nightly <= 3x the bare lag() pass (wall)"].measured \
        == pytest.approx(4.5)
    stall = rows["512-node nightly's stall step <= 5 s"]
    assert stall.held is False and "find_stalls alone: 13.0 s" in stall.verdict()
    # two sizes, not 128 and 2,048: the exponent is shown, not judged
    exponent = rows["nightly wall ~ nodes^k, k <= 1.1 (128 to 2,048 nodes)"]
    assert exponent.held is None
    assert "ran 128, 512: wall exponent 1.58 over those" in exponent.verdict()
    assert rows["2,048-node nightly peak RSS <= 2 GiB (default cap)"].verdict() \
        == "not measured (2,048 nodes not run)"


def test_the_saved_table_prints_without_running(scale: ModuleType,
                                                capsys: pytest.CaptureFixture[str],
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    (scale.OUT / "scale.json").write_text(json.dumps(_doc({128: _size(10.0, 1000.0)})))
    monkeypatch.setattr(sys, "argv", ["scale.py", "--table"])
    assert scale.main() == 0  # the 128-node RSS is the one target measured: held
    out = capsys.readouterr().out
    assert "   128  nightly flow" in out
    assert "0.50" in out  # the nightly's 10 s over the lag() pass's 20 s
    assert "512 nodes not run" in out
    assert "1 of 1 measured targets held; 7 not measured" in out
