"""Lustre server statistics as ``lctl get_param`` prints them -> ``pool_metrics`` rows.

Run on each OSS and MDS (docs/formats.md, "Lustre"); the parameters read, each under its name
(``name=`` then its lines; a value may start on the name's own line):

* ``obdfilter.<fs>-OSTnnnn.stats``: ``write [usecs]`` -> ``write_ops`` (its samples),
  ``write_latency_us_total`` (its sum), ``write_latency_peak_ms`` (its max);
  ``write_bytes [bytes]`` -> ``write_bytes`` (its sum). target = the OST, pool = its fsname.
* ``mdt.<fs>-MDTnnnn.md_stats``: each operation ``<op> [usecs]`` ->
  ``metadata_ops_total.<op>``, ``metadata_latency_us_total.<op>``,
  ``metadata_latency_peak_ms.<op>``, and the unqualified sums over the operations (the
  aggregate). target = the MDT.
* ``ost.OSS.ost_io.stats`` (the OSS bulk I/O service) and ``mds.MDS.mdt.stats`` (the MDS
  request service): ``req_qdepth`` -> ``queue_requests_total`` (its samples: one per request)
  and ``queue_depth_total`` (its sum), ``req_waittime`` -> ``queue_wait_us_total``,
  ``req_active`` -> ``active_requests_total``; ``ost_write`` -> ``write_*`` and ``mds_*``
  operations -> ``metadata_*.<op>`` as above. These services belong to a server, not to one
  target: target = ``<node>/ost_io`` or ``<node>/mdt`` (a server may run both), pool =
  ``lustre``.
* ``<osd>.<fs>-OSTnnnn.brw_stats`` (``osd-ldiskfs``, ``osd-zfs``, ``obdfilter``): the write
  column of ``disk I/Os in flight`` -> ``queue_requests_total.disk`` (I/Os) and
  ``queue_depth_total.disk`` (each I/O's bucket, the I/Os in flight when it was issued, summed;
  only when the buckets are single counts 1, 2, 3, …: power-of-two buckets are ranges).
  ``I/O time`` is not read: its power-of-two buckets bound a latency, they do not give one.
  A bare block (``lctl get_param -n``) names no target: the envelope's ``device``
  (``fs-OST0000``) gives it.
* ``obdfilter.<fs>-OSTnnnn.job_stats`` and ``mdt.<fs>-MDTnnnn.job_stats``: per job id the same
  write and metadata names, qualified ``.job=<job id>`` (``write_ops.job=1234``); each job's
  own ``snapshot_time`` is its time. The job id is Lustre's (``jobid_var``, ``jobid_name``):
  mapping it to a checkpoint job is the reader of these rows' business (docs/formats.md).

Every stats block's ``snapshot_time`` is the rows' time (a value below 10^9 s is time since
boot, printed by some versions: the file's time is used instead). Lustre prints only the
counters that have samples, so a counter read here that is absent is written as 0: a cleared
stats file then reads as a drop, which the lake's counter rules treat as a reset
(stg_counter_deltas). Other parameters in the same dump (``ldlm.*``, ``osd-*.kbytesfree``,
per-export stats, …) are passed over. A parameter read here with a line not in its format is
quarantined (its reason names the line), the others kept.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import polars as pl

from ckptwatch.errors import RecordError
from ckptwatch.sources.base import ToolContext, plain_output, register_bulk, register_tool
from ckptwatch.sources.envelope import LINE_REJECTS
from ckptwatch.sources.pool_bulk import divided, epoch_time, row_targets
from ckptwatch.sources.pool_common import pool_target
from ckptwatch.sources.textkv import shorten

SOURCE = "lctl"
#: pool of the per-server service stats (ost.OSS.*, mds.MDS.*): a server may serve several
#: file systems, so they are not one file system's.
SERVER_POOL = "lustre"
#: A ``snapshot_time`` below this (2001-09-09) is seconds since boot, not a date.
MIN_EPOCH_S = 1e9

#: A parameter's name line, ``name=`` and maybe the first line of its value (found over the
#: whole text at once: a dump is mostly parameters not read, whose lines are never split).
_HEADER = re.compile(r"^(?P<name>[A-Za-z][\w.\-@:*\[\]]*)=(?P<value>[^\n]*)$", re.MULTILINE)
_OST_STATS = re.compile(r"obdfilter\.(?P<t>[^.]+)\.stats")
_MD_STATS = re.compile(r"mdt\.(?P<t>[^.]+)\.md_stats")
_SERVICE = re.compile(r"ost\.OSS\.ost_io\.stats|mds\.MDS\.mdt\.stats")
_BRW = re.compile(r"(?:osd-[a-z]+|obdfilter)\.(?P<t>[^.]+)\.brw_stats")
_JOBS = re.compile(r"(?P<kind>obdfilter|mdt)\.(?P<t>[^.]+)\.job_stats")
#: A data or metadata target's name: ``<fsname>-OSTnnnn`` / ``<fsname>-MDTnnnn``.
_TARGET = re.compile(r"(?P<fs>.+)-(?:OST|MDT)[0-9a-fA-F]{4}")

_TIME = re.compile(r"(?P<key>snapshot_time|start_time|elapsed_time):?\s+(?P<v>\d+(?:\.\d+)?)"
                   r"(?:\s+\(?secs\.[nu]secs\)?)?")
_STAT = re.compile(r"(?P<op>\S+)\s+(?P<n>\d+)\s+samples\s+\[(?P<unit>[^\]]*)\]"
                   r"(?:\s+(?P<min>-?\d+)\s+(?P<max>-?\d+)\s+(?P<sum>-?\d+)(?:\s+-?\d+)?)?")
_TIME_UNITS = {"usec", "usecs"}
#: Operations of md_stats / an MDT's job_stats that move file data (Data-on-MDT), not metadata.
DATA_OPS = frozenset({"read", "write", "read_bytes", "write_bytes", "punch", "fallocate"})

_BRW_COLUMNS = re.compile(r"\s*read\s*\|\s*write\s*")
_BRW_TITLE = re.compile(r"(?P<title>\S.*?)\s+\w+\s+%\s+cum\s+%\s+\|\s+\w+\s+%\s+cum\s+%")
_BRW_BUCKET = re.compile(r"(?P<label>\w+):\s+\d+\s+\d+\s+\d+\s*\|\s*(?P<w>\d+)\s+\d+\s+\d+")
IN_FLIGHT = "disk I/Os in flight"

_JOB_ID = re.compile(r"-\s+job_id:\s*(?P<id>.*)")
_JOB_STAT = re.compile(r"(?P<op>\w+):\s*\{(?P<body>.*)\}")
_JOB_FIELD = re.compile(r"(?P<k>\w+):\s*(?P<v>[^,]*)")
_JOB_HIST = re.compile(r"hist:\s*\{[^}]*\}")
_JOB_USUAL = re.compile(r"\s*samples:\s*(?P<n>\d+),\s*unit:\s*(?P<unit>\w+)"
                        r"(?:,\s*min:\s*-?\d+,\s*max:\s*(?P<max>-?\d+),\s*sum:\s*(?P<sum>-?\d+))?")


def _reads(name: str) -> bool:
    return any(p.fullmatch(name) for p in (_OST_STATS, _MD_STATS, _SERVICE, _BRW, _JOBS))


def _bare_brw(text: str) -> bool:
    first = next((line.strip() for line in text.splitlines() if line.strip()), "")
    return first.startswith("snapshot_time") and IN_FLIGHT in text


def detect(output: Any) -> bool:
    """``lctl get_param`` text holding a parameter read here (``obdfilter.*.stats``, …), or a
    bare ``brw_stats`` block."""
    if not isinstance(output, str):
        return False
    if any(_reads(m.group("name")) for m in _HEADER.finditer(output)):
        return True
    return _bare_brw(output)


@dataclass
class _Block:
    """One parameter: its name, the line of its name, and its lines (number, text)."""

    name: str
    line: int
    lines: list[tuple[int, str]] = field(default_factory=list)


def _blocks(text: str) -> Iterator[_Block]:
    """The parameters read here (``_reads``), each with its lines; the others are skipped."""
    heads = list(_HEADER.finditer(text))
    line, pos = 1, 0
    for k, m in enumerate(heads):
        if not _reads(m.group("name")):
            continue
        line += text.count("\n", pos, m.start())
        pos = m.start()
        block = _Block(m.group("name"), line)
        if m.group("value").strip():
            block.lines.append((line, m.group("value")))
        end = heads[k + 1].start() if k + 1 < len(heads) else len(text)
        block.lines += enumerate(text[m.end():end].split("\n")[1:], start=line + 1)
        yield block


class _Rows:
    """The rows of one output: each block's time and target, then name -> value."""

    def __init__(self, ctx: ToolContext) -> None:
        self.ctx = ctx
        self.rows: list[dict[str, Any]] = []

    def time(self, seconds: float | None) -> datetime:
        if seconds is None or seconds < MIN_EPOCH_S:
            return self.ctx.ts
        try:
            return datetime.fromtimestamp(seconds, tz=UTC)
        except (OverflowError, OSError, ValueError):
            raise RecordError(f"snapshot_time {seconds:.0f} s is not a time") from None

    def add(self, ts: datetime, pool: str, target: str, values: dict[str, float]) -> None:
        target = pool_target(target)
        self.rows += [{"ts": ts, "pool": pool, "target": target, "metric": metric,
                       "value": float(value)} for metric, value in values.items()]


