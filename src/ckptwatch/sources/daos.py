"""DAOS engine telemetry (``daos_metrics``) and ``dmg pool query`` -> ``pool_metrics``.

``daos_metrics`` prints the engine's telemetry tree in two forms, both read:

* CSV (``daos_metrics -C``): ``ID: <engine>/<path>,value[,min,max,mean,sample_size,sum,
  std_dev[,description[,units]]]``; a header ``name,value,min,…`` may precede the rows (the
  rows may have fewer fields than it: the description and units are left out when empty).
* tree (``daos_metrics`` without ``-C``): one directory per indented line, leaves
  ``name: value unit [min: …, max: …, avg: …, sum: …, stddev: …, samples: …]``; the path is
  the chain of enclosing directories; an ``ID: <engine>`` line names the engine (else 0).

Read, per path (any prefix before the part shown, e.g. ``io/``, is allowed: a ``grep`` of the
output keeps the leaf's directory only in the CSV form):

* ``latency/update/<size>/tgt_<n>`` (µs; ``update`` is DAOS's write): its stats cover every
  sample since the engine started or the metric was reset, so per target the cumulative
  ``write_latency_us_total`` (Σsum over the sizes) and ``write_ops`` (Σsample_size), whose
  increases give each interval's mean, and ``write_latency_peak_ms`` (the largest max, since
  the start). ``fetch`` (reads) is not read.
* ``sched/cycle_duration/xs_<n>`` (ms) -> ``queue_wait_ms`` and ``sched/cycle_size/xs_<n>``
  (ULTs) -> ``queue_depth`` of that execution stream: the current cycle's length and how many
  user-level threads it runs (a stuck xstream shows a cycle of hours and a run queue of tens
  of thousands).
* ``net/<provider>/hg/active_rpcs/ctx_<n>`` (RPCs being handled in each network context),
  summed -> ``active_requests`` of the engine.
* ``pool/<pool>/ops/update/tgt_<n>`` -> ``write_ops`` and ``pool/<pool>/xferred/update/
  tgt_<n>`` -> ``write_bytes`` of that pool's target; ``pool/<pool>/ops/<op>`` for the pool and
  container operations (``pool_connect``, ``cont_open``, …) -> ``metadata_ops_total.<op>``
  and their sum ``metadata_ops_total`` on the engine's pool service.

Targets are host-local (every storage host has an engine 0): ``<node>/engine<e>/tgt_<n>``,
``<node>/engine<e>/xs_<n>``, ``<node>/engine<e>`` for RPCs and pool-service operations. The
pool is the DAOS pool named in the path, else ``daos`` (the engine-wide latency, scheduler
and RPC metrics belong to no one pool).

``dmg pool query``: ``Rebuild busy`` -> ``background_active.rebuild`` 1, ``idle``/``done``/
``stopped``/``failed`` -> 0, for the pool (target = the pool: a rebuild moves data on all of
its targets).

A value that is not a number (a timestamp, a string) is skipped, unless its path is one of
those read: that line is quarantined alone. Not read (no vocabulary signal, or no level in one
snapshot): the VOS aggregation and scrubber counters (``pool/<pool>/vos_aggregation/*``,
``pool/<pool>/scrubber/*``: cumulative counts, whose change over an interval would say whether
the work ran), network, NVMe error and other counters. Timestamps: the envelope's
``collected_at`` or the file's name or mtime (``daos_metrics`` prints none).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from ckptwatch.errors import RecordError
from ckptwatch.sources.base import ToolContext, register_tool
from ckptwatch.sources.pool_common import (
    host_target,
    line_reject,
    pool_row,
    result,
)
from ckptwatch.sources.textkv import shorten

SOURCE = "daos-metrics"
POOL_QUERY_SOURCE = "dmg-pool-query"
#: The pool of engine-wide metrics (I/O latency per target, scheduler) when nothing names one.
DEFAULT_POOL = "daos"

_CSV_COLUMNS = "name,value,min,max,mean,sample_size,sum,std_dev"
_CSV_HEADER = re.compile(rf"^{_CSV_COLUMNS}\b")
_CSV_ROW = re.compile(r"^ID:\s*(?P<engine>\d+)/(?P<path>[^,]+),(?P<rest>.*)$")
#: A command line echoed above the output (``sudo daos_metrics -C -S 0``, ``#sudo …``).
_COMMAND = re.compile(r"^#?\s*(?:sudo\s+)?(?:daos_metrics|dmg)\b")
_TREE_ID = re.compile(r"^\s*ID:\s*(?P<engine>\d+)\s*$")
_TREE_LEAF = re.compile(r"^(?P<indent>\s*)(?P<name>[^:\s][^:]*):\s*(?P<value>-?\d+(?:\.\d+)?)"
                        r"\s*(?P<unit>[^\[,]*?)\s*(?:\[(?P<stats>[^\]]*)\])?\s*(?:,.*)?$")
_TREE_DIR = re.compile(r"^(?P<indent>\s*)(?P<name>[^:\s]+)\s*$")
#: A leaf whose value is not a number (a timestamp, a string): nothing ckptwatch reads.
_TREE_TEXT = re.compile(r"^(?P<indent>\s*)(?P<name>[^:\s][^:]*):\s*\S")
_STAT = re.compile(r"^\s*(?P<key>min|max|avg|mean|sum|stddev|samples)\s*:\s*"
                   r"(?P<value>-?\d+(?:\.\d+)?)\s*$")

_UPDATE_LATENCY = re.compile(r"(?:^|/)latency/update/(?P<size>[^/]+)/tgt_(?P<tgt>\d+)$")
_CYCLE = re.compile(r"(?:^|/)cycle_(?P<what>duration|size)/xs_(?P<xs>\d+)$")
_POOL_TARGET = re.compile(
    r"^pool/(?P<pool>[^/]+)/(?P<what>ops/update|xferred/update)/tgt_(?P<tgt>\d+)$")
_POOL_OP = re.compile(r"^pool/(?P<pool>[^/]+)/ops/(?P<op>(?:pool|cont)_[a-z_]+)$")
_ACTIVE_RPCS = re.compile(r"(?:^|/)hg/active_rpcs/ctx_\d+$")


@dataclass
class Reading:
    """One telemetry leaf: its path below the engine, value and (for stats gauges) stats."""

    engine: str
    path: str
    value: float
    line: int
    max: float | None = None
    samples: float | None = None
    sum: float | None = None


def _is_csv_line(line: str) -> bool:
    return bool(_CSV_ROW.match(line.strip()) or _CSV_HEADER.match(line.strip()))


def _is_tree_line(line: str) -> bool:
    leaf = _TREE_LEAF.match(line)
    return bool(leaf and leaf.group("stats") and "samples" in leaf.group("stats"))


def detect(output: Any) -> bool:
    """``daos_metrics`` CSV rows (``ID: 0/…,``) or tree leaves with ``[… samples: n]``."""
    if not isinstance(output, str):
        return False
    lines = [line for line in output.splitlines()[:40] if line.strip()]
    return any(_is_csv_line(line) or _is_tree_line(line) for line in lines)


def _number(text: str) -> float | None:
    text = text.strip()
    if not text:
        return None
    try:
        return float(text)
    except ValueError:
        return None


def is_read(path: str) -> bool:
    """Whether a telemetry path is one ckptwatch reads (see the module doc)."""
    return bool(_UPDATE_LATENCY.search(path) or _CYCLE.search(path)
                or _POOL_TARGET.match(path) or _POOL_OP.match(path)
                or _ACTIVE_RPCS.search(path))


def _csv_reading(engine: str, path: str, rest: str, line: int) -> Reading | str | None:
    """A CSV row's reading, the problem with it, or None: a value that is not a number (a
    timestamp, a string) of a path ckptwatch does not read."""
    fields = rest.split(",")
    value = _number(fields[0])
    if value is None:
        return f"value {fields[0]!r} is not a number" if is_read(path.strip()) else None
    reading = Reading(engine, path.strip(), value, line)
    # A stats gauge has min,max,mean,sample_size,sum (then std_dev); a counter or plain gauge
    # leaves them empty, and its description and units follow in fewer fields than the header.
    stats = [_number(f) for f in fields[1:6]]
    if len(stats) == 5 and all(v is not None for v in stats):
        reading.max, reading.samples, reading.sum = stats[1], stats[3], stats[4]
    return reading


def _tree_readings(lines: list[tuple[int, str]], engine: str) -> Iterator[Reading | tuple[
        int, str, str]]:
    """The tree form's leaves with their paths (from the indentation), and unreadable lines."""
    stack: list[tuple[int, str]] = []  # (indent, directory name)
    for i, line in lines:
        ident = _TREE_ID.match(line)
        if ident:
            engine, stack = ident.group("engine"), []
            continue
        leaf = _TREE_LEAF.match(line)
        folder = None if leaf else _TREE_DIR.match(line)
        text = None if leaf or folder else _TREE_TEXT.match(line)
        m = leaf or folder or text
        if m is None:
            yield (i, line, "not a 'name: value unit [stats]' leaf or a directory name")
            continue
        indent = len(m.group("indent").expandtabs())
        while stack and stack[-1][0] >= indent:
            stack.pop()
        name = m.group("name").strip()
        if folder:
            stack.append((indent, name))
            continue
        path = "/".join([d for _, d in stack] + [name])
        if leaf is None:
            if is_read(path):
                yield (i, line, f"{path}: the value is not a number")
            continue
        reading = Reading(engine, path, float(leaf.group("value")), i)
        if leaf.group("stats"):
            stats: dict[str, float] = {}
            for part in leaf.group("stats").split(","):
                sm = _STAT.match(part)
                if sm is None:
                    yield (i, line, f"stat {part.strip()!r} is not 'name: number'")
                    break
                stats[sm.group("key")] = float(sm.group("value"))
            else:
                reading.max, reading.samples = stats.get("max"), stats.get("samples")
                reading.sum = stats.get("sum")
                yield reading
            continue
        yield reading


