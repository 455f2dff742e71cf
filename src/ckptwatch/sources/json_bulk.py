"""Bulk parsers for tool outputs that are JSON objects: ``smartctl -j -a`` (NVMe), ``nvme
smart-log -o json`` and the OCP extended SMART log as JSON (``nvme ocp smart-add-log -o json``).

``read_envelopes`` has read every envelope with ``json.loads`` already; what is left per
envelope is small: pick the values the format reads out of its object (one list per envelope,
no row dicts), check their Python types, and hand them all to polars, which scales, converts
and unpivots them into ``nvme_smart`` rows in one pass (see ``base.JsonBulkParser``).

The per-envelope parsers (``smartctl.parse_smartctl``, ``nvme_cli.parse_smart_log``,
``nvme_cli.parse_ocp_smart``) remain the reference. An envelope is declined to them, never
guessed, when any value read is other than a JSON integer or float below 2**63 in magnitude
and finite, or a string of 1-18 ASCII digits (all of one kind per envelope), or when its shape
needs one of their judgements: a required part missing, a null where a number goes, two keys
with one metric, a non-NVMe device, no device name.
"""

from __future__ import annotations

import functools
import re
from typing import Any

import numpy as np
import polars as pl

from ckptwatch.sources.base import INPUT_ERRORS, register_json_bulk
from ckptwatch.sources.nvme_cli import (
    KELVIN_THRESHOLD,
    OCP_SOURCE,
    SMART_LOG_METRICS,
    SMART_LOG_SOURCE,
    ocp_metric,
)
from ckptwatch.sources.smartctl import HEALTH_LOG_METRICS, nvme_device_name
from ckptwatch.sources.smartctl import SOURCE as SMARTCTL_SOURCE
from ckptwatch.sources.smartctl import _text as text_or_none

#: Value kinds read in bulk: numbers (``None``: not given, no row), or digit strings.
_NUMERIC = frozenset({int, float, type(None)})
_TEXTUAL = frozenset({str, type(None)})
#: Numbers at or above this magnitude are declined: below it polars' float of a Python int is
#: the one ``float()`` gives (both round correctly from an exact 64-bit integer).
_LIMIT = 9.2e18
#: A number as text that the bulk path reads: ``int(text)``, exactly, as a float.
_DIGITS = r"^[0-9]{1,18}$"