def _where(block: _Block, number: int, line: str) -> str:
    return f"line {number}: {block.name}: {shorten(line.strip(), 60)!r}"


@dataclass(frozen=True)
class _Stat:
    op: str
    samples: int
    unit: str
    max: int | None
    sum: int | None

    @property
    def timed(self) -> bool:
        return self.unit in _TIME_UNITS and self.sum is not None


def _stats(block: _Block) -> tuple[float | None, dict[str, _Stat]]:
    """A stats block: its snapshot_time and its counters by name."""
    snapshot: float | None = None
    stats: dict[str, _Stat] = {}
    for number, line in block.lines:
        text = line.strip()
        if not text:
            continue
        t = _TIME.fullmatch(text)
        if t:
            if t.group("key") == "snapshot_time":
                snapshot = float(t.group("v"))
            continue
        s = _STAT.fullmatch(text)
        if not s:
            raise RecordError(f"{_where(block, number, line)} is not a stats line "
                              "('<name> <count> samples [<unit>] <min> <max> <sum> …')")
        stats[s.group("op")] = _Stat(
            s.group("op"), int(s.group("n")), s.group("unit"),
            int(s.group("max")) if s.group("max") is not None else None,
            int(s.group("sum")) if s.group("sum") is not None else None)
    return snapshot, stats


