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

from ckptwatch.errors import RecordError
from ckptwatch.sources.base import ToolContext, register_tool
from ckptwatch.sources.sysfs_ib import with_bytes
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


@register_tool(SOURCE, detect)
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
