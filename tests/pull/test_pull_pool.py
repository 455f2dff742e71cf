"""`ckptwatch pull prometheus` with the pool presets, against a real Prometheus backfilled from
the genuine lustrefs-exporter exposition (a DDN AI400's lctl dump, as the exporter printed it)
and a small series set under DAOS's engine exporter names (values from the DAOS telemetry
guide): the lake's pool_metrics rows are exactly the mapped values, units converted, targets
and pools as the presets say; a second pull adds nothing; unmapped pool names are named; the
interval view reads the pulled counters."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import polars as pl
import pytest
from tests.conftest_prometheus import Prometheus, backfill, start_prometheus_over
from tests.pull.conftest import CliRun
from tests.pull.exposition import Sample, openmetrics

from ckptwatch.lake.query import connect, run_sql
from ckptwatch.lake.store import Lake
from ckptwatch.pull.prometheus import PullReport, pull_prometheus
from ckptwatch.settings import PrometheusSettings, load_settings
from ckptwatch.settings.pool import PoolPrometheusSettings
from ckptwatch.sources.prometheus import iter_samples

REAL = Path(__file__).resolve().parent.parent / "fixtures" / "real" / "pool_telemetry"
LUSTRE_SNAPSHOT = (REAL / "lustrefs_exporter_ddn"
                   / "lustrefs_exporter__tests__valid_fixture_otel@valid.txt.snap")
T0 = datetime(2026, 11, 28, 12, tzinfo=UTC)
T1 = T0 + timedelta(minutes=1)
LUSTRE_HOST, DAOS_HOST = "ai400-oss0", "daos-server-01"
POOL_UUID = "55bc3ca3-6f2b-4bb8-b3c6-1d2a7b4a7a1c"
#: At T1 the MDT's open operations grew by 10, taking 5000 µs more (the interval's mean: 0.5 ms).
OPEN_OPS_DELTA, OPEN_US_DELTA = 10, 5000
#: engine 0's 4MB update latency of targets 0..3 (telemetry guide, `daos_metrics -C`): sum µs,
#: sample_size, max µs — and a 1MB size of tgt_0 (literal), summed over the sizes.
DAOS_UPDATE = {"0": (307839671, 42, 16349826), "1": (76098, 52, 2191), "2": (90024, 62, 2275),
               "3": (70148, 45, 2639)}
DAOS_1MB_TGT0 = (5000, 10, 900)


def lustre_samples() -> list[Sample]:
    """The exporter's exposition (after the snapshot's YAML header) at T0, and at T1 with the
    MDT's open operations grown."""
    text = LUSTRE_SNAPSHOT.read_text().split("---\n", 2)[2]
    out: list[Sample] = []
    for _, name, labels, value, _ in iter_samples(text):
        labels = {**labels, "instance": f"{LUSTRE_HOST}:32221", "job": "lustre"}
        out.append((name, labels, value, T0.timestamp()))
        if labels.get("operation") == "open" and name == "lustre_stats_total":
            value += OPEN_OPS_DELTA
        elif labels.get("operation") == "open" and name == "lustre_stats_time_total":
            value += OPEN_US_DELTA
        out.append((name, labels, value, T1.timestamp()))
    return out


def daos_samples() -> list[Sample]:
    """engine_* series as daos_server's exporter names them (promexp: io/latency/update/<size>/
    tgt_<n> -> engine_io_latency_update_<stat>{rank,size,target}), at T0 and T1."""
    base = {"instance": f"{DAOS_HOST}:9191", "job": "daos", "rank": "0"}
    rows: list[tuple[str, dict[str, str], float]] = []
    sizes = [(tgt, "4MB", v) for tgt, v in DAOS_UPDATE.items()] + [("0", "1MB", DAOS_1MB_TGT0)]
    for tgt, size, (total, samples, peak) in sizes:
        labels = {**base, "size": size, "target": tgt}
        rows += [("engine_io_latency_update_sum", labels, total),
                 ("engine_io_latency_update_samples", labels, samples),
                 ("engine_io_latency_update_max", labels, peak)]
    # the stuck xstream 3 of the guide's sched block: cycle_duration ms, cycle_size ULTs
    rows += [("engine_sched_cycle_duration", {**base, "xstream": "3"}, 87624970),
             ("engine_sched_cycle_size", {**base, "xstream": "3"}, 72508),
             ("engine_pool_ops_cont_open", {**base, "pool": POOL_UUID}, 7),
             ("engine_pool_ops_pool_connect", {**base, "pool": POOL_UUID}, 3),
             ("engine_nvme_temp_current", {**base, "device": "0000:81:00.0"}, 310)]
    return [(n, labels, v, t.timestamp()) for n, labels, v in rows for t in (T0, T1)]


