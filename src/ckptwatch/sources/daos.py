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
* ``io/ops/<op>/latency/tgt_<n>`` (µs) for the object RPCs that touch metadata
  (``METADATA_OPS``: key queries, punches, enumerations, syncs): per target the cumulative
  ``metadata_latency_us_total.<op>`` (sum) and ``metadata_ops_total.<op>`` (sample_size),
  their sums over the operations, and ``metadata_latency_peak_ms`` (the largest max). A DFS
  namespace operation is such RPCs on the directory's objects: their latency is where a
  metadata stall shows on DAOS's data targets (the bulk parser leaves these outputs to this
  one).
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

import polars as pl

from ckptwatch.errors import RecordError
from ckptwatch.sources.base import ToolContext, register_bulk, register_tool
from ckptwatch.sources.pool_bulk import divided, plain_lines, row_targets
from ckptwatch.sources.pool_common import (
    host_target,
    line_reject,
    pool_row,
    result,
)
from ckptwatch.sources.textkv import first_lines, shorten

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
#: Object RPCs that touch metadata, not data (DAOS's ``obj_opc_to_str`` names): key queries,
#: punches (deletes), enumerations (readdir, listing keys), syncs. Their processing time per
#: target is a stats gauge ``io/ops/<op>/latency/tgt_<n>`` (µs); update and fetch are the data
#: path (``io/latency/update/<size>``), ``tgt_*`` ops are a leader's forwarded halves.
METADATA_OPS = frozenset({"key_query", "obj_punch", "dkey_punch", "akey_punch", "dkey_enum",
                          "akey_enum", "recx_enum", "obj_enum", "obj_sync"})
_OP_LATENCY = re.compile(r"(?:^|/)ops/(?P<op>[a-z_]+)/latency/tgt_(?P<tgt>\d+)$")


def _metadata_op(path: str) -> re.Match[str] | None:
    """The per-target latency reading of a metadata object RPC (``METADATA_OPS``), or None."""
    m = _OP_LATENCY.search(path)
    return m if m is not None and m.group("op") in METADATA_OPS else None


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
    return any(_is_csv_line(line) or _is_tree_line(line)
               for line in first_lines(output, 40) if line.strip())


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
                or _ACTIVE_RPCS.search(path) or _metadata_op(path))


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
    meta: dict[str, list[tuple[str, Reading]]] = {}
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
            continue
        m = _metadata_op(r.path)
        if m:
            target = host_target(ctx, f"{engine}/tgt_{m.group('tgt')}")
            meta.setdefault(target, []).append((m.group("op"), r))
    out += [pool_row(ctx.ts, default_pool, target, "active_requests", n)
            for target, n in rpcs.items()]
    for target, parts in latency.items():
        out += _latency_rows(ctx, default_pool, target, parts)
    for (pool, target), counts in ops.items():
        out += [pool_row(ctx.ts, pool, target, f"metadata_ops_total.{op}", n)
                for op, n in counts.items()]
        out.append(pool_row(ctx.ts, pool, target, "metadata_ops_total", sum(counts.values())))
    for target, ops_read in meta.items():
        out += _metadata_latency_rows(ctx, default_pool, target, ops_read)
    return out


def _metadata_latency_rows(ctx: ToolContext, pool: str, target: str,
                           parts: list[tuple[str, Reading]]) -> list[dict[str, Any]]:
    """One target's metadata RPCs: per operation the cumulative latency (µs) and count
    (``metadata_latency_us_total.<op>``, ``metadata_ops_total.<op>``), their sums over the
    operations, and the largest max since the start (``metadata_latency_peak_ms``). A reading
    without stats gives nothing (no sum to give)."""
    stats = [(op, r) for op, r in parts if r.samples is not None and r.sum is not None]
    if not stats:
        return []
    rows = []
    for op, r in stats:
        rows += [pool_row(ctx.ts, pool, target, f"metadata_latency_us_total.{op}", r.sum or 0.0),
                 pool_row(ctx.ts, pool, target, f"metadata_ops_total.{op}", r.samples or 0.0)]
    rows += [pool_row(ctx.ts, pool, target, "metadata_latency_us_total",
                      sum(r.sum or 0.0 for _, r in stats)),
             pool_row(ctx.ts, pool, target, "metadata_ops_total",
                      sum(r.samples or 0.0 for _, r in stats))]
    maxima = [r.max for _, r in stats if r.max is not None and r.samples]
    if maxima:
        rows.append(pool_row(ctx.ts, pool, target, "metadata_latency_peak_ms",
                             max(maxima) / 1000))
    return rows


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


