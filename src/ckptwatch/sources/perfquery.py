"""``perfquery -x`` (PortCountersExtended) and legacy ``perfquery`` (PortCounters) text.

Blocks start with a header such as ``# Port extended counters: Lid 2052 port 1 (CapMask: …)``
and hold ``Name:........value`` lines. Names map to the sysfs spelling (``PortXmitWait`` and the
old libibmad ``XmtWait`` -> ``port_xmit_wait``; see ``PERFQUERY_NAMES``); unknown names become
snake_case. ``PortXmitData``/``PortRcvData`` are 4-byte words; their byte forms are added.
Error-detail blocks (``perfquery -E``, ``-D``) parse the same way.

perfquery output names no HCA: the envelope's ``device`` is used, else ``lid<LID>``.
"""

from __future__ import annotations

import re
from typing import Any

import polars as pl

from ckptwatch.errors import RecordError
from ckptwatch.sources.base import (
    ToolContext,
    int_text_as_float,
    plain_output,
    register_bulk,
    register_tool,
)
from ckptwatch.sources.sysfs_ib import WORD_COUNTERS, with_bytes
from ckptwatch.sources.textkv import iter_lines, parse_int, shorten, snake_case

SOURCE = "perfquery"

#: perfquery / libibmad field name -> sysfs counter name.
PERFQUERY_NAMES: dict[str, str] = {
    # PortCounters and PortCountersExtended (infiniband-diags >= 1.5 names)
    "PortXmitData": "port_xmit_data",
    "PortRcvData": "port_rcv_data",
    "PortXmitPkts": "port_xmit_packets",
    "PortRcvPkts": "port_rcv_packets",
    "PortUnicastXmitPkts": "unicast_xmit_packets",
    "PortUnicastRcvPkts": "unicast_rcv_packets",
    "PortMulticastXmitPkts": "multicast_xmit_packets",
    "PortMulticastRcvPkts": "multicast_rcv_packets",
    "SymbolErrorCounter": "symbol_error",
    "LinkErrorRecoveryCounter": "link_error_recovery",
    "LinkDownedCounter": "link_downed",
    "PortRcvErrors": "port_rcv_errors",
    "PortRcvRemotePhysicalErrors": "port_rcv_remote_physical_errors",
    "PortRcvSwitchRelayErrors": "port_rcv_switch_relay_errors",
    "PortXmitDiscards": "port_xmit_discards",
    "PortXmitConstraintErrors": "port_xmit_constraint_errors",
    "PortRcvConstraintErrors": "port_rcv_constraint_errors",
    "LocalLinkIntegrityErrors": "local_link_integrity_errors",
    "ExcessiveBufferOverrunErrors": "excessive_buffer_overrun_errors",
    "VL15Dropped": "VL15_dropped",
    "PortXmitWait": "port_xmit_wait",
    "QP1Dropped": "qp1_dropped",
    # legacy libibmad names (OFED 1.x perfquery)
    "XmtData": "port_xmit_data",
    "RcvData": "port_rcv_data",
    "XmtPkts": "port_xmit_packets",
    "RcvPkts": "port_rcv_packets",
    "XmtWait": "port_xmit_wait",
    "SymbolErrors": "symbol_error",
    "LinkRecovers": "link_error_recovery",
    "LinkDowned": "link_downed",
    "RcvErrors": "port_rcv_errors",
    "RcvRemotePhysErrors": "port_rcv_remote_physical_errors",
    "RcvSwRelayErrors": "port_rcv_switch_relay_errors",
    "XmtDiscards": "port_xmit_discards",
    "XmtConstraintErrors": "port_xmit_constraint_errors",
    "RcvConstraintErrors": "port_rcv_constraint_errors",
    "LinkIntegrityErrors": "local_link_integrity_errors",
    "ExcBufOverrunErrors": "excessive_buffer_overrun_errors",
}
_NOT_COUNTERS = {"PortSelect", "CounterSelect", "CounterSelect2"}
_HEADER = re.compile(
    r"^#\s*(?P<kind>[^:]*?counters?)\s*:\s*Lid\s+(?P<lid>\d+)(?:\s+\([^)]*\))?\s+"
    r"(?:port\s+(?P<port>\d+)|(?P<all>all ports))", re.IGNORECASE)
