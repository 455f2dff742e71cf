"""MLPerf Storage / DLIO per-rank checkpoint timings (``<rank>_per_epoch_stats.json``).

DLIO (argonne-lcf/dlio_benchmark, the engine of MLPerf Storage's checkpointing workload)
writes one ``<rank>_per_epoch_stats.json`` per rank: ``{epoch: {"start", "end",
"save_ckpt<N>": {"start", "end", "duration", "throughput"}, "load_ckpt<N>": …}}``. Each
``save_ckpt<N>`` becomes one ``checkpoint_writes`` row for that rank (``step`` = N).

What the file cannot provide, and how it is supplied (see docs/formats.md):

* node: the file names no host -> ``node=`` (from the hostfile / rank placement);
* bytes per rank: ``throughput`` is the whole checkpoint's GiB/s (``throughput x duration`` =
  the total checkpoint size in GiB, the same on every rank) -> ``n_ranks=`` (divides the total
  evenly; ``num_accelerators`` of summary.json, see ``n_ranks_from_summary``) or
  ``bytes_per_rank=``;
* target / tier: the storage the run wrote to -> ``target=``, ``tier=`` (default ``pool``);
* phases (open/write/fsync/close): not measured by DLIO -> left null;
* time zone: timestamps are the run host's naive local time -> ``tz=`` (default UTC).

Reads (``load_ckpt<N>``) are not checkpoint writes and are not returned. This is a file-level
format, not an envelope tool: it registers no tool source.
"""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime, tzinfo
from typing import Any

from ckptwatch.errors import RecordError
from ckptwatch.lake.schema import TIERS
from ckptwatch.sources.textkv import parse_number, shorten

GIB = 1 << 30
_SAVE = re.compile(r"save_ckpt(\d+)")
_RANK_FILE = re.compile(r"(?:^|/)(\d+)_per_epoch_stats\.json$")
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


def _load(text_or_obj: Any) -> Any:
    if isinstance(text_or_obj, bytes | bytearray):
        text_or_obj = text_or_obj.decode("utf-8", errors="replace")
    if isinstance(text_or_obj, str):
        try:
            return json.loads(text_or_obj)
        except json.JSONDecodeError as exc:
            raise RecordError(f"DLIO per_epoch_stats is not valid JSON ({exc.msg} at line "
                              f"{exc.lineno} column {exc.colno}; truncated?)") from exc
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


def parse_dlio_per_epoch_stats(
    text_or_obj: Any, *, rank: int, job_id: str, node: str | None,
    n_ranks: int | None = None, bytes_per_rank: int | None = None, tier: str = "pool",
    target: str | None = None, tz: tzinfo = UTC,
) -> list[dict[str, Any]]:
    """One rank's DLIO ``per_epoch_stats.json`` -> ``checkpoint_writes`` row dicts.

    ``text_or_obj`` is the file's text (or bytes) or its parsed JSON. ``node=None`` gives
    ``"unknown"`` (rows then join no SMART/fabric data). Bytes per rank come from
    ``bytes_per_rank`` or, failing that, the total checkpoint size / ``n_ranks``; with neither,
    RecordError. Raises RecordError naming the epoch/checkpoint for malformed entries.
    """
    if tier not in TIERS:
        raise ValueError(f"tier must be one of {', '.join(TIERS)}, not {tier!r}")
    doc = _load(text_or_obj)
    if not isinstance(doc, dict):
        raise RecordError(f"DLIO per_epoch_stats is not a JSON object (got {type(doc).__name__})")
    rows: list[dict[str, Any]] = []
    seen: dict[int, str] = {}
    for epoch, stats in doc.items():
        if not isinstance(stats, dict):
            raise RecordError(f"DLIO per_epoch_stats epoch {epoch!r} is not an object")
        for key, entry in stats.items():
            m = _SAVE.fullmatch(key)
            if not m:
                continue
            step = int(m.group(1))
            where = f"epoch {epoch} {key}"
            if step in seen:
                raise RecordError(f"{where}: checkpoint {step} also appears in {seen[step]}")
            seen[step] = where
            if not isinstance(entry, dict):
                raise RecordError(f"{where} is not an object")
            for field in ("start", "end"):
                if field not in entry:
                    raise RecordError(f"{where} has no '{field}' (run interrupted or truncated?)")
            start = _time(entry["start"], f"{where}.start", tz)
            end = _time(entry["end"], f"{where}.end", tz)
            duration = (end - start).total_seconds()
            if duration < 0:
                raise RecordError(f"{where}: end {entry['end']} is before start {entry['start']}")
            if bytes_per_rank is not None:
                nbytes = int(bytes_per_rank)
            elif n_ranks:
                throughput = parse_number(entry.get("throughput"))
                if throughput is None:
                    raise RecordError(f"{where} has no numeric 'throughput' (GiB/s) to size the "
                                      "write; pass bytes_per_rank")
                reported = parse_number(entry.get("duration"))
                total_gib = float(throughput) * float(reported if reported is not None
                                                      else duration)
                nbytes = round(total_gib * GIB / n_ranks)
            else:
                raise RecordError("DLIO reports only the whole checkpoint's size (throughput x "
                                  "duration); pass n_ranks (summary.json num_accelerators) or "
                                  "bytes_per_rank")
            rows.append({
                "job_id": job_id, "step": step, "rank": rank, "node": node or "unknown",
                "tier": tier, "target": target, "start_ts": start, "end_ts": end,
                "duration_s": duration, "bytes": nbytes, "open_s": None, "write_s": None,
                "fsync_s": None, "close_s": None, "status": "ok",
            })
    if not rows:
        raise RecordError("DLIO per_epoch_stats has no save_ckptN entries (a training-mode run: "
                          "epoch/block timings only, no checkpoints)")
    return sorted(rows, key=lambda r: r["step"])
