"""The varied simulator's options: coarse SMART, GC seen only through write amplification,
background episodes during stalls that slow nothing, and telemetry families left out."""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from ckptwatch.errors import SimulationConfigError
from ckptwatch.simulate.evaluation import FAMILIES, family_of, family_options
from ckptwatch.simulate.scenario import simulate


@pytest.fixture(scope="module")
def varied(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One small scenario with every variety option on."""
    out = tmp_path_factory.mktemp("varied")
    simulate(out, seed=11, nodes=8, hours=2.0, smart_interval_s=120.0, gc_evidence="wa_only",
             background_per_stall=1.0, signal_strength="weak",
             omit=("topology", "phases", "ocp", "pool"))
    return out


def _labels(root: Path) -> dict[str, Any]:
    return json.loads((root / "labels.json").read_text(encoding="utf-8"))


def test_left_out_families_leave_no_trace(varied: Path) -> None:
    assert not (varied / "topology.csv").exists()
    assert not (varied / "pool").exists()
    smart = "".join(p.read_text() for p in (varied / "smart").glob("*.jsonl"))
    assert '"smartctl"' in smart and "nvme-ocp-smart" not in smart
    record = next(json.loads(line) for p in sorted((varied / "checkpoints").glob("*.jsonl"))
                  for line in p.read_text().splitlines() if '"end_time"' in line)
    assert "end_time" in record and "open_s" not in record and "write_s" not in record


def test_smart_is_sampled_every_one_to_five_minutes(varied: Path) -> None:
    path = sorted((varied / "smart").glob("node*.jsonl"))[0]
    stamps = sorted({json.loads(line)["collected_at"] for line in path.read_text().splitlines()})
    ts = [datetime.fromisoformat(t.replace("Z", "+00:00")).timestamp() for t in stamps]
    gaps = [b - a for a, b in zip(ts, ts[1:], strict=False)]
    assert gaps and all(60 <= g <= 300 for g in gaps), gaps


def test_background_episodes_slow_nothing(varied: Path) -> None:
    labels = _labels(varied)
    background = [i for i in labels["incidents"] if i["kind"] == "background"]
    assert background, "every stall gets a background episode when it has spare hosts"
    blamed = {i for s in labels["stalls"] for i in s["incidents"]}
    assert all(i["stalled"] == [] and i["id"] not in blamed for i in background)


def test_local_gc_shows_only_a_modest_write_amplification(varied: Path) -> None:
    local = [i for i in _labels(varied)["incidents"]
             if (i["cause"], i["kind"]) == ("gc", "stall")
             and i["variant"] in ("local_drive", "node_drives", "nodes_drives")]
    assert local, "the 2 h scenario of seed 11 has a GC stall on local drives"
    for inc in local:
        m = inc["magnitude"]
        assert m["wa_only"] == 1.0 and m["relocation_gbs"] == 0.0
        assert 1.15 <= m["write_amplification"] <= 1.6


def test_default_options_change_nothing(tmp_path: Path) -> None:
    simulate(tmp_path / "a", seed=5, nodes=4, hours=1.0)
    simulate(tmp_path / "b", seed=5, nodes=4, hours=1.0, gc_evidence="full",
             signal_strength="strong", background_per_stall=0.0, omit=())
    for p in sorted((tmp_path / "a").rglob("*")):
        if p.is_file():
            assert p.read_bytes() == (tmp_path / "b" / p.relative_to(tmp_path / "a")).read_bytes()


def test_an_unknown_family_to_omit_is_refused(tmp_path: Path) -> None:
    with pytest.raises(SimulationConfigError, match=r"omit: unknown telemetry family "
                       r"\['gpu'\]; choose from topology, phases, ocp, pool"):
        simulate(tmp_path, seed=1, nodes=4, hours=1.0, omit=("gpu",))


def test_seeds_cycle_through_the_families_with_smart_every_one_to_five_minutes() -> None:
    names = tuple(FAMILIES)
    assert [family_of(s, names) for s in range(len(names))] == list(names)
    intervals = {family_options("coarse_smart", s)["smart_interval_s"] for s in range(50)}
    assert min(intervals) >= 60 and max(intervals) <= 300 and len(intervals) > 10
    assert family_options("no_ocp", 3) == {"omit": ("ocp",)}
