"""nvme-cli: ``nvme smart-log -o json`` and the OCP extended SMART log (``nvme ocp smart-add-log``).

``nvme-smart-log``: the NVMe SMART / Health log as nvme-cli prints it in JSON. nvme-cli reports
the composite temperature in Kelvin (1.x and 2.x alike); values of 200 and above are read as
Kelvin and converted with ``K - 273`` (as nvme-cli and smartctl print Celsius). Counters may be
JSON numbers, floats or strings (all seen in the wild). ``critical_warning`` may be a number or,
from nvme-cli 2.11, an object whose ``value`` is the byte.

``nvme-ocp-smart``: the OCP Datacenter NVMe SSD "SMART / Health Information Extended" log (C0h),
from ``nvme ocp smart-add-log`` as text or JSON (``-o json``: both nvme-cli's titled keys and its
snake_case keys), and the same log page as ``nvme wdc vs-smart-add-log`` prints it ("SMART Cloud
Attributes"). Physical media units written/read are bytes (128-bit; printed as ``hi lo`` by older
nvme-cli). The vendor logs whose units are documented by their own labels are read too:
Samsung (``PhysicallyWrittenBytes``), Liteon/SSSTC (``Physical(NAND) bytes written``), Toshiba
(``Total data written to NAND : … GiB``), SK hynix (erase counts, free blocks; its "Physical Media
Units Written" has no stated unit and is not read) and Intel ``smart-log-add`` (erase counts,
throttling; its ``nand_bytes_written`` is in undocumented units and is not read).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Mapping
from typing import Any

import polars as pl

from ckptwatch.errors import RecordError
from ckptwatch.sources.base import (
    ToolContext,
    int_text_as_float,
    plain_output,
    register_bulk,
    register_json_bulk,
    register_tool,
)
from ckptwatch.sources.json_bulk import JsonRows, envelopes
from ckptwatch.sources.smartctl import DATA_UNIT_BYTES, nvme_device_name
from ckptwatch.sources.textkv import iter_lines, label_key, parse_int, parse_number, shorten

SMART_LOG_SOURCE = "nvme-smart-log"
OCP_SOURCE = "nvme-ocp-smart"

#: Temperatures at or above this are Kelvin (no working drive reads 200 degC; none reads -73).
KELVIN_THRESHOLD = 200

#: nvme-cli smart-log JSON key -> (canonical metric, multiplier).
SMART_LOG_METRICS: dict[str, tuple[str, float]] = {
    "critical_warning": ("critical_warning", 1),
    "avail_spare": ("available_spare_pct", 1),
    "spare_thresh": ("available_spare_threshold_pct", 1),
    "percent_used": ("percent_used_pct", 1),
    "percentage_used": ("percent_used_pct", 1),
    "endurance_grp_critical_warning_summary": ("endurance_group_critical_warning", 1),
    "data_units_read": ("host_read_bytes", DATA_UNIT_BYTES),
    "data_units_written": ("host_written_bytes", DATA_UNIT_BYTES),
    "host_read_commands": ("host_read_commands", 1),
    "host_write_commands": ("host_write_commands", 1),
    "controller_busy_time": ("controller_busy_time_min", 1),
    "power_cycles": ("power_cycles", 1),
    "power_on_hours": ("power_on_hours", 1),
    "unsafe_shutdowns": ("unsafe_shutdowns", 1),
    "media_errors": ("media_errors", 1),
    "num_err_log_entries": ("num_err_log_entries", 1),
    "warning_temp_time": ("warning_temp_time_min", 1),
    "critical_comp_time": ("critical_comp_time_min", 1),
    "thm_temp1_trans_count": ("thermal_mgmt_temp1_transitions", 1),
    "thm_temp2_trans_count": ("thermal_mgmt_temp2_transitions", 1),
    "thm_temp1_total_time": ("thermal_mgmt_temp1_time_s", 1),
    "thm_temp2_total_time": ("thermal_mgmt_temp2_time_s", 1),
}


def kelvin_to_celsius(value: float) -> float:
    """nvme-cli temperatures: Kelvin when >= 200 (converted as ``K - 273``), else Celsius."""
    return value - 273 if value >= KELVIN_THRESHOLD else value


def _device(ctx: ToolContext, what: str) -> str:
    if not ctx.device:
        raise RecordError(f"{what} output names no device; give it in the envelope 'device' or "
                          "the file name (smart/<node>/nvme0.json)")
    return nvme_device_name(ctx.device)


def _rows(ctx: ToolContext, device: str, values: dict[str, float]) -> list[dict[str, Any]]:
    return [
        {"ts": ctx.ts, "node": ctx.node, "device": device, "source": ctx.source,
         "metric": metric, "value": value, "model": None, "serial": None, "firmware": None}
        for metric, value in values.items()
    ]


# --------------------------------------------------------------------------- smart-log JSON


def detect_smart_log(output: Any) -> bool:
    """``nvme smart-log -o json``: a flat object with data units and nvme-cli's spare keys."""
    return (
        isinstance(output, dict)
        and "data_units_written" in output
        and ("avail_spare" in output or "spare_thresh" in output)
        and "smartctl" not in output
    )


