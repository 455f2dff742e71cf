"""The ``world`` format mix: every supported format, the same series and truth as ``default``."""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from ckptwatch.analysis.findings import find_stalls
from ckptwatch.errors import CkptwatchError
from ckptwatch.ingest.run import ingest
from ckptwatch.simulate.scenario import simulate

SEED = 11
#: Every envelope format the world mix writes: (source, output shape).
WORLD_FORMATS = {
    ("smartctl", "json"), ("nvme-smart-log", "json"), ("nvme-ocp-smart", "json"),
    ("nvme-ocp-smart", "text"), ("ethtool", "text"), ("perfquery", "text"),
    ("sysfs-ib", "text"), ("prometheus", "text"),
}


@pytest.fixture(scope="module")
def scenarios(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The same seed in the default and the world mix (8 nodes, 4 h: every format occurs)."""
    root = tmp_path_factory.mktemp("mix")
    out = {}
    for mix in ("default", "world"):
        simulate(root / mix, SEED, format_mix=mix)
        out[mix] = root / mix
    return out


@pytest.fixture(scope="module")
def lakes(scenarios: dict[str, Path],
          tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Path, Any]]:
    """Each scenario ingested into its own lake, with the ingest report."""
    root = tmp_path_factory.mktemp("lakes")
    return {mix: (root / mix, ingest(raw, root / mix)) for mix, raw in scenarios.items()}


def _formats(raw: Path) -> Counter[tuple[str, str]]:
    seen: Counter[tuple[str, str]] = Counter()
    for path in [*raw.glob("smart/*.jsonl"), *raw.glob("fabric/*.jsonl")]:
        for line in path.read_text(encoding="utf-8").splitlines():
            env = json.loads(line)
            seen[(env["source"], "text" if isinstance(env["output"], str) else "json")] += 1
    return seen


def test_world_mix_writes_every_format(scenarios: dict[str, Path]) -> None:
    assert set(_formats(scenarios["world"])) == WORLD_FORMATS
    assert set(_formats(scenarios["default"])) == {
        ("smartctl", "json"), ("nvme-ocp-smart", "json"), ("ethtool", "text"),
        ("perfquery", "text")}
    scrapes = "\n".join(p.read_text() for p in scenarios["world"].glob("fabric/*.jsonl"))
    assert "node_infiniband_port_transmit_wait_total" in scrapes
    assert "node_ethtool_received_prio3_pause" in scrapes


def test_world_mix_changes_only_the_encoding(scenarios: dict[str, Path]) -> None:
    default, world = scenarios["default"], scenarios["world"]
    for rel in ["topology.csv", "jobs/jobs.csv", "pool/pool_metrics.csv",
                *[p.relative_to(default).as_posix() for p in default.glob("checkpoints/*")]]:
        assert (default / rel).read_bytes() == (world / rel).read_bytes(), rel
    labels = json.loads((world / "labels.json").read_text())
    assert labels.pop("format_mix") == "world"
    assert labels == json.loads((default / "labels.json").read_text())
    # one envelope per drive and sample either way: only the encoding differs
    n_smart = {mix: sum(len(p.read_text().splitlines()) for p in raw.glob("smart/*.jsonl"))
               for mix, raw in scenarios.items()}
    assert n_smart["default"] == n_smart["world"]


def test_world_mix_ingests_cleanly(lakes: dict[str, tuple[Path, Any]]) -> None:
    for mix, (_, report) in lakes.items():
        assert report.quarantined == 0, mix
        assert {f.status for f in report.files} == {"ingested", "ignored"}, mix
        assert [f.rel for f in report.files if f.status == "ignored"] == ["labels.json"]
    default, world = (lakes[m][1].rows for m in ("default", "world"))
    assert set(world) == set(default) == {
        "checkpoint_starts", "checkpoint_writes", "fabric_counters", "jobs", "nvme_smart",
        "pool_metrics", "topology"}
    for table in ("checkpoint_starts", "checkpoint_writes", "jobs", "pool_metrics", "topology"):
        assert world[table] == default[table], table


def test_world_mix_finds_the_same_stalls_and_causes(
        lakes: dict[str, tuple[Path, Any]], scenarios: dict[str, Path]) -> None:
    found = {}
    for mix, (lake, _) in lakes.items():
        stalls = find_stalls(lake).stalls
        found[mix] = sorted((s.job_id, s.step, s.cause) for s in stalls)
    assert found["world"] == found["default"]
    truth = json.loads((scenarios["world"] / "labels.json").read_text())["stalls"]
    assert len(found["world"]) >= 3 and {c for _, _, c in found["world"]} >= {"gc",
                                                                               "fabric_pause"}
    assert {(s["job_id"], s["step"]) for s in truth} >= {(j, k) for j, k, _ in found["world"]}


def test_eight_nics_per_node(tmp_path: Path) -> None:
    raw = tmp_path / "raw"
    simulate(raw, 5, nodes=4, hours=2.0, format_mix="world", nics_per_node=8)
    report = ingest(raw, tmp_path / "lake")
    assert report.quarantined == 0
    assert {f.status for f in report.files} == {"ingested", "ignored"}
    labels = json.loads((raw / "labels.json").read_text())
    assert labels["nics_per_node"] == 8
    resets = labels["counter_resets"]
    assert len(resets) == 8 and len({r["device"] for r in resets}) == 8
    devices: dict[str, set[str]] = {}
    for path in raw.glob("fabric/*.jsonl"):
        text = path.read_text()
        devices[path.stem] = (set(re.findall(r'"device":"([^"]+)"', text))
                              | set(re.findall(r'device=\\"([^"\\]+)\\"', text))
                              | set(re.findall(r"/sys/class/infiniband/([^/]+)/", text)))
    assert all(len(d) == 8 for d in devices.values()), devices


@pytest.mark.parametrize(("opts", "message"), [
    ({"format_mix": "galaxy"}, "--format-mix must be one of default, world"),
    ({"nics_per_node": 9}, "--nics-per-node must be between 1 and 8"),
    ({"nics_per_node": 2, "fabric_format": "canonical"},
     "--nics-per-node above 1 needs --fabric-format raw"),
])
def test_bad_mix_options_are_named(tmp_path: Path, opts: dict[str, Any], message: str) -> None:
    with pytest.raises(CkptwatchError, match=re.escape(message)):
        simulate(tmp_path, seed=1, **opts)
