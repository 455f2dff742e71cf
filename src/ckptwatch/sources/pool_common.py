"""What the pool readers (DAOS, SPDK, IBM Storage Scale) share: the row they write, how a
host-local name becomes a target, the units they convert, and how a line of a tool's output
that cannot be read is quarantined while the rest of the output stands.

Rows are ``pool_metrics`` rows ``(ts, pool, target, metric, value)`` in the pool vocabulary
(docs/formats.md, "Pool telemetry").
"""

from __future__ import annotations

import re
from datetime import datetime
from typing import Any

from ckptwatch.sources.base import ToolContext
from ckptwatch.sources.envelope import LINE_REJECTS
from ckptwatch.sources.textkv import shorten

#: Names a bare file's name gives as its "device" that are a tool's name, not a pool's.
TOOL_FILE_WORDS = frozenset({
    "daos", "daos_metrics", "dmg", "spdk", "bdev", "nvmf", "iostat", "mmpmon", "mmlsqos",
    "mmdiag", "gpfs", "waiters", "telemetry",
})


#: The whitespace ``pool_target`` trims (the SQL macro's ``chr(32) || chr(9) || …``).
_TRIMMED = " \t\n\v\f\r"
#: A Lustre target in any of the spellings its tools print: ``fs-OST0003`` (lctl, the
#: exporters), ``fs-OST0003_UUID`` (``lfs df``, ``lfs getstripe --obd``), the client's device
#: ``fs-OST0003-osc-ffff8803c9c0f000`` (``lctl dl``, ``osc.*`` parameters), an MDT's
#: ``fs-MDT0000-mdc-…``; the kind and the hex index in any (ASCII) case. sql/session.sql's
#: ``pool_target_pattern()`` is the same pattern (tests/sql/test_pool_target.py).
LUSTRE_TARGET = re.compile(r"([A-Za-z0-9_]{1,8})-([Oo][Ss][Tt]|[Mm][Dd][Tt])([0-9A-Fa-f]{4})"
                           r"(?:_UUID|_uuid|-(?:osc|mdc)-[^\t\n\x0B\f\r ]*)?")


def pool_target(name: str) -> str:
    """The target a name stands for, the key that joins a checkpoint record's target to the
    pool telemetry's (docs/formats.md, "Pool target identity"): trimmed, and a Lustre target
    as ``<fsname>-OSTxxxx`` / ``<fsname>-MDTxxxx`` (upper-case kind and index) whichever
    spelling a tool printed; any other name as it is. The SQL macro ``pool_target`` applies
    the same rule to lakes and writers that did not."""
    text = name.strip(_TRIMMED)
    m = LUSTRE_TARGET.fullmatch(text)
    if m is None:
        return text
    return f"{m.group(1)}-{m.group(2).upper()}{m.group(3).upper()}"


def pool_row(ts: datetime, pool: str, target: str, metric: str, value: float) -> dict[str, Any]:
    """One ``pool_metrics`` row (its target as :func:`pool_target` spells it)."""
    return {"ts": ts, "pool": pool, "target": pool_target(target), "metric": metric,
            "value": float(value)}


def host_target(ctx: ToolContext, name: str) -> str:
    """A target named by a host-local name (DAOS ``engine0/tgt_3``, an SPDK bdev ``Nvme0n1``):
    the host goes first, ``<node>/<name>``, because every storage host has an engine 0 and an
    ``Nvme0n1`` and the series key ``(pool, target, metric)`` has no host."""
    return f"{ctx.node}/{name}"


def named_pool(ctx: ToolContext, default: str) -> str:
    """The pool an output that names none belongs to: the envelope's ``device`` (a bare file's
    name gives one too, unless it is a tool's name), else ``default``."""
    device = (ctx.device or "").strip()
    if device and device.lower() not in TOOL_FILE_WORDS:
        return device
    return default


def ticks_to_us(ticks: float, tick_rate: float) -> float:
    """SPDK ticks as microseconds (``tick_rate`` ticks per second)."""
    return ticks * 1e6 / tick_rate


def line_reject(tool: str, line: int, text: str, problem: str) -> dict[str, Any]:
    """A line of ``tool``'s output that cannot be read, as the parser result's
    ``LINE_REJECTS`` entry: quarantined with its reason, the output's other rows kept."""
    return {"reason": f"{tool} line {line}: {problem}: {shorten(text)!r}", "raw": text[:2000]}


def result(rows: list[dict[str, Any]],
           rejects: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """A parser's result: its ``pool_metrics`` rows and any rejected lines."""
    out: dict[str, list[dict[str, Any]]] = {"pool_metrics": rows}
    if rejects:
        out[LINE_REJECTS] = rejects
    return out