def _write(stat: _Stat | None, bytes_stat: _Stat | None = None, suffix: str = "") -> dict[
        str, float]:
    """write_* from a ``write`` (``ost_write``) counter; absent: no writes (zeros)."""
    out: dict[str, float] = {}
    if stat is not None and stat.timed:
        out[f"write_ops{suffix}"] = stat.samples
        out[f"write_latency_us_total{suffix}"] = float(stat.sum or 0)
        if stat.max is not None:
            out[f"write_latency_peak_ms{suffix}"] = stat.max / 1000
    elif stat is not None:
        out[f"write_ops{suffix}"] = stat.samples
    elif bytes_stat is not None:
        out[f"write_ops{suffix}"] = bytes_stat.samples
    else:
        out[f"write_ops{suffix}"] = 0.0
        out[f"write_latency_us_total{suffix}"] = 0.0
    return out


def _metadata(ops: list[_Stat], suffix: str = "", *, per_op: bool = True) -> dict[str, float]:
    """metadata_* per operation (``per_op``) and summed over the operations (the unqualified
    aggregate, or ``suffix``'s). When any operation has a time, the sums are over the timed
    ones only, so that the aggregate latency over the aggregate count is a mean."""
    out: dict[str, float] = {}
    timed = [s for s in ops if s.timed]
    for s in ops if per_op else []:
        out[f"metadata_ops_total.{s.op}"] = s.samples
        if s.timed:
            out[f"metadata_latency_us_total.{s.op}"] = float(s.sum or 0)
            if s.max is not None:
                out[f"metadata_latency_peak_ms.{s.op}"] = s.max / 1000
    counted = timed or ops
    out[f"metadata_ops_total{suffix}"] = float(sum(s.samples for s in counted))
    if timed or not ops:
        out[f"metadata_latency_us_total{suffix}"] = float(sum(s.sum or 0 for s in timed))
    peaks = [s.max for s in timed if s.max is not None and s.samples]
    if peaks:
        out[f"metadata_latency_peak_ms{suffix}"] = max(peaks) / 1000
    return out


def _queue(stats: dict[str, _Stat]) -> dict[str, float]:
    depth, wait, active = (stats.get(k) for k in ("req_qdepth", "req_waittime", "req_active"))
    return {
        "queue_requests_total": depth.samples if depth else 0,
        "queue_depth_total": (depth.sum or 0) if depth else 0,
        "queue_wait_us_total": (wait.sum or 0) if wait else 0,
        "active_requests_total": (active.sum or 0) if active else 0,
    }