#: A number ``parse_daos_metrics_bulk`` reads (exactly ``float``'s reading of it): digits,
#: a fraction, an exponent. Another non-blank field of a reading used (``inf``, ``1_000``,
#: ``+5``) declines its output to ``parse_daos_metrics``.
_BULK_NUMBER = r"^-?[0-9]+(?:\.[0-9]+)?(?:[eE][+-]?[0-9]{1,3})?$"
#: What a reading read is, in ``daos_rows``' order of tests: (kind, pattern, its group).
_BULK_KINDS = [("latency", _UPDATE_LATENCY, "tgt"), ("cycle", _CYCLE, "xs"),
               ("pool_target", _POOL_TARGET, "tgt"), ("pool_op", _POOL_OP, "op"),
               ("rpcs", _ACTIVE_RPCS, None)]


def _bulk_numbers(frame: pl.DataFrame, fields: dict[str, pl.Expr]) -> pl.DataFrame:
    """``frame`` with CSV fields as ``_number`` reads them, for the bulk parser: each of
    ``fields`` as a number (null: none), and ``<name>__ok``: whether the bulk parser reads the
    field (absent, blank, or ``_BULK_NUMBER``). Step by step: each expression is evaluated once."""
    frame = frame.with_columns(f.str.strip_chars().alias(name) for name, f in fields.items())
    frame = frame.with_columns(
        pl.when(pl.col(name).str.contains(_BULK_NUMBER))
        .then(pl.col(name).cast(pl.Float64, strict=False)).alias(f"{name}__n")
        for name in fields)
    return frame.with_columns(
        *[(pl.col(name).is_null() | (pl.col(name) == "") | pl.col(f"{name}__n").is_not_null())
          .alias(f"{name}__ok") for name in fields],
        *[pl.col(f"{name}__n").alias(name) for name in fields]).drop(
        f"{name}__n" for name in fields)


def _sequential_sum(values: pl.Expr) -> pl.Expr:
    """Python's ``sum`` of ``values`` in their order (polars' ``sum`` adds in another order:
    its last bit may differ); 0.0 added, so that a zero is +0.0 as Python's is."""
    return values.cum_sum().last() + 0.0