@register_tool(SMART_LOG_SOURCE, detect_smart_log, needs=())  # (JSON only)
def parse_smart_log(output: Any, ctx: ToolContext) -> dict[str, list[dict[str, Any]]]:
    """``nvme smart-log /dev/nvmeX -o json`` -> ``nvme_smart`` rows."""
    if not isinstance(output, dict):
        raise RecordError("nvme smart-log output is not a JSON object "
                          f"(got {type(output).__name__})")
    values: dict[str, float] = {}
    for key, (metric, scale) in SMART_LOG_METRICS.items():
        if key not in output:
            continue
        raw = output[key]
        if key == "critical_warning" and isinstance(raw, dict):
            raw = raw.get("value")
        num = parse_number(raw)
        if num is None:
            raise RecordError(f"nvme smart-log field '{key}' is not a number: {shorten(repr(raw))}")
        values[metric] = float(num) * scale
    temps = [(k, v) for k, v in output.items()
             if k == "temperature" or re.fullmatch(r"temperature_sensor_?\d+", k)]
    for key, raw in temps:
        num = parse_number(raw)
        if num is None:
            raise RecordError(f"nvme smart-log field '{key}' is not a number: {shorten(repr(raw))}")
        digits = re.sub(r"\D", "", key)
        metric = "temperature_c" if key == "temperature" else f"temperature_sensor{digits}_c"
        values[metric] = kelvin_to_celsius(float(num))
    if "host_written_bytes" not in values or "temperature_c" not in values:
        missing = [k for k in ("data_units_written", "temperature") if k not in output]
        raise RecordError(f"nvme smart-log output lacks {', '.join(missing)} (truncated or not "
                          "`nvme smart-log -o json`?)")
    return {"nvme_smart": _rows(ctx, _device(ctx, "nvme smart-log"), values)}


_TEMPERATURE_KEY = re.compile(r"temperature_sensor_?\d+")
_NOT_DIGIT = re.compile(r"\D")


@functools.lru_cache(maxsize=1024)
def _smart_log_plan(keys: tuple[str, ...]) -> tuple[
        list[str], list[tuple[str, float, float | None]], int | None] | None:
    """What ``parse_smart_log`` reads from an output with these keys: the keys (those of
    ``SMART_LOG_METRICS`` present, then the temperatures in order), their metrics (name,
    scale, a temperature's Kelvin threshold), the place of ``critical_warning``; None when
    that parser must judge it (no data units written or temperature, two keys of one
    metric)."""
    if "data_units_written" not in keys or "temperature" not in keys or (
            "percent_used" in keys and "percentage_used" in keys):
        return None
    present = set(keys)
    read = [k for k in SMART_LOG_METRICS if k in present]
    metrics = [(*SMART_LOG_METRICS[k], None) for k in read]
    temps = [k for k in keys if k == "temperature" or _TEMPERATURE_KEY.fullmatch(k)]
    names = ["temperature_c" if k == "temperature"
             else "temperature_sensor" + _NOT_DIGIT.sub("", k) + "_c" for k in temps]
    if len(set(names)) < len(names):
        return None
    warning = read.index("critical_warning") if "critical_warning" in present else None
    return read + temps, metrics + [(m, 1.0, KELVIN_THRESHOLD) for m in names], warning


@register_json_bulk(SMART_LOG_SOURCE)
def parse_smart_log_bulk(env: pl.DataFrame,
                         outputs: list[dict[str, Any]]) -> tuple[dict[str, pl.DataFrame],
                                                                  pl.Series]:
    """``parse_smart_log`` over many envelopes (see ``base.JsonBulkParser`` and ``json_bulk``).

    Declined, for ``parse_smart_log`` to judge: no data units written or temperature, two keys
    of one metric, a null where a number goes, no envelope device."""
    rows = JsonRows()
    plans: dict[tuple[str, ...], tuple[list[str], list[int], int | None] | None] = {}
    for e, dev, out in zip(*envelopes(env), outputs, strict=True):
        keys = tuple(out)
        if keys in plans:
            plan = plans[keys]
        else:
            found = _smart_log_plan(keys)
            plan = plans[keys] = None if found is None else (
                found[0], [rows.metric(*m) for m in found[1]], found[2])
        if plan is None or not dev:
            rows.declined.append(e)
            continue
        read, codes, warning = plan
        values = [out[k] for k in read]
        if warning is not None and type(values[warning]) is dict:  # nvme-cli 2.11: an
            values[warning] = values[warning].get("value")  # object, "value" is the byte
        if None in values:  # a null where a number goes: parse_smart_log says so
            rows.declined.append(e)
            continue
        rows.add(e, codes, values, nvme_device_name(dev))
    return rows.frames()


