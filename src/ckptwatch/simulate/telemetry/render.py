"""Tool outputs of the ``world`` format mix that ``ckptwatch.sources`` has no renderer for.

Each function prints what the real tool prints for given counter values, laid out as the genuine
samples in ``tests/fixtures/real/`` are (key order, spacing, units), so a parser reads back the
values it was given:

- ``render_nvme_smart_log_json``: ``nvme smart-log /dev/nvme0 -o json`` (nvme-cli 2.x; the
  composite temperature in Kelvin), from the smartctl health-log keys the simulator keeps;
- ``render_ocp_smart_text``: ``nvme ocp smart-add-log /dev/nvme0`` text ("SMART Cloud
  Attributes", 128-bit counters as ``hi lo``), from the same values as ``render_ocp_smart_json``;
- ``render_sysfs_ib_text``: ``grep -H . /sys/class/infiniband/*/ports/*/counters/* …`` for one
  or more HCAs;
- ``render_node_exporter``: a node_exporter ``/metrics`` scrape (``--collector.infiniband`` or
  ``--collector.ethtool``) with the usual HELP/TYPE lines and a few families ckptwatch does not
  read, as a real scrape carries them.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

import numpy as np

KELVIN = 273

#: smartctl health-log key -> nvme-cli smart-log JSON key (same value, same unit).
_NVME_CLI_KEYS = (
    ("critical_warning", "critical_warning"), ("available_spare", "avail_spare"),
    ("available_spare_threshold", "spare_thresh"), ("percentage_used", "percent_used"),
    (None, "endurance_grp_critical_warning_summary"),
    ("data_units_read", "data_units_read"), ("data_units_written", "data_units_written"),
    ("host_reads", "host_read_commands"), ("host_writes", "host_write_commands"),
    ("controller_busy_time", "controller_busy_time"), ("power_cycles", "power_cycles"),
    ("power_on_hours", "power_on_hours"), ("unsafe_shutdowns", "unsafe_shutdowns"),
    ("media_errors", "media_errors"), ("num_err_log_entries", "num_err_log_entries"),
    (None, "warning_temp_time"), (None, "critical_comp_time"),
)


def render_nvme_smart_log_json(health: Mapping[str, int]) -> dict[str, int]:
    """``nvme smart-log -o json`` from smartctl health-log values (``temperature`` in degC).

    Keys in nvme-cli 2.x order; the temperatures print in Kelvin (``degC + 273``, as nvme-cli
    does), fields the simulator does not model as 0.
    """
    kelvin = int(health["temperature"]) + KELVIN
    doc: dict[str, int] = {"critical_warning": int(health.get("critical_warning", 0)),
                           "temperature": kelvin}
    for src, key in _NVME_CLI_KEYS[1:]:
        doc[key] = int(health.get(src, 0)) if src else 0
    doc["temperature_sensor_1"] = kelvin
    for k in ("thm_temp1_trans_count", "thm_temp2_trans_count", "thm_temp1_total_time",
              "thm_temp2_total_time"):
        doc[k] = 0
    return doc


def render_ocp_smart_text(o: Mapping[str, int]) -> str:
    """``nvme ocp smart-add-log /dev/nvme0`` text from ``render_ocp_smart_json``'s values.

    Layout of the genuine sample (CacheLib's NandWrites fixture): two-space indent, tabs before
    the values, 128-bit media units as ``hi lo``, the throttling status in hex.
    """
    rows = [
        ("Bad user nand blocks - Raw", "\t\t\t", 0),
        ("Bad user nand blocks - Normalized", "\t\t", 100),
        ("Bad system nand blocks - Raw", "\t\t\t", 0),
        ("Bad system nand blocks - Normalized", "\t\t", 100),
        ("XOR recovery count", "\t\t\t\t", 0), ("Uncorrectable read error count", "\t\t", 0),
        ("Soft ecc error count", "\t\t\t\t", o["soft_ecc"]),
        ("End to end corrected errors", "\t\t\t", 0), ("End to end detected errors", "\t\t\t", 0),
        ("System data percent used", "\t\t\t", o["system_used"]),
        ("Refresh counts", "\t\t\t\t", o["refresh"]),
        ("Max User data erase counts", "\t\t\t", o["erase_max"]),
        ("Min User data erase counts", "\t\t\t", o["erase_min"]),
        ("Number of Thermal throttling events", "\t\t", 0),
    ]
    tail = [
        ("PCIe correctable error count", "\t\t\t", 0), ("Incomplete shutdowns", "\t\t\t\t", 0),
        ("Percent free blocks", "\t\t\t\t", o["free_blocks"]),
        ("Capacitor health", "\t\t\t\t", 100),
        ("Unaligned I/O", "\t\t\t\t\t", 0), ("Security Version Number", "\t\t\t", 1),
        ("NUSE - Namespace utilization", "\t\t\t", o["nuse"]),
        ("PLP start count", "\t\t\t\t", o["plp"]),
        ("Endurance estimate", "\t\t\t\t", o["endurance"]),
        ("Log page version", "\t\t\t\t", 3),
    ]
    out = ["", "  SMART Cloud Attributes :- ",
           f"  Physical media units written -   \t        0 {int(o['media_written'])}",
           f"  Physical media units read    - \t        0 {int(o['media_read'])}"]
    out += [f"  {label}{tabs}{int(value)}" for label, tabs, value in rows]
    out.append("  Current throttling status\t\t  \t0x0")
    out += [f"  {label}{tabs}{int(value)}" for label, tabs, value in tail]
    out += ["  Log page GUID\t\t\t\t\t0xafd514c97c6f4f9ca4f2bfea2810afc5",
            "  Errata Version Field                          0",
            "  Point Version Field                           0",
            "  Minor Version Field                           0",
            "  Major Version Field                           2",
            "  NVMe Errata Version\t\t\t\t98",
            "  PCIe Link Retraining Count\t\t\t0",
            f"  Power State Change Count\t\t\t{int(o['power_changes'])}", ""]
    return "\n".join(out)


#: Error counters an IB port's ``counters/`` directory holds besides the data counters (0 here).
SYSFS_ERROR_COUNTERS = (
    "VL15_dropped", "excessive_buffer_overrun_errors", "link_downed", "link_error_recovery",
    "local_link_integrity_errors", "port_rcv_constraint_errors", "port_rcv_errors",
    "port_rcv_remote_physical_errors", "port_rcv_switch_relay_errors",
    "port_xmit_constraint_errors", "port_xmit_discards", "symbol_error",
)
#: mlx5 ``hw_counters/`` files (0 here: no RDMA errors in the simulated fabric).
SYSFS_HW_COUNTERS = ("duplicate_request", "implied_nak_seq_err", "local_ack_timeout_err",
                     "out_of_buffer", "out_of_sequence", "packet_seq_err", "rnr_nak_retry_err")


def render_sysfs_ib_text(ports: Sequence[tuple[str, str, Mapping[str, int]]]) -> str:
    """``grep -H . /sys/class/infiniband/*/ports/*/counters/* …/hw_counters/*`` text.

    ``ports``: (hca, port, counters by sysfs name) per port; the named counters and the zero
    error counters print under ``counters/`` in ``ls`` order (grep walks the glob sorted), then
    the ``hw_counters/``.
    """
    lines: list[str] = []
    for hca, port, counters in ports:
        base = f"/sys/class/infiniband/{hca}/ports/{port}"
        values = {name: 0 for name in SYSFS_ERROR_COUNTERS}
        values.update({k: int(v) for k, v in counters.items()})
        lines += [f"{base}/counters/{name}:{values[name]}" for name in sorted(values)]
        lines += [f"{base}/hw_counters/{name}:0" for name in SYSFS_HW_COUNTERS]
    return "\n".join(lines) + "\n"


def go_float(value: float) -> str:
    """A sample value as Prometheus' Go client prints it (``strconv`` 'g', shortest digits):
    exponent form when the decimal exponent is below -4 or at least 6 (``1.416692e+06``),
    else positional (``27478``, ``3.91``)."""
    v = float(value)
    if v == 0:
        return "0"
    sci = str(np.format_float_scientific(v, unique=True, trim="-", exp_digits=2))
    if -4 <= int(sci.rsplit("e", 1)[1]) < 6:
        return str(np.format_float_positional(v, unique=True, trim="-"))
    return sci


#: node_exporter infiniband family (without ``node_infiniband_`` and ``_total``) -> (sysfs
#: counter, multiplier, help text), in node_exporter's (alphabetical) order.
_NODE_IB = (
    ("link_downed", "link_downed", 1,
     "Number of times the link failed to recover from an error state and went down"),
    ("link_error_recovery", "link_error_recovery", 1,
     "Number of times the link successfully recovered from an error state"),
    ("multicast_packets_received", "multicast_rcv_packets", 1,
     "Number of multicast packets received (including errors)"),
    ("multicast_packets_transmitted", "multicast_xmit_packets", 1,
     "Number of multicast packets transmitted (including errors)"),
    ("port_constraint_errors_received", "port_rcv_constraint_errors", 1,
     "Number of packets received on the switch physical port that are discarded"),
    ("port_constraint_errors_transmitted", "port_xmit_constraint_errors", 1,
     "Number of packets not transmitted from the switch physical port"),
    ("port_data_received_bytes", "port_rcv_data", 4,
     "Number of data octets received on all links"),
    ("port_data_transmitted_bytes", "port_xmit_data", 4,
     "Number of data octets transmitted on all links"),
    ("port_discards_received", "port_rcv_discards", 1,
     "Number of inbound packets discarded by the port because the port is down or congested"),
    ("port_discards_transmitted", "port_xmit_discards", 1,
     "Number of outbound packets discarded by the port because the port is down or congested"),
    ("port_errors_received", "port_rcv_errors", 1,
     "Number of packets containing an error that were received on this port"),
    ("port_packets_received", "port_rcv_packets", 1,
     "Number of packets received on all VLs by this port (including errors)"),
    ("port_packets_transmitted", "port_xmit_packets", 1,
     "Number of packets transmitted on all VLs from this port (including errors)"),
    ("port_receive_remote_physical_errors", "port_rcv_remote_physical_errors", 1,
     "Number of packets marked with the EBP delimiter received on the port"),
    ("port_receive_switch_relay_errors", "port_rcv_switch_relay_errors", 1,
     "Number of packets that could not be forwarded by the switch"),
    ("port_transmit_wait", "port_xmit_wait", 1,
     "Number of ticks during which the port had data to transmit but no data was sent during "
     "the entire tick"),
    ("symbol_error", "symbol_error", 1, "Number of minor link errors detected on one or "
     "more physical lanes"),
    ("unicast_packets_received", "unicast_rcv_packets", 1,
     "Number of unicast packets received (including errors)"),
    ("unicast_packets_transmitted", "unicast_xmit_packets", 1,
     "Number of unicast packets transmitted (including errors)"),
    ("vl15_dropped", "VL15_dropped", 1, "Number of incoming VL15 packets dropped"),
)
#: Families of a node_exporter scrape that ckptwatch does not read (a scrape is never only the
#: collectors it wants): name, type, help, value.
_NODE_OTHER = (
    ("node_boot_time_seconds", "gauge", "Node boot time, in unixtime.", 1.7641e+09),
    ("node_load1", "gauge", "1m load average.", 3.91),
    ("node_load5", "gauge", "5m load average.", 4.02),
    ("node_memory_MemAvailable_bytes", "gauge", "Memory information field MemAvailable_bytes.",
     1.6351698944e+12),
    ("node_procs_running", "gauge", "Number of processes in runnable state.", 9),
)


def _family(lines: list[str], name: str, kind: str, help_text: str,
            samples: Sequence[tuple[str, float]]) -> None:
    lines.append(f"# HELP {name} {help_text}")
    lines.append(f"# TYPE {name} {kind}")
    lines += [f"{name}{{{labels}}} {go_float(v)}" if labels else f"{name} {go_float(v)}"
              for labels, v in samples]


def ethtool_metric(stat: str) -> str:
    """node_exporter's ethtool metric name of an ``ethtool -S`` statistic
    (``rx_prio3_pause`` -> ``node_ethtool_received_prio3_pause``)."""
    name = re.sub(r"[^a-zA-Z0-9_]", "_", stat).lower().lstrip("_")
    name = re.sub(r"(^|_)rx(_|$)", r"\1received\2", name)
    name = re.sub(r"(^|_)tx(_|$)", r"\1transmitted\2", name)
    return f"node_ethtool_{name}"


def render_node_exporter(*, infiniband: Sequence[tuple[str, str, Mapping[str, int]]] = (),
                         ethtool: Sequence[tuple[str, Mapping[str, int]]] = ()) -> str:
    """A node_exporter scrape: ``node_infiniband_*`` for (hca, port, sysfs counters) and
    ``node_ethtool_*`` for (netdev, ethtool statistics), each family with its HELP and TYPE,
    samples sorted by label as node_exporter prints them, and a few other families."""
    lines: list[str] = []
    for name, kind, help_text, value in _NODE_OTHER[:1]:
        _family(lines, name, kind, help_text, [("", value)])
    if ethtool:
        stats = list(dict.fromkeys(s for _, counters in ethtool for s in counters))
        _family(lines, "node_ethtool_info", "gauge",
                "A metric with a constant '1' value labeled by bus_info, device, driver, "
                "expansion_rom_version, firmware_version, version.",
                [(f'bus_info="0000:{0x17 + i:02x}:00.0",device="{dev}",driver="mlx5_core",'
                  f'expansion_rom_version="",firmware_version="28.39.1002 (MT_0000000838)",'
                  f'version="6.8.0-49-generic"', 1) for i, (dev, _) in enumerate(ethtool)])
        for stat in sorted(stats, key=ethtool_metric):
            _family(lines, ethtool_metric(stat), "untyped", f"Network interface {stat}",
                    [(f'device="{dev}"', counters[stat]) for dev, counters in ethtool
                     if stat in counters])
    if infiniband:
        _family(lines, "node_infiniband_info", "gauge",
                "Non-numeric data from /sys/class/infiniband/<device>, value is always 1.",
                [(f'board_id="MT_0000000838",device="{hca}",firmware_version="28.39.1002",'
                  f'hca_type="MT4129"', 1) for hca in dict.fromkeys(h for h, _, _ in infiniband)])
        for family, counter, scale, help_text in _NODE_IB:
            _family(lines, f"node_infiniband_{family}_total", "counter", help_text,
                    [(f'device="{hca}",port="{port}"', int(counters.get(counter, 0)) * scale)
                     for hca, port, counters in infiniband])
        _family(lines, "node_infiniband_physical_state_id", "gauge",
                "Physical state of the InfiniBand port (0: no change, 1: sleep, 2: polling, "
                "3: disable, 4: shift, 5: link up, 6: link error recover, 7: phytest)",
                [(f'device="{hca}",port="{port}"', 5) for hca, port, _ in infiniband])
        _family(lines, "node_infiniband_rate_bytes_per_second", "gauge",
                "Maximum signal transfer rate",
                [(f'device="{hca}",port="{port}"', 5e10) for hca, port, _ in infiniband])
    for name, kind, help_text, value in _NODE_OTHER[1:]:
        _family(lines, name, kind, help_text, [("", value)])
    return "\n".join(lines) + "\n"


def _dlio_time(epoch_s: float) -> str:
    """DLIO's timestamps: the host's naive local time (UTC here), microseconds."""
    return str(np.datetime_as_string(np.datetime64(int(round(epoch_s * 1e6)), "us"), unit="us"))


def render_dlio_per_epoch_stats(saves: Sequence[tuple[float, float]],
                                checkpoint_gib: float) -> dict[str, object]:
    """A DLIO / MLPerf Storage ``<rank>_per_epoch_stats.json`` of one rank's checkpoint saves.

    ``saves``: (start, end) epoch seconds per save, in order; ``checkpoint_gib``: the whole
    checkpoint's size (DLIO's ``throughput`` is that over the rank's save duration, as in the
    MLPerf Storage v3.0 samples). Layout of the samples: one epoch ``"1"`` holding
    ``save_ckpt<N>`` entries (start, end, duration, throughput).
    """
    epoch: dict[str, object] = {"start": _dlio_time(saves[0][0] - 5.0) if saves else ""}
    for n, (start, end) in enumerate(saves, start=1):
        duration = end - start
        epoch[f"save_ckpt{n}"] = {"start": _dlio_time(start), "end": _dlio_time(end),
                                  "duration": round(duration, 6),
                                  "throughput": checkpoint_gib / duration if duration > 0 else 0}
    if saves:
        epoch["end"] = _dlio_time(saves[-1][1] + 1.0)
    return {"1": epoch}


def render_dlio_summary(start: float, n_ranks: int, n_hosts: int, hostname: str,
                        checkpoint_gib: float) -> dict[str, object]:
    """The run's ``summary.json`` (the keys ckptwatch reads, ``num_accelerators`` for the
    bytes per rank, and the save metrics MLPerf reports)."""
    return {"start": _dlio_time(start), "num_accelerators": n_ranks, "num_hosts": n_hosts,
            "hostname": hostname,
            "metric": {"checkpoint_size_GB": checkpoint_gib * 2**30 / 1e9},
            "num_files_train": n_ranks, "num_files_eval": 0}
