"""The simulator samples as clusters do: each tool on its own clock and cadence, host clocks off,
device names as the tools print them; and the default (aligned) day stays as it was."""

from __future__ import annotations

import hashlib
import json
from collections import defaultdict
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from ckptwatch.errors import SimulationConfigError, UsageError
from ckptwatch.simulate.evaluation import (
    COMPLETE_FAMILIES,
    SAMPLING_FAMILIES,
    VARIED,
    family_options,
    parse_families,
)
from ckptwatch.simulate.scenario import simulate
from ckptwatch.simulate.telemetry.sampling import Clocks
from ckptwatch.simulate.telemetry.smart import OCP_CADENCES, ocp_times
from ckptwatch.sources.smartctl import nvme_device_name

DAY: dict[str, Any] = {"nodes": 4, "hours": 1.0}


def _digest(root: Path) -> dict[str, str]:
    return {p.relative_to(root).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file()}


def _epoch(text: str) -> float:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def _smart(root: Path) -> dict[tuple[str, str], list[tuple[float, str]]]:
    """(host, source) -> [(collected_at, envelope device)] of every SMART envelope."""
    out: dict[tuple[str, str], list[tuple[float, str]]] = defaultdict(list)
    for path in sorted((root / "smart").glob("*.jsonl")):
        for line in path.read_text(encoding="utf-8").splitlines():
            env = json.loads(line)
            out[(env["node"], env["source"])].append((_epoch(env["collected_at"]),
                                                      env["device"]))
    return out


