"""Checkpoint records from torchtitan's training log (stdlib only).

torchtitan's ``CheckpointManager`` saves through PyTorch DCP and logs each save on every rank
(``torchtitan/components/checkpointer/dcp.py`` in pytorch/torchtitan; the logger's format is
``[titan] %(asctime)s - %(name)s - %(levelname)s - %(message)s``, local time):

* the start: ``Saving the checkpoint.`` / ``Staging the checkpoint.`` (async), in 2025
  ``Saving the checkpoint (or staging if async is enabled).``, in 2024
  ``Saving a full checkpoint at step N``; a last-step save adds ``Saving a full checkpoint at
  last step, step N.`` or ``Saving a model only checkpoint in <dtype> at last step, step N.``
* the end: ``Finished saving the checkpoint in X seconds.`` (``staging`` when async; 2025:
  ``Finished saving the checkpoint (or staging if async is enabled)in X seconds.``, 2024:
  without the final period), or for the last step ``Last step checkpoint completed in Xs``.

X is the time the save blocked training on that rank (with async checkpointing: the staging
only; the upload runs on). Each finished save gives one record per rank the log shows, its end
the stamp of the end line and its start X seconds before. ``torchrun --tee``/``--role`` prefixes
(``[rank3]:``) and ``srun --label`` prefixes (``3: ``) give the rank; a log without them is one
rank's (``rank``, default 0). The step is the one the start lines name, else the last
``step: N`` metrics line of that rank before the save (torchtitan saves right after logging the
step when the log frequency divides the checkpoint interval; with ``interval`` the step is
rounded up to the next multiple of it). A save that starts and never ends (the job died, or the
log ends while it runs) becomes a start marker, so it counts as unfinished.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta, tzinfo
from typing import Any

from ckptwatch.collect.recorder import STARTED, TIERS, iso_time

_PREFIX = re.compile(r"^\s*(?:\[rank(\d+)\]:|(\d+): )")
_STAMP = re.compile(r"(\d{4}-\d{2}-\d{2}[ T]\d{2}:\d{2}:\d{2}(?:[.,]\d+)?)")
_TRAIN_STEP = re.compile(r"\bstep:\s*(\d+)\b")
_GENERIC_START = re.compile(r"\b(?:Saving|Staging) the checkpoint\b(?! in)")
_NAMED_START = re.compile(
    r"\bSaving a (?:full|model only|model weights only) checkpoint\b.*?\bstep,? (\d+)")
_FINISHED = re.compile(r"\bFinished (?:saving|staging) the checkpoint"
                       r"(?: \(or staging if async is enabled\))?\s*in ([\d.]+) seconds")
_LAST_STEP_DONE = re.compile(r"\bLast step checkpoint completed in ([\d.]+)s\b")


@dataclass
class _Save:
    start: datetime | None
    step: int | None
    named: bool = False


@dataclass
class TorchtitanLog:
    """Records read from a torchtitan log, and what could not become one (``notes``)."""

    records: list[dict[str, Any]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def _stamp(line: str, tz: tzinfo) -> datetime | None:
    m = _STAMP.search(line)
    if not m:
        return None
    try:
        ts = datetime.fromisoformat(m.group(1).replace(",", "."))
    except ValueError:
        return None
    return ts.replace(tzinfo=tz) if ts.tzinfo is None else ts


def parse_torchtitan_log(lines: Iterable[str], *, job_id: str, tier: str,
                         node: str | None = None, rank: int = 0, target: str | None = None,
                         bytes_per_rank: int = 0, interval: int | None = None,
                         tz: tzinfo = UTC, default_time: datetime | None = None,
                         ) -> TorchtitanLog:
    """torchtitan log lines -> one input-contract record per rank per finished save, a start
    marker per save that never finished (see the module docstring).

    ``node`` None gives ``"unknown"``; ``bytes_per_rank`` is 0 unless given (torchtitan logs no
    size). ``default_time`` stands in for a line without a stamp. Raises ValueError for a bad
    ``tier`` or ``interval``; saves that cannot be placed (no step, no time) are named in
    ``notes``.
    """
    if tier not in TIERS:
        raise ValueError(f"tier must be one of {', '.join(TIERS)}, got {tier!r}")
    if interval is not None and interval < 1:
        raise ValueError(f"interval must be >= 1, got {interval}")
    out = TorchtitanLog()
    last_step: dict[int, int] = {}
    pending: dict[int, _Save] = {}
    base = {"job_id": job_id, "node": node or "unknown", "tier": tier, "target": target}

    def save_step(r: int) -> int | None:
        step = last_step.get(r)
        if step is None or interval is None:
            return step
        return math.ceil(step / interval) * interval

    def unfinished(r: int, save: _Save) -> None:
        if save.step is None or save.start is None:
            out.notes.append(f"rank {r}: a save that never finished has no "
                             f"{'step' if save.step is None else 'time'}: left out")
            return
        out.records.append({**base, "step": save.step, "rank": r,
                            "start_time": iso_time(save.start), "status": STARTED})

    for number, raw in enumerate(lines, start=1):
        line = raw.rstrip("\n")
        m = _PREFIX.match(line)
        r = int(m.group(1) or m.group(2)) if m else rank
        body = line[m.end():] if m else line
        ts = _stamp(body, tz) or default_time
        finished = _FINISHED.search(body) or _LAST_STEP_DONE.search(body)
        if finished:
            save = pending.pop(r, None) or _Save(None, save_step(r))
            if save.step is None:
                out.notes.append(f"line {number}: rank {r}'s save names no step and no "
                                 "'step: N' line came before it: left out")
                continue
            if ts is None:
                out.notes.append(f"line {number}: no timestamp for rank {r}'s save at step "
                                 f"{save.step}: left out (pass a default time)")
                continue
            duration = timedelta(seconds=float(finished.group(1)))
            out.records.append({
                **base, "step": save.step, "rank": r, "start_time": iso_time(ts - duration),
                "end_time": iso_time(ts), "bytes": int(bytes_per_rank), "open_s": None,
                "write_s": None, "fsync_s": None, "close_s": None, "status": "ok"})
            continue
        named = _NAMED_START.search(body)
        if named:
            step = int(named.group(1))
            current = pending.get(r)
            if current is not None and not current.named \
                    and current.step in (None, step, save_step(r)):
                current.step, current.named = step, True  # the generic line began this save
            else:
                if current is not None:
                    unfinished(r, current)
                pending[r] = _Save(ts, step, named=True)
            continue
        if _GENERIC_START.search(body):
            if r in pending:
                unfinished(r, pending.pop(r))
            pending[r] = _Save(ts, save_step(r))
            continue
        step_m = _TRAIN_STEP.search(body)
        if step_m and "loss" in body:
            last_step[r] = int(step_m.group(1))
    for r, save in sorted(pending.items()):
        unfinished(r, save)
    out.records.sort(key=lambda rec: (rec["step"], rec["rank"], rec["status"] == STARTED))
    return out