# --------------------------------------------------------------------------- OCP / vendor logs

#: Normalised label (see ``label_key``) -> canonical metric. Full-match regexes; the first match
#: wins. Byte counters are exact bytes; ``_pct`` are percent; counts are counts.
OCP_LABELS: list[tuple[re.Pattern[str], str]] = [
    (re.compile(p), m) for p, m in [
        (r"physical media units written", "media_written_bytes"),
        (r"physical media units read", "media_read_bytes"),
        (r"physicallywrittenbytes|physically written bytes", "media_written_bytes"),
        (r"physically read bytes", "media_read_bytes"),
        (r"physical\(nand\) bytes written", "media_written_bytes"),
        (r"physical\(nand\) bytes read", "media_read_bytes"),
        (r"total data written to nand", "media_written_bytes"),
        (r"total data read from nand", "media_read_bytes"),
        (r"bad user nand blocks( -)? raw|bad (user )?nand block count ?\(raw( value)?\)",
         "bad_user_nand_blocks"),
        (r"bad system nand blocks( -)? raw|bad system nand block count ?\(raw( value)?\)",
         "bad_system_nand_blocks"),
        (r"xor recovery count", "xor_recovery_count"),
        (r"uncorrectable read error count|uncorrectable read errors", "uncorrectable_read_errors"),
        (r"soft ecc error count", "soft_ecc_errors"),
        (r"end to end corrected errors|ssd end to end correction counts? \(corrected errors\)"
         r"|ssd end to end corrected errors counts|end-to-end error count \(corrected\)",
         "e2e_corrected_errors"),
        (r"end to end detected errors|ssd end to end correction counts? \(detected errors\)"
         r"|ssd end to end detected errors counts|end-to-end error count \(detected\)",
         "e2e_detected_errors"),
        (r"system data (percent|percentage) used|system data %{1,2} (life-)?used"
         r"|system data used", "system_data_used_pct"),
        (r"refresh counts?", "refresh_count"),
        (r"max user data erase counts?|user data erase counts? (maximum|\(max(imum tlc)?\))",
         "max_erase_count"),
        (r"min user data erase counts?|user data erase counts? (minimum|\(min(imum tlc)?\))",
         "min_erase_count"),
        (r"nand avg erase count", "avg_erase_count"),
        (r"number of thermal throttling events|thermal throttling (events|count)"
         r"|thermal throttling status & count \(number of thermal throttling events\)",
         "thermal_throttle_count"),
        (r"current throttling status|thermal throttling status"
         r"|thermal throttling status & count \(current throttling status\)",
         "thermal_throttle_status"),
        (r"light throttle time \(seconds\)", "thermal_throttle_light_time_s"),
        (r"heavy throttle time \(seconds\)", "thermal_throttle_heavy_time_s"),
        (r"pcie correctable error(s| count)", "pcie_correctable_errors"),
        (r"incomplete shutdowns", "incomplete_shutdowns"),
        (r"percent free blocks|%{1,2} free blocks( \(user\))?|free blocks", "free_blocks_pct"),
        (r"capacitor health", "capacitor_health_pct"),
        (r"unaligned i/o|unaligned io", "unaligned_io"),
        (r"plp start count", "plp_start_count"),
        (r"pcie link retraining count", "pcie_link_retraining_count"),
        (r"power state change count", "power_state_change_count"),
        (r"command timeouts", "command_timeouts"),
        (r"program fail count ?\(raw( value)?\)", "program_fail_count"),
        (r"(user data )?erase fail count ?\(raw( value)?\)", "erase_fail_count"),
    ]
]

_UNITS = {"": 1, "b": 1, "kib": 1 << 10, "mib": 1 << 20, "gib": 1 << 30, "tib": 1 << 40}
_VALUE = re.compile(
    r"(?P<num>0[xX][0-9a-fA-F]+|\d[\d,]*(?:\.\d+)?)(?:\s+(?P<lo>\d+))?\s*(?P<unit>%|[KMGT]iB|B)?"
)
_LINE = re.compile(
    r"^\s*(?P<label>.*?\S)\s*(?:[:\-]\s*|\t\s*|\s{2,})"
    r"(?P<value>(?:0[xX][0-9a-fA-F]+|\d[\d,]*(?:\.\d+)?)(?:\s+\d+)?\s*(?:%|[KMGT]iB|B)?)\s*$"
)


