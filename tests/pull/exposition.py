"""Exporter history for the pull tests: real exposition fixtures given timestamps, and a lake's
SMART and fabric rows rendered back as the series node_exporter and smartctl_exporter expose,
both as the OpenMetrics text ``promtool tsdb create-blocks-from openmetrics`` reads."""

from __future__ import annotations

import json
from collections.abc import Iterable
from datetime import datetime
from pathlib import Path

import polars as pl

from ckptwatch.sources.ethtool import canonical_alias
from ckptwatch.sources.prometheus import (
    INFINIBAND_NAMES,
    SMARTCTL_EXPORTER_METRICS,
    iter_samples,
)

REAL = Path(__file__).resolve().parent.parent / "fixtures" / "real" / "prometheus_exposition"
#: The two real scrapes (provenance: tests/fixtures/real/PROVENANCE.md) and their exporter port.
SMARTCTL_FIXTURE = (REAL / "smartctl_exporter_EXAMPLE.prom", 9633)
INFINIBAND_FIXTURE = (REAL / "node_exporter_e2e_infiniband_excerpt.prom", 9100)

#: (metric, labels, value, epoch seconds)
Sample = tuple[str, dict[str, str], float, float]


def _label_text(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def openmetrics(samples: Iterable[Sample]) -> str:
    """OpenMetrics text: samples grouped by metric and series, in time order, ``# EOF``."""
    def key(s: Sample) -> tuple[str, str, float]:
        return s[0], json.dumps(sorted(s[1].items())), s[3]

    lines = []
    for name, labels, value, ts in sorted(samples, key=key):
        inner = ",".join(f'{k}="{_label_text(v)}"' for k, v in sorted(labels.items()))
        lines.append(f"{name}{{{inner}}} {value!r} {ts:.3f}")
    return "\n".join(lines) + "\n# EOF\n"


def is_counter(name: str) -> bool:
    """The fixture series that count up (the rest are gauges: left as they are)."""
    return name.endswith("_total") or name in (
        "smartctl_device_bytes_written", "smartctl_device_bytes_read",
        "smartctl_device_power_on_seconds", "smartctl_device_power_cycle_count")


def fixture_history(hosts: Iterable[str], start: float, n: int, every_s: float,
                    reset_at: int, reset_metric: str) -> list[Sample]:
    """The real scrapes as ``n`` samples ``every_s`` apart from ``start``, per host: counters
    grow by their index x 1000 per sample; ``reset_metric`` restarts near zero at sample
    ``reset_at`` (a driver reload)."""
    out: list[Sample] = []
    for host in hosts:
        for path, port in (SMARTCTL_FIXTURE, INFINIBAND_FIXTURE):
            base = iter_samples(path.read_text())
            for k in range(n):
                for i, (_, name, labels, value, _ts) in enumerate(base):
                    if is_counter(name):
                        if name == reset_metric and k >= reset_at:
                            value = float((k - reset_at) * 7 + i)
                        elif value < 2**32 - 1:  # a saturated legacy counter stays there
                            value = value + k * 1000.0 * (1 + i % 5)
                    out.append((name, {**labels, "instance": f"{host}:{port}"}, value,
                                start + k * every_s))
    return out


# -- a lake's rows as exporter series ---------------------------------------------------------

_IB_METRIC = {canonical: name for name, canonical in INFINIBAND_NAMES.items()}
_SMART_METRIC = {canonical: (name, scale)
                 for name, (canonical, scale) in SMARTCTL_EXPORTER_METRICS.items()}


def _ethtool_metric(counter: str) -> str:
    """node_exporter's name for a driver statistic: ``rx_prio3_pause`` ->
    ``node_ethtool_received_prio3_pause``."""
    tokens = ["received" if t == "rx" else "transmitted" if t == "tx" else t
              for t in counter.split("_")]
    return "node_ethtool_" + "_".join(tokens)


def lake_as_exporters(fabric: pl.DataFrame, smart: pl.DataFrame) -> tuple[list[Sample], set[str]]:
    """The series node_exporter (ethtool, infiniband) and smartctl_exporter would have exposed
    for these rows, and the canonical names no exporter carries (lost, e.g. OCP logs)."""
    out: list[Sample] = []
    lost: set[str] = set()
    eth = fabric.filter(pl.col("source") == "ethtool")
    aliases = {canonical_alias(c) for c in eth["counter"].unique()} - {None}
    for ts, node, device, port, counter, value, source in fabric.select(
            "ts", "node", "device", "port", "counter", "value", "source").iter_rows():
        labels = {"instance": f"{node}:9100", "device": device}
        epoch = ts.timestamp()
        if source == "ethtool":
            if counter not in aliases:
                out.append((_ethtool_metric(counter), labels, value, epoch))
        elif counter in _IB_METRIC:
            out.append((f"node_infiniband_{_IB_METRIC[counter]}_total",
                        {**labels, "port": port}, value, epoch))
        elif counter == "port_xmit_bytes":
            out.append(("node_infiniband_port_data_transmitted_bytes_total",
                        {**labels, "port": port}, value, epoch))
        elif counter == "port_rcv_bytes":
            out.append(("node_infiniband_port_data_received_bytes_total",
                        {**labels, "port": port}, value, epoch))
        elif counter not in ("port_xmit_data", "port_rcv_data"):  # words: from the bytes
            lost.add(counter)
    seen: set[tuple[str, str, datetime]] = set()
    for ts, node, device, source, metric, value, model, serial, firmware in smart.select(
            "ts", "node", "device", "source", "metric", "value", "model", "serial",
            "firmware").iter_rows():
        labels = {"instance": f"{node}:9633", "device": f"/dev/{device}"}
        epoch = ts.timestamp()
        if source != "smartctl":
            lost.add(metric)
            continue
        if (node, device, ts) not in seen:
            seen.add((node, device, ts))
            out.append(("smartctl_device", {**labels, "protocol": "NVMe", "interface": "nvme",
                                            "model_name": model or "", "serial_number":
                                            serial or "", "firmware_version": firmware or ""},
                        1.0, epoch))
        if metric == "temperature_c":
            out.append(("smartctl_device_temperature", {**labels, "temperature_type":
                                                        "current"}, value, epoch))
        elif metric in _SMART_METRIC:
            name, scale = _SMART_METRIC[metric]
            out.append((f"smartctl_device_{name}", labels, value / scale, epoch))
        else:
            lost.add(metric)
    return out, lost
