"""MLPerf Storage / DLIO checkpointing runs: per-rank saves and loads, host names, run facts.

DLIO (argonne-lcf/dlio_benchmark, the engine of MLPerf Storage's checkpointing workload)
writes, per rank, ``<rank>_per_epoch_stats.json``: ``{epoch: {"start", "end",
"save_ckpt<N>": {"start", "end", "duration", "throughput"}, "load_ckpt<N>": …}}``, and
``<rank>_output.json`` (host facts, ``hostname`` among them); per run, ``summary.json``
(``start``, ``num_accelerators``, ``num_hosts``, ``metric``) and ``dlio.log`` (rank 0's view:
the storage configuration, the checkpoint size, where the results were saved). MLPerf
publishes a run as ``<system>/checkpointing/<model>/<timestamp>/``.

Each ``save_ckpt<N>`` becomes one ``checkpoint_writes`` row for that rank (``step`` = N), each
``load_ckpt<N>`` one ``checkpoint_loads`` row (a restore; kept apart from the saves).

What the stats file cannot provide, and how it is supplied (see docs/formats.md):

* node: the stats name no host -> ``node=`` (the ingest passes ``<rank>_output.json``'s
  ``hostname``, see ``hostname_from_output``; without one, ``"unknown"``);
* bytes per rank: ``throughput`` is the whole checkpoint's GiB/s (``throughput x duration`` =
  the total checkpoint size in GiB, the same on every rank) -> ``n_ranks=`` (divides the total
  evenly; ``num_accelerators`` of summary.json, see ``n_ranks_from_summary``) or
  ``bytes_per_rank=``;
* target / tier: the storage the run wrote to -> ``target=`` (the ingest passes dlio.log's
  ``storage_root``), ``tier=`` (default ``pool``);
* phases (open/write/fsync/close): not measured by DLIO -> left null;
* time zone: timestamps are the run host's naive local time -> ``tz=`` (default UTC).

This is a file-level format, not an envelope tool: it registers no tool source.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime, tzinfo
from pathlib import PurePath
from typing import Any

from ckptwatch.errors import RecordError
from ckptwatch.lake.schema import TIERS
from ckptwatch.sources.base import load_json
from ckptwatch.sources.textkv import parse_number, shorten

GIB = 1 << 30
_CHECKPOINT = re.compile(r"(save|load)_ckpt(\d+)")
#: Which lake table each kind of DLIO entry goes to.
TABLE_OF = {"save": "checkpoint_writes", "load": "checkpoint_loads"}
_RANK_FILE = re.compile(r"(?:^|/)(\d+)_per_epoch_stats\.json$")
_NO_CHECKPOINTS = ("DLIO per_epoch_stats has no save_ckptN entries (a training-mode run: "
                   "epoch/block timings only, no checkpoints)")
#: The directory MLPerf Storage publishes checkpointing runs under:
#: ``<system>/checkpointing/<model>/<timestamp>/``.
LAYOUT_WORKLOAD = "checkpointing"
_LOG_SETTING = re.compile(r"^\[OUTPUT\]\s+(storage_type|storage_root|framework)\s*=\s*(.*?)\s*$")
_LOG_ENUM = re.compile(r"^<\w+\.\w+:\s*'([^']*)'>$")
_LOG_PROCESSES = re.compile(r"Running DLIO \[Checkpointing\] with (\d+) process")
_LOG_SIZE = re.compile(r"Total checkpoint size: ([0-9.]+) GiB")
_LOG_SAVED = re.compile(r"Saved outputs in (\S+)")
_LOG_TIME = re.compile(r"^\[OUTPUT\] (\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?) ")
_EPOCH_KEYS = re.compile(r"(save|load)_ckpt\d+|block\d+")


def rank_from_filename(name: str) -> int | None:
    """The rank in a DLIO file name: ``63_per_epoch_stats.json`` -> 63; else None."""
    m = _RANK_FILE.search(name)
    return int(m.group(1)) if m else None


def n_ranks_from_summary(summary: Any) -> int | None:
    """``num_accelerators`` (DLIO's process count) from a DLIO ``summary.json`` object."""
    if isinstance(summary, dict):
        n = parse_number(summary.get("num_accelerators"))
        if isinstance(n, int) and n > 0:
            return n
    return None


def _load(text_or_obj: Any, what: str = "DLIO per_epoch_stats") -> Any:
    if isinstance(text_or_obj, bytes | bytearray):
        text_or_obj = text_or_obj.decode("utf-8", errors="replace")
    if isinstance(text_or_obj, str):
        try:
            return load_json(text_or_obj)
        except RecordError as exc:  # "invalid JSON (<reason>)": malformed, too deep, too long
            reason = str(exc).removeprefix("invalid JSON (").removesuffix(")")
            raise RecordError(f"{what} is not valid JSON ({reason}; truncated?)") from exc
    return text_or_obj


def detect_dlio_per_epoch_stats(text_or_obj: Any) -> bool:
    """A DLIO ``per_epoch_stats.json``: epoch-number keys holding ``start`` and
    ``save_ckptN``/``load_ckptN``/``blockN`` entries (training-mode files included)."""
    obj = text_or_obj
    if isinstance(obj, str | bytes | bytearray):
        try:
            obj = _load(obj)
        except RecordError:
            return False
    if not isinstance(obj, dict) or not obj:
        return False
    epochs = [v for k, v in obj.items() if isinstance(k, str) and k.isdigit()]
    return bool(epochs) and len(epochs) == len(obj) and all(
        isinstance(e, dict) and "start" in e and any(_EPOCH_KEYS.fullmatch(k) for k in e)
        for e in epochs
    )


def _time(value: Any, where: str, tz: tzinfo) -> datetime:
    if not isinstance(value, str):
        raise RecordError(f"{where} is not an ISO-8601 time: {shorten(repr(value))}")
    try:
        ts = datetime.fromisoformat(value.strip())
    except ValueError:
        raise RecordError(f"{where} is not an ISO-8601 time: {shorten(value)!r}") from None
    return (ts.replace(tzinfo=tz) if ts.tzinfo is None else ts).astimezone(UTC)


def parse_dlio_checkpoints(
    text_or_obj: Any, *, rank: int, job_id: str, node: str | None,
    n_ranks: int | None = None, bytes_per_rank: int | None = None, tier: str = "pool",
    target: str | None = None, tz: tzinfo = UTC,
) -> dict[str, list[dict[str, Any]]]:
    """One rank's DLIO ``per_epoch_stats.json`` -> row dicts per lake table: its saves
    (``save_ckptN``) under ``checkpoint_writes``, its loads (``load_ckptN``, restores) under
    ``checkpoint_loads``, each sorted by step.

    ``text_or_obj`` is the file's text (or bytes) or its parsed JSON. ``node`` is the rank's
    host as given (``None``: ``"unknown"``, which joins no SMART/fabric data). Bytes per rank
    come from ``bytes_per_rank`` or, failing that, the total checkpoint size / ``n_ranks``;
    with neither, RecordError. Raises RecordError naming the epoch/entry for malformed
    entries, and when the file has neither saves nor loads (a training-mode run).
    """
    if tier not in TIERS:
        raise ValueError(f"tier must be one of {', '.join(TIERS)}, not {tier!r}")
    doc = _load(text_or_obj)
    if not isinstance(doc, dict):
        raise RecordError(f"DLIO per_epoch_stats is not a JSON object (got {type(doc).__name__})")
    out: dict[str, list[dict[str, Any]]] = {t: [] for t in TABLE_OF.values()}
    seen: dict[tuple[str, int], str] = {}
    for epoch, stats in doc.items():
        if not isinstance(stats, dict):
            raise RecordError(f"DLIO per_epoch_stats epoch {epoch!r} is not an object")
        for key, entry in stats.items():
            m = _CHECKPOINT.fullmatch(key)
            if not m:
                continue
            kind, step = m.group(1), int(m.group(2))
            where = f"epoch {epoch} {key}"
            if (kind, step) in seen:
                raise RecordError(f"{where}: checkpoint {step} also appears in "
                                  f"{seen[kind, step]}")
            seen[kind, step] = where
            start, end, nbytes = _entry(entry, where, tz, n_ranks, bytes_per_rank)
            row: dict[str, Any] = {
                "job_id": job_id, "step": step, "rank": rank, "node": node or "unknown",
                "tier": tier, "target": target, "start_ts": start, "end_ts": end,
                "duration_s": (end - start).total_seconds(), "bytes": nbytes,
            }
            if kind == "save":
                row |= {"open_s": None, "write_s": None, "fsync_s": None, "close_s": None,
                        "status": "ok"}
            out[TABLE_OF[kind]].append(row)
    if not any(out.values()):
        raise RecordError(_NO_CHECKPOINTS)
    return {t: sorted(rows, key=lambda r: r["step"]) for t, rows in out.items()}


def _entry(entry: Any, where: str, tz: tzinfo, n_ranks: int | None,
           bytes_per_rank: int | None) -> tuple[datetime, datetime, int]:
    """Start, end and bytes of this rank of one ``save_ckptN``/``load_ckptN`` entry."""
    if not isinstance(entry, dict):
        raise RecordError(f"{where} is not an object")
    for field in ("start", "end"):
        if field not in entry:
            raise RecordError(f"{where} has no '{field}' (run interrupted or truncated?)")
    start = _time(entry["start"], f"{where}.start", tz)
    end = _time(entry["end"], f"{where}.end", tz)
    if end < start:
        raise RecordError(f"{where}: end {entry['end']} is before start {entry['start']}")
    if bytes_per_rank is not None:
        return start, end, int(bytes_per_rank)
    if not n_ranks:
        raise RecordError("DLIO reports only the whole checkpoint's size (throughput x "
                          "duration); pass n_ranks (summary.json num_accelerators) or "
                          "bytes_per_rank")
    throughput = parse_number(entry.get("throughput"))
    if throughput is None:
        raise RecordError(f"{where} has no numeric 'throughput' (GiB/s) to size the "
                          "write; pass bytes_per_rank")
    reported = parse_number(entry.get("duration"))
    total_gib = float(throughput) * float(reported if reported is not None
                                          else (end - start).total_seconds())
    return start, end, round(total_gib * GIB / n_ranks)


def parse_dlio_per_epoch_stats(
    text_or_obj: Any, *, rank: int, job_id: str, node: str | None,
    n_ranks: int | None = None, bytes_per_rank: int | None = None, tier: str = "pool",
    target: str | None = None, tz: tzinfo = UTC,
) -> list[dict[str, Any]]:
    """One rank's DLIO ``per_epoch_stats.json`` -> its saves as ``checkpoint_writes`` row
    dicts (``parse_dlio_checkpoints`` without the loads). RecordError when it has no saves."""
    rows = parse_dlio_checkpoints(text_or_obj, rank=rank, job_id=job_id, node=node,
                                  n_ranks=n_ranks, bytes_per_rank=bytes_per_rank, tier=tier,
                                  target=target, tz=tz)["checkpoint_writes"]
    if not rows:
        raise RecordError(_NO_CHECKPOINTS)
    return rows


# -- the run around the stats: <rank>_output.json, summary.json, dlio.log, the layout ----------

def hostname_from_output(text_or_obj: Any) -> str | None:
    """The host of a rank: ``hostname`` of its DLIO ``<rank>_output.json`` (None: absent or not
    a name). Raises RecordError when the text is not JSON."""
    obj = _load(text_or_obj, "DLIO <rank>_output.json")
    name = obj.get("hostname") if isinstance(obj, dict) else None
    if not isinstance(name, str) or not name.strip():
        return None
    return name.strip()


@dataclass(frozen=True)
class DlioRun:
    """What a DLIO run's ``summary.json`` and ``dlio.log`` say about the run as a whole
    (each field None when neither says)."""

    #: When the run started (summary ``start``, else the log's first time), UTC.
    start_ts: datetime | None = None
    #: Processes (ranks): summary ``num_accelerators``, else the log's "with N process(es)".
    n_ranks: int | None = None
    #: Hosts the ranks ran on (summary ``num_hosts``).
    n_hosts: int | None = None
    #: The storage written: ``storage_type`` (``s3``, ``local_fs``) and ``storage_root``.
    storage_type: str | None = None
    storage_root: str | None = None
    #: The whole checkpoint (log "Total checkpoint size", GiB -> bytes).
    checkpoint_bytes: int | None = None
    #: Where DLIO saved the results (log "Saved outputs in"): the MLPerf layout, when moved.
    results_dir: str | None = None


def _local_time(value: Any, tz: tzinfo) -> datetime | None:
    if not isinstance(value, str):
        return None
    try:
        ts = datetime.fromisoformat(value.strip())
    except ValueError:
        return None
    return (ts.replace(tzinfo=tz) if ts.tzinfo is None else ts).astimezone(UTC)


def _log_value(raw: str) -> str:
    """A setting as dlio.log prints it: ``<StorageType.S3: 's3'>`` -> ``s3``, ``'x'`` -> ``x``."""
    m = _LOG_ENUM.match(raw)
    if m:
        return m.group(1)
    return raw[1:-1] if len(raw) >= 2 and raw[0] == raw[-1] == "'" else raw


def read_dlio_run(summary: Any = None, log: str | None = None, *, tz: tzinfo = UTC) -> DlioRun:
    """The run facts of a DLIO ``summary.json`` (text or parsed) and ``dlio.log`` text; either
    may be None. Lines and keys it does not know are passed over: both files are rank 0's
    report, not data. Raises RecordError when ``summary`` is text that is not JSON."""
    facts: dict[str, Any] = {}
    doc = _load(summary, "DLIO summary.json") if summary is not None else None
    if isinstance(doc, dict):
        facts["start_ts"] = _local_time(doc.get("start"), tz)
        facts["n_ranks"] = n_ranks_from_summary(doc)
        hosts = parse_number(doc.get("num_hosts"))
        facts["n_hosts"] = hosts if isinstance(hosts, int) and hosts > 0 else None
    for line in (log or "").splitlines():
        if m := _LOG_SETTING.match(line):
            facts.setdefault(m.group(1), _log_value(m.group(2)) or None)
        elif m := _LOG_PROCESSES.search(line):
            facts.setdefault("log_ranks", int(m.group(1)))
        elif m := _LOG_SIZE.search(line):
            facts.setdefault("checkpoint_bytes", round(float(m.group(1)) * GIB))
        elif m := _LOG_SAVED.search(line):
            facts["results_dir"] = m.group(1)
        if (m := _LOG_TIME.match(line)) and "log_start" not in facts:
            facts["log_start"] = _local_time(m.group(1), tz)
    return DlioRun(
        start_ts=facts.get("start_ts") or facts.get("log_start"),
        n_ranks=facts.get("n_ranks") or facts.get("log_ranks"),
        n_hosts=facts.get("n_hosts"),
        storage_type=facts.get("storage_type"), storage_root=facts.get("storage_root"),
        checkpoint_bytes=facts.get("checkpoint_bytes"), results_dir=facts.get("results_dir"),
    )


def job_id_from_layout(run_dir: PurePath | str) -> str | None:
    """``<system>/<model>/<timestamp>`` for a run directory in MLPerf's published layout
    (``…/<system>/checkpointing/<model>/<timestamp>``); None for any other directory."""
    parts = PurePath(run_dir).parts
    if len(parts) >= 4 and parts[-3] == LAYOUT_WORKLOAD and all(parts[-4:]):
        return f"{parts[-4]}/{parts[-2]}/{parts[-1]}"
    return None