@dataclass(frozen=True)
class Pulled:
    prometheus: Prometheus
    lake: Path
    report: PullReport
    rows: pl.DataFrame


PRESETS = PoolPrometheusSettings(presets=("lustrefs-exporter", "daos"))


def _pull(url: str, lake: Path, pool: PoolPrometheusSettings = PRESETS) -> PullReport:
    return pull_prometheus(url, lake, PrometheusSettings(), since=T0 - timedelta(minutes=5),
                           until=T1 + timedelta(minutes=5), step_s=15, pool=pool)


@pytest.fixture(scope="module")
def pulled(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Pulled]:
    root = tmp_path_factory.mktemp("pool-prometheus")
    backfill(openmetrics([*lustre_samples(), *daos_samples()]), root / "tsdb")
    with start_prometheus_over(root, root / "tsdb") as server:
        lake = root / "lake"
        report = _pull(server.url, lake)
        rows = Lake(lake).read("pool_metrics").select("ts", "pool", "target", "metric", "value")
        yield Pulled(server, lake, report, rows)


def _at(rows: pl.DataFrame, ts: datetime, target: str) -> dict[str, float]:
    part = rows.filter((pl.col("ts") == ts) & (pl.col("target") == target))
    return dict(zip(part["metric"], part["value"], strict=True))


def test_lustre_mdt_rows_are_the_exporters_values(pulled: Pulled) -> None:
    mdt = pulled.rows.filter(pl.col("target") == "ai400-MDT0000")
    assert set(mdt["pool"]) == {"ai400"}  # the fsname, from the target's name
    got = _at(pulled.rows, T0, "ai400-MDT0000")
    # md_stats open: 3 samples [usecs] 686 16407 18634 (valid.txt), as the exporter printed it
    assert got["metadata_ops_total.open"] == 3
    assert got["metadata_latency_us_total.open"] == 18634
    assert got["metadata_latency_peak_ms.open"] == pytest.approx(16.407)
    assert got["metadata_ops_total.statfs"] == 44863
    # the unqualified names: sums over the six operations, the largest peak
    assert got["metadata_ops_total"] == 3 + 3 + 3 + 23 + 2 + 44863
    assert got["metadata_latency_us_total"] == 399 + 629 + 47 + 18582 + 18634 + 323074
    assert got["metadata_latency_peak_ms"] == pytest.approx(16.407)
    assert got["free_blocks_pct"] == pytest.approx(108469468 / 110635320 * 100)
    assert len(got) == 6 * 3 + 3 + 1
    later = _at(pulled.rows, T1, "ai400-MDT0000")
    assert later["metadata_ops_total.open"] == 3 + OPEN_OPS_DELTA
    assert later["metadata_latency_us_total"] == got["metadata_latency_us_total"] + OPEN_US_DELTA


def test_lustre_ost_rows(pulled: Pulled) -> None:
    ost = _at(pulled.rows, T0, "ai400-OST0000")
    assert ost["write_ops"] == 25001
    assert ost["write_bytes"] == 104857600000
    # brw_stats "disk I/Os in flight", write column: the I/Os, and Σ depth x I/Os
    in_flight = {1: 17751, 2: 17886, 3: 5335, 4: 5296, 5: 1722, 6: 1665, 7: 128, 8: 121,
                 9: 30, 10: 31, 11: 12, 12: 11, 13: 7, 14: 7, 15: 1, 16: 1}
    assert ost["queue_requests_total.disk"] == sum(in_flight.values())
    assert ost["queue_depth_total.disk"] == sum(d * n for d, n in in_flight.items())
    assert ost["free_blocks_pct"] == pytest.approx(3835411664 / 3978095168 * 100)
    assert set(_at(pulled.rows, T0, "ai400-OST0001")) == {"free_blocks_pct"}


