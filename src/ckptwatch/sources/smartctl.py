"""smartctl JSON for NVMe devices (``smartctl -j -a /dev/nvme0``, ``smartctl --json -x``).

Reads ``nvme_smart_health_information_log`` (NVMe SMART / Health log page 02h as smartctl prints
it), the device's model, serial and firmware, and smartctl's exit status. One row per metric in
``nvme_smart``; metric names carry units (see docs/formats.md). Data units are 1000 blocks of
512 bytes (NVMe spec), so ``data_units_written`` becomes ``host_written_bytes`` = units x 512 000.
"""

from __future__ import annotations

import functools
import re
from typing import Any

import polars as pl

from ckptwatch.errors import RecordError
from ckptwatch.sources.base import ToolContext, register_json_bulk, register_tool
from ckptwatch.sources.json_bulk import JsonRows, envelopes
from ckptwatch.sources.textkv import parse_number

SOURCE = "smartctl"

#: NVMe "data unit": 1000 x 512-byte blocks (NVMe base spec, SMART / Health log).
DATA_UNIT_BYTES = 512_000

#: smartctl exit status bits (smartctl(8), "RETURN VALUES").
EXIT_STATUS_BITS: dict[int, str] = {
    0: "command line did not parse",
    1: "device open failed",
    2: "a SMART or other command to the device failed",
    3: "SMART status: disk failing",
    4: "prefail attributes at or below threshold",
    5: "attributes at or below threshold in the past",
    6: "device error log has errors",
    7: "device self-test log has errors",
}

#: smartctl health-log key -> (canonical metric, multiplier).
HEALTH_LOG_METRICS: dict[str, tuple[str, float]] = {
    "critical_warning": ("critical_warning", 1),
    "temperature": ("temperature_c", 1),
    "available_spare": ("available_spare_pct", 1),
    "available_spare_threshold": ("available_spare_threshold_pct", 1),
    "percentage_used": ("percent_used_pct", 1),
    "data_units_read": ("host_read_bytes", DATA_UNIT_BYTES),
    "data_units_written": ("host_written_bytes", DATA_UNIT_BYTES),
    "host_reads": ("host_read_commands", 1),
    "host_writes": ("host_write_commands", 1),
    "controller_busy_time": ("controller_busy_time_min", 1),
    "power_cycles": ("power_cycles", 1),
    "power_on_hours": ("power_on_hours", 1),
    "unsafe_shutdowns": ("unsafe_shutdowns", 1),
    "media_errors": ("media_errors", 1),
    "num_err_log_entries": ("num_err_log_entries", 1),
    "warning_temp_time": ("warning_temp_time_min", 1),
    "critical_comp_time": ("critical_comp_time_min", 1),
}

#: The kernel's names of an NVMe controller's devices, each with the controller's number:
#: a multipath path ``nvme<subsystem>c<controller>n<ns>`` (its controller is the ``c`` number;
#: the leading number is the subsystem's), the generic character device ``ng<ctrl>n<ns>``, and
#: ``nvme<ctrl>`` with an optional namespace ``n<ns>`` and partition ``p<part>``. The same rule
#: is the SQL macro ``nvme_drive`` (sql/staging/stg_nvme_smart.sql; a test holds them equal).
_NVME_NAMESPACE = re.compile(r"nvme\d+c(\d+)n\d+(?:p\d+)?|ng(\d+)n\d+|nvme(\d+)(?:n\d+(?:p\d+)?)?")


@functools.lru_cache(maxsize=4096)
def nvme_device_name(name: str) -> str:
    """Short kernel name of an NVMe controller: ``/dev/nvme0n1`` -> ``nvme0``.

    SMART is per controller, so a namespace, partition, multipath path (``nvme0c1n1`` ->
    ``nvme1``) or generic device (``ng0n1`` -> ``nvme0``) name maps to its controller: one drive
    keeps one name whichever tool printed it (docs/formats.md, "Device identity"). Other names
    lose ``/dev/`` and any directory part (``IOService:/…/NS_01@1`` -> ``NS_01@1``). Cached:
    every envelope of a drive names it again.
    """
    s = name.strip()
    if s.startswith("/dev/"):
        s = s[5:]
    m = _NVME_NAMESPACE.fullmatch(s)
    if m:
        return "nvme" + next(g for g in m.groups() if g is not None)
    return s.rstrip("/").rsplit("/", 1)[-1] or s


def decode_exit_status(status: int) -> list[str]:
    """The meanings of the bits set in a smartctl exit status."""
    return [text for bit, text in EXIT_STATUS_BITS.items() if status >> bit & 1]


def _block(doc: dict[str, Any], key: str) -> dict[str, Any]:
    value = doc.get(key)
    return value if isinstance(value, dict) else {}


