"""`ckptwatch simulate`'s options for the varied scenarios reach the generator."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ckptwatch.cli.main import main


def test_omit_leaves_those_families_out_and_names_a_bad_one(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "s"
    assert main(["simulate", str(out), "--seed", "5", "--nodes", "4", "--hours", "1",
                 "--omit", "pool,topology", "--gc-evidence", "wa_only",
                 "--signal-strength", "weak", "--background-per-stall", "0.5",
                 "--quiet"]) == 0
    assert not (out / "pool").exists() and not (out / "topology.csv").exists()
    assert (out / "checkpoints").is_dir() and (out / "smart").is_dir()
    with pytest.raises(SystemExit):
        main(["simulate", str(tmp_path / "t"), "--omit", "pool,nope"])
    assert "unknown telemetry family nope (known: topology, phases, ocp, pool, smart, fabric)" in \
        capsys.readouterr().err


def test_tool_clocks_and_clock_skew_reach_the_generator(tmp_path: Path) -> None:
    out = tmp_path / "s"
    assert main(["simulate", str(out), "--seed", "5", "--nodes", "4", "--hours", "1",
                 "--tool-clocks", "apart", "--clock-skew", "1.5", "--quiet"]) == 0
    clocks = json.loads((out / "labels.json").read_text())["clocks"]
    assert clocks["tool_clocks"] == "apart" and clocks["clock_skew_s"] == 1.5
    assert clocks["host_offset_s"] and all(abs(x) <= 1.5
                                           for x in clocks["host_offset_s"].values())


def test_evaluate_samples_every_family_apart_when_asked() -> None:
    from ckptwatch.cli.evaluate import _sampling
    from ckptwatch.cli.main import build_parser

    parser = build_parser()
    args = parser.parse_args(["evaluate", "--tool-clocks", "apart", "--clock-skew", "2"])
    assert _sampling(args) == {"tool_clocks": "apart", "clock_skew_s": 2.0}
    # not given: each family keeps its own (smart_apart stays apart, base aligned)
    assert _sampling(parser.parse_args(["evaluate"])) == {}