_FIELD = re.compile(r"^(?P<key>[A-Za-z][A-Za-z0-9]*):\.*(?P<value>.*)$")
_KEY = re.compile(r"[A-Za-z][A-Za-z0-9]*")  # ``_FIELD``'s key
#: The order of ``perfquery -x`` output (infiniband-diags), used by the renderer.
EXTENDED_ORDER = [
    "PortXmitData", "PortRcvData", "PortXmitPkts", "PortRcvPkts", "PortUnicastXmitPkts",
    "PortUnicastRcvPkts", "PortMulticastXmitPkts", "PortMulticastRcvPkts", "CounterSelect2",
    "SymbolErrorCounter", "LinkErrorRecoveryCounter", "LinkDownedCounter", "PortRcvErrors",
    "PortRcvRemotePhysicalErrors", "PortRcvSwitchRelayErrors", "PortXmitDiscards",
    "PortXmitConstraintErrors", "PortRcvConstraintErrors", "LocalLinkIntegrityErrors",
    "ExcessiveBufferOverrunErrors", "VL15Dropped", "PortXmitWait", "QP1Dropped",
]


def counter_name(field: str) -> str:
    """Canonical (sysfs) name of a perfquery field."""
    return PERFQUERY_NAMES.get(field) or snake_case(field)


def detect(output: Any) -> bool:
    """perfquery text: a ``# … counters: Lid N port P`` header or ``Name:....value`` lines."""
    if not isinstance(output, str):
        return False
    lines = [line for _, line in list(iter_lines(output))[:6]]
    if any(_HEADER.match(line.strip()) for line in lines):
        return True
    dotted = [line for line in lines if re.match(r"^[A-Za-z][A-Za-z0-9]*:\.{3,}\S", line)]
    return len(dotted) >= 2


@register_tool(SOURCE, detect, needs=("#", ":..."))
def parse_perfquery(output: Any, ctx: ToolContext) -> dict[str, list[dict[str, Any]]]:
    """perfquery text (one or more port blocks) -> ``fabric_counters`` rows."""
    if not isinstance(output, str):
        raise RecordError(f"perfquery output is not text (got {type(output).__name__})")
    if not output.strip():
        raise RecordError("perfquery output is empty (the port did not answer, or the collector "
                          "captured no stdout)")
    blocks: dict[tuple[str, str], dict[str, float]] = {}
    current: tuple[str, str] | None = None
    header_seen = False
    for i, line in iter_lines(output):
        stripped = line.strip()
        header = _HEADER.match(stripped)
        if header:
            header_seen = True
            port = header.group("port") or "all"
            device = ctx.device or f"lid{header.group('lid')}"
            current = (device, port)
            blocks.setdefault(current, {})
            continue
        if stripped.startswith("#"):
            continue
        field = _FIELD.match(stripped)
        if not field:
            raise RecordError(f"perfquery line {i} is not 'Name:....value': {shorten(stripped)!r}")
        key, raw = field.group("key"), field.group("value").strip()
        if current is None:
            if not (ctx.device and ctx.port):
                raise RecordError("perfquery output has no '# Port counters: Lid N port P' "
                                  "header and the envelope gives no device/port")
            current = (ctx.device, ctx.port)
            blocks.setdefault(current, {})
        if key in _NOT_COUNTERS:
            continue
        value = parse_int(raw)
        if value is None:
            raise RecordError(f"perfquery line {i}: {key} is not an integer: {shorten(raw)!r}"
                              + (" (output truncated?)" if not raw else ""))
        name = counter_name(key)
        seen = blocks[current].get(name)
        if seen is not None and seen != value:
            raise RecordError(f"perfquery line {i}: {key} given twice for port {current[1]} "
                              f"({seen:.0f} and {value})")
        blocks[current][name] = float(value)
    empty = [f"port {port}" for (_, port), counters in blocks.items() if not counters]
    if empty:
        raise RecordError(f"perfquery block for {', '.join(empty)} has a header but no counters "
                          "(output truncated?)")
    if not header_seen and not blocks:
        raise RecordError("perfquery output has no counter lines")
    rows = [
        {"ts": ctx.ts, "node": ctx.node, "device": device, "port": port, "counter": name,
         "value": value, "source": ctx.source}
        for (device, port), counters in blocks.items()
        for name, value in with_bytes(counters).items()
    ]
    return {"fabric_counters": rows}


#: A counter's value as the bulk path reads it (hex, grouped digits and numbers too long for
#: a float are declined to ``parse_perfquery``).
_BULK_VALUE = r"^[+-]?[0-9]{1,300}$"


