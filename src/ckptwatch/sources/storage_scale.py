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

from ckptwatch.errors import RecordError
from ckptwatch.sources.base import ToolContext, register_tool
from ckptwatch.sources.pool_common import line_reject, named_pool, pool_row, result
from ckptwatch.sources.textkv import iter_lines

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
        line.lstrip().startswith("_fs_io_s_ ") for line in output.splitlines()[:20])


@register_tool(MMPMON_SOURCE, detect_mmpmon, needs=("_fs_io_s_ ",))
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
        line.startswith("mmlsqos:") for line in output.splitlines()[:20])


@register_tool(MMLSQOS_SOURCE, detect_mmlsqos, needs=("mmlsqos:",))
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


def detect_waiters(output: Any) -> bool:
    """``mmdiag --waiters -Y`` output: ``mmdiag:waiters:`` lines."""
    return isinstance(output, str) and any(
        line.startswith("mmdiag:waiters:") for line in output.splitlines()[:20])


_IO_COMPLETION = re.compile(r"\bfor I/O completion\b")


@register_tool(WAITERS_SOURCE, detect_waiters, needs=("mmdiag:waiters:",))
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
