"""Prometheus text exposition (a scrape saved to a file) -> the same canonical rows.

Families read:

* ``node_infiniband_*`` (node_exporter ``--collector.infiniband``) -> ``fabric_counters`` with
  the sysfs counter names. node_exporter already multiplies ``port_*_data`` by 4; those samples
  become ``port_xmit_bytes`` / ``port_rcv_bytes`` and the word counts are restored alongside.
  node_exporter's ``legacy_*`` series are read from ``counters_ext`` (the 64-bit files) and win
  over the plain series of the same counter, as in ``sysfs_ib``. Gauges (state, rate, info) are
  not counters and are skipped.
* ``node_ethtool_*`` (``--collector.ethtool``) -> ``fabric_counters``: node_exporter's renaming
  (``rx``/``tx`` -> ``received``/``transmitted``, ``.`` -> ``_``, lower case, a few ``_total``)
  is undone to recover the driver name, then the ethtool aliases apply.
* ``smartctl_device_*`` (prometheus-community/smartctl_exporter) -> ``nvme_smart`` for NVMe
  devices (SATA/SAS devices in the same scrape are skipped), with model/serial/firmware from
  ``smartctl_device``.

Sample timestamps, when present, are used; otherwise the envelope's ``collected_at``.
"""

from __future__ import annotations

import math
import re
from datetime import UTC, datetime
from typing import Any

from ckptwatch.errors import RecordError
from ckptwatch.sources.base import ToolContext, register_tool
from ckptwatch.sources.ethtool import canonical_alias
from ckptwatch.sources.smartctl import nvme_device_name
from ckptwatch.sources.textkv import iter_lines, shorten

SOURCE = "prometheus"

_NAME = r"[a-zA-Z_:][a-zA-Z0-9_:]*"
_SAMPLE = re.compile(
    rf"^(?P<name>{_NAME})\s*(?:\{{(?P<labels>.*)\}})?\s+(?P<value>\S+)(?:\s+(?P<ts>-?\d+))?\s*$"
)
_LABEL = re.compile(r'\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*=\s*"((?:[^"\\]|\\.)*)"\s*(?:,|$)')
_ESCAPES = {"\\\\": "\\", '\\"': '"', "\\n": "\n"}

#: node_exporter infiniband metric (without ``node_infiniband_`` and ``_total``) -> sysfs name.
INFINIBAND_NAMES: dict[str, str] = {
    "port_data_transmitted_bytes": "port_xmit_bytes",
    "port_data_received_bytes": "port_rcv_bytes",
    "port_packets_transmitted": "port_xmit_packets",
    "port_packets_received": "port_rcv_packets",
    "unicast_packets_transmitted": "unicast_xmit_packets",
    "unicast_packets_received": "unicast_rcv_packets",
    "multicast_packets_transmitted": "multicast_xmit_packets",
    "multicast_packets_received": "multicast_rcv_packets",
    "port_transmit_wait": "port_xmit_wait",
    "port_discards_transmitted": "port_xmit_discards",
    "port_discards_received": "port_rcv_discards",
    "port_errors_received": "port_rcv_errors",
    "port_constraint_errors_received": "port_rcv_constraint_errors",
    "port_constraint_errors_transmitted": "port_xmit_constraint_errors",
    "port_receive_remote_physical_errors": "port_rcv_remote_physical_errors",
    "port_receive_switch_relay_errors": "port_rcv_switch_relay_errors",
    "link_downed": "link_downed",
    "link_error_recovery": "link_error_recovery",
    "symbol_error": "symbol_error",
    "excessive_buffer_overrun_errors": "excessive_buffer_overrun_errors",
    "local_link_integrity_errors": "local_link_integrity_errors",
    "vl15_dropped": "VL15_dropped",
}
_IB_BYTES_TO_WORDS = {"port_xmit_bytes": "port_xmit_data", "port_rcv_bytes": "port_rcv_data"}
_IB_NOT_COUNTERS = {"info", "state_id", "physical_state_id", "rate_bytes_per_second"}