@register_bulk(SOURCE)
def parse_perfquery_bulk(env: pl.DataFrame) -> tuple[dict[str, pl.DataFrame], pl.Series]:
    """``parse_perfquery`` over many envelopes at once (see ``base.BulkParser``).

    Declined, for ``parse_perfquery`` to handle one by one: text that is not plain ASCII, a
    line that is neither a header, a comment nor ``Name:....integer``, counters before any
    header without an envelope device and port, a counter given twice in a block, a block
    without counters, no counters at all, and the rare byte-named fields.
    """
    plain = env.select(plain_output(env)).to_series()
    take = env.filter(plain)
    lines = take.select(
        "__env",
        pl.when(pl.col("device") != "").then(pl.col("device")).alias("__dev"),
        pl.when(pl.col("port") != "").then(pl.col("port")).alias("__port"),
        pl.col("output").str.split("\n").alias("__s"),
    ).explode("__s").with_columns(pl.col("__s").str.strip_chars())
    lines = lines.filter(pl.col("__s") != "").with_row_index("__pos").with_columns(
        pl.col("__pos").cast(pl.Int64), pl.col("__s").str.starts_with("#").alias("__hash"))
    # Headers: the regex runs on the '#' lines only (other '#' lines are comments).
    heads = lines.filter("__hash").with_columns(
        pl.col("__s").str.extract_groups("(?i)" + _HEADER.pattern).alias("__h")
    ).unnest("__h").filter(pl.col("lid").is_not_null()).select(
        "__env", "__pos",
        pl.coalesce("__dev", pl.lit("lid") + pl.col("lid")).alias("device"),
        pl.coalesce("port", pl.lit("all")).alias("port"))
    n = lines.height
    is_head = pl.Series(dtype=pl.Boolean).extend_constant(False, n).scatter(heads["__pos"], True)
    head_dev = pl.Series(dtype=pl.String).extend_constant(None, n).scatter(
        heads["__pos"], heads["device"])
    head_port = pl.Series(dtype=pl.String).extend_constant(None, n).scatter(
        heads["__pos"], heads["port"])
    # A line's block: the position of the latest header of its envelope, or -1 (none: the
    # envelope's own device and port).
    start = pl.col("__env") != pl.col("__env").shift(1).fill_null(-1)
    lines = lines.with_columns(
        pl.when(is_head).then(pl.col("__pos")).when(start).then(-1).forward_fill()
        .alias("__block"),
    ).filter(~pl.col("__hash"))
    if not lines.height:  # headers and comments only, or nothing: parse_perfquery says why
        return {}, env["__env"]
    # Name:....value lines: the key is the text before the first colon (``_FIELD``'s key
    # cannot hold one), judged once per distinct key.
    kv = pl.col("__s").str.split_exact(":", 1)
    lines = lines.with_columns(kv.struct.field("field_0").alias("key"),
                               kv.struct.field("field_1").alias("__rest"))
    keys = lines["key"].unique().to_list()
    valid = [bool(_KEY.fullmatch(k)) for k in keys]
    names = [counter_name(k) if ok and k not in _NOT_COUNTERS else None
             for k, ok in zip(keys, valid, strict=True)]
    distinct = sorted({n for n in names if n is not None})
    name_code = [distinct.index(n) if n is not None else -1 for n in names]
    lines = lines.with_columns(pl.col("key").replace_strict(
        keys, list(range(len(keys))), return_dtype=pl.Int64).alias("__code"))
    code = pl.col("__code")
    lines = lines.with_columns(
        (pl.col("__rest").is_not_null() & pl.lit(pl.Series(valid, dtype=pl.Boolean))
         .gather(code)).alias("__field"),
        pl.lit(pl.Series(names, dtype=pl.String)).gather(code).alias("counter"))
    counters = lines.filter(pl.col("__field") & pl.col("counter").is_not_null()).with_columns(
        pl.when(pl.col("__block") >= 0).then(pl.col("__block"))
        .otherwise(-pl.col("__env")).alias("__bid"),
        pl.col("__rest").str.strip_chars_start(".").str.strip_chars().alias("value"))
    bad_env = pl.concat([
        # a line that is not Name:....value; a line before any header with no envelope
        # device and port to go to
        lines.filter(~pl.col("__field") | ((pl.col("__block") < 0)
                     & (pl.col("__dev").is_null() | pl.col("__port").is_null())))["__env"],
        # lines before a header in an envelope with headers (blocks could merge)
        lines.filter((pl.col("__block") < 0)
                     & pl.col("__env").is_in(heads["__env"].implode()))["__env"],
        # a value the bulk path does not read; the byte-named fields
        counters.filter(~pl.col("value").str.contains(_BULK_VALUE)
                        | pl.col("counter").is_in(list(WORD_COUNTERS.values())))["__env"],
        # a header whose block has no counters
        heads.join(counters.select(pl.col("__block").alias("__pos")).unique(), on="__pos",
                   how="anti")["__env"],
    ])
    head_keys = heads.select("__env", "device", "port")
    if head_keys.n_unique() != head_keys.height:  # two headers name one port: merged blocks
        bad_env = pl.concat([bad_env, heads.filter(head_keys.is_duplicated())["__env"]])
    keyed = counters.select(pl.col("__bid") * (len(distinct) + 1)
                            + pl.lit(pl.Series(name_code, dtype=pl.Int64)).gather(code))
    if keyed.n_unique() != keyed.height:  # a counter given twice in a block (XmtWait and
        # PortXmitWait are one counter)
        bad_env = pl.concat([bad_env, counters.filter(keyed.is_duplicated())["__env"]])
    bad_env = bad_env.unique()
    good = counters.filter(~pl.col("__env").is_in(bad_env.implode()))
    declined = pl.concat([env.filter(~plain)["__env"], bad_env,
                          take.filter(~pl.col("__env").is_in(good["__env"].implode()))["__env"]]
                         ).unique()
    block_dev = head_dev.gather(good["__block"].clip(0))
    block_port = head_port.gather(good["__block"].clip(0))
    last_in_block = pl.col("__bid").ne_missing(pl.col("__bid").shift(-1))
    good = good.select(
        "__env",
        pl.when(pl.col("__block") >= 0).then(block_dev).otherwise(pl.col("__dev"))
        .alias("device"),
        pl.when(pl.col("__block") >= 0).then(block_port).otherwise(pl.col("__port"))
        .alias("port"),
        "counter",
        int_text_as_float(pl.col("value")).alias("value"),
        (pl.col("__pos") * 4).alias("__key"),
        pl.when(last_in_block).then(pl.col("__pos")).backward_fill().alias("__end"),
    )
    # ``with_bytes``: each block's byte counts follow its last counter, in WORD_COUNTERS order
    words = [good.filter(pl.col("counter") == w).with_columns(
        pl.lit(b).alias("counter"), pl.col("value") * 4,
        (pl.col("__end") * 4 + k + 1).alias("__key"))
        for k, (w, b) in enumerate(WORD_COUNTERS.items())]
    rows = (pl.concat([good, *words]).sort("__key").drop("__end")
            .rename({"__key": "__idx"}))
    return {"fabric_counters": rows}, declined