def _fs(block: _Block, target: str) -> str:
    m = _TARGET.fullmatch(target)
    if not m:
        raise RecordError(f"line {block.line}: {block.name}: {target!r} is not a Lustre target "
                          "name (<fsname>-OSTnnnn or <fsname>-MDTnnnn)")
    return m.group("fs")


def _read_ost_stats(block: _Block, target: str, out: _Rows) -> None:
    snapshot, stats = _stats(block)
    values = _write(stats.get("write"), stats.get("write_bytes"))
    wb = stats.get("write_bytes")
    values["write_bytes"] = float(wb.sum or 0) if wb else 0.0
    out.add(out.time(snapshot), _fs(block, target), target, values)


def _read_md_stats(block: _Block, target: str, out: _Rows) -> None:
    snapshot, stats = _stats(block)
    ops = [s for s in stats.values() if s.op not in DATA_OPS]
    out.add(out.time(snapshot), _fs(block, target), target, _metadata(ops))


def _read_service(block: _Block, out: _Rows) -> None:
    snapshot, stats = _stats(block)
    values = _queue(stats)
    if block.name.startswith("ost."):
        values.update(_write(stats.get("ost_write")))
    else:
        values.update(_metadata([s for s in stats.values() if s.op.startswith("mds_")]))
    service = block.name.split(".")[2]  # ost_io, mdt
    out.add(out.time(snapshot), SERVER_POOL, f"{out.ctx.node}/{service}", values)


def _read_brw(block: _Block, target: str, out: _Rows) -> None:
    snapshot: float | None = None
    section: str | None = None
    ios = depth = 0
    seen = False
    # One bucket per in-flight count (1, 2, 3, …): the sum of each I/O's bucket is exact. Some
    # versions bin by powers of two (1, 2, 4, 8, …): a bucket is then a range, and the depth is
    # not written (only the I/Os).
    linear = True
    previous: int | None = None
    for number, line in block.lines:
        text = line.strip()
        if not text or _BRW_COLUMNS.fullmatch(text):
            continue
        t = _TIME.fullmatch(text)
        if t:
            if t.group("key") == "snapshot_time":
                snapshot = float(t.group("v"))
            continue
        title = _BRW_TITLE.fullmatch(text)
        if title:
            section = title.group("title")
            seen = seen or section == IN_FLIGHT
            continue
        bucket = _BRW_BUCKET.fullmatch(text)
        if not bucket or section is None:
            raise RecordError(f"{_where(block, number, line)} is not a brw_stats line (a "
                              "section title or '<bucket>: <ios> % cum % | <ios> % cum %')")
        if section == IN_FLIGHT:
            label = bucket.group("label")
            if not label.isdigit():
                raise RecordError(f"{_where(block, number, line)}: an I/Os-in-flight bucket is "
                                  "not a whole number")
            linear = linear and (previous is None or int(label) == previous + 1)
            previous = int(label)
            ios += int(bucket.group("w"))
            depth += int(label) * int(bucket.group("w"))
    if not seen:
        return
    fs = _fs(block, target) if _TARGET.fullmatch(target) else SERVER_POOL
    values: dict[str, float] = {"queue_requests_total.disk": ios}
    if linear:
        values["queue_depth_total.disk"] = depth
    out.add(out.time(snapshot), fs, target, values)


def _job_id(raw: str) -> str:
    text = raw.strip()
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "\"'":
        text = text[1:-1].replace('\\"', '"').replace("\\\\", "\\")
    return text


def _job_stat(block: _Block, number: int, line: str, op: str, body: str) -> _Stat:
    quick = _JOB_USUAL.match(body)
    if quick:  # the usual order of the fields: one match instead of a field at a time
        return _Stat(op, int(quick.group("n")), quick.group("unit"),
                     int(quick.group("max")) if quick.group("max") else None,
                     int(quick.group("sum")) if quick.group("sum") else None)
    body = _JOB_HIST.sub("", body)
    fields = {m.group("k"): m.group("v").strip() for m in _JOB_FIELD.finditer(body)}
    try:
        samples = int(fields["samples"])
        high = int(fields["max"]) if "max" in fields else None
        total = int(fields["sum"]) if "sum" in fields else None
    except (KeyError, ValueError):
        raise RecordError(f"{_where(block, number, line)} is not a job_stats counter "
                          "('<op>: { samples: N, unit: U, min: a, max: b, sum: c … }')") from None
    return _Stat(op, samples, fields.get("unit", ""), high, total)