@functools.lru_cache(maxsize=4096)
def ocp_metric(label: str) -> str | None:
    """The canonical metric of an OCP / vendor log label (text label or JSON key), or None
    (cached: every envelope of a drive repeats the same labels)."""
    key = label_key(label)
    for pattern, metric in OCP_LABELS:
        if pattern.fullmatch(key):
            return metric
    return None


def _text_value(text: str, metric: str, where: str) -> float:
    m = _VALUE.fullmatch(text.strip())
    if not m:
        raise RecordError(f"{where}: cannot read a number from {shorten(text)!r}")
    num = parse_number(m.group("num"))
    if num is None:
        raise RecordError(f"{where}: cannot read a number from {shorten(text)!r}")
    if m.group("lo") is not None:  # older nvme-cli prints 128-bit counters as "hi lo"
        num = (int(num) << 64) + int(m.group("lo"))
    unit = (m.group("unit") or "").lower()
    if unit in _UNITS:
        num = num * _UNITS[unit]
    return float(round(num)) if unit not in ("", "%") else float(num)


_INTEL_1X = re.compile(r"^(?P<key>[a-z_]+)\s*:\s*(?P<norm>\d+)%\s+(?P<raw>.*?)\s*$")
_INTEL_2X = re.compile(
    r"^\s*0x[0-9a-fA-F]{2}\s+(?P<key>[a-z_]+)\s+(?P<norm>\d+)\s+(?P<raw>\d+)\s*$")
_INTEL_SIMPLE = {
    "program_fail_count": "program_fail_count",
    "erase_fail_count": "erase_fail_count",
    "end_to_end_error_detection_count": "e2e_detected_errors",
    "e2e_error_detect_count": "e2e_detected_errors",
    "crc_error_count": "crc_errors",
    "retry_buffer_overflow_count": "retry_buffer_overflows",
    "retry_buff_overflow_count": "retry_buffer_overflows",
    "pll_lock_loss_count": "pll_lock_losses",
    "pll_lock_loss_counter": "pll_lock_losses",
}


def _parse_intel(text: str) -> dict[str, float]:
    """``nvme intel smart-log-add`` (1.x ``key : norm% raw`` and 2.x ``ID KEY norm raw``)."""
    values: dict[str, float] = {}
    for i, line in iter_lines(text):
        m1, m2 = _INTEL_1X.match(line.strip()), _INTEL_2X.match(line)
        if m2:
            key, raw = m2.group("key"), int(m2.group("raw"))
            if key in _INTEL_SIMPLE:
                values[_INTEL_SIMPLE[key]] = float(raw)
            elif key == "wear_leveling_count":  # packed le16 min, max, avg (nvme-cli struct)
                values["min_erase_count"] = float(raw & 0xFFFF)
                values["max_erase_count"] = float(raw >> 16 & 0xFFFF)
                values["avg_erase_count"] = float(raw >> 32 & 0xFFFF)
            elif key == "thermal_throttle_status":  # packed u8 percent, u32 count
                values["thermal_throttle_pct"] = float(raw & 0xFF)
                values["thermal_throttle_count"] = float(raw >> 8 & 0xFFFFFFFF)
        elif m1:
            key, raw_text = m1.group("key"), m1.group("raw")
            if key in _INTEL_SIMPLE:
                num = parse_int(raw_text)
                if num is None:
                    raise RecordError(f"intel smart-log-add line {i}: {key} is not a number: "
                                      f"{shorten(raw_text)!r}")
                values[_INTEL_SIMPLE[key]] = float(num)
            elif key == "wear_leveling":
                wl = re.fullmatch(r"min:\s*(\d+),\s*max:\s*(\d+),\s*avg:\s*(\d+)", raw_text)
                if not wl:
                    raise RecordError(f"intel smart-log-add line {i}: wear_leveling is not "
                                      f"'min: N, max: N, avg: N': {shorten(raw_text)!r}")
                values["min_erase_count"] = float(wl.group(1))
                values["max_erase_count"] = float(wl.group(2))
                values["avg_erase_count"] = float(wl.group(3))
            elif key == "thermal_throttle_status":
                tt = re.fullmatch(r"(\d+)%,\s*cnt:\s*(\d+)", raw_text)
                if tt:
                    values["thermal_throttle_pct"] = float(tt.group(1))
                    values["thermal_throttle_count"] = float(tt.group(2))
    return values