@register_bulk(SOURCE)
def parse_daos_metrics_bulk(env: pl.DataFrame) -> tuple[dict[str, pl.DataFrame], pl.Series]:
    """``parse_daos_metrics`` over many outputs at once (``base.BulkParser``; targets: the
    envelope's ``node`` first): the CSV form (``daos_metrics -C``), each line a header, an
    echoed command, a comment or an ``ID: <engine>/<path>,…`` row, and the fields of the
    readings ckptwatch uses blank or numbers (``_BULK_NUMBER``). Declined, for
    ``parse_daos_metrics``: the tree form, any other line, such a field that is neither, a
    reading read whose value is blank (quarantined), a pool operation given twice in one
    output, an output of no rows (it says why)."""
    line = pl.col("line")
    lines = plain_lines(env)
    # ``_CSV_ROW`` (``ID:``, blanks, the engine's digits, ``/``, the path up to the first
    # comma, the rest), split without a regular expression
    lines = lines.with_columns(pl.when(line.str.starts_with("ID:")).then(
        line.str.slice(3).str.strip_chars_start(" \t").str.splitn("/", 2)).alias("__a"))
    lines = lines.with_columns(pl.col("__a").struct.field("field_0").alias("engine"),
                               pl.col("__a").struct.field("field_1").str.splitn(",", 2)
                               .alias("__b")).drop("__a")
    lines = lines.with_columns(pl.col("__b").struct.field("field_0").alias("path"),
                               pl.col("__b").struct.field("field_1").alias("rest")).drop("__b")
    lines = lines.with_columns(
        (pl.col("engine").str.contains(r"^[0-9]+$") & (pl.col("path") != "")
         & pl.col("rest").is_not_null()).fill_null(False).alias("__row"))
    other = lines.filter(~pl.col("__row")).filter(~(
        line.str.contains(_CSV_HEADER.pattern) | line.str.contains(_COMMAND.pattern)
        | line.str.starts_with("#")))
    rows = lines.filter("__row").select("__env", "__k", "engine", pl.col("path").str.strip_chars(),
                                        "rest")
    # what each reading is (``daos_rows``' tests, in its order), worked out once per distinct
    # path (a day's outputs repeat a few dozen), then joined to the rows
    rows = rows.join(_bulk_readings(rows.select(pl.col("path").unique())), on="path",
                     how="left", maintain_order="left").filter(pl.col("kind").is_not_null())
    rows = rows.join(env.select("__env", "node"), on="__env", maintain_order="left")
    rows = rows.with_columns((pl.col("node") + "/engine" + pl.col("engine") + pl.col("sub"))
                             .alias("target")).drop("sub")
    rows = _bulk_numbers(rows, {"value": pl.col("rest").str.splitn(",", 2)
                                .struct.field("field_0")})
    # a latency's stats (the update latency's and the metadata RPCs'): min, max, mean,
    # samples, sum (all numbers, or none is read)
    latency = pl.col("kind").is_in(["latency", "metaop"])
    lat = rows.filter(latency).with_columns(pl.col("rest").str.split(",").alias("__f"))
    lat = _bulk_numbers(lat, {f"__s{k}": pl.col("__f").list.get(k + 1, null_on_oob=True)
                              for k in range(5)})
    lat = lat.select("__env", "__k", "kind", "metric", "target", *[f"__s{k}" for k in range(5)],
                     pl.all_horizontal(f"__s{k}__ok" for k in range(5)).alias("__sok"),
                     (pl.col("__f").list.len() >= 6).alias("__slen"))
    twice = rows.filter((pl.col("kind") == "pool_op")
                        & pl.struct("__env", "pool", "target", "metric").is_duplicated())
    bad = pl.concat([other["__env"], twice["__env"],
                     rows.filter(~pl.col("value__ok") | pl.col("value").is_null())["__env"],
                     lat.filter(~pl.col("__sok"))["__env"]]).unique()
    keep = ~pl.col("__env").is_in(bad.implode())
    rows = rows.filter(keep & ~latency)
    lat = lat.filter(keep)
    # the rows' order: each envelope's in turn (``__env``), then ``daos_rows``' phases, then
    # the first line of what the row sums up, then the row's place among its group's rows
    parts = []
    # in the readings' order: the scheduler cycles and the pool's targets
    parts.append(rows.filter(pl.col("kind").is_in(["cycle", "pool_target"])).select(
        "__env", pl.lit(0).alias("__phase"), pl.col("__k").alias("__first"),
        pl.lit(0).alias("__j"), "pool", "target", "metric", "value"))
    # then the RPCs in flight per engine, summed over its contexts
    parts.append(rows.filter(pl.col("kind") == "rpcs")
                 .group_by("__env", "target", maintain_order=True)
                 .agg(pl.col("__k").first().alias("__first"),
                      _sequential_sum(pl.col("value")).alias("value"))
                 .select("__env", pl.lit(1).alias("__phase"), "__first", pl.lit(0).alias("__j"),
                         pl.lit(DEFAULT_POOL).alias("pool"), "target",
                         pl.lit("active_requests").alias("metric"), "value"))
    # then each target's update latency over its I/O sizes
    stat = pl.col("__slen") & pl.all_horizontal(pl.col(f"__s{k}").is_not_null()
                                                for k in range(5))
    meta = lat.filter(pl.col("kind") == "metaop")
    lat = lat.filter(pl.col("kind") == "latency")
    lat = (lat.group_by("__env", "target", maintain_order=True)
           .agg(pl.col("__k").first().alias("__first"), stat.any().alias("__any"),
                _sequential_sum(pl.col("__s4").filter(stat)).alias("write_latency_us_total"),
                _sequential_sum(pl.col("__s3").filter(stat)).alias("write_ops"),
                pl.col("__s1").filter(stat & (pl.col("__s3") != 0.0)).max()
                .alias("write_latency_peak_ms"))
           .filter("__any"))
    lat = divided(lat, 1000, "write_latency_peak_ms")
    names = ["write_latency_us_total", "write_ops", "write_latency_peak_ms"]
    parts.append(lat.unpivot(names, index=["__env", "__first", "target"],
                             variable_name="metric").drop_nulls("value").select(
        "__env", pl.lit(2).alias("__phase"), "__first",
        pl.col("metric").replace_strict(names, [0, 1, 2], return_dtype=pl.Int64).alias("__j"),
        pl.lit(DEFAULT_POOL).alias("pool"), "target", "metric", "value"))
    # then the pool service's operations per pool and engine, and their sum
    ops = rows.filter(pl.col("kind") == "pool_op").with_columns(
        pl.col("__k").first().over("__env", "pool", "target").alias("__first"))
    parts.append(ops.select("__env", pl.lit(3).alias("__phase"), "__first",
                            pl.col("__k").alias("__j"), "pool", "target", "metric", "value"))
    parts.append(ops.group_by("__env", "pool", "target", maintain_order=True)
                 .agg(pl.col("__first").first(), _sequential_sum(pl.col("value")).alias("value"))
                 .select("__env", pl.lit(3).alias("__phase"), "__first",
                         pl.lit(1 << 40).alias("__j"), "pool", "target",
                         pl.lit("metadata_ops_total").alias("metric"), "value"))
    # then each target's metadata RPCs: per reading its latency sum and count, then their
    # sums and the largest max (``_metadata_latency_rows``)
    # (a target's place: its first such reading, with stats or not, as the plain parser's)
    meta = meta.with_columns(
        pl.col("__k").first().over("__env", "target").alias("__first")).filter(stat)
    parts.append(meta.select("__env", pl.lit(4).alias("__phase"), "__first",
                             (2 * pl.col("__k")).alias("__j"), pl.lit(DEFAULT_POOL).alias("pool"),
                             "target", "metric", pl.col("__s4").alias("value")))
    parts.append(meta.select("__env", pl.lit(4).alias("__phase"), "__first",
                             (2 * pl.col("__k") + 1).alias("__j"),
                             pl.lit(DEFAULT_POOL).alias("pool"), "target",
                             pl.col("metric").str.replace("^metadata_latency_us_total",
                                                          "metadata_ops_total"),
                             pl.col("__s3").alias("value")))
    sums = (meta.group_by("__env", "target", maintain_order=True)
            .agg(pl.col("__first").first(),
                 _sequential_sum(pl.col("__s4")).alias("metadata_latency_us_total"),
                 _sequential_sum(pl.col("__s3")).alias("metadata_ops_total"),
                 pl.col("__s1").filter(pl.col("__s3") != 0.0).max()
                 .alias("metadata_latency_peak_ms")))
    sums = divided(sums, 1000, "metadata_latency_peak_ms")
    names = ["metadata_latency_us_total", "metadata_ops_total", "metadata_latency_peak_ms"]
    parts.append(sums.unpivot(names, index=["__env", "__first", "target"],
                              variable_name="metric").drop_nulls("value").select(
        "__env", pl.lit(4).alias("__phase"), "__first",
        pl.col("metric").replace_strict(names, [1 << 40, (1 << 40) + 1, (1 << 40) + 2],
                                        return_dtype=pl.Int64).alias("__j"),
        pl.lit(DEFAULT_POOL).alias("pool"), "target", "metric", "value"))
    out = (pl.concat([p.with_columns(pl.col("__phase", "__first", "__j").cast(pl.Int64))
                      for p in parts])
           .sort("__env", "__phase", "__first", "__j")
           .select("__env", pl.int_range(pl.len(), dtype=pl.Int64).over("__env").alias("__idx"),
                   "pool", "target", "metric", "value"))
    declined = env.filter(~pl.col("__env").is_in(out["__env"].implode()))["__env"]
    return {"pool_metrics": row_targets(out)}, declined