#: smartctl_exporter metric (without ``smartctl_device_``) -> (nvme_smart metric, multiplier).
SMARTCTL_EXPORTER_METRICS: dict[str, tuple[str, float]] = {
    "available_spare": ("available_spare_pct", 1),
    "available_spare_threshold": ("available_spare_threshold_pct", 1),
    "bytes_read": ("host_read_bytes", 1),
    "bytes_written": ("host_written_bytes", 1),
    "critical_warning": ("critical_warning", 1),
    "media_errors": ("media_errors", 1),
    "num_err_log_entries": ("num_err_log_entries", 1),
    "percentage_used": ("percent_used_pct", 1),
    "power_cycle_count": ("power_cycles", 1),
    "power_on_seconds": ("power_on_hours", 1 / 3600),
    "smartctl_exit_status": ("smartctl_exit_status", 1),
}


def _unescape(value: str) -> str:
    return re.sub(r'\\[\\"n]', lambda m: _ESCAPES[m.group(0)], value)


def parse_labels(text: str, where: str) -> dict[str, str]:
    """``a="x",b="y"`` -> ``{"a": "x", "b": "y"}``; RecordError on a malformed label set."""
    labels: dict[str, str] = {}
    pos = 0
    text = text.strip()
    while pos < len(text):
        m = _LABEL.match(text, pos)
        if not m:
            raise RecordError(f"{where}: malformed label set near {shorten(text[pos:], 40)!r}")
        labels[m.group(1)] = _unescape(m.group(2))
        pos = m.end()
    return labels


def parse_value(text: str, where: str) -> float:
    """A sample value (Go float syntax, ``NaN``, ``+Inf``)."""
    try:
        return float(text)
    except ValueError:
        raise RecordError(f"{where}: sample value is not a number: {shorten(text, 40)!r}") from None


def iter_samples(text: str) -> list[tuple[int, str, dict[str, str], float, int | None]]:
    """(line, metric name, labels, value, timestamp ms) for every sample line."""
    out: list[tuple[int, str, dict[str, str], float, int | None]] = []
    for i, line in iter_lines(text):
        stripped = line.strip()
        if stripped.startswith("#"):
            continue
        where = f"prometheus exposition line {i}"
        m = _SAMPLE.match(stripped)
        if not m:
            raise RecordError(f"{where}: not a sample 'name{{labels}} value': "
                              f"{shorten(stripped)!r}")
        labels = parse_labels(m.group("labels"), where) if m.group("labels") else {}
        ts = int(m.group("ts")) if m.group("ts") else None
        out.append((i, m.group("name"), labels, parse_value(m.group("value"), where), ts))
    return out


def detect(output: Any) -> bool:
    """Prometheus text exposition: ``# HELP``/``# TYPE`` lines or ``name{labels} value`` samples."""
    if not isinstance(output, str):
        return False
    lines = [line.strip() for _, line in list(iter_lines(output))[:20]]
    if any(line.startswith(("# HELP ", "# TYPE ")) for line in lines):
        return True
    samples = [line for line in lines if not line.startswith("#")]
    return bool(samples) and all(
        (m := _SAMPLE.match(line)) is not None and "{" in line and m.group("labels") is not None
        for line in samples
    )


def ethtool_driver_name(metric: str) -> str:
    """Undo node_exporter's ethtool renaming: ``received_prio3_pause`` -> ``rx_prio3_pause``."""
    base = re.sub(r"_total$", "", metric)
    tokens = ["rx" if t == "received" else "tx" if t == "transmitted" else t
              for t in base.split("_")]
    return "_".join(tokens)


def _when(ctx: ToolContext, ts_ms: int | None, where: str = "sample") -> datetime:
    if ts_ms is None:
        return ctx.ts
    try:
        return datetime.fromtimestamp(ts_ms / 1000, tz=UTC)
    except (OverflowError, OSError, ValueError):
        raise RecordError(f"{where}: sample timestamp {ts_ms} ms is out of range") from None