_ERROR_LINE = re.compile(r"^\s*(ERROR|Error|error)\b.*|.*\b(not supported|unsupported)\b.*")
_SEAGATE = "Seagate Extended SMART Information"
_INTEL = "Additional Smart Log for NVME device"
#: SK hynix's log reuses OCP labels, but its "Physical Media Units" carry no stated unit.
_SKHYNIX = "Physical Media Units Written - TLC"
_TEXT_MARKERS = (
    "SMART Cloud Attributes", "Physical media units written", "PhysicallyWrittenBytes",
    "Physical(NAND) bytes written", "Total data written to NAND", _INTEL,
    _SKHYNIX, _SEAGATE,
)


def _parse_ocp_text(text: str) -> dict[str, float]:
    if _INTEL in text:
        return _parse_intel(text)
    if _SEAGATE in text:
        raise RecordError("Seagate vs-smart-add-log table: its Ext-Smart-Value fields are "
                          "vendor-packed hex with undocumented units, not read; collect "
                          "`nvme ocp smart-add-log` instead if the drive supports it")
    values: dict[str, float] = {}
    for i, line in iter_lines(text):
        m = _LINE.match(line)
        if not m:
            continue
        metric = ocp_metric(m.group("label"))
        if metric is None or metric in values:
            continue
        values[metric] = _text_value(m.group("value"), metric, f"line {i}")
    if _SKHYNIX in text:
        values.pop("media_written_bytes", None)
        values.pop("media_read_bytes", None)
    return values


def _parse_ocp_json(doc: dict[str, Any]) -> dict[str, float]:
    values: dict[str, float] = {}
    for key, raw in doc.items():
        metric = ocp_metric(key)
        if metric is None or metric in values:
            continue
        num = parse_number(raw)
        if num is None:
            raise RecordError(f"OCP smart-add-log field '{key}' is not a number: "
                              f"{shorten(repr(raw))}")
        values[metric] = float(num)
    return values


def detect_ocp(output: Any) -> bool:
    """OCP C0 extended SMART log (JSON keys or text) or a vendor smart-add-log text."""
    if isinstance(output, dict):
        return any(k in output for k in ("Physical media units written",
                                         "physical_media_units_written"))
    if isinstance(output, str):
        head = output[:4000]
        return any(marker in head for marker in _TEXT_MARKERS)
    return False


def _error_text(text: str) -> str | None:
    lines = [line.strip() for _, line in iter_lines(text)]
    if lines and all(_ERROR_LINE.match(line) for line in lines):
        return " | ".join(lines)
    return None


@register_tool(OCP_SOURCE, detect_ocp, needs=_TEXT_MARKERS)
def parse_ocp_smart(output: Any, ctx: ToolContext) -> dict[str, list[dict[str, Any]]]:
    """``nvme ocp smart-add-log`` (text or ``-o json``) or a vendor log -> ``nvme_smart`` rows."""
    if isinstance(output, dict):
        values = _parse_ocp_json(output)
    elif isinstance(output, str):
        err = _error_text(output)
        if err:
            raise RecordError(f"nvme-cli printed an error instead of the log: {shorten(err)!r}")
        values = _parse_ocp_text(output)
    else:
        raise RecordError(f"OCP smart-add-log output is neither text nor a JSON object "
                          f"(got {type(output).__name__})")
    if not values:
        raise RecordError("no OCP / vendor extended SMART field recognised (expected e.g. "
                          "'Physical media units written', 'Percent free blocks')")
    return {"nvme_smart": _rows(ctx, _device(ctx, "OCP smart-add-log"), values)}


#: The parts of an OCP text value (``_VALUE``'s groups, anchored) the bulk path reads; other
#: numbers (a nonzero 128-bit high word, long hex, misplaced commas, more than 290 digits: a
#: scaled value that may not fit a float) are declined to ``parse_ocp_smart``.
_BULK_INT = r"^[0-9]{1,290}$"
_BULK_GROUPED = r"^[0-9]{1,3}(?:,[0-9]{3})+$"
_BULK_FLOAT = r"^[0-9]+\.[0-9]+$"
_BULK_HEX = r"^0[xX][0-9a-fA-F]{1,13}$"
_BULK_ERROR = r"^(?:\s*(?:ERROR|Error|error)\b|.*\b(?:not supported|unsupported)\b)"