def _exit_summary(doc: dict[str, Any]) -> str:
    sm = _block(doc, "smartctl")
    status = sm.get("exit_status")
    parts: list[str] = []
    if isinstance(status, int) and not isinstance(status, bool):
        bits = decode_exit_status(status)
        parts.append(f"smartctl exit_status {status}" + (f": {'; '.join(bits)}" if bits else ""))
    messages = sm.get("messages")
    if isinstance(messages, list):
        texts = [str(m.get("string")) for m in messages if isinstance(m, dict) and m.get("string")]
        if texts:
            parts.append("messages: " + " | ".join(texts))
    if not parts or status == 0:
        argv = sm.get("argv")
        if isinstance(argv, list):
            parts.append("argv: " + " ".join(str(a) for a in argv))
    return "; ".join(parts) if parts else "no smartctl exit status"


def detect(output: Any) -> bool:
    """smartctl's JSON: an object with a ``smartctl`` block and ``json_format_version``."""
    return (
        isinstance(output, dict)
        and isinstance(output.get("smartctl"), dict)
        and "json_format_version" in output
    )


def _text(value: Any) -> str | None:
    return value.strip() if isinstance(value, str) and value.strip() else None


def _device(output: dict[str, Any], ctx: ToolContext) -> str:
    if ctx.device:
        return nvme_device_name(ctx.device)
    dev = output.get("device")
    if isinstance(dev, dict):
        name = _text(dev.get("name")) or _text(dev.get("info_name"))
        if name:
            return nvme_device_name(name)
    raise RecordError("smartctl output names no device (no device.name) and the envelope has "
                      "no 'device'")


def health_log_values(log: dict[str, Any]) -> dict[str, float]:
    """Canonical metric -> value from a ``nvme_smart_health_information_log`` object."""
    values: dict[str, float] = {}
    for key, (metric, scale) in HEALTH_LOG_METRICS.items():
        if key not in log or log[key] is None:
            continue
        num = parse_number(log[key])
        if num is None:
            raise RecordError(f"nvme_smart_health_information_log.{key} is not a number: "
                              f"{log[key]!r}")
        values[metric] = float(num) * scale
    sensors = log.get("temperature_sensors")
    if isinstance(sensors, list):
        for i, reading in enumerate(sensors, start=1):
            num = parse_number(reading)
            if num is not None:  # smartctl prints null for an absent sensor
                values[f"temperature_sensor{i}_c"] = float(num)
    return values


@register_tool(SOURCE, detect, needs=())  # (JSON only: no text is smartctl's)
def parse_smartctl(output: Any, ctx: ToolContext) -> dict[str, list[dict[str, Any]]]:
    """``smartctl -j -a`` of one NVMe device -> ``nvme_smart`` rows."""
    if not isinstance(output, dict):
        raise RecordError(f"smartctl output is not a JSON object (got {type(output).__name__})")
    if "devices" in output and "device" not in output:
        raise RecordError("smartctl --scan output (a device list), not one device's health "
                          "report; collect with `smartctl -j -a /dev/nvmeX`")
    dev = _block(output, "device")
    protocol = _text(dev.get("protocol"))
    if protocol and protocol.lower() != "nvme":
        raise RecordError(f"smartctl output is for a non-NVMe device ({dev.get('name')}, "
                          f"protocol {protocol}); nvme_smart takes NVMe devices only")
    log = output.get("nvme_smart_health_information_log")
    if not isinstance(log, dict):
        raise RecordError("smartctl output has no nvme_smart_health_information_log "
                          f"({_exit_summary(output)})")
    values = health_log_values(log)
    if "temperature_c" not in values:
        temp = output.get("temperature")
        current = parse_number(temp.get("current")) if isinstance(temp, dict) else None
        if current is not None:
            values["temperature_c"] = float(current)
    if not values:
        raise RecordError("smartctl nvme_smart_health_information_log has none of the NVMe "
                          f"SMART fields ({_exit_summary(output)})")
    status = parse_number(_block(output, "smartctl").get("exit_status"))
    if status is not None:
        values["smartctl_exit_status"] = float(status)
    device = _device(output, ctx)
    model = _text(output.get("model_name"))
    serial = _text(output.get("serial_number"))
    firmware = _text(output.get("firmware_version"))
    rows = [
        {"ts": ctx.ts, "node": ctx.node, "device": device, "source": ctx.source,
         "metric": metric, "value": value, "model": model, "serial": serial,
         "firmware": firmware}
        for metric, value in values.items()
    ]
    return {"nvme_smart": rows}


_HEALTH_KEYS = list(HEALTH_LOG_METRICS)
_TEMPERATURE = _HEALTH_KEYS.index("temperature")