def read_metrics(text: str) -> tuple[list[Reading], list[tuple[int, str, str]]]:
    """Every reading of a ``daos_metrics`` output (CSV or tree), and the lines that are
    neither (line, text, problem). Echoed command lines and the CSV header are skipped."""
    readings: list[Reading] = []
    bad: list[tuple[int, str, str]] = []
    tree: list[tuple[int, str]] = []
    for i, raw in enumerate(text.splitlines(), start=1):
        line = raw.rstrip()
        stripped = line.strip()
        if not stripped or _COMMAND.match(stripped) or _CSV_HEADER.match(stripped):
            continue
        row = _CSV_ROW.match(stripped)
        if row:
            got = _csv_reading(row.group("engine"), row.group("path"), row.group("rest"), i)
            if isinstance(got, str):
                bad.append((i, stripped, got))
            elif got is not None:
                readings.append(got)
            continue
        if stripped.startswith("#"):
            continue
        tree.append((i, line))
    engine = "0"
    for item in _tree_readings(tree, engine):
        if isinstance(item, Reading):
            readings.append(item)
        else:
            bad.append(item)
    return readings, bad


@register_tool(SOURCE, detect, needs=("ID:", _CSV_COLUMNS, "samples"))
def parse_daos_metrics(output: Any, ctx: ToolContext) -> dict[str, list[dict[str, Any]]]:
    """``daos_metrics`` text (CSV or tree) -> ``pool_metrics`` rows (see the module doc)."""
    if not isinstance(output, str):
        raise RecordError(f"daos_metrics output is not text (got {type(output).__name__})")
    readings, bad = read_metrics(output)
    if not readings:
        why = f" (line {bad[0][0]}: {bad[0][2]})" if bad else ""
        raise RecordError(f"daos_metrics output has no telemetry rows{why}")
    rows = daos_rows(readings, ctx)
    if not rows:
        raise RecordError(
            f"daos_metrics output: none of its {len(readings)} readings is one ckptwatch reads "
            "(io/latency/update, sched cycle_duration/cycle_size, hg active_rpcs, pool/<pool>/"
            "ops and xferred/update); collect 'daos_metrics -C' without a filter")
    rejects = [line_reject("daos_metrics", i, text, problem) for i, text, problem in bad]
    return result(rows, rejects)