def _ocp_number(num: pl.Expr, lo: pl.Expr, unit: pl.Expr) -> pl.Expr:
    """``_text_value`` in polars: the value of one OCP text number, null where the bulk path
    does not vouch for it (the envelope is then declined)."""
    grouped = num.str.contains(_BULK_GROUPED) & (num.str.len_chars() <= 390)
    digits = pl.when(grouped).then(num.str.replace_all(",", "", literal=True)).otherwise(num)
    as_int = (pl.when(lo.is_not_null()).then(pl.when(num.str.contains(r"^0+$")
                                                     & lo.str.contains(_BULK_INT)).then(lo))
              .when(digits.str.contains(_BULK_INT)).then(digits))
    is_float = lo.is_null() & num.str.contains(_BULK_FLOAT) & (num.str.len_chars() <= 290)
    is_hex = lo.is_null() & num.str.contains(_BULK_HEX)
    value = (pl.when(as_int.is_not_null()).then(int_text_as_float(as_int))
             .when(is_float).then(num.cast(pl.Float64, strict=False))
             .when(is_hex).then(num.str.slice(2).str.to_integer(base=16, strict=False)
                                .cast(pl.Float64)))
    scale = unit.str.to_lowercase().replace_strict(
        [k for k in _UNITS if k not in ("", "b")], [float(v) for k, v in _UNITS.items()
                                                   if k not in ("", "b")],
        default=1.0, return_dtype=pl.Float64)
    # ``float(round(num * unit))`` for a byte unit; ``float(num)`` for none or ``%``
    scaled = unit.is_not_null() & (unit != "%")
    return pl.when(scaled).then((value * scale).round(0)).otherwise(value)


#: Every metric ``ocp_metric`` can name, in a fixed order: a line's ``__code`` indexes it.
_OCP_KNOWN = sorted({metric for _, metric in OCP_LABELS})
_OCP_CODE = {metric: k for k, metric in enumerate(_OCP_KNOWN)}
#: What ``_ocp_layout`` found for a layout ((line head, digits cut)), kept across calls: a
#: file's envelopes, and the next file's, repeat the same few dozen layouts.
_LAYOUTS: dict[tuple[str, bool], tuple[bool, int | None, int | None]] = {}
_LAYOUTS_MAX = 1 << 16
_LAYOUT_CHARS = 200


def _layout_of(head: str, digits: bool) -> tuple[bool, int | None, int | None]:
    """(an error line, the code of its metric, its value text's length) of one layout, with
    the per-envelope parser's own regular expressions (on plain text Python's and polars'
    agree: ``base.PLAIN_TEXT``)."""
    line = head + "9" if digits else head
    m = _LINE.match(line)
    metric = ocp_metric(m.group("label")) if m else None
    return (re.search(_BULK_ERROR, line) is not None,
            _OCP_CODE[metric] if metric is not None else None,
            len(m.group("value").rstrip()) if m else None)


def _ocp_layout(lines: pl.DataFrame) -> tuple[pl.DataFrame, list[str]]:
    r"""``lines`` (``__s``: one line each) with what ``_LINE`` and ``ocp_metric`` make of it:
    ``__err`` (an error line, ``_ERROR_LINE``), ``__code`` (the index of its metric in the
    returned list, ``_OCP_KNOWN``; null: the line gives none), ``__vl`` (its value text's
    length, stripped).

    ``_LINE`` runs once per distinct layout, not per line, and each layout once per process
    (``_LAYOUTS``): a line's layout is the line without its trailing blanks and with its last
    run of digits read as "9". That changes neither whether ``_LINE`` matches nor its label
    nor where the value starts: trailing blanks only ever fall in ``_LINE``'s last ``\s*``;
    every part of ``_LINE`` a trailing digit run can fall in takes one digit as it takes many;
    and a value starts after a separator, never inside a run of digits. The value text is
    then the line's own, from that place on (``_ocp_values``).
    """
    # each step materialised before the next (an expression used twice in one select is
    # computed twice): the line without its trailing blanks, then without its last digits
    lines = lines.with_columns(pl.col("__s").str.strip_chars_end(" \t").alias("__b")) \
        .with_columns(pl.col("__b").str.strip_chars_end("0123456789").alias("__k")) \
        .with_columns((pl.col("__b").str.len_bytes().cast(pl.Int64)
                       - pl.col("__k").str.len_bytes().cast(pl.Int64)).alias("__dl")) \
        .drop("__b")
    # one key to join on: each head read both ways (with and without its digits cut)
    keys = lines.select("__k").unique()
    if len(_LAYOUTS) > _LAYOUTS_MAX:
        _LAYOUTS.clear()
    found = []
    for (head,) in keys.iter_rows():
        both: list[bool | int | None] = []
        for cut in (False, True):
            got = _LAYOUTS.get((head, cut))
            if got is None:
                got = _layout_of(head, cut)
                if len(head) <= _LAYOUT_CHARS:  # a hostile file's long lines are not kept
                    _LAYOUTS[(head, cut)] = got
            both.extend(got)
        found.append(both)
    layouts = keys.hstack(pl.DataFrame(
        found, orient="row", schema={f"{c}{d}": t for d in (0, 1) for c, t in (
            ("__err", pl.Boolean), ("__code", pl.Int64), ("__vl", pl.Int64))}))
    cut_digits = pl.col("__dl") > 0
    lines = lines.join(layouts, on="__k", how="left", maintain_order="left").with_columns(
        *[pl.when(cut_digits).then(pl.col(f"{c}1")).otherwise(pl.col(f"{c}0")).alias(c)
          for c in ("__err", "__code", "__vl")])
    # the value text's length in the line itself: its digits for the layout's "9"
    return lines.with_columns(
        (pl.col("__vl") + (pl.col("__dl") - 1).clip(0)).alias("__vl")
    ).drop("__k", "__dl", *[f"{c}{d}" for d in (0, 1) for c in ("__err", "__code", "__vl")]
           ), _OCP_KNOWN