def _bulk_readings(keys: pl.DataFrame) -> pl.DataFrame:
    """Per distinct ``path`` of readings: what ``daos_rows`` makes of the reading (``kind``:
    ``_BULK_KINDS``' name, null when none is read), and of a row in the readings' order or
    in the sums its ``pool``, ``metric`` (an operation's: ``metadata_ops_total.<op>``) and
    ``sub``, its target below the engine (``/xs_<n>``, ``/tgt_<n>``, or the engine)."""
    path = pl.col("path")
    kind = pl.lit(None, dtype=pl.String)
    for name, pattern, _ in reversed(_BULK_KINDS):
        kind = pl.when(path.str.contains(pattern.pattern)).then(pl.lit(name)).otherwise(kind)
    op = path.str.extract(_OP_LATENCY.pattern, 1)
    kind = kind.fill_null(pl.when(op.is_in(sorted(METADATA_OPS))).then(pl.lit("metaop")))
    keys = keys.with_columns(kind.alias("kind"))
    kind = pl.col("kind")
    return keys.with_columns(
        pl.when(kind.is_in(["pool_target", "pool_op"])).then(path.str.extract(r"^pool/([^/]+)/"))
        .otherwise(pl.lit(DEFAULT_POOL)).alias("pool"),
        pl.when(kind == "cycle").then("/" + path.str.extract(r"(xs_[0-9]+)$"))
        .when(kind.is_in(["latency", "pool_target", "metaop"]))
        .then("/" + path.str.extract(r"(tgt_[0-9]+)$"))
        .otherwise(pl.lit("")).alias("sub"),
        pl.when(kind == "cycle").then(
            pl.when(path.str.contains(r"cycle_duration/xs_[0-9]+$")).then(pl.lit("queue_wait_ms"))
            .otherwise(pl.lit("queue_depth")))
        .when(kind == "pool_target").then(
            pl.when(path.str.contains(r"/ops/update/tgt_[0-9]+$")).then(pl.lit("write_ops"))
            .otherwise(pl.lit("write_bytes")))
        .when(kind == "pool_op").then("metadata_ops_total." + path.str.extract(r"/ops/([^/]+)$"))
        .when(kind == "metaop").then("metadata_latency_us_total." + op)
        .alias("metric"))


_POOL_HEAD = re.compile(r"^Pool\s+(?P<pool>[0-9a-fA-F-]{36}),\s*ntarget=")
_REBUILD = re.compile(r"^-?\s*Rebuild\s+(?P<state>[a-z]+)\b")
#: ``dmg pool query`` rebuild states -> background_active.rebuild.
REBUILD_ACTIVE = {"busy": 1.0, "idle": 0.0, "done": 0.0, "stopped": 0.0, "failed": 0.0}


def detect_pool_query(output: Any) -> bool:
    """``dmg pool query`` text: ``Pool <uuid>, ntarget=…``."""
    if not isinstance(output, str):
        return False
    return any(_POOL_HEAD.match(line.strip()) for line in first_lines(output, 10))


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
