"""The sample scenario with its pool telemetry read from Prometheus through rules of one's own:
the pool's rows rendered as the series of an exporter ckptwatch has no preset for (other names,
other units: seconds, a 0..1 ratio), backfilled with promtool, served by a real Prometheus and
pulled with a `[pool.prometheus]` mapping from a config file. The pulled pool_metrics rows are
the raw file's, and `ckptwatch stalls` finds the same stalls with the same causes (GC and
metadata attribution run on the pulled series)."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path

import polars as pl
import pytest
from tests.conftest_prometheus import backfill, start_prometheus_over
from tests.pull.conftest import CliRun
from tests.pull.exposition import Sample, openmetrics

from ckptwatch.ingest.run import ingest
from ckptwatch.lake.store import Lake
from ckptwatch.pull.prometheus import PullReport, pull_prometheus
from ckptwatch.settings import PrometheusSettings, load_settings

SAMPLE = Path(__file__).resolve().parents[2] / "data" / "sample"
POOL = ["ts", "pool", "target", "metric", "value"]
#: The exporter's metric for each pool name, and the factor from the lake's unit to its own.
EXPORTER = {"gc_active": ("acme_target_gc_running", 1.0),
            "free_blocks_pct": ("acme_target_free_ratio", 0.01),
            "metadata_latency_ms": ("acme_mds_op_latency_seconds", 0.001),
            "metadata_ops": ("acme_mds_ops_rate", 1.0),
            "write_bytes": ("acme_target_written_bytes_total", 1.0)}
MAPPING = """
[pool.prometheus]

[[pool.prometheus.rules]]
metric = "acme_target_gc_running"
signal = "gc_active"
target = "{ost}"
pool = "{array}"

[[pool.prometheus.rules]]
metric = "acme_target_free_ratio"
signal = "free_blocks_pct"
scale = 100
target = "{ost}"
pool = "{array}"

[[pool.prometheus.rules]]
metric = "acme_mds_op_latency_seconds"
signal = "metadata_latency_ms"
scale = 1000
target = "{ost}"
pool = "{array}"

[[pool.prometheus.rules]]
metric = "acme_mds_ops_rate"
signal = "metadata_ops"
target = "{ost}"
pool = "{array}"

[[pool.prometheus.rules]]
metric = "acme_target_written_bytes_total"
signal = "write_bytes"
kind = "counter"
target = "{ost}"
pool = "{array}"
"""


@dataclass(frozen=True)
class Lakes:
    files: Path
    pulled: Path
    report: PullReport


@pytest.fixture(scope="module")
def lakes(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lakes]:
    root = tmp_path_factory.mktemp("sample-pool-pull")
    files = root / "lake-files"
    ingest(SAMPLE, files)
    pool = Lake(files).read("pool_metrics")
    samples: list[Sample] = []
    for ts, name, target, metric, value in pool.select(POOL).iter_rows():
        series, factor = EXPORTER[metric]
        samples.append((series, {"instance": "acme-exporter:9500", "array": name,
                                 "ost": target}, value * factor, ts.timestamp()))
    backfill(openmetrics(samples), root / "tsdb")
    raw = root / "raw"
    raw.mkdir()
    for entry in SAMPLE.iterdir():  # everything but the pool telemetry
        if entry.name != "pool":
            copy = shutil.copytree if entry.is_dir() else shutil.copy2
            copy(entry, raw / entry.name)
    pulled = root / "lake-pulled"
    ingest(raw, pulled)
    config = root / "ckptwatch.toml"
    config.write_text(MAPPING)
    mapping = load_settings(config, environ={}).pool.prometheus
    first, last = pool["ts"].min(), pool["ts"].max()
    assert isinstance(first, datetime) and isinstance(last, datetime)
    with start_prometheus_over(root, root / "tsdb") as server:
        report = pull_prometheus(
            server.url, pulled, PrometheusSettings(), step_s=15, pool=mapping,  # every 30 s
            since=first - timedelta(minutes=1), until=last + timedelta(minutes=1))
    yield Lakes(files, pulled, report)


def test_pool_rows_land_as_the_file_had_them(lakes: Lakes) -> None:
    want = Lake(lakes.files).read("pool_metrics").select(POOL).sort(POOL[:4])
    got = Lake(lakes.pulled).read("pool_metrics").select(POOL).sort(POOL[:4])
    assert got.height == want.height > 0
    assert got.drop("value").equals(want.drop("value"))
    error = (got["value"] - want["value"]).abs() / want["value"].abs().clip(lower_bound=1.0)
    worst = error.max()
    assert isinstance(worst, float) and worst < 1e-12  # x 0.01 then x 100: rounding only
    assert lakes.report.pool_series == want.select("target", "metric").n_unique()
    assert not [n for n in lakes.report.notes if "pool" in n]  # everything mapped
    gc = got.filter((pl.col("metric") == "gc_active") & (pl.col("value") == 1))
    assert gc.height > 0


def _stalls(lake: Path, run_cli: CliRun) -> list[tuple[str, int, str, list[str]]]:
    code, out, err = run_cli(["stalls", "--lake", str(lake), "--format", "json"])
    assert code == 0, err
    return [(s["job_id"], s["step"], s["cause"], [c["cause"] for c in s["causes"]])
            for s in json.loads(out)]


def test_same_stalls_same_causes(lakes: Lakes, run_cli: CliRun, tmp_path: Path,
                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CKPTWATCH_MODEL", str(tmp_path / "absent.joblib"))  # the rules alone
    before = _stalls(lakes.files, run_cli)
    assert {"gc", "metadata"} <= {cause for _, _, cause, _ in before}
    assert _stalls(lakes.pulled, run_cli) == before