def _ocp_values(fields: pl.DataFrame) -> pl.Series:
    """``_text_value`` of each line's value (its last ``__vl`` characters, blanks aside):
    null where the bulk path does not vouch for it. Plain decimal text is read at once;
    ``_VALUE`` runs on the rest."""
    fields = fields.select(pl.col("__s").str.strip_chars_end().str.tail(pl.col("__vl"))
                           .alias("__text"))
    plain = pl.col("__text").str.contains(_BULK_INT)
    simple = fields.select(pl.when(plain).then(int_text_as_float(pl.col("__text"))))
    other = fields.filter(~plain)
    if not other.height:
        return simple.to_series()
    parts = pl.col("__text").str.extract_groups("^(?:" + _VALUE.pattern + ")$")
    read = other.select(parts.alias("__v")).unnest("__v").select(
        _ocp_number(pl.col("num"), pl.col("lo"), pl.col("unit")))
    return simple.to_series().scatter(
        fields.select(pl.arg_where(~plain)).to_series(), read.to_series())


@register_bulk(OCP_SOURCE)
def parse_ocp_bulk(env: pl.DataFrame) -> tuple[dict[str, pl.DataFrame], pl.Series]:
    """``parse_ocp_smart`` over many text envelopes at once (see ``base.BulkParser``).

    Declined, for ``parse_ocp_smart`` to handle one by one: text that is not plain ASCII, no
    envelope ``device``, an error printed instead of the log, Intel's and Seagate's own
    tables, a number the bulk path does not read (see ``_ocp_number``), no field recognised.
    """
    plain = env.select(
        plain_output(env) & (pl.col("device") != "").fill_null(False)
        & ~pl.col("output").str.contains(_INTEL, literal=True)
        & ~pl.col("output").str.contains(_SEAGATE, literal=True)).to_series()
    take = env.filter(plain)
    lines = take.select(
        "__env", pl.col("output").str.contains(_SKHYNIX, literal=True).alias("__skh"),
        pl.col("output").str.split("\n").alias("__s"),
    ).explode("__s").filter(pl.col("__s").str.strip_chars() != "").with_row_index("__pos")
    if not lines.height:  # no lines at all: parse_ocp_smart says what is wrong
        return {}, env["__env"]
    lines, known = _ocp_layout(lines)
    # nvme-cli printed only errors: parse_ocp_smart says so
    errors = lines.group_by("__env").agg(pl.col("__err").all()).filter("__err")["__env"]
    # the first line of each metric gives its value; later ones are not read
    fields = lines.filter(pl.col("__code").is_not_null()).filter(
        (pl.col("__env") * (len(known) + 1) + pl.col("__code")).is_first_distinct())
    fields = fields.with_columns(_ocp_values(fields).alias("__value"))
    bad = pl.concat([errors, fields.filter(pl.col("__value").is_null())["__env"]]).unique()
    metric = pl.lit(pl.Series(known, dtype=pl.String)).gather(pl.col("__code"))
    good = fields.filter(~pl.col("__env").is_in(bad.implode())
                         & ~(pl.col("__skh") & metric.is_in(["media_written_bytes",
                                                             "media_read_bytes"])))
    declined = pl.concat([env.filter(~plain)["__env"], bad,
                          take.filter(~pl.col("__env").is_in(good["__env"].implode()))["__env"]]
                         ).unique()
    devices = take.select("__env", "device")
    names = devices["device"].unique().to_list()
    rows = good.join(devices, on="__env", how="left", maintain_order="left").select(
        "__env", pl.col("__pos").cast(pl.Int64).alias("__idx"),
        pl.col("device").replace_strict(names, [nvme_device_name(n) for n in names],
                                        return_dtype=pl.String),
        metric.alias("metric"), pl.col("__value").alias("value"),
        *[pl.lit(None, dtype=pl.String).alias(c) for c in ("model", "serial", "firmware")])
    return {"nvme_smart": rows}, declined


