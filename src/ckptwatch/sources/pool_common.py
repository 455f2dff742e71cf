"""What the pool readers (DAOS, SPDK, IBM Storage Scale) share: the row they write, how a
host-local name becomes a target, the units they convert, and how a line of a tool's output
that cannot be read is quarantined while the rest of the output stands.

Rows are ``pool_metrics`` rows ``(ts, pool, target, metric, value)`` in the pool vocabulary
(docs/formats.md, "Pool telemetry").
"""

from __future__ import annotations

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


def pool_row(ts: datetime, pool: str, target: str, metric: str, value: float) -> dict[str, Any]:
    """One ``pool_metrics`` row."""
    return {"ts": ts, "pool": pool, "target": target, "metric": metric, "value": float(value)}


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