def _read_jobs(block: _Block, kind: str, target: str, out: _Rows) -> None:
    fs = _fs(block, target)
    job: str | None = None
    snapshot: float | None = None
    stats: dict[str, _Stat] = {}

    def flush() -> None:
        if job is None:
            return
        suffix = f".job={job}"
        if kind == "obdfilter":
            values = _write(stats.get("write"), stats.get("write_bytes"), suffix)
            wb = stats.get("write_bytes")
            values[f"write_bytes{suffix}"] = float(wb.sum or 0) if wb else 0.0
        else:
            values = _metadata([s for s in stats.values() if s.op not in DATA_OPS], suffix,
                               per_op=False)
        out.add(out.time(snapshot), fs, target, values)

    for number, line in block.lines:
        text = line.strip()
        if not text or text == "job_stats:":
            continue
        j = _JOB_ID.fullmatch(text)
        if j:
            flush()
            job, snapshot, stats = _job_id(j.group("id")), None, {}
            if not job:
                raise RecordError(f"{_where(block, number, line)}: empty job id")
            continue
        if job is None:
            raise RecordError(f"{_where(block, number, line)} comes before any '- job_id:'")
        t = _TIME.fullmatch(text)
        if t:
            if t.group("key") == "snapshot_time":
                snapshot = float(t.group("v"))
            continue
        s = _JOB_STAT.fullmatch(text)
        if not s:
            raise RecordError(f"{_where(block, number, line)} is not a job_stats line")
        op = s.group("op")
        if kind == "obdfilter" and op not in ("write", "write_bytes"):
            continue  # an OST's other operations (punch, statfs, …) are not read
        stats[op] = _job_stat(block, number, line, op, s.group("body"))
    flush()


def _read_block(block: _Block, out: _Rows) -> bool:
    """Read one parameter into ``out``; False when it is not one read here."""
    name = block.name
    if m := _OST_STATS.fullmatch(name):
        _read_ost_stats(block, m.group("t"), out)
    elif m := _MD_STATS.fullmatch(name):
        _read_md_stats(block, m.group("t"), out)
    elif _SERVICE.fullmatch(name):
        _read_service(block, out)
    elif (m := _BRW.fullmatch(name)) and m.group("t") != "MGS":  # MGS: no data or metadata
        _read_brw(block, m.group("t"), out)
    elif m := _JOBS.fullmatch(name):
        _read_jobs(block, m.group("kind"), m.group("t"), out)
    else:
        return False
    return True


@register_tool(SOURCE, detect, needs=("stats", IN_FLIGHT))
def parse_lctl(output: Any, ctx: ToolContext) -> dict[str, list[dict[str, Any]]]:
    """``lctl get_param`` text of an OSS or MDS -> ``pool_metrics`` rows. A parameter with a
    line not in its format is quarantined whole (``LINE_REJECTS``: its counters belong
    together), with the line in the reason; the other parameters' rows are kept."""
    if not isinstance(output, str):
        raise RecordError(f"lctl output is text, not {type(output).__name__}")
    out = _Rows(ctx)
    rejects: list[dict[str, Any]] = []
    read = 0
    for block in _blocks(output):
        kept = len(out.rows)
        try:
            read += _read_block(block, out)
        except RecordError as exc:
            del out.rows[kept:]  # a job_stats block adds its jobs as it goes
            read += 1
            raw = "\n".join([f"{block.name}="] + [text for _, text in block.lines])
            rejects.append({"reason": exc.reason, "raw": raw[:2000]})
    if read == 0 and _bare_brw(output):
        if not ctx.device or not _TARGET.fullmatch(ctx.device):
            raise RecordError("a bare brw_stats block names no target: collect it with "
                              "`lctl get_param osd-*.*.brw_stats` (with the names), or give "
                              "the envelope a 'device' (the target, e.g. fs-OST0000)")
        lines = list(enumerate(output.splitlines(), start=1))
        _read_brw(_Block(f"{ctx.device}.brw_stats", 1, lines), ctx.device, out)
        read = 1
    if read == 0:
        raise RecordError("lctl output holds none of the parameters read (obdfilter.*.stats, "
                          "mdt.*.md_stats, ost.OSS.ost_io.stats, mds.MDS.mdt.stats, "
                          "*.brw_stats, *.job_stats)")
    result: dict[str, list[dict[str, Any]]] = {"pool_metrics": out.rows}
    if rejects:
        result[LINE_REJECTS] = rejects
    return result