@functools.lru_cache(maxsize=1024)
def _ocp_plan(keys: tuple[str, ...]) -> tuple[list[str], list[str]]:
    """The keys ``_parse_ocp_json`` reads from an output with these keys (the first of each
    metric, in order) and their metrics."""
    read: dict[str, str] = {}
    for key in keys:
        metric = ocp_metric(key)
        if metric is not None and metric not in read.values():
            read[key] = metric
    return list(read), list(read.values())


@register_json_bulk(OCP_SOURCE)
def parse_ocp_json_bulk(env: pl.DataFrame,
                        outputs: list[dict[str, Any]]) -> tuple[dict[str, pl.DataFrame],
                                                                 pl.Series]:
    """``parse_ocp_smart`` of JSON outputs over many envelopes (see ``base.JsonBulkParser`` and
    ``json_bulk``). nvme-cli's 128-bit ``{"hi", "lo"}`` counters are read when both halves are
    JSON integers. Declined, for ``parse_ocp_smart`` to judge: no field recognised, a null
    where a number goes, a ``{"hi", "lo"}`` of anything else, no envelope device."""
    rows = JsonRows()
    plans: dict[tuple[str, ...], tuple[list[str], list[int]]] = {}
    for e, dev, out in zip(*envelopes(env), outputs, strict=True):
        keys = tuple(out)
        plan = plans.get(keys)
        if plan is None:
            read, metrics = _ocp_plan(keys)
            plan = plans[keys] = (read, [rows.metric(m) for m in metrics])
        read, codes = plan
        if not read or not dev:
            rows.declined.append(e)
            continue
        values = [out[k] for k in read]
        if None in values:  # a null where a number goes: parse_ocp_smart says so
            rows.declined.append(e)
            continue
        if dict in set(map(type, values)):
            for i, v in enumerate(values):
                if type(v) is dict:
                    hi, lo = v.get("hi"), v.get("lo")
                    if "hi" not in v or "lo" not in v or type(hi) is not int \
                            or type(lo) is not int:
                        break
                    values[i] = (hi << 64) + lo
            else:
                rows.add(e, codes, values, nvme_device_name(dev))
                continue
            rows.declined.append(e)
            continue
        rows.add(e, codes, values, nvme_device_name(dev))
    return rows.frames()


def ocp_metrics_known() -> Iterable[str]:
    """Every canonical metric the OCP / vendor parser can produce (for docs and tests)."""
    seen: dict[str, None] = {m: None for _, m in OCP_LABELS}
    for m in (*_INTEL_SIMPLE.values(), "avg_erase_count", "thermal_throttle_pct"):
        seen.setdefault(m, None)
    return list(seen)


def render_ocp_smart_json(o: Mapping[str, int]) -> dict[str, object]:
    """An nvme-cli ``ocp smart-add-log -o json`` document (C0 log page version 3).

    ``o`` holds media_written, media_read (physical media units, bytes), free_blocks (%),
    erase_min, erase_max, soft_ecc, system_used, refresh, nuse, plp, endurance,
    power_changes. Keys as nvme-cli's ocp-print-json.c prints them (v1 key style).
    """
    return {
        "Physical media units written": {"hi": 0, "lo": o["media_written"]},
        "Physical media units read": {"hi": 0, "lo": o["media_read"]},
        "Bad user nand blocks - Raw": 0, "Bad user nand blocks - Normalized": 100,
        "Bad system nand blocks - Raw": 0, "Bad system nand blocks - Normalized": 100,
        "XOR recovery count": 0, "Uncorrectable read error count": 0,
        "Soft ecc error count": o["soft_ecc"], "End to end detected errors": 0,
        "End to end corrected errors": 0, "System data percent used": o["system_used"],
        "Refresh counts": o["refresh"], "Max User data erase counts": o["erase_max"],
        "Min User data erase counts": o["erase_min"], "Number of Thermal throttling events": 0,
        "Current throttling status": 0, "PCIe correctable error count": 0,
        "Incomplete shutdowns": 0, "Percent free blocks": o["free_blocks"],
        "Capacitor health": 100, "Unaligned I/O": 0, "Security Version Number": 1,
        "NUSE - Namespace utilization": o["nuse"], "PLP start count": o["plp"],
        "Endurance estimate": o["endurance"], "Log page version": 3,
        "Log page GUID": "0xafd514c97c6f4f9ca4f2bfea2810afc5",
        "Errata Version Field": 0, "Point Version Field": 0, "Minor Version Field": 0,
        "Major Version Field": 2, "NVMe Base Errata Version": 98,
        "PCIe Link Retraining Count": 0, "Power State Change Count": o["power_changes"],
    }
