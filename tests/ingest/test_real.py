"""Real tool outputs (tests/fixtures/real) through discovery and ingest, in the directory form."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import polars as pl

from ckptwatch.ingest.run import ingest
from ckptwatch.lake.store import Lake

REAL = Path(__file__).resolve().parents[1] / "fixtures" / "real"


def test_directory_form_of_real_outputs_ingests(tmp_path: Path) -> None:
    raw = tmp_path / "raw"
    smart = raw / "smart" / "gpu-node-01"
    smart.mkdir(parents=True)
    for f in sorted((REAL / "smartctl_json_nvme" / "smartctl_exporter").glob("*.json"))[:4]:
        shutil.copy(f, smart / f"{f.stem}_20261128T010000Z.json")
    fab = raw / "fabric" / "gpu-node-02"
    fab.mkdir(parents=True)
    shutil.copy(REAL / "ethtool" / "ethq" / "ethtool-S_mlx5_core.txt",
                fab / "eth0_20261128T010000Z.txt")
    shutil.copy(REAL / "infiniband" / "treydock_infiniband_exporter" / "perfquery" /
                "0x506b4b03005c2740.out", fab / "perfquery_20261128T010000Z.txt")
    tree = raw / "fabric" / "gpu-node-03" / "2026-11-28T01:00:00Z"
    shutil.copytree(REAL / "infiniband" / "procfs_sysfs" / "sys", tree / "sys")
    report = ingest(raw, tmp_path / "lake")
    assert report.count("failed") == 0
    q = Lake(tmp_path / "lake").read("quarantine")
    assert q.height == 0, q.select("source_file", "reason").rows()
    smart_rows = Lake(tmp_path / "lake").read("nvme_smart")
    temp = smart_rows.filter((pl.col("metric") == "temperature_c")
                             & (pl.col("model") == "INTEL SSDPE2KX080T8"))
    assert temp["value"].to_list() == [29.0]
    assert set(smart_rows["node"]) == {"gpu-node-01"}
    fc = Lake(tmp_path / "lake").read("fabric_counters")
    assert set(fc["node"]) == {"gpu-node-02", "gpu-node-03"}
    wait = fc.filter((pl.col("counter") == "port_xmit_wait") & (pl.col("node") == "gpu-node-02"))
    assert wait["value"].to_list() == [41864608.0]
    assert fc["ts"].dt.hour().unique().to_list() == [1]


def test_envelope_of_a_real_smartctl_output(tmp_path: Path) -> None:
    raw = tmp_path / "raw" / "smart"
    raw.mkdir(parents=True)
    out = json.loads((REAL / "smartctl_json_nvme" / "smartctl_exporter" /
                      "SAMSUNG_MZQLB1T9HAJR-00007_19.json").read_text())
    env = {"node": "pool-target-3", "collected_at": "2026-11-28T02:00:00+00:00", "output": out}
    truncated = json.dumps(env)[:500]
    (raw / "n.jsonl").write_text(json.dumps(env) + "\n" + truncated + "\n")
    report = ingest(tmp_path / "raw", tmp_path / "lake")
    assert report.rows["nvme_smart"] > 10
    q = Lake(tmp_path / "lake").read("quarantine")
    assert q.select("source_file", "line").rows() == [("smart/n.jsonl", 2)]
    assert q["reason"][0].startswith("invalid JSON")