#: The parameters ``parse_lctl_bulk`` reads (kind, name pattern); a dump holding another
#: parameter that ``parse_lctl`` reads (``brw_stats``, ``job_stats``) is declined.
_BULK_BLOCKS = [("ost", _OST_STATS), ("md", _MD_STATS), ("service", _SERVICE)]
#: A count read in bulk: at most 17 digits (exact in 64 bits, and so are their sums); a
#: maximum, divided by 1000, at most 15 (exact as a float).
_COUNT_DIGITS, _PEAK_DIGITS = 17, 15
#: A row's slot in its block (``__j``): the named counters' rows first, then three per
#: operation (by its line's place in the block: a block of more lines is declined), then
#: the sums.
_PER_OP, _SUMS, _SLOTS = 1 << 5, 1 << 22, 1 << 23
_BULK_TIME = (r"^(?P<key>snapshot_time|start_time|elapsed_time):?[ \t]+(?P<v>[0-9]+(?:\.[0-9]+)?)"
              r"(?:[ \t]+\(?secs\.[nu]secs\)?)?$")
_BULK_STAT = (r"^(?P<op>[^ \t]+)[ \t]+(?P<n>[0-9]+)[ \t]+samples[ \t]+\[(?P<unit>[^\]]*)\]"
              r"(?:[ \t]+(?P<min>-?[0-9]+)[ \t]+(?P<max>-?[0-9]+)[ \t]+(?P<sum>-?[0-9]+)"
              r"(?:[ \t]+-?[0-9]+)?)?$")


def _bulk_stats(lines: pl.DataFrame) -> pl.DataFrame:
    """The stats lines of the read blocks (``_STAT``) as typed columns: ``__b`` (the block),
    ``op``, ``n``, ``unit``, ``max``, ``sum`` (null when the line gives no min/max/sum),
    ``timed`` (``_Stat.timed``), ``__line`` (its place)."""
    return lines.select(
        "__env", "__b", pl.col("__k").alias("__line"), "op",
        pl.col("n").cast(pl.Int64, strict=False), "unit",
        pl.col("max").cast(pl.Int64, strict=False), pl.col("sum").cast(pl.Int64, strict=False),
        (pl.col("unit").is_in(sorted(_TIME_UNITS)) & pl.col("sum").is_not_null()).alias("timed"))