@register_json_bulk(SOURCE)
def parse_smartctl_bulk(env: pl.DataFrame,
                        outputs: list[dict[str, Any]]) -> tuple[dict[str, pl.DataFrame],
                                                                 pl.Series]:
    """``parse_smartctl`` over many envelopes (see ``base.JsonBulkParser`` and ``json_bulk``).

    Declined, for ``parse_smartctl`` to judge: a device list (``--scan``), no health log, a
    non-NVMe device, none of the health fields, no device name in the envelope or the output.
    """
    rows = JsonRows()
    health = [rows.metric(m, scale) for m, scale in HEALTH_LOG_METRICS.values()]
    temperature = rows.metric("temperature_c")
    exit_status = rows.metric("smartctl_exit_status")
    sensors: list[int] = []
    for e, dev, out in zip(*envelopes(env), outputs, strict=True):
        block = out.get("device")
        block = block if type(block) is dict else {}
        protocol = _text(block.get("protocol"))
        log = out.get("nvme_smart_health_information_log")
        if (("devices" in out and "device" not in out) or type(log) is not dict
                or (protocol and protocol.lower() != "nvme")):
            rows.declined.append(e)
            continue
        values = list(map(log.get, _HEALTH_KEYS))
        codes = health
        readings = log.get("temperature_sensors")
        if type(readings) is list and readings:
            while len(sensors) < len(readings):
                sensors.append(rows.metric(f"temperature_sensor{len(sensors) + 1}_c"))
            values += readings
            codes = health + sensors[:len(readings)]
        if values[_TEMPERATURE] is None:  # the log has none: smartctl's own temperature
            temp = out.get("temperature")
            values.append(temp.get("current") if type(temp) is dict else None)
            codes = [*codes, temperature]
        if values.count(None) == len(values):  # none of the fields: parse_smartctl says so
            rows.declined.append(e)
            continue
        tool = out.get("smartctl")
        values.append(tool.get("exit_status") if type(tool) is dict else None)
        if dev:
            device = nvme_device_name(dev)
        else:
            name = _text(block.get("name")) or _text(block.get("info_name"))
            if not name:
                rows.declined.append(e)
                continue
            device = nvme_device_name(name)
        rows.add(e, [*codes, exit_status], values, device, _text(out.get("model_name")),
                 _text(out.get("serial_number")),
                 _text(out.get("firmware_version")))
    return rows.frames()


def render_smartctl_json(model: str, serial: str, firmware: str, device: str,
                         values: dict[str, float], *, exit_status: int = 0,
                         version: tuple[int, int] = (7, 3)) -> dict[str, Any]:
    """Realistic ``smartctl -j -a /dev/<device>`` output from canonical metric values.

    ``values`` uses the canonical names (``temperature_c``, ``host_written_bytes``, …); byte
    counts are rounded down to whole NVMe data units. Missing health fields are written as 0,
    as a drive would report them. Modelled on smartctl 7.3 output (smartctl_exporter testdata).
    """
    log: dict[str, Any] = {}
    for key, (metric, scale) in HEALTH_LOG_METRICS.items():
        raw = values.get(metric, 0)
        log[key] = int(raw // scale) if scale != 1 else int(raw)
    sensor_keys = [k for k in values if re.fullmatch(r"temperature_sensor\d+_c", k)]
    sensors = [int(values[k]) for k in sorted(sensor_keys, key=lambda k: int(re.sub(r"\D", "", k)))]
    if sensors:
        log["temperature_sensors"] = sensors
    path = device if device.startswith("/dev/") else f"/dev/{device}"
    return {
        "json_format_version": [1, 0],
        "smartctl": {
            "version": list(version),
            "svn_revision": "5338",
            "platform_info": "x86_64-linux-5.15.0",
            "build_info": "(local build)",
            "argv": ["smartctl", "-j", "-a", path],
            "exit_status": exit_status,
        },
        "device": {"name": path, "info_name": path, "type": "nvme", "protocol": "NVMe"},
        "model_name": model,
        "serial_number": serial,
        "firmware_version": firmware,
        "nvme_pci_vendor": {"id": 32902, "subsystem_id": 32902},
        "nvme_controller_id": 0,
        "nvme_number_of_namespaces": 1,
        "smart_support": {"available": True, "enabled": True},
        "smart_status": {"passed": log["critical_warning"] == 0,
                         "nvme": {"value": log["critical_warning"]}},
        "nvme_smart_health_information_log": log,
        "temperature": {"current": log["temperature"]},
        "power_cycle_count": log["power_cycles"],
        "power_on_time": {"hours": log["power_on_hours"]},
    }
