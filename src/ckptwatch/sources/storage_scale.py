"""IBM Storage Scale (GPFS) tools -> ``pool_metrics``.

* ``mmpmon -p`` with ``fs_io_s`` on its input (source ``mmpmon``): one ``_fs_io_s_`` line per
  file system, counts since the node's mmfsd started or ``reset``: ``_bw_`` -> ``write_bytes``,
  ``_wc_`` -> ``write_ops``, ``_oc_``/``_cc_``/``_dir_``/``_iu_`` ->
  ``metadata_ops_total.open``/``.close``/``.readdir``/``.inode_update`` and their sum
  ``metadata_ops_total``. pool = the file system (``_fs_``), target = the node whose I/O it
  counts (``_nn_``: mmpmon counts one node's calls); ts = ``_t_`` + ``_tu_`` µs. A line with
  a non-zero ``_rc_`` is quarantined. mmpmon has no latency.
* ``mmlsqos <fs> -Y`` (source ``mmlsqos``): per storage pool and QoS class over the last
  interval (``et`` seconds from ``timeEpoch``; ts = its end): ``ioql`` (mean requests pending
  other than by QoS) + ``qsdl`` (mean queued by QoS), summed over the classes ->
  ``queue_depth``; the ``maintenance`` class's share of the pool's IOPS ->
  ``background_active.restripe`` (the maintenance class carries restripe, rebuild and other
  administrative I/O: 0 when it did none, 1 when it was all of the pool's I/O). Numbers are
  read with a decimal comma or point. target = the storage pool; pool = the file system, which
  the output does not name: the envelope's ``device`` (a bare file: the first word of its
  name, ``mmfs1.txt``, ``mmfs1_20261128T120000Z.txt``), else ``gpfs``.
* ``mmdiag --waiters -Y`` (source ``mmdiag-waiters``), on an NSD server: the threads waiting
  now. ``RebuildWorkThread`` waiters -> ``background_active.rebuild`` 1 (0 when there are
  none: no rebuild I/O in flight); ``NSDThread`` waiters ``for I/O completion`` -> their count
  as ``queue_depth.disk`` (disk I/O in flight at the server) and the longest wait as
  ``write_latency_max_ms`` (NSD I/O of either direction; during a checkpoint mostly writes).
  target = the server (the envelope's node), pool = ``gpfs`` (waiters belong to no one file
  system); ts = the collection time. A malformed line is quarantined with its reason and the
  rest of the output is read.

No metadata latency anywhere (mmpmon counts operations only).
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Any
from urllib.parse import unquote

import polars as pl

from ckptwatch.errors import RecordError
from ckptwatch.sources.base import ToolContext, head_line_starts, register_bulk, register_tool
from ckptwatch.sources.pool_bulk import (
    divided,
    epoch_time,
    plain_lines,
    read_whole,
    row_major,
    row_targets,
)
from ckptwatch.sources.pool_common import line_reject, named_pool, pool_row, result
from ckptwatch.sources.textkv import first_lines, iter_lines

MMPMON_SOURCE = "mmpmon"
MMLSQOS_SOURCE = "mmlsqos"
WAITERS_SOURCE = "mmdiag-waiters"
DEFAULT_POOL = "gpfs"

#: mmpmon fs_io_s keys -> (metric, metadata operation or None).
MMPMON_FIELDS: dict[str, tuple[str, str | None]] = {
    "_bw_": ("write_bytes", None),
    "_wc_": ("write_ops", None),
    "_oc_": ("metadata_ops_total", "open"),
    "_cc_": ("metadata_ops_total", "close"),
    "_dir_": ("metadata_ops_total", "readdir"),
    "_iu_": ("metadata_ops_total", "inode_update"),
}
#: The QoS class whose I/O is restripe, rebuild and other administrative work.
MAINTENANCE_CLASS = "maintenance"


def _epoch(seconds: float) -> datetime:
    return datetime.fromtimestamp(seconds, tz=UTC)


def detect_mmpmon(output: Any) -> bool:
    """``mmpmon -p`` parseable output with ``_fs_io_s_`` lines."""
    return isinstance(output, str) and any(
        line.lstrip().startswith("_fs_io_s_ ") for line in first_lines(output, 20))


@register_tool(MMPMON_SOURCE, detect_mmpmon, needs=("_fs_io_s_ ",),
               detect_plain=head_line_starts("_fs_io_s_ ", lstrip=True))
def parse_mmpmon(output: Any, ctx: ToolContext) -> dict[str, list[dict[str, Any]]]:
    """``mmpmon -p`` ``fs_io_s`` -> per file system and node write and metadata counts."""
    if not isinstance(output, str):
        raise RecordError(f"mmpmon output is not text (got {type(output).__name__})")
    rows: list[dict[str, Any]] = []
    bad: list[dict[str, Any]] = []
    for i, line in iter_lines(output):
        words = line.split()
        if words[0] != "_fs_io_s_":
            # other requests' replies (io_s, rhist, …) are not read
            if not words[0].startswith("_") or not words[0].endswith("_"):
                bad.append(line_reject("mmpmon", i, line, "not an mmpmon -p reply line"))
            continue
        if len(words) % 2 != 1:
            bad.append(line_reject("mmpmon", i, line, "keys and values do not pair up"))
            continue
        fields = dict(zip(words[1::2], words[2::2], strict=True))
        problem = _mmpmon_problem(fields)
        if problem:
            bad.append(line_reject("mmpmon", i, line, problem))
            continue
        ts = _epoch(int(fields["_t_"]) + int(fields.get("_tu_", "0")) / 1e6)
        pool, target = fields["_fs_"], fields["_nn_"]
        metadata = 0
        for key, (metric, op) in MMPMON_FIELDS.items():
            value = int(fields[key])
            rows.append(pool_row(ts, pool, target, f"{metric}.{op}" if op else metric, value))
            if op:
                metadata += value
        rows.append(pool_row(ts, pool, target, "metadata_ops_total", metadata))
    if not rows and not bad:
        raise RecordError("mmpmon output has no _fs_io_s_ lines (was fs_io_s the request?)")
    return result(rows, bad)


#: An ``_fs_io_s_`` line as ``parse_mmpmon_bulk`` reads it: ``mmpmon -p``'s keys in its order,
#: one space apart, ``_rc_`` 0, the counts read of at most 18 digits (exact in 64 bits: so is
#: their sum), ``_t_`` of at most 10 and ``_tu_`` of at most 6. (A word: no space or tab,
#: the only blanks of plain text, where ``str.split`` splits.)
_W = "[^ \t]+"
_FS_IO_S = (rf"^_fs_io_s_ _n_ {_W} _nn_ (?P<target>{_W}) _rc_ 0 _t_ (?P<t>[0-9]{{1,10}}) "
            rf"_tu_ (?P<tu>[0-9]{{1,6}}) _cl_ {_W} _fs_ (?P<pool>{_W}) _d_ {_W} _br_ {_W} "
            r"_bw_ (?P<_bw_>[0-9]{1,18}) _oc_ (?P<_oc_>[0-9]{1,18}) _cc_ (?P<_cc_>[0-9]{1,18}) "
            rf"_rdc_ {_W} _wc_ (?P<_wc_>[0-9]{{1,18}}) _dir_ (?P<_dir_>[0-9]{{1,18}}) "
            r"_iu_ (?P<_iu_>[0-9]{1,18})$")


@register_bulk(MMPMON_SOURCE)
def parse_mmpmon_bulk(env: pl.DataFrame) -> tuple[dict[str, pl.DataFrame], pl.Series]:
    """``parse_mmpmon`` over many outputs at once (``base.BulkParser``): outputs whose every
    line is an ``_fs_io_s_`` line as ``mmpmon -p`` prints it (``_FS_IO_S``). Declined, for
    ``parse_mmpmon``: any other line (another request's reply, a non-zero ``_rc_``, keys in
    another order or spacing, a count too long), no line at all."""
    lines = plain_lines(env).with_columns(pl.col("line").str.extract_groups(_FS_IO_S)
                                           .alias("__m")).unnest("__m")
    good, declined = read_whole(env, lines, pl.col("t").is_not_null())
    if not good.height:
        return {}, declined
    counts = list(MMPMON_FIELDS)
    good = divided(good.select(
        "__env", "__k", "pool", "target", pl.col("t").cast(pl.Float64),
        pl.col("tu").cast(pl.Float64), *[pl.col(k).cast(pl.Int64) for k in counts]), 1e6, "tu")
    good = good.with_columns(
        epoch_time(pl.col("t") + pl.col("tu")).alias("ts"),
        pl.sum_horizontal(k for k, (_, op) in MMPMON_FIELDS.items() if op).alias("__meta"))
    metrics = [f"{metric}.{op}" if op else metric for metric, op in MMPMON_FIELDS.values()]
    rows = row_major(good, ["__env", "ts", "pool", "target"], [*counts, "__meta"],
                     [*metrics, "metadata_ops_total"])
    return {"pool_metrics": row_targets(rows)}, declined


def _mmpmon_problem(fields: dict[str, str]) -> str | None:
    """Why an ``_fs_io_s_`` line cannot be read, or None."""
    rc = fields.get("_rc_", "0")
    if rc != "0":
        return f"mmpmon reports an error (_rc_ {rc})"
    missing = [k for k in ("_t_", "_fs_", "_nn_", *MMPMON_FIELDS) if k not in fields]
    if missing:
        return f"lacks {', '.join(missing)}"
    for key in ("_t_", "_tu_", *MMPMON_FIELDS):
        if key in fields and not fields[key].isdigit():
            return f"{key} {fields[key]!r} is not a count"
    return None


def _yformat(output: str, command: str) -> list[tuple[int, str, str, dict[str, str] | str]]:
    """``mm… -Y`` lines: (line, raw, section, {field: value}) for each data line, from the
    section's ``HEADER`` line; (line, raw, section, problem) for one that cannot be read.
    Values are URL-decoded (``-Y`` writes ``:`` as ``%3A``)."""
    headers: dict[str, list[str]] = {}
    out: list[tuple[int, str, str, dict[str, str] | str]] = []
    for i, line in iter_lines(output):
        parts = line.strip().split(":")
        if parts[0] != command:
            out.append((i, line, "", f"not a '{command}:<section>:…' line"))
            continue
        if len(parts) < 4:
            out.append((i, line, "", f"{len(parts)} fields: too few for a '{command} -Y' line"))
            continue
        section = parts[1]
        if parts[2] == "HEADER":
            headers[section] = parts
            continue
        names = headers.get(section)
        if names is None:
            out.append((i, line, section, f"section '{section}' has no HEADER line before it"))
            continue
        if len(parts) != len(names):
            out.append((i, line, section, f"{len(parts)} fields where the HEADER has "
                                          f"{len(names)}"))
            continue
        out.append((i, line, section, {n: unquote(v) for n, v in zip(names, parts, strict=True)
                                       if n not in ("", "reserved")}))
    return out


def _decimal(text: str) -> float | None:
    """A number written with a decimal comma (``0,85256``, ``1,0751e-05``) or point."""
    s = text.strip().replace(",", ".", 1)
    try:
        value = float(s)
    except ValueError:
        return None
    return value if value == value and abs(value) != float("inf") else None


def detect_mmlsqos(output: Any) -> bool:
    """``mmlsqos -Y`` output: ``mmlsqos:`` lines."""
    return isinstance(output, str) and any(
        line.startswith("mmlsqos:") for line in first_lines(output, 20))


@register_tool(MMLSQOS_SOURCE, detect_mmlsqos, needs=("mmlsqos:",),
               detect_plain=head_line_starts("mmlsqos:"))
def parse_mmlsqos(output: Any, ctx: ToolContext) -> dict[str, list[dict[str, Any]]]:
    """``mmlsqos -Y`` ``stats`` -> per storage pool queue depth and maintenance share."""
    if not isinstance(output, str):
        raise RecordError(f"mmlsqos output is not text (got {type(output).__name__})")
    fs = named_pool(ctx, DEFAULT_POOL)
    # (storage pool, interval end) -> [queued, iops, maintenance iops]
    per_pool: dict[tuple[str, float], list[float]] = {}
    bad: list[dict[str, Any]] = []
    for i, line, section, got in _yformat(output, "mmlsqos"):
        if isinstance(got, str):
            bad.append(line_reject("mmlsqos", i, line, got))
            continue
        if section != "stats":
            continue  # status, config, values: settings, not measurements
        numbers = {k: _decimal(got.get(k, "")) for k in ("timeEpoch", "iops", "ioql", "qsdl",
                                                         "et")}
        wrong = [k for k, v in numbers.items() if v is None]
        if wrong or not got.get("pool") or not got.get("class"):
            what = ", ".join(f"{k} {got.get(k, '')!r}" for k in wrong) or "pool or class"
            bad.append(line_reject("mmlsqos", i, line, f"unreadable {what}"))
            continue
        values = {k: float(v or 0.0) for k, v in numbers.items()}
        key = (got["pool"], values["timeEpoch"] + values["et"])
        acc = per_pool.setdefault(key, [0.0, 0.0, 0.0])
        acc[0] += values["ioql"] + values["qsdl"]
        acc[1] += values["iops"]
        if got["class"] == MAINTENANCE_CLASS:
            acc[2] += values["iops"]
    rows = []
    for (storage_pool, end), (queued, iops, maintenance) in per_pool.items():
        ts = _epoch(end)
        rows.append(pool_row(ts, fs, storage_pool, "queue_depth", queued))
        rows.append(pool_row(ts, fs, storage_pool, "background_active.restripe",
                             maintenance / iops if iops > 0 else 0.0))
    if not rows and not bad:
        raise RecordError("mmlsqos output has no stats lines (is QoS monitoring on? run "
                          "mmlsqos <fs> -Y --seconds 60)")
    return result(rows, bad)


#: ``mmlsqos -Y``'s HEADER lines as Storage Scale prints them (the genuine sample's): the only
#: ones ``parse_mmlsqos_bulk`` reads, so each section's fields are at fixed places.
QOS_HEADERS = {
    "status": "mmlsqos:status:HEADER:version:reserved:reserved:enabled:throttling:monitoring:"
              "fineStatsSecs:idStats:",
    "config": "mmlsqos:config:HEADER:version:reserved:reserved:config_enc:",
    "values": "mmlsqos:values:HEADER:version:reserved:reserved:values_enc:",
    "stats": "mmlsqos:stats:HEADER:version:reserved:reserved:pool:timeEpoch:class:iops:ioql:"
             "qsdl:et:MBs:",
}
_QOS_STATS = {name: k for k, name in enumerate(QOS_HEADERS["stats"].split(":"))
              if name in ("pool", "timeEpoch", "class", "iops", "ioql", "qsdl", "et")}
#: A number ``_decimal`` reads as ``float`` of the text with its comma as a point, and polars'
#: cast of the same text reads to the same bits: digits, one decimal comma or point between
#: digits, an exponent of at most two digits (finite, never negative: no ``-0.0``).
_QOS_NUMBER = r"^[0-9]{1,30}(?:[.,][0-9]{1,30})?(?:[eE][-+]?[0-9]{1,2})?$"
#: The latest interval end read in bulk (epoch seconds; year 5138): ``datetime`` holds it.
_QOS_LATEST = 1e11


def _qos_number(field: pl.Expr) -> pl.Expr:
    return field.str.replace(",", ".", literal=True).cast(pl.Float64, strict=False)


@register_bulk(MMLSQOS_SOURCE)
def parse_mmlsqos_bulk(env: pl.DataFrame) -> tuple[dict[str, pl.DataFrame], pl.Series]:
    """``parse_mmlsqos`` over many outputs at once (``base.BulkParser``; pool: the envelope's
    ``device`` as ``named_pool`` reads it): outputs with a ``stats`` line at least, whose
    every line is one of ``QOS_HEADERS`` or a data line of its section after it, with its
    fields; a stats line's pool and class not empty, without a ``%`` escape, its numbers
    ``_QOS_NUMBER``s and its interval's end before ``_QOS_LATEST``. Declined, for
    ``parse_mmlsqos``: any other output (another HEADER, a section without one, a field
    count not the HEADER's, a line it quarantines, no stats line). Sums are taken line by
    line, in the output's order, as ``parse_mmlsqos`` adds them (a cumulative sum, not a
    pairwise one)."""
    part = pl.col("__p")
    section = part.list.get(1, null_on_oob=True)
    header = pl.col("line").is_in(list(QOS_HEADERS.values()))
    data = ((part.list.get(0, null_on_oob=True) == MMLSQOS_SOURCE)
            & (part.list.get(2, null_on_oob=True) != "HEADER"))
    lines = plain_lines(env).with_columns(pl.col("line").str.split(":").alias("__p"))
    lines = lines.with_columns(
        [(header & (section == s)).cum_sum().over("__env").alias(f"__h_{s}")
         for s in QOS_HEADERS])
    known = pl.lit(False)
    for s, line in QOS_HEADERS.items():
        known = known | ((section == s) & (part.list.len() == line.count(":") + 1)
                         & (pl.col(f"__h_{s}") > 0))
    field = {name: part.list.get(k, null_on_oob=True) for name, k in _QOS_STATS.items()}
    numbers = {name: _qos_number(field[name])
               for name in ("timeEpoch", "iops", "ioql", "qsdl", "et")}
    stats = data & (section == "stats")
    readable = (
        (field["pool"] != "") & (field["class"] != "")
        & ~field["pool"].str.contains("%", literal=True)
        & ~field["class"].str.contains("%", literal=True)
        & pl.all_horizontal(field[n].str.contains(_QOS_NUMBER) for n in numbers)
        & ((numbers["timeEpoch"] + numbers["et"]) < _QOS_LATEST))
    lines = lines.with_columns(
        (header | (data & known & pl.when(stats).then(readable).otherwise(True)))
        .alias("__ok"), stats.fill_null(False).alias("__stats"))
    lines = lines.with_columns(pl.col("__stats").any().over("__env").alias("__any"))
    good, declined = read_whole(env, lines, pl.col("__ok") & pl.col("__any"))
    if not good.height:
        return {}, declined
    iops = numbers["iops"]
    per = (good.filter(pl.col("__stats"))
           .select("__env", field["pool"].alias("target"),
                   (numbers["timeEpoch"] + numbers["et"]).alias("end"),
                   (numbers["ioql"] + numbers["qsdl"]).alias("queued"), iops.alias("iops"),
                   pl.when(field["class"] == MAINTENANCE_CLASS).then(iops).otherwise(0.0)
                   .alias("maint"))
           .group_by("__env", "target", "end", maintain_order=True)
           .agg(pl.col(c).cum_sum().last() for c in ("queued", "iops", "maint")))
    # the file system: each distinct device asked of named_pool once
    names = env["device"].unique(maintain_order=True)
    fs = pl.DataFrame({"device": names, "pool": [
        named_pool(ToolContext(node="", ts=_epoch(0), source=MMLSQOS_SOURCE, device=d),
                   DEFAULT_POOL) for d in names.to_list()]},
        schema={"device": pl.String, "pool": pl.String})
    pools = env.select("__env", "device").join(fs, on="device", how="left", nulls_equal=True,
                                                maintain_order="left").drop("device")
    wide = (per.join(pools, on="__env", how="left", maintain_order="left")
            .select("__env", epoch_time(pl.col("end")).alias("ts"), "pool", "target",
                    "queued",
                    pl.when(pl.col("iops") > 0).then(pl.col("maint") / pl.col("iops"))
                    .otherwise(0.0).alias("restripe")))
    rows = row_major(wide, ["__env", "ts", "pool", "target"], ["queued", "restripe"],
                     ["queue_depth", "background_active.restripe"])
    return {"pool_metrics": row_targets(rows)}, declined


def detect_waiters(output: Any) -> bool:
    """``mmdiag --waiters -Y`` output: ``mmdiag:waiters:`` lines."""
    return isinstance(output, str) and any(
        line.startswith("mmdiag:waiters:") for line in first_lines(output, 20))


_IO_COMPLETION = re.compile(r"\bfor I/O completion\b")


@register_tool(WAITERS_SOURCE, detect_waiters, needs=("mmdiag:waiters:",),
               detect_plain=head_line_starts("mmdiag:waiters:"))
def parse_waiters(output: Any, ctx: ToolContext) -> dict[str, list[dict[str, Any]]]:
    """``mmdiag --waiters -Y`` -> rebuild activity, NSD I/O in flight and its longest wait."""
    if not isinstance(output, str):
        raise RecordError(f"mmdiag output is not text (got {type(output).__name__})")
    if not output.strip():
        raise RecordError("mmdiag --waiters output is empty (not even its HEADER line)")
    pool = DEFAULT_POOL
    rebuild = 0
    nsd_waits: list[float] = []
    bad: list[dict[str, Any]] = []
    seen = 0
    for i, line, section, got in _yformat(output, "mmdiag"):
        if isinstance(got, str):
            bad.append(line_reject("mmdiag --waiters", i, line, got))
            continue
        if section != "waiters":
            bad.append(line_reject("mmdiag --waiters", i, line, f"section '{section}' is not "
                                                                "waiters"))
            continue
        thread = got.get("threadName", "").strip()
        wait = _decimal(got.get("waitTime", ""))
        problems = ([] if thread else ["no threadName"]) + (
            [] if wait is not None and wait >= 0
            else [f"waitTime {got.get('waitTime', '')!r} is not a number of seconds"])
        if problems or wait is None:
            bad.append(line_reject("mmdiag --waiters", i, line, "; ".join(problems)))
            continue
        seen += 1
        if thread == "RebuildWorkThread":
            rebuild += 1
        elif thread == "NSDThread" and _IO_COMPLETION.search(got.get("auxReason", "")
                                                             + " " + got.get("condVarReason",
                                                                             "")):
            nsd_waits.append(wait)
    if not seen and bad:  # (a HEADER and no waiter line: nothing waits)
        raise RecordError(f"mmdiag --waiters output has no readable waiter line "
                          f"({bad[0]['reason']})")
    target = ctx.node
    rows = [pool_row(ctx.ts, pool, target, "background_active.rebuild", 1.0 if rebuild else 0.0),
            pool_row(ctx.ts, pool, target, "queue_depth.disk", len(nsd_waits))]
    if nsd_waits:
        rows.append(pool_row(ctx.ts, pool, target, "write_latency_max_ms",
                             max(nsd_waits) * 1000))
    return result(rows, bad)


#: ``mmdiag --waiters -Y``'s HEADER line as Storage Scale prints it (the genuine sample's):
#: the one ``parse_waiters_bulk`` reads.
WAITERS_HEADER = ("mmdiag:waiters:HEADER:version:reserved:reserved:threadId:threadAddr:"
                  "threadName:waitStartTime:waitTime:isMonitored:condVarAddr:condVarName:"
                  "condVarReason:mutexAddr:mutexName:auxReason:delayTime:delayReason:")
_WAITER_FIELDS = WAITERS_HEADER.split(":")
#: A waitTime read in bulk: seconds as digits, maybe a fraction (exactly ``float``'s reading).
_WAIT_TIME = r"^[0-9]{1,15}(?:\.[0-9]{1,15})?$"


@register_bulk(WAITERS_SOURCE)
def parse_waiters_bulk(env: pl.DataFrame) -> tuple[dict[str, pl.DataFrame], pl.Series]:
    """``parse_waiters`` over many outputs at once (``base.BulkParser``; target: the
    envelope's ``node``): outputs whose first line is ``WAITERS_HEADER`` and whose other lines
    are waiter lines of its fields, each with a thread name, a waitTime of digits (and a
    fraction) and no ``%`` escape in the fields read. Declined, for ``parse_waiters``: any
    other output (another HEADER or a second one, a line of another section, a field count
    not the HEADER's, a line it quarantines)."""
    col = {name: k for k, name in enumerate(_WAITER_FIELDS) if name}
    part = pl.col("line").str.split(":")
    lines = plain_lines(env).with_columns(part.alias("__p"))
    field = {name: pl.col("__p").list.get(col[name], null_on_oob=True)
             for name in ("threadName", "waitTime", "condVarReason", "auxReason")}
    head = pl.col("__first")
    ok = pl.when(head).then(pl.col("line") == WAITERS_HEADER).otherwise(
        (pl.col("__p").list.len() == len(_WAITER_FIELDS))
        & (pl.col("__p").list.get(0, null_on_oob=True) == "mmdiag")
        & (pl.col("__p").list.get(1, null_on_oob=True) == "waiters")
        & (pl.col("__p").list.get(2, null_on_oob=True) != "HEADER")
        & (field["threadName"].str.strip_chars() != "")
        & field["waitTime"].str.contains(_WAIT_TIME)
        & ~pl.any_horizontal(f.str.contains("%", literal=True) for f in field.values()))
    good, declined = read_whole(env, lines, ok)
    if not good.height:
        return {}, declined
    thread = field["threadName"].str.strip_chars()
    nsd = (thread == "NSDThread") & (field["auxReason"] + " " + field["condVarReason"]) \
        .str.contains(r"\bfor I/O completion\b")
    waits = good.filter(~head).select("__env", (thread == "RebuildWorkThread").alias("rebuild"),
                                      pl.when(nsd).then(field["waitTime"].cast(pl.Float64))
                                      .alias("nsd"))
    per = (good.filter(head).select("__env", "__k")
           .join(waits.group_by("__env").agg(pl.col("rebuild").any(), pl.col("nsd").count(),
                                             pl.col("nsd").max().alias("peak")),
                 on="__env", how="left", maintain_order="left")
           .join(env.select("__env", pl.col("node").alias("target")), on="__env",
                 maintain_order="left"))
    wide = per.select(
        "__env", "target",
        pl.col("rebuild").fill_null(False).cast(pl.Float64).alias("background_active.rebuild"),
        pl.col("nsd").fill_null(0).cast(pl.Float64).alias("queue_depth.disk"),
        (pl.col("peak") * 1000).alias("write_latency_max_ms"))
    metrics = ["background_active.rebuild", "queue_depth.disk", "write_latency_max_ms"]
    rows = row_major(wide, ["__env", "target"], metrics, metrics).with_columns(
        pl.lit(DEFAULT_POOL).alias("pool"))
    return {"pool_metrics": row_targets(rows)}, declined
