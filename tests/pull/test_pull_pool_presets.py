"""The pool presets' rules on exporter samples, without a server: the genuine gpfs_exporter
expositions (its collector tests' expected output), and WEKA / VAST series under the names their
exporters' public code gives (no captured scrape exists for them: literal values). Every preset
is checked by the same code as a user's rules."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from ckptwatch.pull.pool_mapping import Sample, map_samples
from ckptwatch.pull.prometheus import strip_port
from ckptwatch.settings import sql_dir
from ckptwatch.settings.pool import preset_rules
from ckptwatch.settings.pool_presets import PRESETS
from ckptwatch.sources.prometheus import iter_samples

GPFS = Path(__file__).resolve().parent.parent / "fixtures" / "real" / "pool_telemetry" / \
    "gpfs_exporter"
TS = datetime(2026, 11, 28, 12, tzinfo=UTC).timestamp()


def _exposition(name: str, host: str) -> list[Sample]:
    """A Go test literal's exposition (leading indentation stripped) as samples of ``host``."""
    text = "\n".join(line.strip() for line in (GPFS / name).read_text().splitlines())
    return [(host, metric, labels, repr(value), TS)
            for _, metric, labels, value, _ in iter_samples(text)]


def _rows(preset: str, samples: list[Sample]) -> dict[tuple[str, str, str], float]:
    mapped = map_samples(samples, preset_rules(preset, sql_dir()), strip_port)
    assert not mapped.skipped, mapped.skipped
    out = {(r["pool"], r["target"], r["metric"]): r["value"] for r in mapped.rows}
    assert len(out) == len(mapped.rows)  # one row per key
    return out


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_every_preset_is_a_valid_mapping(name: str) -> None:
    rules = preset_rules(name, sql_dir())
    assert len(rules) == len(PRESETS[name].rules) > 0
    assert all(r.origin.startswith(f"preset {name} #") for r in rules)


def test_gpfs_exporter_mmpmon() -> None:
    rows = _rows("gpfs_exporter", _exposition("mmpmon_TestMmpmonCollector_expected_exposition"
                                              ".txt", "ib-pitzer-rw02:9303"))
    node = "ib-pitzer-rw02"
    assert rows[("scratch", node, "write_bytes")] == 74839282351
    assert rows[("scratch", node, "write_ops")] == 18874626
    assert rows[("scratch", node, "metadata_ops_total.open")] == 2377656
    assert rows[("scratch", node, "metadata_ops_total.readdir")] == 40971
    assert rows[("scratch", node, "metadata_ops_total")] == 2377656 + 2201576 + 40971 + 544768
    assert rows[("project", node, "metadata_ops_total")] == 513 + 513 + 0 + 169
    assert len(rows) == 2 * 7  # per file system: bytes, writes, 4 operations and their sum


def test_gpfs_exporter_mmlsqos_queue_depth_per_storage_pool() -> None:
    rows = _rows("gpfs_exporter", _exposition(
        "mmlsqos_TestMmlsqosCollector_expected_exposition.txt", "ess01:9303"))
    # pending + queued by QoS, summed over the classes (maintenance, misc, other)
    assert rows == {
        ("mmfs1", "system", "queue_depth"): pytest.approx(
            5.579e-05 + 0 + 1.7781e08 + 0.0055852 + 41.399 + 1.9398e08),
        ("mmfs1", "nvme1", "queue_depth"): pytest.approx(
            0.013449 + 1.0751e-05 + 0.85256 + 7.734906573251e07)}


def test_gpfs_exporter_waiters() -> None:
    rows = _rows("gpfs_exporter", _exposition(
        "waiter_TestWaiterCollector_expected_exposition.txt", "nsd02:9303"))
    assert rows == {("gpfs", "nsd02", "background_active.rebuild"): 1.0,  # 22 waiters
                    ("gpfs", "nsd02", "queue_depth.disk"): 3}  # NSDThread waiters


def test_weka_stats_by_its_public_names() -> None:
    labels = {"cluster": "wekaprod", "host_name": "weka07", "host_role": "backend",
              "node_role": "COMPUTE", "category": "ops", "unit": "microsecs"}
    samples: list[Sample] = [
        ("weka07:8001", "weka_stats", {**labels, "node_id": "NodeId<21>",
                                       "stat": "WRITE_LATENCY"}, "1200", TS),
        ("weka07:8001", "weka_stats", {**labels, "node_id": "NodeId<22>",
                                       "stat": "WRITE_LATENCY"}, "1800", TS),
        ("weka07:8001", "weka_stats", {**labels, "node_id": "NodeId<21>",
                                       "stat": "GETATTR_OPS", "unit": "ops"}, "40", TS),
        ("weka07:8001", "weka_stats", {**labels, "node_id": "NodeId<21>",
                                       "stat": "FILEOPEN_OPS", "unit": "ops"}, "2", TS),
        ("weka07:8001", "weka_stats", {**labels, "node_id": "NodeId<21>",
                                       "stat": "READ_LATENCY"}, "99", TS),  # reads: no rule
    ]
    assert _rows("weka", samples) == {
        ("wekaprod", "weka07", "write_latency_ms"): pytest.approx(1.5),  # mean of the nodes
        ("wekaprod", "weka07", "metadata_ops.getattr"): 40,
        ("wekaprod", "weka07", "metadata_ops.open"): 2,
        ("wekaprod", "weka07", "metadata_ops"): 42}


def test_vast_write_latency_is_the_intervals_sum_over_count() -> None:
    labels = {"cluster": "vast1", "cnode_id": "3", "hostname": "cnode3",
              "proto_name": "ProtoAll"}
    samples: list[Sample] = [
        ("vast-exp:8000", "vast_cnode_metrics_ProtoMetrics_write_latency_sum", labels,
         "450000", TS),
        ("vast-exp:8000", "vast_cnode_metrics_ProtoMetrics_write_latency_count", labels,
         "300", TS),
        ("vast-exp:8000", "vast_cnode_metrics_ProtoMetrics_md_iops", labels, "812", TS),
        ("vast-exp:8000", "vast_cnode_metrics_ProtoMetrics_md_iops",
         {**labels, "proto_name": "NFSCommon"}, "500", TS),  # one protocol: ProtoAll has it
    ]
    assert _rows("vast", samples) == {("vast1", "cnode3", "write_latency_ms"): 1.5,
                                      ("vast1", "cnode3", "metadata_ops"): 812}


def test_a_series_without_a_templates_label_is_named_not_guessed() -> None:
    samples: list[Sample] = [("ai400:32221", "lustre_write_samples_total",
                              {"component": "ost", "target": "scratch_OST1"}, "5", TS),
                             ("ai400:32221", "lustre_write_bytes_total",
                              {"component": "ost"}, "5", TS)]
    mapped = map_samples(samples, preset_rules("lustrefs-exporter", sql_dir()), strip_port)
    assert mapped.rows == []
    assert mapped.skipped == {
        "preset lustrefs-exporter #4 (metric lustre_write_samples_total): label "
        "target='scratch_OST1' does not match extract "
        "'^(?P<fsname>.+)-(?:OST|MDT)[0-9a-fA-F]{4}$'": 1,
        "preset lustrefs-exporter #5 (metric lustre_write_bytes_total): label target='' does "
        "not match extract '^(?P<fsname>.+)-(?:OST|MDT)[0-9a-fA-F]{4}$'": 1}