def daos_rows(readings: list[Reading], ctx: ToolContext) -> list[dict[str, Any]]:
    """The vocabulary rows of a ``daos_metrics`` output's readings."""
    default_pool = DEFAULT_POOL
    latency: dict[str, list[Reading]] = {}
    out: list[dict[str, Any]] = []
    ops: dict[tuple[str, str], dict[str, float]] = {}
    rpcs: dict[str, float] = {}
    for r in readings:
        engine = f"engine{r.engine}"
        m = _UPDATE_LATENCY.search(r.path)
        if m:
            latency.setdefault(host_target(ctx, f"{engine}/tgt_{m.group('tgt')}"), []).append(r)
            continue
        m = _CYCLE.search(r.path)
        if m:
            metric = "queue_wait_ms" if m.group("what") == "duration" else "queue_depth"
            out.append(pool_row(ctx.ts, default_pool,
                                host_target(ctx, f"{engine}/xs_{m.group('xs')}"), metric,
                                r.value))
            continue
        m = _POOL_TARGET.match(r.path)
        if m:
            metric = "write_ops" if m.group("what") == "ops/update" else "write_bytes"
            out.append(pool_row(ctx.ts, m.group("pool"),
                                host_target(ctx, f"{engine}/tgt_{m.group('tgt')}"), metric,
                                r.value))
            continue
        m = _POOL_OP.match(r.path)
        if m:
            ops.setdefault((m.group("pool"), host_target(ctx, engine)), {})[m.group("op")] = r.value
            continue
        if _ACTIVE_RPCS.search(r.path):
            target = host_target(ctx, engine)
            rpcs[target] = rpcs.get(target, 0.0) + r.value
    out += [pool_row(ctx.ts, default_pool, target, "active_requests", n)
            for target, n in rpcs.items()]
    for target, parts in latency.items():
        out += _latency_rows(ctx, default_pool, target, parts)
    for (pool, target), counts in ops.items():
        out += [pool_row(ctx.ts, pool, target, f"metadata_ops_total.{op}", n)
                for op, n in counts.items()]
        out.append(pool_row(ctx.ts, pool, target, "metadata_ops_total", sum(counts.values())))
    return out