def test_daos_rows_per_target_summed_over_sizes(pulled: Pulled) -> None:
    tgt0 = _at(pulled.rows, T0, f"{DAOS_HOST}/rank0/tgt_0")
    total, samples, peak = DAOS_UPDATE["0"]
    assert tgt0 == {"write_latency_us_total": total + DAOS_1MB_TGT0[0],
                    "write_ops": samples + DAOS_1MB_TGT0[1],
                    "write_latency_peak_ms": pytest.approx(peak / 1000)}
    tgt8 = _at(pulled.rows, T0, f"{DAOS_HOST}/rank0/tgt_3")
    assert tgt8["write_latency_us_total"] == 70148 and tgt8["write_ops"] == 45
    xs3 = _at(pulled.rows, T0, f"{DAOS_HOST}/rank0/xs_3")
    assert xs3 == {"queue_wait_ms": 87624970, "queue_depth": 72508}
    svc = pulled.rows.filter((pl.col("ts") == T0) & (pl.col("target") == f"{DAOS_HOST}/rank0"))
    assert set(svc["pool"]) == {POOL_UUID}
    assert dict(zip(svc["metric"], svc["value"], strict=True)) == {
        "metadata_ops_total.cont_open": 7, "metadata_ops_total.pool_connect": 3,
        "metadata_ops_total": 10}
    daos = pulled.rows.filter(pl.col("target").str.contains("/tgt_|/xs_"))
    assert set(daos["pool"]) == {"daos"}


def test_every_row_once_per_scrape(pulled: Pulled) -> None:
    assert set(pulled.rows["ts"]) == {T0, T1}
    assert pulled.rows.height == 2 * pulled.rows.filter(pl.col("ts") == T0).height
    assert not pulled.rows.select("ts", "pool", "target", "metric").is_duplicated().any()
    assert pulled.report.rows == {"pool_metrics": pulled.rows.height}
    assert pulled.report.pool_hosts == 2 and pulled.report.series == 0


def test_unmapped_pool_names_are_named(pulled: Pulled) -> None:
    unmapped = next(n for n in pulled.report.notes if "no [pool.prometheus] rule maps" in n)
    assert "engine_nvme_temp_current (1)" in unmapped
    assert "lustre_health_healthy (1)" in unmapped
    unmatched = next(n for n in pulled.report.notes if "no rule's match selects" in n)
    assert "lustre_disk_io (16 series)" in unmatched  # the read column


def test_second_pull_adds_nothing(pulled: Pulled, run_cli: CliRun, tmp_path: Path) -> None:
    manifest = Lake(pulled.lake).manifest_keys()
    config = tmp_path / "ckptwatch.toml"
    config.write_text('[pool.prometheus]\npreset = ["lustrefs-exporter", "daos"]\n')
    code, out, err = run_cli([
        "pull", "prometheus", pulled.prometheus.url, "--lake", str(pulled.lake), "--config",
        str(config), "--since", (T0 - timedelta(minutes=5)).isoformat(), "--until",
        (T1 + timedelta(minutes=5)).isoformat(), "--step", "15", "--quiet"])
    assert code == 0, err
    assert f"pool series: {pulled.report.pool_series:,} from 2 instance(s)" in out
    assert f"rows written: none ({pulled.rows.height:,} already in the lake)" in out
    assert Lake(pulled.lake).manifest_keys() == manifest


def test_without_a_preset_nothing_is_pulled_and_the_names_say_which(pulled: Pulled,
                                                                   tmp_path: Path) -> None:
    report = _pull(pulled.prometheus.url, tmp_path / "lake", PoolPrometheusSettings())
    assert report.rows == {} and report.pool_series == 0
    note = next(n for n in report.notes if "no [pool.prometheus] rule maps" in n)
    assert "(preset 'lustrefs-exporter' / 'daos' maps some" in note


