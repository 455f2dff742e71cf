"""The sample scenario with its SMART and fabric counters read from Prometheus instead of the
envelopes: the counters land as they were, and `ckptwatch stalls` finds the same stalls with
the same causes.

The sample's counters are rendered as the series the exporters expose (node_exporter's
ethtool and infiniband collectors, smartctl_exporter), backfilled with promtool, served by a
real Prometheus and pulled; checkpoints, jobs, pool telemetry and topology are ingested from
the raw directory as usual. What no exporter carries (the OCP log, perfquery's QP1 drops) is
lost, as docs/collecting.md says.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

import polars as pl
import pytest
from tests.conftest_prometheus import backfill, start_prometheus_over
from tests.pull.conftest import CliRun
from tests.pull.exposition import lake_as_exporters, openmetrics

from ckptwatch.ingest.run import ingest
from ckptwatch.lake.store import Lake
from ckptwatch.pull.prometheus import pull_prometheus
from ckptwatch.settings import PrometheusSettings

SAMPLE = Path(__file__).resolve().parents[2] / "data" / "sample"
FABRIC = ["ts", "node", "device", "port", "counter", "value"]
SMART = ["ts", "node", "device", "metric", "value"]


@dataclass(frozen=True)
class Lakes:
    """The sample ingested from its envelopes (``envelopes``), and with SMART and fabric pulled
    from Prometheus (``pulled``); ``lost``: the canonical names no exporter carries."""

    envelopes: Path
    pulled: Path
    lost: set[str]


@pytest.fixture(scope="module")
def lakes(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lakes]:
    root = tmp_path_factory.mktemp("sample-pull")
    envelopes = root / "lake-envelopes"
    ingest(SAMPLE, envelopes)
    fabric = Lake(envelopes).read("fabric_counters")
    smart = Lake(envelopes).read("nvme_smart")
    samples, lost = lake_as_exporters(fabric, smart)
    backfill(openmetrics(samples), root / "tsdb")
    raw = root / "raw"
    raw.mkdir()
    for entry in SAMPLE.iterdir():  # everything but the SMART and fabric envelopes
        if entry.name not in ("smart", "fabric"):
            copy = shutil.copytree if entry.is_dir() else shutil.copy2
            copy(entry, raw / entry.name)
    pulled = root / "lake-pulled"
    ingest(raw, pulled)
    since = min(fabric["ts"].min(), smart["ts"].min()) - timedelta(minutes=1)
    until = max(fabric["ts"].max(), smart["ts"].max()) + timedelta(minutes=1)
    with start_prometheus_over(root, root / "tsdb") as server:
        pull_prometheus(server.url, pulled, PrometheusSettings(), since=since, until=until,
                        step_s=60)  # every sample: the sample scrapes every 90 s or slower
    yield Lakes(envelopes, pulled, lost)


def test_counters_land_as_the_envelopes_had_them(lakes: Lakes) -> None:
    assert {"media_written_bytes", "controller_busy_time_min", "qp1_dropped"} <= lakes.lost
    a, b = Lake(lakes.envelopes), Lake(lakes.pulled)
    want = a.read("fabric_counters").filter(~pl.col("counter").is_in(sorted(lakes.lost)))
    got = b.read("fabric_counters")
    assert set(got["source"]) == {"prometheus"}
    assert got.select(FABRIC).sort(FABRIC).equals(want.select(FABRIC).sort(FABRIC))
    want_smart = a.read("nvme_smart").filter((pl.col("source") == "smartctl")
                                             & ~pl.col("metric").is_in(sorted(lakes.lost)))
    assert b.read("nvme_smart").select(SMART).sort(SMART).equals(
        want_smart.select(SMART).sort(SMART))


def _stalls(lake: Path, run_cli: CliRun) -> list[tuple[str, int, str, list[str]]]:
    code, out, err = run_cli(["stalls", "--lake", str(lake), "--format", "json"])
    assert code == 0, err
    return [(s["job_id"], s["step"], s["cause"], [c["cause"] for c in s["causes"]])
            for s in json.loads(out)]


def test_same_stalls_same_causes(lakes: Lakes, run_cli: CliRun, tmp_path: Path,
                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CKPTWATCH_MODEL", str(tmp_path / "absent.joblib"))  # the rules alone
    before = _stalls(lakes.envelopes, run_cli)
    assert len(before) >= 5
    assert {"gc", "metadata", "fabric_pause"} <= {cause for _, _, cause, _ in before}
    assert _stalls(lakes.pulled, run_cli) == before