@register_bulk(SOURCE)
def parse_lctl_bulk(env: pl.DataFrame) -> tuple[dict[str, pl.DataFrame], pl.Series]:
    """``parse_lctl`` over many outputs at once (``base.BulkParser``): dumps whose parameters
    read are an OST's ``stats``, an MDT's ``md_stats`` and the OSS/MDS services' ``stats``,
    each a name line ``name=`` then ``snapshot_time`` (a date: 10**9 s or more) and counter
    lines. Read as ``parse_lctl`` reads them when the counters it uses are timed where it uses
    their times (``[usec]``/``[usecs]`` with min, max, sum), given once, of at most 17 digits
    (a maximum 15), an OST's ``write`` and ``write_bytes`` both given or neither. Declined,
    for ``parse_lctl``: anything else (``brw_stats``, ``job_stats``, a value on a name's line,
    a line that is no counter, a target name that is not ``<fs>-OSTnnnn``/``-MDTnnnn``, no
    parameter read, text that is not plain)."""
    raw = pl.col("raw")
    lines = (env.filter(plain_output(env))
             .select("__env", "node", pl.col("output").str.split("\n").alias("raw"))
             .explode("raw").with_row_index("__k").with_columns(pl.col("__k").cast(pl.Int64)))
    lines = lines.with_columns(raw.str.extract_groups(
        r"^(?P<name>[A-Za-z][\w.\-@:*\[\]]*)=(?P<value>.*)$").alias("__h")).unnest("__h")
    lines = lines.with_columns(pl.col("name").is_not_null().alias("__head"))
    head = pl.col("__head")
    kind = pl.lit(None, dtype=pl.String)
    for name, pattern in reversed(_BULK_BLOCKS):
        kind = pl.when(pl.col("name").str.contains(f"^(?:{pattern.pattern})$")) \
            .then(pl.lit(name)).otherwise(kind)
    other_read = (pl.col("name").str.contains(f"^(?:{_BRW.pattern})$")
                  | pl.col("name").str.contains(f"^(?:{_JOBS.pattern})$"))
    lines = lines.with_columns(
        head.cast(pl.Int64).cum_sum().over("__env").alias("__b"),
        pl.when(head).then(kind).alias("kind"), pl.when(head).then(other_read).alias("__other"))
    lines = lines.with_columns(pl.col("kind", "name").forward_fill().over("__env", "__b"))
    heads = lines.filter(head)
    bad = [heads.filter(pl.col("__other") | (pl.col("kind").is_not_null()
                                             & (pl.col("value").str.strip_chars() != "")))]
    text = pl.col("raw").str.strip_chars()
    body = (lines.filter(~head & pl.col("kind").is_not_null() & (text != ""))
            .select("__env", "__b", "__k", "kind", text.alias("text")))
    # ``_TIME`` and ``_STAT`` in ASCII classes (on plain text the same: its only blanks in a
    # line are spaces and tabs), the time lines found first: a capture is the slow part
    is_time = pl.col("text").str.starts_with("snapshot_time") | pl.col("text").str.starts_with(
        "start_time") | pl.col("text").str.starts_with("elapsed_time")
    body = body.with_columns(is_time.alias("__time"))
    is_time = pl.col("__time") & pl.col("text").str.contains(_BULK_TIME)
    times = body.filter(is_time).with_columns(
        pl.col("text").str.extract_groups(_BULK_TIME).alias("__t")).unnest("__t")
    stat_lines = body.filter(~is_time).with_columns(
        pl.col("text").str.extract_groups(_BULK_STAT).alias("__s")).unnest("__s")
    bad += [stat_lines.filter(pl.col("op").is_null())]
    stat_lines = stat_lines.filter(pl.col("op").is_not_null())
    digits = {c: pl.col(c).fill_null("0").str.strip_prefix("-").str.len_bytes()
              for c in ("n", "min", "max", "sum")}  # (``_BULK_STAT``'s: digits, maybe a -)
    bad += [stat_lines.filter((digits["n"] > _COUNT_DIGITS) | (digits["min"] > _COUNT_DIGITS)
                              | (digits["max"] > _PEAK_DIGITS)
                              | (digits["sum"] > _COUNT_DIGITS)),
            stat_lines.filter(pl.struct("__env", "__b", "op").is_duplicated())]
    stats = _bulk_stats(stat_lines)
    snap = (times.filter(pl.col("key") == "snapshot_time").group_by("__env", "__b")
            .agg(pl.col("v").last()))
    blocks = heads.filter(pl.col("kind").is_not_null()).select(
        "__env", "__b", "__k", "node", "name", "kind").join(
        snap, on=["__env", "__b"], how="left", maintain_order="left")
    dated = pl.col("v").str.contains(r"^[1-9][0-9]{9}(?:\.[0-9]+)?$").fill_null(False)
    bad.append(blocks.filter(~dated))
    blocks = blocks.with_columns(epoch_time(pl.when(dated).then(pl.col("v").cast(pl.Float64)))
                                 .alias("ts"))
    target = (pl.when(pl.col("kind") == "service")
              .then(pl.col("node") + "/" + pl.col("name").str.split(".").list.get(2))
              .otherwise(pl.col("name").str.extract(r"^[^.]+\.([^.]+)\.")))
    blocks = blocks.with_columns(target.alias("target")).with_columns(
        pl.when(pl.col("kind") == "service").then(pl.lit(SERVER_POOL))
        .otherwise(pl.col("target").str.extract(r"^(.+)-(?:OST|MDT)[0-9a-fA-F]{4}$"))
        .alias("pool"))
    bad.append(blocks.filter(pl.col("pool").is_null()))
    keys = ["__env", "__b"]

    def counter(op: str, **cols: pl.Expr) -> pl.DataFrame:
        return stats.filter(pl.col("op") == op).select(*keys, **cols)

    def write(frame: pl.DataFrame, op: str) -> pl.DataFrame:
        """``_write``: a timed counter's ops, time and peak; absent: no writes (zeros)."""
        w = stats.filter(pl.col("op") == op)
        bad.append(w.filter(~pl.col("timed")))
        return frame.join(w.select(*keys, pl.col("n").alias("write_ops"),
                                   pl.col("sum").alias("write_latency_us_total"),
                                   pl.col("max").alias("write_latency_peak_ms")),
                          on=keys, how="left", maintain_order="left").with_columns(
            pl.col("write_ops", "write_latency_us_total").fill_null(0))

    rows: list[pl.DataFrame] = []

    def add(frame: pl.DataFrame, metrics: list[str], start: int = 0) -> None:
        """The rows of ``frame``'s ``metrics`` columns, in that order after ``start``."""
        frame = divided(frame.with_columns(pl.col(m).cast(pl.Float64) for m in metrics),
                        1000, *[m for m in metrics if "_peak_ms" in m])
        rows.append(frame.unpivot(metrics, index=[*keys, "__k", "ts", "pool", "target"],
                                  variable_name="metric").drop_nulls("value").with_columns(
            (pl.col("metric").replace_strict(metrics, list(range(len(metrics))),
                                             return_dtype=pl.Int64) + start).alias("__j")))

    def metadata(frame: pl.DataFrame, ops: pl.DataFrame) -> None:
        """``_metadata``: per operation (every one timed), then summed over them."""
        bad.append(ops.filter(~pl.col("timed")))
        per_op = ops.join(frame.select(*keys, "__k", "ts", "pool", "target"), on=keys,
                          maintain_order="left").with_columns(pl.col("max").cast(pl.Float64))
        per_op = divided(per_op, 1000, "max")
        bad.append(per_op.filter(pl.col("__line") - pl.col("__k") >= (_SUMS - _PER_OP) // 3))
        names = ["metadata_ops_total", "metadata_latency_us_total", "metadata_latency_peak_ms"]
        for j, (name, value) in enumerate(zip(names, ("n", "sum", "max"), strict=True)):
            rows.append(per_op.select(
                *keys, "__k", "ts", "pool", "target", (name + "." + pl.col("op")).alias("metric"),
                pl.col(value).cast(pl.Float64).alias("value"),
                (_PER_OP + (pl.col("__line") - pl.col("__k")) * 3 + j).alias("__j")))
        sums = ops.group_by(keys).agg(
            pl.col("n").sum().alias("metadata_ops_total"),
            pl.col("sum").sum().alias("metadata_latency_us_total"),
            pl.col("max").filter(pl.col("n") != 0).max().alias("metadata_latency_peak_ms"))
        add(frame.join(sums, on=keys, how="left", maintain_order="left").with_columns(
            pl.col("metadata_ops_total", "metadata_latency_us_total").fill_null(0)),
            names, start=_SUMS)

    ost = write(blocks.filter(pl.col("kind") == "ost"), "write").join(
        counter("write_bytes", write_bytes=pl.col("sum"), __wb=pl.lit(True)), on=keys,
        how="left", maintain_order="left")
    bad.append(ost.filter((pl.col("write_latency_peak_ms").is_null()
                           != pl.col("__wb").is_null())
                          | (pl.col("__wb").is_not_null() & pl.col("write_bytes").is_null())))
    add(ost.with_columns(pl.col("write_bytes").fill_null(0)),
        ["write_ops", "write_latency_us_total", "write_latency_peak_ms", "write_bytes"])
    service = blocks.filter(pl.col("kind") == "service")
    queue = ["queue_requests_total", "queue_depth_total", "queue_wait_us_total",
             "active_requests_total"]
    for op, cols in (("req_qdepth", {queue[0]: pl.col("n"), queue[1]: pl.col("sum")}),
                     ("req_waittime", {queue[2]: pl.col("sum")}),
                     ("req_active", {queue[3]: pl.col("sum")})):
        bad.append(stats.filter((pl.col("op") == op) & pl.col("sum").is_null()))
        service = service.join(counter(op, **cols), on=keys, how="left",
                               maintain_order="left")
    service = service.with_columns(pl.col(queue).fill_null(0))
    oss = pl.col("name") == "ost.OSS.ost_io.stats"
    add(write(service.filter(oss), "ost_write"),
        [*queue, "write_ops", "write_latency_us_total", "write_latency_peak_ms"])
    mds = service.filter(~oss)
    add(mds, queue)
    on = ["__env", "__b"]
    metadata(mds, stats.filter(pl.col("op").str.starts_with("mds_")).join(
        mds.select(on), on=on, how="semi"))
    md = blocks.filter(pl.col("kind") == "md")
    metadata(md, stats.filter(~pl.col("op").is_in(sorted(DATA_OPS))).join(
        md.select(on), on=on, how="semi"))
    declined = pl.concat([f.select("__env") for f in bad]).to_series().unique()
    out = (pl.concat([r.select("__env", (pl.col("__k") * _SLOTS + pl.col("__j")).alias("__idx"),
                               "ts", "pool", "target", "metric", "value") for r in rows])
           .filter(~pl.col("__env").is_in(declined.implode()))
           .sort("__idx"))  # (the line of a block's name, its row's slot: envelopes in order)
    declined = env.filter(~pl.col("__env").is_in(out["__env"].implode()))["__env"]
    return {"pool_metrics": row_targets(out)}, declined
