"""`ckptwatch pull prometheus` against a real Prometheus over backfilled real exporter scrapes:
the lake holds exactly the samples Prometheus stores, the reset is a reset, a second pull adds
nothing, the node rule and the window around checkpoints hold, a too large pull is refused."""

from __future__ import annotations

import json
import urllib.parse
import urllib.request
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from tests.pull.conftest import (
    EVERY_S,
    HOSTS,
    N_SCRAPES,
    RESET_AT,
    T0,
    T_END,
    CliRun,
    History,
)

from ckptwatch.lake.query import connect, run_sql
from ckptwatch.lake.store import Lake
from ckptwatch.pull.prometheus import (
    FAMILIES,
    PullError,
    PullReport,
    pull_prometheus,
    strip_port,
)
from ckptwatch.settings import PrometheusSettings
from ckptwatch.sources.base import ToolContext
from ckptwatch.sources.prometheus import parse_prometheus

FABRIC_KEY = ["ts", "node", "device", "port", "counter", "value"]
SMART_KEY = ["ts", "node", "device", "metric", "value"]


def _stored(history: History) -> dict[str, list[dict]]:
    """Every sample Prometheus stores in the range, read with a range selector (raw samples,
    not the pull's query_range), as the parser maps them, per table."""
    span = int((history.end - history.start).total_seconds()) + 1
    q = urllib.parse.urlencode({"query": f"{FAMILIES}[{span}s]",
                                "time": history.end.timestamp()})
    with urllib.request.urlopen(f"{history.prometheus.url}/api/v1/query?{q}") as resp:
        matrix = json.load(resp)["data"]["result"]
    by_instance: dict[str, list[str]] = {}
    for series in matrix:
        labels = dict(series["metric"])
        name = labels.pop("__name__")
        inner = ",".join(f'{k}="{v}"' for k, v in sorted(labels.items()))
        by_instance.setdefault(labels["instance"], []).extend(
            f"{name}{{{inner}}} {v} {round(float(t) * 1000)}" for t, v in series["values"])
    out: dict[str, list[dict]] = {"fabric_counters": [], "nvme_smart": []}
    for instance, lines in by_instance.items():
        rows = parse_prometheus("\n".join(lines), ToolContext(strip_port(instance), T0,
                                                              "prometheus"))
        for table, found in rows.items():
            out[table] += found
    return out


def _rows(lake: Path, table: str) -> pl.DataFrame:
    key = FABRIC_KEY if table == "fabric_counters" else SMART_KEY
    return Lake(lake).read(table).select(key).sort(key)


def _pull(history: History, lake: Path, **kw: Any) -> PullReport:
    settings = kw.pop("settings", PrometheusSettings())
    return pull_prometheus(history.prometheus.url, lake, settings, **{
        "since": history.start, "until": history.end, "step_s": 60, **kw})


@dataclass(frozen=True)
class Pulled:
    """The fixture history pulled once into a lake (shared by the tests that only read it)."""

    lake: Path
    report: PullReport


@pytest.fixture(scope="module")
def pulled(history: History, tmp_path_factory: pytest.TempPathFactory) -> Pulled:
    """One pull of the whole history on a small query budget: several time chunks and host
    batches, none of which may lose or repeat a sample."""
    lake = tmp_path_factory.mktemp("pulled") / "lake"
    report = _pull(history, lake, settings=PrometheusSettings(max_points_per_query=4000))
    return Pulled(lake, report)


def test_lake_holds_exactly_the_samples_prometheus_stores(history: History,
                                                          pulled: Pulled) -> None:
    assert len(pulled.report.chunks) > 2
    stored = _stored(history)
    for table, key in (("fabric_counters", FABRIC_KEY), ("nvme_smart", SMART_KEY)):
        want = pl.DataFrame(stored[table]).select(key).with_columns(
            pl.col("ts").dt.cast_time_unit("us")).sort(key)
        got = _rows(pulled.lake, table)
        assert got.height == want.height > 0
        assert got.equals(want), table
    smart = Lake(pulled.lake).read("nvme_smart")
    assert set(smart["source"]) == {"prometheus"}
    assert set(smart["device"]) == {"nvme0"}  # the scrape's SATA drives are not NVMe SMART
    first = smart.filter((pl.col("node") == "gpu-node-01") & (pl.col("ts") == T0))
    values = dict(zip(first["metric"], first["value"], strict=True))
    assert values["temperature_c"] == 37  # the real scrape's own numbers
    assert values["host_written_bytes"] == 1.9632806690816e13
    assert len(smart.filter(pl.col("metric") == "temperature_c")) == len(HOSTS) * N_SCRAPES


def test_second_pull_adds_nothing(history: History, pulled: Pulled, run_cli: CliRun) -> None:
    before = {t: _rows(pulled.lake, t) for t in ("fabric_counters", "nvme_smart")}
    manifest = Lake(pulled.lake).manifest_keys()
    code, out, err = run_cli([
        "pull", "prometheus", history.prometheus.url, "--lake", str(pulled.lake), "--since",
        T0.isoformat(), "--until", str(T_END.timestamp()), "--step", "60", "--quiet"])
    assert code == 0, err
    n = sum(pulled.report.rows.values())
    assert f"series: 210 from {2 * len(HOSTS)} instance(s)" in out  # 2 exporters a host
    assert f"rows written: none ({n:,} already in the lake)" in out
    assert Lake(pulled.lake).manifest_keys() == manifest
    for t, frame in before.items():
        assert _rows(pulled.lake, t).equals(frame)