@pytest.fixture(scope="module")
def aligned(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("aligned")
    simulate(out, seed=21, **DAY)
    return out


@pytest.fixture(scope="module")
def apart(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("apart")
    simulate(out, seed=21, tool_clocks="apart", smart_interval_s=300.0, **DAY)
    return out


def test_aligned_tools_read_a_drive_at_one_instant(aligned: Path) -> None:
    smart = _smart(aligned)
    for (host, source), rows in smart.items():
        if source == "nvme-ocp-smart":
            health = smart[(host, "smartctl")]
            assert sorted(rows) == sorted(health)  # same instants, same device spelling


def test_apart_tools_read_the_ocp_log_at_moments_of_their_own(apart: Path) -> None:
    smart = _smart(apart)
    hosts = {h for h, _ in smart}
    assert hosts
    same = total = 0
    for host in hosts:
        health, ocp = smart[(host, "smartctl")], smart[(host, "nvme-ocp-smart")]
        # the health log's device as smartctl is given it, the OCP log's in a spelling of its
        # own; both name the same controllers
        assert {dev for _, dev in health} <= {"/dev/nvme0", "/dev/nvme1"}
        assert ({nvme_device_name(d) for _, d in ocp}
                == {nvme_device_name(d) for _, d in health})
        for dev in {nvme_device_name(d) for _, d in health}:
            h = {t for t, d in health if nvme_device_name(d) == dev}
            o = {t for t, d in ocp if nvme_device_name(d) == dev}
            same += len(h & o)
            total += len(o)
    assert total and same / total < 0.1, (same, total)
    spellings = {d for (_, src), rows in smart.items() if src == "nvme-ocp-smart"
                 for _, d in rows}
    assert len(spellings) >= 2, spellings


def test_ocp_cadence_is_the_health_logs_seconds_later_or_ten_times_denser_or_sparser() -> None:
    rng = np.random.default_rng(7)
    health = np.arange(1000.0, 1000.0 + 20 * 300.0, 300.0)
    seen: dict[float, int] = defaultdict(int)
    for _ in range(80):
        ts, dev = ocp_times(rng, health, 300.0, 1000.0, 1000.0 + 6000.0, "nvme1")
        assert nvme_device_name(dev) == "nvme1"
        assert (np.diff(ts) > 0).all() and (ts == np.floor(ts)).all()
        gap = float(np.median(np.diff(ts)))
        if ts.size == health.size and np.all((ts - health >= 1) & (ts - health <= 22)):
            seen[1.0] += 1  # one command after the other: 1-22 s after each health read
        else:
            factor = round(gap / 300.0, 1)
            assert factor in OCP_CADENCES, gap
            seen[factor] += 1
    assert set(seen) == set(OCP_CADENCES), seen


def test_a_hosts_clock_moves_only_what_that_host_stamps(aligned: Path, tmp_path: Path) -> None:
    labels = json.loads((aligned / "labels.json").read_text())
    node = labels["jobs"][0]["nodes"][0]
    target = labels["pool"]["targets"][0]
    simulate(tmp_path, seed=21, host_clock=((node, 2.0), (target, -1.5)), **DAY)
    before, after = _digest(aligned), _digest(tmp_path)
    changed = {rel for rel in before if before[rel] != after[rel]}
    assert changed == {f"smart/{node}.jsonl", f"fabric/{node}.jsonl", f"smart/{target}.jsonl",
                       "pool/pool_metrics.csv", "labels.json"}
    moved = {k: [t for t, _ in v] for k, v in _smart(tmp_path).items()}
    for key, rows in _smart(aligned).items():
        shift = {node: 2.0, target: -1.5}.get(key[0], 0.0)
        # stamps are whole seconds: a clock off by 1.5 s moves each by 1 or 2
        assert all(abs(b - a - shift) < 1 for (a, _), b in zip(rows, moved[key], strict=True))
    pool_lines = (tmp_path / "pool" / "pool_metrics.csv").read_text().splitlines()
    old_lines = (aligned / "pool" / "pool_metrics.csv").read_text().splitlines()
    assert sorted(x.split(",", 1)[1] for x in pool_lines if f",{target}," not in x) == \
        sorted(x.split(",", 1)[1] for x in old_lines if f",{target}," not in x)
    assert json.loads((tmp_path / "labels.json").read_text())["clocks"]["host_offset_s"] == {
        node: 2.0, target: -1.5}
    assert labels["stalls"] == json.loads((tmp_path / "labels.json").read_text())["stalls"]


def test_skew_draws_every_hosts_clock_within_its_bound(tmp_path: Path) -> None:
    simulate(tmp_path, seed=21, clock_skew_s=2.0, **DAY)
    offsets = json.loads((tmp_path / "labels.json").read_text())["clocks"]["host_offset_s"]
    assert len(offsets) == 4 + 2  # four nodes, two pool targets
    assert all(0 < abs(x) <= 2.0 for x in offsets.values())
    assert len(set(offsets.values())) == len(offsets)


def test_shifting_one_tool_moves_its_instants_and_reads_the_values_there(
        aligned: Path, tmp_path: Path) -> None:
    simulate(tmp_path, seed=21, sample_shift=(("ocp", 40.0),), **DAY)
    before, after = _smart(aligned), _smart(tmp_path)
    for (host, source), rows in before.items():
        if source == "smartctl":
            assert after[(host, source)] == rows
        else:
            times = sorted(t for t, _ in rows)
            moved = sorted(t for t, _ in after[(host, source)])
            assert len(moved) == len(times)
            assert sum(b - a == 40.0 for a, b in zip(times, moved, strict=True)) >= len(times) - 2
    changed = {rel for rel, h in _digest(aligned).items() if _digest(tmp_path)[rel] != h}
    assert changed and all(rel.startswith("smart/") or rel == "labels.json" for rel in changed)


def test_a_negative_shift_comes_round_after_the_end_keeping_the_count() -> None:
    ts = np.array([[110.0, 170.0, 230.0], [150.0, 210.0, 270.0]])
    moved = Clocks(shift={"pool": -30.0}).sampled("pool", ts, 100.0, 180.0)
    assert moved.tolist() == [[140.0, 200.0, 260.0], [120.0, 180.0, 240.0]]
    assert Clocks().sampled("pool", ts, 100.0, 180.0) is ts
    assert Clocks(offset={"n1": -2.0}).stamp("n1", ts[0]).tolist() == [108.0, 168.0, 228.0]


def test_bad_clock_options_are_named(tmp_path: Path) -> None:
    with pytest.raises(SimulationConfigError, match="tool_clocks must be one of aligned, apart"):
        simulate(tmp_path / "a", seed=1, tool_clocks="sloppy", **DAY)
    with pytest.raises(SimulationConfigError, match="sample_shift: tools are smart, ocp"):
        simulate(tmp_path / "b", seed=1, sample_shift=(("gpu", 1.0),), **DAY)
    with pytest.raises(SimulationConfigError, match="clock_skew_s must be between 0 and 600"):
        simulate(tmp_path / "c", seed=1, clock_skew_s=-1.0, **DAY)
    with pytest.raises(SimulationConfigError, match="host_clock names no host of the cluster: "
                       "nodeX"):
        simulate(tmp_path / "d", seed=1, host_clock=(("nodeX", 1.0),), **DAY)


def test_sampling_families_are_asked_for_by_name() -> None:
    assert not set(SAMPLING_FAMILIES) & set(VARIED)
    assert set(SAMPLING_FAMILIES) <= set(COMPLETE_FAMILIES)
    assert parse_families("base,smart_apart,skewed_clocks") == ("base", "smart_apart",
                                                                "skewed_clocks")
    assert family_options("smart_apart", 4) == {"tool_clocks": "apart"}
    opts: dict[str, Any] = family_options("as_clusters", 4)
    assert opts["tool_clocks"] == "apart" and opts["clock_skew_s"] == 2.0
    assert 60 <= opts["smart_interval_s"] <= 300
    with pytest.raises(UsageError):
        parse_families("smart_aparts")
