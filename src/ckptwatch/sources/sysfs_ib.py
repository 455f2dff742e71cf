"""InfiniBand / RoCE port counters from sysfs (``/sys/class/infiniband/<hca>/ports/<n>/…``).

Canonical IB counter names are the sysfs file names (``port_xmit_wait``, ``symbol_error``, …);
perfquery and Prometheus map onto them. ``port_xmit_data`` / ``port_rcv_data`` count 4-byte
words (IBA: "octets divided by 4"); they are kept as the tool reports them and also emitted in
bytes as ``port_xmit_bytes`` / ``port_rcv_bytes`` (= words x 4). ``counters_ext/*_64`` (mlx4)
are the 64-bit versions of the same counters and win over the legacy 32-bit files.
``hw_counters/*`` (mlx5 and others) keep their driver names; the RoCE congestion counters also
get the cross-driver aliases (``cnp_sent``, ``cnp_handled``, ``ecn_marked``).

Accepted shapes of one snapshot (all read by ``parse_sysfs_ib``):

* text from ``grep -H . /sys/class/infiniband/*/ports/*/counters/* …`` (``path:value`` lines);
* a JSON object ``{path: value}`` (paths absolute or relative; nested objects are flattened);
* a directory tree copied from sysfs, read with ``read_sysfs_tree`` into the object above.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from ckptwatch.errors import RecordError
from ckptwatch.sources.base import ToolContext, register_tool
from ckptwatch.sources.ethtool import canonical_alias
from ckptwatch.sources.textkv import iter_lines, parse_int, shorten

SOURCE = "sysfs-ib"

#: Word counters (4 octets per unit) and the byte counters derived from them.
WORD_COUNTERS = {"port_xmit_data": "port_xmit_bytes", "port_rcv_data": "port_rcv_bytes"}
COUNTER_GROUPS = ("counters", "counters_ext", "hw_counters")
_NO_PMA = re.compile(r"N/A\b.*", re.IGNORECASE)
_PATH = re.compile(r"(?:^|/)(?:ports/\d+/)?(?:counters|counters_ext|hw_counters)/[^/]+$")


def with_bytes(counters: dict[str, float]) -> dict[str, float]:
    """``counters`` plus ``port_xmit_bytes`` / ``port_rcv_bytes`` derived from the word counts."""
    out = dict(counters)
    for words, byte_name in WORD_COUNTERS.items():
        if words in counters:
            out[byte_name] = counters[words] * 4
    return out


def ext_name(name: str) -> str:
    """``counters_ext`` file name -> canonical: ``port_xmit_data_64`` -> ``port_xmit_data``,
    ``port_unicast_xmit_packets`` -> ``unicast_xmit_packets``."""
    base = name[:-3] if name.endswith("_64") else name
    m = re.fullmatch(r"port_((?:uni|multi)cast_(?:xmit|rcv)_packets)", base)
    return m.group(1) if m else base


def flatten(doc: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """Nested ``{dir: {file: value}}`` -> ``{"dir/file": value}``."""
    flat: dict[str, Any] = {}
    for key, value in doc.items():
        path = f"{prefix}/{key}" if prefix else str(key)
        if isinstance(value, dict):
            flat.update(flatten(value, path))
        else:
            flat[path] = value
    return flat


def read_sysfs_tree(root: Path) -> dict[str, str]:
    """Counter files under a copied sysfs tree -> ``{relative posix path: file content}``."""
    out: dict[str, str] = {}
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root).as_posix()
        if path.is_file() and _PATH.search(rel):
            out[rel] = path.read_text(errors="replace").strip()
    return out


def _locate(path: str, ctx: ToolContext) -> tuple[str, str, str, str] | None:
    """(device, port, group, name) of a counter path; None when it is not a counter file."""
    parts = [p for p in path.strip().split("/") if p]
    idx = next((i for i in range(len(parts) - 1, -1, -1) if parts[i] in COUNTER_GROUPS), None)
    if idx is None or idx != len(parts) - 2:
        return None
    group, name = parts[idx], parts[idx + 1]
    port = ctx.port
    device = ctx.device
    if idx >= 2 and parts[idx - 2] == "ports":
        port = parts[idx - 1]
        if idx >= 3:
            device = parts[idx - 3]
    if not device or not port:
        raise RecordError(f"sysfs path '{shorten(path)}' does not say which HCA/port; use paths "
                          "like <hca>/ports/<n>/counters/<name> or give device and port in the "
                          "envelope")
    return device, port, group, name


def detect(output: Any) -> bool:
    """A sysfs counter snapshot: ``path:value`` text or ``{path: value}`` with counter paths."""
    if isinstance(output, dict):
        keys = list(flatten(output))
        return bool(keys) and any(_PATH.search(k) for k in keys[:50])
    if isinstance(output, str):
        for _, line in list(iter_lines(output))[:5]:
            path, sep, _ = line.partition(":")
            if sep and _PATH.search(path.strip()):
                return True
    return False


@register_tool(SOURCE, detect)
def parse_sysfs_ib(output: Any, ctx: ToolContext) -> dict[str, list[dict[str, Any]]]:
    """A sysfs ``counters/`` + ``hw_counters/`` snapshot -> ``fabric_counters`` rows."""
    items: list[tuple[str, Any, str]] = []
    if isinstance(output, dict):
        items = [(k, v, f"key '{shorten(k)}'") for k, v in flatten(output).items()]
    elif isinstance(output, str):
        for i, line in iter_lines(output):
            path, sep, value = line.partition(":")
            if not sep:
                raise RecordError(f"sysfs snapshot line {i} is not 'path:value': "
                                  f"{shorten(line)!r}")
            items.append((path, value, f"line {i}"))
    else:
        raise RecordError(f"sysfs snapshot is neither text nor a JSON object "
                          f"(got {type(output).__name__})")
    legacy: dict[tuple[str, str], dict[str, float]] = {}
    ext: dict[tuple[str, str], dict[str, float]] = {}
    hw: dict[tuple[str, str], dict[str, float]] = {}
    no_pma = 0
    for path, raw, where in items:
        loc = _locate(path, ctx)
        if loc is None:
            continue
        device, port, group, name = loc
        text = str(raw).strip()
        if _NO_PMA.fullmatch(text):
            no_pma += 1
            continue
        number = parse_int(text)
        if number is None:
            raise RecordError(f"sysfs {where} ({group}/{name}): not an integer: {shorten(text)!r}")
        target = {"counters": legacy, "counters_ext": ext, "hw_counters": hw}[group]
        target.setdefault((device, port), {})[ext_name(name) if group == "counters_ext"
                                              else name] = float(number)
    rows: list[dict[str, Any]] = []
    for key in sorted({*legacy, *ext, *hw}):
        counters = with_bytes({**legacy.get(key, {}), **ext.get(key, {})})
        for hw_name, hw_value in hw.get(key, {}).items():
            counters[hw_name] = hw_value
            alias = canonical_alias(hw_name)
            if alias and alias not in counters:
                counters[alias] = hw_value
        device, port = key
        rows.extend(
            {"ts": ctx.ts, "node": ctx.node, "device": device, "port": port, "counter": cname,
             "value": cvalue, "source": ctx.source}
            for cname, cvalue in counters.items()
        )
    if not rows:
        if no_pma:
            raise RecordError(f"sysfs snapshot has no readable counter: all {no_pma} counter "
                              "files read 'N/A (no PMA)' (the HCA has no performance management "
                              "agent)")
        raise RecordError("sysfs snapshot has no <hca>/ports/<n>/counters/* or hw_counters/* "
                          "entries")
    return {"fabric_counters": rows}
