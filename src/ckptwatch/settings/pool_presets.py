"""The shipped ``[pool.prometheus]`` presets: the rules (``ckptwatch.settings.pool``) that map a
pool exporter's series to the pool vocabulary, chosen by name (``preset = "daos"``).

Each preset is written exactly as rules in ``ckptwatch.toml`` would be, and checked by the same
code. What each is built from:

* ``lustrefs-exporter`` (whamcloud/lustrefs-exporter): its real exposition of a DDN AI400's
  ``lctl`` dump (tests/fixtures/real/pool_telemetry/lustrefs_exporter_ddn/, the ``.snap``).
* ``daos`` (the ``engine_*`` series of ``daos_server``'s exporter): the names its exporter
  builds from the telemetry paths (daos-stack/daos ``src/control/lib/telemetry/promexp``:
  ``io/latency/update/<size>/tgt_<n>`` -> ``engine_io_latency_update_{sum,samples,max}``
  ``{rank,size,target}``); values read in the tests are the telemetry guide's, under those names.
* ``gpfs_exporter`` (treydock/gpfs_exporter): its expected expositions (collector tests).
* ``weka`` (weka/export's ``weka_stats{category,stat,...}``) and ``vast`` (vast-data/
  vast-exporter's ``vast_cnode_metrics_*``): from their public code and docs only, no captured
  scrape; the units are the documented ones (WEKA latency in µs; VAST's latency histograms
  are taken to be in µs).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Preset:
    """A preset: the metric names it knows (``family``, a regex: series of such a name that no
    rule maps are named as unmapped) and its rules."""

    name: str
    family: str
    about: str
    rules: tuple[dict[str, Any], ...]


#: A Lustre target name: ``<fsname>-OSTnnnn`` / ``<fsname>-MDTnnnn`` (the pool is the fsname).
_LUSTRE_TARGET = {"target": r"^(?P<fsname>.+)-(?:OST|MDT)[0-9a-fA-F]{4}$"}
_LUSTRE = {"target": "{target}", "pool": "{fsname}", "extract": _LUSTRE_TARGET}

LUSTREFS_EXPORTER = Preset(
    "lustrefs-exporter", r"lustre_.+",
    "whamcloud/lustrefs-exporter: MDT operation counts and latency sums (µs) per operation, "
    "OST writes and bytes, brw_stats disk I/Os in flight, free space",
    (
        {"metric": "lustre_stats_total", "match": {"component": "mdt"},
         "signal": "metadata_ops_total.{operation}", "aggregate": True, **_LUSTRE},
        # typed gauge by the exporter, but the md_stats sum: cumulative since the clear
        {"metric": "lustre_stats_time_total", "match": {"component": "mdt"},
         "signal": "metadata_latency_us_total.{operation}", "aggregate": True, **_LUSTRE},
        {"metric": "lustre_stats_time_max", "match": {"component": "mdt"},
         "signal": "metadata_latency_peak_ms.{operation}", "scale": 0.001, "aggregate": True,
         **_LUSTRE},
        {"metric": "lustre_write_samples_total", "match": {"component": "ost"},
         "signal": "write_ops", **_LUSTRE},
        {"metric": "lustre_write_bytes_total", "match": {"component": "ost"},
         "signal": "write_bytes", **_LUSTRE},
        # brw_stats "disk I/Os in flight": I/Os per depth found on arrival (size = the depth)
        {"metric": "lustre_disk_io", "match": {"operation": "write"},
         "signal": "queue_requests_total.disk", **_LUSTRE},
        {"metric": "lustre_disk_io", "match": {"operation": "write"}, "weight": "size",
         "signal": "queue_depth_total.disk", **_LUSTRE},
        {"metric": "lustre_available_kilobytes", "divide_by": "lustre_capacity_kilobytes",
         "scale": 100.0, "signal": "free_blocks_pct", **_LUSTRE},
    ),
)

_DAOS_TARGET = "{node}/rank{rank}/tgt_{target}"
DAOS = Preset(
    "daos", r"engine_.+",
    "DAOS engine telemetry (daos_server's exporter): write latency sums and counts per target "
    "(summed over I/O sizes), scheduler cycle per xstream, RPCs in flight, pool writes and "
    "pool/container operations",
    (
        # stats gauges: _sum and _samples are cumulative since the engine started
        {"metric": "engine_io_latency_update_sum", "kind": "counter",
         "signal": "write_latency_us_total", "target": _DAOS_TARGET, "pool": "daos"},
        {"metric": "engine_io_latency_update_samples", "signal": "write_ops",
         "target": _DAOS_TARGET, "pool": "daos"},
        {"metric": "engine_io_latency_update_max", "signal": "write_latency_peak_ms",
         "scale": 0.001, "target": _DAOS_TARGET, "pool": "daos"},
        {"metric": "engine_sched_cycle_duration", "signal": "queue_wait_ms",
         "target": "{node}/rank{rank}/xs_{xstream}", "pool": "daos"},
        {"metric": "engine_sched_cycle_size", "signal": "queue_depth",
         "target": "{node}/rank{rank}/xs_{xstream}", "pool": "daos"},
        {"metric": "engine_net_hg_active_rpcs", "signal": "active_requests",
         "target": "{node}/rank{rank}", "pool": "daos"},
        {"metric": "engine_pool_ops_update", "signal": "write_ops", "target": _DAOS_TARGET,
         "pool": "{pool}"},
        {"metric": "engine_pool_xferred_update", "signal": "write_bytes",
         "target": _DAOS_TARGET, "pool": "{pool}"},
        {"metric": r"~engine_pool_ops_(?P<op>(?:pool|cont)_[a-z_]+)",
         "signal": "metadata_ops_total.{op}", "aggregate": True, "target": "{node}/rank{rank}",
         "pool": "{pool}"},
    ),
)

_GPFS_NODE = {"target": "{node}", "pool": "{fs}"}
GPFS_EXPORTER = Preset(
    "gpfs_exporter", r"gpfs_.+",
    "treydock/gpfs_exporter: mmpmon bytes and operations per file system, mmlsqos pending and "
    "queued requests per storage pool, mmdiag waiters (rebuild; NSD I/O)",
    (
        {"metric": "gpfs_perf_write_bytes_total", "signal": "write_bytes", **_GPFS_NODE},
        {"metric": "gpfs_perf_operations_total", "match": {"operation": "writes"},
         "signal": "write_ops", **_GPFS_NODE},
        {"metric": "gpfs_perf_operations_total", "match": {"operation": "opens"},
         "signal": "metadata_ops_total.open", "aggregate": True, **_GPFS_NODE},
        {"metric": "gpfs_perf_operations_total", "match": {"operation": "closes"},
         "signal": "metadata_ops_total.close", "aggregate": True, **_GPFS_NODE},
        {"metric": "gpfs_perf_operations_total", "match": {"operation": "read_dir"},
         "signal": "metadata_ops_total.readdir", "aggregate": True, **_GPFS_NODE},
        {"metric": "gpfs_perf_operations_total", "match": {"operation": "inode_updates"},
         "signal": "metadata_ops_total.inode_update", "aggregate": True, **_GPFS_NODE},
        # queue_depth per storage pool: pending + queued by QoS, summed over the classes
        {"metric": "gpfs_qos_average_pending_requests", "signal": "queue_depth",
         "target": "{pool}", "pool": "{fs}"},
        {"metric": "gpfs_qos_average_queued_requests", "signal": "queue_depth",
         "target": "{pool}", "pool": "{fs}"},
        {"metric": "gpfs_waiter_info_count", "match": {"waiter": "RebuildWorkThread"},
         "signal": "background_active.rebuild", "active": True, "target": "{node}",
         "pool": "gpfs"},
        {"metric": "gpfs_waiter_info_count", "match": {"waiter": "NSDThread"},
         "signal": "queue_depth.disk", "target": "{node}", "pool": "gpfs"},
    ),
)


def _weka_ops(stat: str, op: str) -> dict[str, Any]:
    return {"metric": "weka_stats", "match": {"category": "ops", "stat": stat},
            "signal": f"metadata_ops.{op}", "aggregate": True, "target": "{host_name}",
            "pool": "{cluster}"}


WEKA = Preset(
    "weka", r"weka_.+",
    "WEKA (weka/export, weka_stats{category,stat}): ops WRITE_LATENCY (µs, the minute's mean) "
    "and metadata operation rates per host; from public names only",
    (
        {"metric": "weka_stats", "match": {"category": "ops", "stat": "WRITE_LATENCY"},
         "signal": "write_latency_ms", "scale": 0.001, "target": "{host_name}",
         "pool": "{cluster}"},
        _weka_ops("FILEOPEN_OPS", "open"),
        _weka_ops("FILECLOSE_OPS", "close"),
        _weka_ops("GETATTR_OPS", "getattr"),
        _weka_ops("CREATE_OPS", "create"),
        _weka_ops("UNLINK_OPS", "unlink"),
        _weka_ops("MKDIR_OPS", "mkdir"),
        _weka_ops("RENAME_OPS", "rename"),
        _weka_ops("READDIR_OPS", "readdir"),
    ),
)

VAST = Preset(
    "vast", r"vast_.+",
    "VAST (vast-data/vast-exporter): per CNode write latency (the interval's sum / count, µs) "
    "and metadata IOPS over all protocols; from public names only",
    (
        {"metric": "vast_cnode_metrics_ProtoMetrics_write_latency_sum",
         "match": {"proto_name": "ProtoAll"},
         "divide_by": "vast_cnode_metrics_ProtoMetrics_write_latency_count",
         "signal": "write_latency_ms", "scale": 0.001, "target": "{hostname}",
         "pool": "{cluster}"},
        {"metric": "vast_cnode_metrics_ProtoMetrics_md_iops",
         "match": {"proto_name": "ProtoAll"}, "signal": "metadata_ops",
         "target": "{hostname}", "pool": "{cluster}"},
    ),
)

#: The presets by name.
PRESETS: dict[str, Preset] = {p.name: p for p in (LUSTREFS_EXPORTER, DAOS, GPFS_EXPORTER,
                                                  WEKA, VAST)}