def test_overlapping_pulls_add_each_sample_once(history: History, pulled: Pulled,
                                                tmp_path: Path) -> None:
    lake = tmp_path / "lake"
    _pull(history, lake, until=T0 + timedelta(hours=2))
    second = _pull(history, lake, since=T0 + timedelta(hours=1))
    assert second.already > 0 and second.rows
    for t in ("fabric_counters", "nvme_smart"):
        assert _rows(lake, t).equals(_rows(pulled.lake, t))


def test_counter_reset_is_a_reset_and_saturation_stays_flagged(pulled: Pulled) -> None:
    con = connect(pulled.lake, views=("stg_counter_deltas",))
    try:
        deltas = run_sql(con, "select * from stg_counter_deltas where host = 'gpu-node-01'")
    finally:
        con.close()
    assert deltas.filter(pl.col("delta") < 0).is_empty()
    series = deltas.filter((pl.col("counter") == "unicast_rcv_packets")
                           & (pl.col("device") == "mlx4_0") & (pl.col("port") == "1"))
    resets = series.filter(pl.col("reset"))
    assert resets["ts"].to_list() == [T0 + timedelta(seconds=RESET_AT * EVERY_S)]
    assert resets["delta"].to_list() == resets["value"].to_list()
    wait = deltas.filter(pl.col("counter") == "port_xmit_wait")
    assert wait.height and wait["saturated"].all()  # the real scrape's 2^32-1: not zero


def test_node_map_names_hosts(history: History, tmp_path: Path) -> None:
    mapping = tmp_path / "nodes.csv"
    mapping.write_text("instance,node\ngpu-node-01,rack1-n01\ngpu-node-02:9633,rack1-n02\n")
    lake = tmp_path / "lake"
    _pull(history, lake, settings=PrometheusSettings(node_map=mapping),
          until=T0 + timedelta(minutes=30))
    assert set(Lake(lake).read("fabric_counters")["node"]) == {"rack1-n01", "gpu-node-02"}
    assert set(Lake(lake).read("nvme_smart")["node"]) == {"rack1-n01", "rack1-n02"}


def test_around_checkpoints_pulls_only_their_windows(history: History, tmp_path: Path,
                                                    run_cli: CliRun) -> None:
    raw = tmp_path / "raw"
    (raw / "checkpoints").mkdir(parents=True)
    start = T0 + timedelta(hours=1, seconds=10)
    records = [{"job_id": "j", "step": 1, "rank": r, "node": HOSTS[r], "tier": "local",
                "start_time": start.isoformat(),
                "end_time": (start + timedelta(seconds=20 + r)).isoformat(), "bytes": 1}
               for r in range(2)]
    (raw / "checkpoints" / "j.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    lake = tmp_path / "lake"
    assert run_cli(["ingest", str(raw), "--lake", str(lake), "--quiet"])[0] == 0
    code, out, err = run_cli(["pull", "prometheus", history.prometheus.url, "--lake", str(lake),
                              "--around-checkpoints", "--step", "60", "--quiet"])
    assert code == 0, err
    assert "rows written: fabric_counters" in out
    ts = Lake(lake).read("fabric_counters")["ts"]
    margin = timedelta(seconds=PrometheusSettings().around_margin_s)
    assert ts.min() >= start - margin and ts.max() <= start + timedelta(seconds=21) + margin
    assert ts.n_unique() == 2  # the 5-minute scrapes inside the window, not three hours


def test_too_large_a_pull_is_refused_before_any_row(history: History, tmp_path: Path) -> None:
    with pytest.raises(PullError, match=r"more than the limit of 1,000 \(\[prometheus\] "
                                        r"max_points\): narrow --since/--until, raise --step"):
        _pull(history, tmp_path / "lake", settings=replace(PrometheusSettings(),
                                                            max_points=1000))
    assert not (tmp_path / "lake").exists()


def test_cli_bad_range_is_one_line(history: History, tmp_path: Path, run_cli: CliRun) -> None:
    code, _, err = run_cli(["pull", "prometheus", history.prometheus.url, "--lake",
                            str(tmp_path / "lake"), "--since", T_END.isoformat(), "--until",
                            T0.isoformat()])
    assert code == 2
    assert err.strip().splitlines() == [
        f"ckptwatch pull: error: --until ({T0.isoformat()}) must be after --since "
        f"({T_END.isoformat()})"]
    code, _, err = run_cli(["pull", "prometheus", history.prometheus.url, "--since",
                            T0.isoformat()])
    assert code == 2
    assert err.strip() == ("ckptwatch pull: error: --since needs --until (or use "
                           "--around-checkpoints)")


@pytest.mark.prefect
def test_nightly_flow_pulls_before_it_ingests(prefect_harness: None, history: History,
                                              pulled: Pulled, raw_dir: Path, tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    from ckptwatch.flows.nightly import nightly_flow

    monkeypatch.delenv("CKPTWATCH_CONFIG", raising=False)
    # the last N seconds up to now: far enough back to reach the history's first scrape
    since_s = (datetime.now(UTC) - T0).total_seconds() + 3600
    config = tmp_path / "ckptwatch.toml"
    config.write_text(f'[sinks]\nstdout = false\n[prometheus]\nurl = "{history.prometheus.url}"'
                      f"\nstep_s = 60\nnightly_since_s = {since_s:.0f}\n")
    out = nightly_flow(raw_dir, tmp_path / "lake", config=config, send=False)
    assert list(out["steps_s"])[:2] == ["pull", "ingest"]
    assert out["pulled"] == pulled.report.rows and out["pull_error"] is None
    assert out["ingested"] == 6
    assert _rows(tmp_path / "lake", "nvme_smart").equals(_rows(pulled.lake, "nvme_smart"))