class _Rows:
    """``nvme_smart`` rows gathered as flat lists, envelope by envelope, typed in polars."""

    def __init__(self) -> None:
        self.names: list[str] = []
        self.scales: list[float] = []
        self.kelvin: list[bool] = []
        self._code: dict[str, int] = {}
        #: per kind (numbers, digit strings): envelope ids, value counts, metric codes, values
        self.batches: dict[bool, tuple[list[int], list[int], list[int], list[Any]]] = {
            True: ([], [], [], []), False: ([], [], [], [])}
        #: per envelope added: its id, device, model, serial, firmware
        self.meta: tuple[list[Any], ...] = ([], [], [], [], [])
        self.declined: list[int] = []

    def metric(self, name: str, scale: float = 1.0, kelvin: bool = False) -> int:
        """The code of metric ``name`` (``float(value) * scale``; ``kelvin``: converted as
        ``nvme_cli.kelvin_to_celsius``)."""
        code = self._code.get(name)
        if code is None:
            code = self._code[name] = len(self.names)
            self.names.append(name)
            self.scales.append(float(scale))
            self.kelvin.append(kelvin)
        return code

    def add(self, env: int, codes: list[int], values: list[Any], device: str,
            model: str | None = None, serial: str | None = None,
            firmware: str | None = None) -> None:
        """One envelope's values (``None``: no row) under metric ``codes``, in row order."""
        kinds = set(map(type, values))
        numeric = kinds <= _NUMERIC
        if not (numeric or kinds <= _TEXTUAL) or not values:
            self.declined.append(env)
            return
        at, counts, all_codes, all_values = self.batches[numeric]
        at.append(len(self.meta[0]))
        counts.append(len(values))
        all_codes.extend(codes)
        all_values.extend(values)
        envs, devices, models, serials, firmwares = self.meta
        envs.append(env)
        devices.append(device)
        models.append(model)
        serials.append(serial)
        firmwares.append(firmware)

    def frames(self) -> tuple[dict[str, pl.DataFrame], pl.Series]:
        """The rows (``base.BulkParser``'s columns) and the envelopes declined."""
        parts = [self._long(numeric) for numeric in (True, False) if self.batches[numeric][0]]
        if not parts:
            return {}, pl.Series(self.declined, dtype=pl.Int64)
        meta = pl.DataFrame(dict(zip(("__env", "device", "model", "serial", "firmware"),
                                     self.meta, strict=True)),
                            schema={"__env": pl.Int64, "device": pl.String, "model": pl.String,
                                    "serial": pl.String, "firmware": pl.String})
        bad = pl.concat([p.filter(pl.col("__bad"))["__k"] for p in parts]).unique()
        declined = pl.concat([pl.Series(self.declined, dtype=pl.Int64),
                              meta["__env"].gather(bad)])
        long = pl.concat([p.filter(pl.col("__value").is_not_null()) for p in parts])
        if len(parts) > 1:
            long = long.sort("__k", maintain_order=True)
        if bad.len():
            long = long.filter(~pl.col("__k").is_in(bad.implode()))
        if not long.height:
            return {}, declined

        def of_code(values: list[Any], dtype: pl.DataType) -> pl.Expr:
            return pl.lit(pl.Series(values, dtype=dtype)).gather(pl.col("__code"))
        scaled = pl.col("__value") * of_code(self.scales, pl.Float64())
        value = pl.when(of_code(self.kelvin, pl.Boolean()) & (scaled >= KELVIN_THRESHOLD)) \
            .then(scaled - 273.0).otherwise(scaled)

        def of_env(name: str) -> pl.Expr:
            return pl.lit(meta[name]).gather(pl.col("__k")).alias(name)
        rows = long.select(
            of_env("__env"), pl.int_range(pl.len(), dtype=pl.Int64).alias("__idx"),
            of_env("device"), of_code(self.names, pl.String()).alias("metric"),
            value.alias("value"), of_env("model"), of_env("serial"), of_env("firmware"))
        return {"nvme_smart": rows}, declined

    def _long(self, numeric: bool) -> pl.DataFrame:
        """One kind's values, long: ``__k`` (the envelope's place in ``meta``), ``__code``,
        ``__value`` (null: no row) and ``__bad`` (true: a value the bulk path does not read;
        its envelope is declined)."""
        at, counts, codes, values = self.batches[numeric]
        if numeric:
            try:
                raw = pl.Series(values, dtype=pl.Float64, strict=True)
            except INPUT_ERRORS:  # OverflowError: an integer beyond any polars type
                if not self._drop_huge():
                    self.declined += [self.meta[0][k] for k in at]
                    self.batches[True] = ([], [], [], [])
                return self._long(numeric)
            value = pl.col("__raw")
            bad = value.is_not_null() & (~value.is_finite() | (value.abs() >= _LIMIT))
        else:
            raw = pl.Series(values, dtype=pl.String)
            value = pl.col("__raw").cast(pl.Int64, strict=False).cast(pl.Float64)
            bad = pl.col("__raw").is_not_null() & ~pl.col("__raw").str.contains(_DIGITS)
        k = pl.Series("__k", np.repeat(np.asarray(at, dtype=np.uint32),
                                       np.asarray(counts, dtype=np.int64)))
        frame = pl.DataFrame({"__k": k, "__code": pl.Series(codes, dtype=pl.UInt32),
                              "__raw": raw})
        return frame.select("__k", "__code", value.alias("__value"), bad.alias("__bad"))

    def _drop_huge(self) -> bool:
        """Decline the envelopes of numbers with an integer of 2**63 or more in magnitude
        (the rare case ``_long`` meets); False when there was none."""
        at, counts, codes, values = self.batches[True]
        kept: tuple[list[int], list[int], list[int], list[Any]] = ([], [], [], [])
        start = 0
        for k, n in zip(at, counts, strict=True):
            part = values[start:start + n]
            if any(type(v) is int and abs(v) >= 1 << 63 for v in part):
                self.declined.append(self.meta[0][k])
            else:
                kept[0].append(k)
                kept[1].append(n)
                kept[2].extend(codes[start:start + n])
                kept[3].extend(part)
            start += n
        dropped = len(kept[0]) < len(at)
        self.batches[True] = kept
        return dropped