def test_interval_view_reads_the_pulled_counters(pulled: Pulled) -> None:
    con = connect(pulled.lake, views=("int_pool_interval_means",))
    try:
        means = run_sql(con, """
            select value from int_pool_interval_means
            where target = 'ai400-MDT0000' and signal = 'metadata_latency_ms'
                and qualifier = 'open' and source = 'counters' and ts = ?
        """, [T1])
    finally:
        con.close()
    assert means["value"].to_list() == [pytest.approx(OPEN_US_DELTA / OPEN_OPS_DELTA / 1000)]


# -- the mapping in ckptwatch.toml ------------------------------------------------------------


def test_a_rule_beside_a_preset_replaces_its_rules_for_that_metric(tmp_path: Path) -> None:
    config = tmp_path / "ckptwatch.toml"
    config.write_text('[pool.prometheus]\npreset = "lustrefs-exporter"\n'
                      '[[pool.prometheus.rules]]\nmetric = "lustre_write_bytes_total"\n'
                      'signal = "write_bytes"\ntarget = "{target}"\npool = "lustre"\n')
    mapping = load_settings(config, environ={}).pool.prometheus
    from ckptwatch.settings import sql_dir

    rules = mapping.effective_rules(sql_dir())
    mine = [r for r in rules if r.metric == "lustre_write_bytes_total"]
    assert [r.pool for r in mine] == ["lustre"]
    assert mine[0].origin == f"{config} [[pool.prometheus.rules]] #1 (metric " \
                             "lustre_write_bytes_total)"
    assert len(rules) == 8  # the preset's 8, its write_bytes rule replaced by this one


@pytest.mark.parametrize(("toml", "problem"), [
    ('preset = "lustre"', "[pool.prometheus] preset 'lustre' is not a shipped preset (known: "
                          "lustrefs-exporter, daos, gpfs_exporter, weka, vast)"),
    ('rules = [{metric = "m", signal = "write_latency", target = "{t}", pool = "p"}]',
     "[[pool.prometheus.rules]] #1 (metric m): signal 'write_latency': 'write_latency' is not "
     "in the pool vocabulary"),
    ('rules = [{metric = "m", signal = "write_ops", target = "{t}"}]',
     "#1 (metric m): pool is missing (a rule needs metric, signal, target and pool)"),
    ('rules = [{metric = "m", signal = "write_ops", kind = "gauge", target = "t", pool = "p"}]',
     "#1 (metric m): kind 'gauge', but write_ops is a counter in the pool vocabulary"),
    ('rules = [{metric = "m", signal = "queue_depth", target = "{t:>3}", pool = "p"}]',
     "#1 (metric m): target '{t:>3}': {t:>3} is not a {label} field"),
    ('rules = [{metric = "m", signal = "queue_depth", target = "t", pool = "p", '
     'match = {a = "~("}}]', "#1 (metric m): match: a = '~(' is not a regular expression"),
    ('rules = [{metric = "m", signal = "queue_depth", target = "t", pool = "p", scale = 0}]',
     "#1 (metric m): scale must be a finite non-zero number (got 0)"),
    ('rules = [{metric = "m", signal = "write_ops", target = "t", pool = "p", '
     'aggregate = true}]', "#1 (metric m): aggregate writes the unqualified name"),
    ('rules = [{metric = "m", signal = "write_ops", target = "t", pool = "p", unit = "us"}]',
     "#1 (metric m): unknown key 'unit'"),
])
def test_bad_mapping_is_one_line_naming_the_file_and_the_rule(
        toml: str, problem: str, tmp_path: Path, run_cli: CliRun) -> None:
    config = tmp_path / "ckptwatch.toml"
    config.write_text(f"[pool.prometheus]\n{toml}\n")
    code, out, err = run_cli(["pull", "prometheus", "http://127.0.0.1:9", "--lake",
                              str(tmp_path / "lake"), "--config", str(config), "--since",
                              T0.isoformat(), "--until", T1.isoformat()])
    assert code == 2 and out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"ckptwatch pull: error: {config}")
    assert problem in lines[0]