def _latency_rows(ctx: ToolContext, pool: str, target: str,
                  parts: list[Reading]) -> list[dict[str, Any]]:
    """One target's write latency over its I/O sizes: the cumulative sum (µs) and count, and
    the largest max since the start (ms). A reading without stats (a plain gauge) has no sum
    to give: none is written for it."""
    stats = [r for r in parts if r.samples is not None and r.sum is not None]
    if not stats:
        return []
    total_us = sum(r.sum or 0.0 for r in stats)
    samples = sum(r.samples or 0.0 for r in stats)
    rows = [pool_row(ctx.ts, pool, target, "write_latency_us_total", total_us),
            pool_row(ctx.ts, pool, target, "write_ops", samples)]
    maxima = [r.max for r in stats if r.max is not None and r.samples]
    if maxima:
        rows.append(pool_row(ctx.ts, pool, target, "write_latency_peak_ms", max(maxima) / 1000))
    return rows


_POOL_HEAD = re.compile(r"^Pool\s+(?P<pool>[0-9a-fA-F-]{36}),\s*ntarget=")
_REBUILD = re.compile(r"^-?\s*Rebuild\s+(?P<state>[a-z]+)\b")
#: ``dmg pool query`` rebuild states -> background_active.rebuild.
REBUILD_ACTIVE = {"busy": 1.0, "idle": 0.0, "done": 0.0, "stopped": 0.0, "failed": 0.0}


def detect_pool_query(output: Any) -> bool:
    """``dmg pool query`` text: ``Pool <uuid>, ntarget=…``."""
    if not isinstance(output, str):
        return False
    return any(_POOL_HEAD.match(line.strip()) for line in output.splitlines()[:10])


@register_tool(POOL_QUERY_SOURCE, detect_pool_query, needs=("ntarget=",))
def parse_pool_query(output: Any, ctx: ToolContext) -> dict[str, list[dict[str, Any]]]:
    """``dmg pool query`` -> ``background_active.rebuild`` of the pool (target = the pool)."""
    if not isinstance(output, str):
        raise RecordError(f"dmg pool query output is not text (got {type(output).__name__})")
    pool = None
    rows = []
    for line in output.splitlines():
        stripped = line.strip()
        head = _POOL_HEAD.match(stripped)
        if head:
            pool = head.group("pool")
            continue
        rebuild = _REBUILD.match(stripped)
        if rebuild and pool is not None:
            state = rebuild.group("state")
            if state not in REBUILD_ACTIVE:
                raise RecordError(f"dmg pool query: unknown rebuild state {state!r} in "
                                  f"{shorten(stripped)!r} (known: {', '.join(REBUILD_ACTIVE)})")
            rows.append(pool_row(ctx.ts, pool, pool, "background_active.rebuild",
                                 REBUILD_ACTIVE[state]))
    if pool is None:
        raise RecordError("dmg pool query output has no 'Pool <uuid>, ntarget=…' line")
    if not rows:
        raise RecordError(f"dmg pool query output for pool {pool} has no 'Rebuild <state>' line "
                          "(query without --health-only=false? an older dmg?)")
    return {"pool_metrics": rows}
