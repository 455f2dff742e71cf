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

Envelopes of node_exporter's fabric families are parsed in bulk (``parse_prometheus_bulk``: all
scrapes of a file in a few polars passes); ``parse_prometheus`` reads the rest (sample
timestamps, escaped labels, smartctl_exporter scrapes) and is the bulk path's oracle.
"""

from __future__ import annotations

import functools
import math
import re
from datetime import UTC, datetime
from typing import Any

import polars as pl

from ckptwatch.errors import RecordError
from ckptwatch.sources.base import ToolContext, plain_output, register_bulk, register_tool
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


@register_tool(SOURCE, detect, needs=("# HELP ", "# TYPE ", "}"))
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


# -- bulk: many scrapes at once (``base.BulkParser``) ---------------------------------------
# The bulk path reads plain text only (``PLAIN_TEXT``), so within a line ``\s`` is a space or
# a tab: the patterns below spell it ``[ \t]`` (and ``\S`` as ``[^ \t]``), which polars'
# regex engine runs several times sooner than its Unicode classes.
_WS = r"[ \t]"
#: A label as ``_LABEL`` reads it, without escapes or braces in the value.
_BULK_LABEL = rf'[a-zA-Z_][a-zA-Z0-9_]*{_WS}*={_WS}*"[^"\\{{}}]*"'
#: Values read in bulk: decimal floats (Go's ``1.5e+12`` included), which polars casts as
#: ``float`` reads them, and the non-finite spellings ``float`` reads (skipped: no reading).
_BULK_NUMBER = r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?"
_BULK_NON_FINITE = r"[+-]?(?i:inf|infinity|nan)"
#: A sample line the bulk path reads is a series (``_BULK_SERIES``) and then its value
#: (``_BULK_REST``), exactly as ``_SAMPLE``, ``parse_labels`` and ``parse_value`` read it:
#: ``name{labels} value`` with a label set ``parse_labels`` accepts (after ``strip``), no sample
#: timestamp, no brace or backslash inside the labels (so ``_SAMPLE``'s greedy label group can
#: only end at the one ``}``, where the series ends).
_BULK_LABELS = rf"(?:{_WS}*{_BULK_LABEL}{_WS}*,)*(?:{_WS}*{_BULK_LABEL}{_WS}*)?{_WS}*"
_BULK_SERIES = rf"^{_NAME}{_WS}*(?:\{{{_BULK_LABELS}\}})?$"
_BULK_REST = rf"^{_WS}+(?:{_BULK_NUMBER}|{_BULK_NON_FINITE}){_WS}*$"


def _last_label_pattern(key: str) -> str:
    """The value of the last label ``key`` in a valid label set (``_BULK_LABELS``): whole
    labels are skipped from the start (a value holds no quote, so each label's end is
    certain), greedily, so the one captured is the last ``key`` given, as a dict keeps it."""
    return rf'^(?:{_WS}*{_BULK_LABEL}{_WS}*,)*{_WS}*{key}{_WS}*={_WS}*"([^"]*)"'


def _series_kinds(series: pl.Series) -> pl.DataFrame:
    """Per distinct series: ``__ok`` (a form the bulk path reads: ``_BULK_SERIES``, not a
    smartctl_exporter sample), and for a fabric counter (``_fabric_name``) ``__legacy``,
    ``counter``, ``__ib`` and its last ``device`` and ``port`` labels (null when absent);
    ``counter`` is null for a series the fabric rows skip."""
    s = pl.col("series")
    kinds = pl.DataFrame({"series": series}).with_columns(
        (s.str.contains(_BULK_SERIES) & ~s.str.starts_with("smartctl_device")).alias("__ok"),
        s.str.slice(0, s.str.find(r"[{ \t]")).alias("name"),  # a valid one's name: up to there
        s.str.find("{", literal=True).alias("__o"))
    labels = pl.when(pl.col("__o").is_not_null()).then(
        s.str.slice(pl.col("__o") + 1, s.str.len_bytes() - pl.col("__o") - 2))
    kinds = kinds.with_columns(labels.str.extract(_last_label_pattern("device")).alias("device"),
                               labels.str.extract(_last_label_pattern("port")).alias("port"))
    names = kinds.filter(pl.col("__ok"))["name"].unique().to_list()
    filed = {n: f for n in names if (f := _fabric_name(n)) is not None}
    fabric = pl.col("__ok") & pl.col("name").is_in(list(filed))
    return kinds.select(
        "series", "__ok",
        pl.when(fabric).then(pl.col("name").replace_strict(
            list(filed), [f[0] for f in filed.values()], default=None,
            return_dtype=pl.Boolean)).alias("__legacy"),
        pl.when(fabric).then(pl.col("name").replace_strict(
            list(filed), [f[1] for f in filed.values()], default=None,
            return_dtype=pl.String)).alias("counter"),
        pl.col("name").str.starts_with("node_infiniband_").alias("__ib"), "device", "port")


@functools.cache
def _fabric_name(name: str) -> tuple[bool, str] | None:
    """How ``parse_prometheus`` files a sample named ``name``: (a ``legacy_`` series, the
    counter) for a fabric counter; None for a sample it skips."""
    if name.startswith("node_infiniband_"):
        rest = name[len("node_infiniband_"):]
        if rest in _IB_NOT_COUNTERS:
            return None
        legacy = rest.startswith("legacy_")
        if legacy:
            rest = re.sub(r"^(data|packets)_(received|transmitted)", r"port_\1_\2",
                          rest[len("legacy_"):])
        base = re.sub(r"_total$", "", rest)
        return legacy, INFINIBAND_NAMES.get(base, base)
    if name.startswith("node_ethtool_"):
        rest = name[len("node_ethtool_"):]
        return None if rest == "info" else (False, ethtool_driver_name(rest))
    return None


@register_bulk(SOURCE)
def parse_prometheus_bulk(env: pl.DataFrame) -> tuple[dict[str, pl.DataFrame], pl.Series]:
    """``parse_prometheus`` over many scrapes at once, for the node_exporter fabric families
    (``node_infiniband_*``, ``node_ethtool_*``): the same rows in the same order (a
    ``legacy_*`` series overrides its plain one in place; word counts and ethtool aliases
    follow, in the order of the samples they come from).

    Declined, for ``parse_prometheus`` to handle one by one: text that is not plain ASCII, a
    sample line not of the form ``_BULK_SERIES`` then ``_BULK_REST`` (a sample timestamp,
    braces or escapes in labels, a malformed label set or value), a smartctl_exporter sample
    (``smartctl_device*``), a counter without a device label, a scrape with no fabric counter.

    Each distinct series is read once (``_series_kinds``); a scrape that gives each series once
    and no ``legacy_*`` one skips the merging of repeated series, and derived series whose
    counters cannot clash skip the check that they are new.
    """
    plain = env.select(plain_output(env).fill_null(False)).to_series()
    take = env.filter(plain)
    line = pl.col("line")
    # Each sample line cut by position (literal finds: no regex captures over the lines) into
    # its series, ``name{labels}`` (up to the one "}" a valid line has) or ``name`` (up to the
    # first blank), and the rest, `` value``. A line with "{" and no "}" gets the series "",
    # which is not valid.
    end = pl.when(line.str.contains("{", literal=True)).then(
        line.str.find("}", literal=True) + 1).otherwise(line.str.find(_WS)).fill_null(0)
    lines = take.lazy().select(
        "__env", pl.col("port").alias("__eport"),
        pl.col("output").str.split("\n").alias("line"),
    ).explode("line").filter(~line.str.starts_with("#")).select(  # most comments, unstripped
        "__env", "__eport", line.str.strip_chars()).filter(
        (line != "") & ~line.str.starts_with("#")).select(
        "__env", "__eport", line.str.slice(0, end).alias("series"),
        line.str.slice(end).alias("rest")).with_row_index("__pos").collect()
    # A scrape repeats its few series in scrape after scrape: each distinct series is read
    # once (checked, named, its device and port labels found, filed) and joined back.
    kinds = _series_kinds(lines["series"].unique())
    lines = lines.join(kinds, on="series", how="left", maintain_order="left")
    bad_env = lines.filter(~pl.col("__ok") | ~pl.col("rest").str.contains(_BULK_REST))[
        "__env"].unique()
    samples = lines.filter(pl.col("counter").is_not_null()
                           & ~pl.col("__env").is_in(bad_env.implode())).with_columns(
        pl.col("rest").str.strip_chars(" \t").cast(pl.Float64, strict=False).alias("value"))
    # a number polars cannot read (not a non-finite spelling, which is no reading: skipped)
    unread = samples.filter(pl.col("value").is_null() & ~pl.col("rest").str.contains(
        rf"^{_WS}*{_BULK_NON_FINITE}{_WS}*$"))["__env"]
    if unread.len():
        bad_env = pl.concat([bad_env, unread]).unique()
        samples = samples.filter(~pl.col("__env").is_in(bad_env.implode()))
    samples = samples.filter(pl.col("value").is_finite())
    if not samples.height:  # no fabric counter at all: parse_prometheus reads or rejects each
        return {}, env["__env"]
    given_port = pl.when(pl.col("__eport") != "").then(pl.col("__eport")).otherwise(pl.lit("1"))
    samples = samples.with_columns(
        pl.when(pl.col("__ib") & pl.col("port").is_not_null()).then(pl.col("port"))
        .otherwise(given_port).alias("port"))
    no_device = samples.filter(pl.col("device").fill_null("") == "")["__env"].unique()
    samples = samples.filter(~pl.col("__env").is_in(no_device.implode()))
    keys = ["__env", "device", "port", "counter"]
    if not samples["__legacy"].any() and samples.select(
            pl.struct(keys).n_unique()).item() == samples.height:
        # each series given once, none legacy (the usual scrape): the samples are the series
        base = samples.select(*keys, "value", pl.int_range(pl.len(), dtype=pl.Int64).alias("__k"))
    else:
        plain_series = samples.filter(~pl.col("__legacy")).group_by(
            keys, maintain_order=True).agg(pl.col("__pos").first(), pl.col("value").last())
        legacy = samples.filter(pl.col("__legacy")).group_by(keys, maintain_order=True).agg(
            pl.col("__pos").first().alias("__lpos"), pl.col("value").last().alias("__lvalue"))
        # a legacy series wins over the plain one in its place; legacy-only ones follow the rest
        base = plain_series.join(legacy, on=keys, how="full", coalesce=True).select(
            *keys, pl.coalesce("__lvalue", "value").alias("value"),
            pl.col("__pos").is_null().alias("__after"),
            pl.coalesce("__pos", "__lpos").alias("__o"),
        ).sort("__env", "__after", "__o").with_columns(
            pl.int_range(pl.len(), dtype=pl.Int64).alias("__k")).drop("__after", "__o")
    counters = base["counter"].unique().to_list()
    words = {c: w for c in counters if (w := _IB_BYTES_TO_WORDS.get(c))}
    aliases = {c: a for c in counters if (a := canonical_alias(c))}
    derived = []
    for k, table, scale in ((0, words, 0.25), (1, aliases, 1.0)):
        if table:
            derived.append(base.filter(pl.col("counter").is_in(list(table))).select(
                "__env", "device", "port",
                pl.col("counter").replace_strict(table, return_dtype=pl.String),
                (pl.col("value") / 4 if scale != 1.0 else pl.col("value")),
                (pl.col("__k") * 2 + k).alias("__k")))
    rows = base.with_columns(pl.col("__k") * 2)
    if derived:  # each added once, and only when the scrape does not give that series itself
        extra = pl.concat(derived)
        if len(derived) > 1:
            extra = extra.sort("__k")
        # a derived series can only clash with a given one, or with another derived one, when
        # its counter is a given counter or the target of two (counter, kind) pairs
        targets = [*words.values(), *aliases.values()]
        if len(set(targets)) < len(targets) or not set(targets).isdisjoint(counters):
            extra = extra.join(base.select(keys), on=keys, how="anti", maintain_order="left")
            extra = extra.filter(pl.struct(keys).is_first_distinct())
        shift = 2 * (base.height + 1)
        rows = pl.concat([rows, extra.with_columns(pl.col("__k") + shift)])
    # base and extra rows are each in ``__k`` order, every extra one after the base: a stable
    # sort by envelope puts them in (``__env``, ``__k``) order
    rows = rows.sort("__env", maintain_order=True).select(
        "__env", pl.col("__k").alias("__idx"), "device", "port", "counter", "value")
    found = rows["__env"].unique()
    declined = pl.concat([env.filter(~plain)["__env"], bad_env, no_device,
                          take.filter(~pl.col("__env").is_in(found.implode()))["__env"]]).unique()
    return {"fabric_counters": rows}, declined