_SYSFS_TO_FIELD = {v: k for k, v in PERFQUERY_NAMES.items() if k in EXTENDED_ORDER}


def render_perfquery_x(lid: int, port: int, counters: dict[str, float], *,
                       cap_mask: str = "0x5A00", cap_mask2: str = "0x0000000") -> str:
    """Realistic ``perfquery -x <lid> <port>`` text from sysfs-named counter values.

    ``counters`` uses the canonical names (``port_xmit_data`` in 4-byte words, or
    ``port_xmit_bytes`` in bytes, ``port_xmit_wait``, ``symbol_error``, …); counters not given
    print as 0. Layout and dot padding follow infiniband-diags (treydock/infiniband_exporter
    fixtures).
    """
    words = dict(counters)
    for word_name, byte_name in (("port_xmit_data", "port_xmit_bytes"),
                                 ("port_rcv_data", "port_rcv_bytes")):
        if byte_name in words:
            words.setdefault(word_name, words[byte_name] // 4)
            del words[byte_name]
    unknown = sorted(set(words) - set(_SYSFS_TO_FIELD))
    if unknown:
        raise ValueError(f"perfquery -x has no field for: {', '.join(unknown)}")
    by_field = {_SYSFS_TO_FIELD[name]: int(value) for name, value in words.items()}

    def line(name: str, value: str) -> str:
        return f"{name}:".ljust(33, ".") + value

    out = [f"# Port extended counters: Lid {lid} port {port} (CapMask: {cap_mask} "
           f"CapMask2: {cap_mask2})",
           line("PortSelect", str(port)), line("CounterSelect", "0x0000")]
    for field in EXTENDED_ORDER:
        if field == "CounterSelect2":
            out.append(line(field, "0x00000000"))
        else:
            out.append(line(field, str(by_field.get(field, 0))))
    return "\n".join(out) + "\n"