def _envelopes(env: pl.DataFrame) -> tuple[list[int], list[str | None]]:
    return env["__env"].to_list(), env["device"].to_list()


# --------------------------------------------------------------------------- smartctl

_HEALTH_KEYS = list(HEALTH_LOG_METRICS)
_TEMPERATURE = _HEALTH_KEYS.index("temperature")


@register_json_bulk(SMARTCTL_SOURCE)
def parse_smartctl_bulk(env: pl.DataFrame,
                        outputs: list[dict[str, Any]]) -> tuple[dict[str, pl.DataFrame],
                                                                 pl.Series]:
    """``smartctl.parse_smartctl`` over many envelopes (see ``base.JsonBulkParser``)."""
    rows = _Rows()
    health = [rows.metric(m, scale) for m, scale in HEALTH_LOG_METRICS.values()]
    temperature = rows.metric("temperature_c")
    exit_status = rows.metric("smartctl_exit_status")
    sensors: list[int] = []
    for e, dev, out in zip(*_envelopes(env), outputs, strict=True):
        block = out.get("device")
        block = block if type(block) is dict else {}
        protocol = text_or_none(block.get("protocol"))
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
            name = text_or_none(block.get("name")) or text_or_none(block.get("info_name"))
            if not name:
                rows.declined.append(e)
                continue
            device = nvme_device_name(name)
        rows.add(e, [*codes, exit_status], values, device, text_or_none(out.get("model_name")),
                 text_or_none(out.get("serial_number")),
                 text_or_none(out.get("firmware_version")))
    return rows.frames()


# --------------------------------------------------------------------------- nvme smart-log

_TEMPERATURE_KEY = re.compile(r"temperature_sensor_?\d+")
_NOT_DIGIT = re.compile(r"\D")


@functools.lru_cache(maxsize=1024)
def _smart_log_plan(keys: tuple[str, ...]) -> tuple[list[str], list[tuple[str, float, bool]],
                                                     int | None] | None:
    """What ``parse_smart_log`` reads from an output with these keys: the keys (those of
    ``SMART_LOG_METRICS`` present, then the temperatures in order), their metrics (name,
    scale, Kelvin), the place of ``critical_warning``; None when that parser must judge it
    (no data units written or temperature, two keys of one metric)."""
    if "data_units_written" not in keys or "temperature" not in keys or (
            "percent_used" in keys and "percentage_used" in keys):
        return None
    present = set(keys)
    read = [k for k in SMART_LOG_METRICS if k in present]
    metrics = [(*SMART_LOG_METRICS[k], False) for k in read]
    temps = [k for k in keys if k == "temperature" or _TEMPERATURE_KEY.fullmatch(k)]
    names = ["temperature_c" if k == "temperature"
             else "temperature_sensor" + _NOT_DIGIT.sub("", k) + "_c" for k in temps]
    if len(set(names)) < len(names):
        return None
    warning = read.index("critical_warning") if "critical_warning" in present else None
    return read + temps, metrics + [(m, 1.0, True) for m in names], warning


@register_json_bulk(SMART_LOG_SOURCE)
def parse_smart_log_bulk(env: pl.DataFrame,
                         outputs: list[dict[str, Any]]) -> tuple[dict[str, pl.DataFrame],
                                                                  pl.Series]:
    """``nvme_cli.parse_smart_log`` over many envelopes (see ``base.JsonBulkParser``)."""
    rows = _Rows()
    plans: dict[tuple[str, ...], tuple[list[str], list[int], int | None] | None] = {}
    for e, dev, out in zip(*_envelopes(env), outputs, strict=True):
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


# --------------------------------------------------------------------------- OCP log JSON


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
    """``nvme_cli.parse_ocp_smart`` of JSON outputs over many envelopes (see
    ``base.JsonBulkParser``). nvme-cli's 128-bit ``{"hi", "lo"}`` counters are read when both
    halves are JSON integers."""
    rows = _Rows()
    plans: dict[tuple[str, ...], tuple[list[str], list[int]]] = {}
    for e, dev, out in zip(*_envelopes(env), outputs, strict=True):
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
