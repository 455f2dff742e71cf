"""Planning inputs from text: config mappings (display and SI keys), config files, sweeps."""

from __future__ import annotations

from pathlib import Path

import pytest

from ckptwatch.errors import PlanInputError
from ckptwatch.planning.inputs import inputs_from_mapping, load_config, parse_sweep


def test_inputs_from_mapping_accepts_display_and_si_keys() -> None:
    got = inputs_from_mapping({"pool_bandwidth_gb_s": 400, "node_mtbf_s": 7200.0, "ranks": 64},
                              origin="t")
    assert got == {"pool_bandwidth_bytes_s": 400e9, "node_mtbf_s": 7200.0, "ranks": 64}
    with pytest.raises(PlanInputError, match=r"t: unknown input 'pool_bw'"):
        inputs_from_mapping({"pool_bw": 1}, origin="t")
    with pytest.raises(PlanInputError, match=r"t: ranks must be a whole number"):
        inputs_from_mapping({"ranks": 1.5}, origin="t")


def test_load_config_yaml_toml_and_fed_back_json(tmp_path: Path) -> None:
    (tmp_path / "a.yaml").write_text("ranks: 64\npool_bandwidth_gb_s: 400\n")
    (tmp_path / "b.toml").write_text("ranks = 64\n")
    (tmp_path / "c.json").write_text('{"inputs": {"ranks": 64}, "best": "pool"}')
    assert load_config(tmp_path / "a.yaml") == {"ranks": 64, "pool_bandwidth_gb_s": 400}
    assert load_config(tmp_path / "b.toml") == {"ranks": 64}
    assert load_config(tmp_path / "c.json") == {"ranks": 64}
    (tmp_path / "b.toml").write_text("ranks = = 1\n")
    with pytest.raises(PlanInputError, match=r"b.toml: not valid TOML"):
        load_config(tmp_path / "b.toml")


def test_parse_sweep_gives_si_bounds() -> None:
    assert parse_sweep("pool_bandwidth=40:4000") == ("pool_bandwidth", 40e9, 4000e9, 41)
    assert parse_sweep("node_mtbf=1:2:5") == ("node_mtbf", 3600.0, 7200.0, 5)
    with pytest.raises(PlanInputError, match=r"N must be in 2..1001"):
        parse_sweep("ranks=8:16:1")