@register_tool(SOURCE, detect)
def parse_prometheus(output: Any, ctx: ToolContext) -> dict[str, list[dict[str, Any]]]:
    """A saved scrape -> ``fabric_counters`` and ``nvme_smart`` rows."""
    if not isinstance(output, str):
        raise RecordError(f"prometheus exposition is not text (got {type(output).__name__})")
    samples = iter_samples(output)
    fabric: dict[tuple[datetime, str, str, str], float] = {}
    legacy: dict[tuple[datetime, str, str, str], float] = {}
    smart: dict[tuple[datetime, str, str], float] = {}
    devices: dict[str, dict[str, str]] = {}
    for i, name, labels, value, ts_ms in samples:
        where = f"prometheus exposition line {i}"
        if math.isnan(value) or math.isinf(value):
            continue  # no reading: a NaN or Inf counter carries no increment
        when = _when(ctx, ts_ms, where)
        if name.startswith("node_infiniband_"):
            rest = name[len("node_infiniband_"):]
            if rest in _IB_NOT_COUNTERS:
                continue
            target = fabric
            if rest.startswith("legacy_"):
                target, rest = legacy, rest[len("legacy_"):]
                rest = re.sub(r"^(data|packets)_(received|transmitted)", r"port_\1_\2", rest)
            base = re.sub(r"_total$", "", rest)
            counter = INFINIBAND_NAMES.get(base, base)
            device, port = labels.get("device"), labels.get("port", ctx.port or "1")
            if not device:
                raise RecordError(f"{where}: {name} has no device label")
            target[(when, device, port, counter)] = value
        elif name.startswith("node_ethtool_"):
            rest = name[len("node_ethtool_"):]
            if rest == "info":
                continue
            device = labels.get("device")
            if not device:
                raise RecordError(f"{where}: {name} has no device label")
            fabric[(when, device, ctx.port or "1", ethtool_driver_name(rest))] = value
        elif name == "smartctl_device":
            if labels.get("device"):
                devices[nvme_device_name(labels["device"])] = labels
        elif name.startswith("smartctl_device_"):
            rest = name[len("smartctl_device_"):]
            device_label = labels.get("device")
            if not device_label:
                raise RecordError(f"{where}: {name} has no device label")
            device = nvme_device_name(device_label)
            if rest == "temperature":
                if labels.get("temperature_type", "current") == "current":
                    smart[(when, device, "temperature_c")] = value
            elif rest in SMARTCTL_EXPORTER_METRICS:
                metric, scale = SMARTCTL_EXPORTER_METRICS[rest]
                smart[(when, device, metric)] = value * scale
    fabric.update(legacy)
    for (when, device, port, counter), value in list(fabric.items()):
        words = _IB_BYTES_TO_WORDS.get(counter)
        if words:
            fabric.setdefault((when, device, port, words), value / 4)
        alias = canonical_alias(counter)
        if alias:
            fabric.setdefault((when, device, port, alias), value)
    fabric_rows = [
        {"ts": when, "node": ctx.node, "device": device, "port": port, "counter": counter,
         "value": value, "source": ctx.source}
        for (when, device, port, counter), value in fabric.items()
    ]
    smart_rows = []
    for (when, device, metric), value in smart.items():
        info = devices.get(device, {})
        protocol = info.get("protocol") or info.get("interface") or ""
        if protocol.lower() not in ("nvme", "") or (not protocol and not device.startswith("nvme")):
            continue  # SATA / SAS drive in the same scrape: not nvme_smart
        smart_rows.append(
            {"ts": when, "node": ctx.node, "device": device, "source": ctx.source,
             "metric": metric, "value": value, "model": info.get("model_name") or None,
             "serial": info.get("serial_number") or None,
             "firmware": info.get("firmware_version") or None})
    if not fabric_rows and not smart_rows:
        raise RecordError(f"prometheus scrape ({len(samples)} samples) has no node_infiniband_*, "
                          "node_ethtool_* or NVMe smartctl_device_* counters; enable "
                          "node_exporter's --collector.infiniband / --collector.ethtool or scrape "
                          "smartctl_exporter")
    out: dict[str, list[dict[str, Any]]] = {}
    if fabric_rows:
        out["fabric_counters"] = fabric_rows
    if smart_rows:
        out["nvme_smart"] = smart_rows
    return out
