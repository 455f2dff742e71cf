"""Checkpoint records from what training frameworks already emit (stdlib only, no torch).

* ``DCPCheckpointHandler``: a ``logging.Handler`` for PyTorch Distributed Checkpoint (DCP)
  events. DCP wraps ``save``/``async_save``/``load`` and the steps inside ``_save_state_dict``
  (``local_step``, ``global_step``, ``write_data``, ``finish_checkpoint``) in
  ``_dcp_method_logger``, which logs a dict per event to the logger that
  ``torch.distributed.c10d_logger._get_or_create_logger("dcp_logger")`` creates:
  ``"c10d-NullHandler-dcp_logger"``, level DEBUG, ``propagate = False`` and only a NullHandler,
  so the events are dropped unless a handler is attached to that very logger. The dict
  (``record.msg``) carries ``event`` (``start`` | ``end`` | ``exception``), ``time``
  (``time.time_ns()``), ``times_spent`` (ns, on ``end``), ``uuid`` (one per wrapped call),
  ``checkpoint_id``, ``func_name`` and, once ``torch.distributed`` is initialised,
  ``global_rank``/``world_size`` as strings.
  Source: pytorch/pytorch ``torch/distributed/checkpoint/logger.py`` (``_dcp_method_logger``,
  ``_msg_dict_from_dcp_method_args``), ``torch/distributed/c10d_logger.py``
  (``_get_or_create_logger``, ``_get_msg_dict``), ``torch/distributed/checkpoint/
  logging_handlers.py`` (``DCP_LOGGER_NAME = "dcp_logger"``).
* ``parse_megatron_log``: Megatron-LM's checkpoint save lines and its ``save-checkpoint``
  timer. Megatron reports only the min and max across ranks, and its timer starts and stops
  with a barrier, so the value is the checkpoint's barrier time (what training waited). Each
  completed save becomes **one** record: ``rank = 0``, duration = the max across ranks. The
  per-rank spread (stragglers, p50 over ranks) is unknown from these logs; use the recorder or
  the DCP handler in the training code for per-rank records. A save the log shows starting
  and never finishing becomes a start marker (rank 0), so it counts as unfinished.
"""

from __future__ import annotations

import argparse
import logging
import os
import re
import sys
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta, tzinfo
from pathlib import Path
from typing import Any

from ckptwatch.collect.recorder import STARTED, TIERS, CheckpointRecorder, iso_time, write_records

# --------------------------------------------------------------------------- PyTorch DCP

#: ``c10d_logger._get_or_create_logger`` names the logger
#: ``f"c10d-{type(handler).__name__}-{destination}"``; DCP registers a NullHandler for
#: destination ``"dcp_logger"``.
DCP_LOGGER_NAME = "c10d-NullHandler-dcp_logger"
#: DCP functions whose start/end bound one checkpoint save on this rank.
DCP_SAVE_FUNCTIONS = ("save",)
#: DCP steps inside a save whose ``times_spent`` become phase columns. ``write_data`` writes and
#: (FileSystemWriter, ``sync_files=True``) fsyncs this rank's files: DCP does not time fsync on
#: its own, so it is counted in ``write_s``. ``finish_checkpoint`` writes the ``.metadata`` file
#: (coordinator rank only): a metadata operation, recorded as ``close_s``.
DCP_PHASE_FUNCTIONS = {"write_data": "write_s", "finish_checkpoint": "close_s"}

_LAST_NUMBER = re.compile(r"(\d+)(?!.*\d)")


def step_from_checkpoint_id(checkpoint_id: str | None) -> int | None:
    """The step a checkpoint directory names: the last number of its final path component
    (``…/step_1000`` , ``iter_0001000``, ``checkpoint-1000``, ``global_step1000`` -> 1000)."""
    if not checkpoint_id:
        return None
    name = os.path.basename(str(checkpoint_id).rstrip("/\\"))
    m = _LAST_NUMBER.search(name)
    return int(m.group(1)) if m else None


def dcp_rank_bytes(checkpoint_id: str | None, rank: int) -> int:
    """Bytes this rank wrote to a FileSystemWriter checkpoint directory.

    FileSystemWriter names a rank's files ``__<rank>_<n>.distcp`` (``_StoragePrefix(f"__{i}_")``
    in ``prepare_global_plan``). They are ``stat``-ed by name, ``n = 0, 1, …`` until one is
    missing, so no directory listing hits the (possibly shared) file system. 0 when the
    checkpoint is not a local directory.
    """
    if not checkpoint_id:
        return 0
    base = Path(str(checkpoint_id))
    total = 0
    n = 0
    while True:
        try:
            total += (base / f"__{rank}_{n}.distcp").stat().st_size
        except OSError:
            return total
        n += 1


@dataclass
class _Pending:
    phases: dict[str, float]


class DCPCheckpointHandler(logging.Handler):
    """Turns DCP ``save`` events into per-rank checkpoint records: the ``start`` event of a
    save writes the rank's start marker at once (``CheckpointRecorder.started``), its ``end``
    (or ``exception``) the finished record.

    ``step_of`` maps the ``checkpoint_id`` to a step (default: the last number in its final
    path component); when it gives None, ``handler.step`` (set it before ``dcp.save``) is used.
    ``bytes_of(checkpoint_id, rank)`` sizes the write (default ``dcp_rank_bytes``). A save that
    raised is recorded with ``status = "error"``. The handler never raises into DCP.
    """

    def __init__(self, recorder: CheckpointRecorder, *,
                 step_of: Callable[[str | None], int | None] = step_from_checkpoint_id,
                 bytes_of: Callable[[str | None, int], int] | None = dcp_rank_bytes,
                 save_functions: Sequence[str] = DCP_SAVE_FUNCTIONS,
                 phase_functions: dict[str, str] | None = None) -> None:
        super().__init__(level=logging.DEBUG)
        self.recorder = recorder
        self.step_of = step_of
        self.bytes_of = bytes_of
        self.save_functions = tuple(save_functions)
        self.phase_functions = dict(DCP_PHASE_FUNCTIONS if phase_functions is None
                                    else phase_functions)
        #: Fallback step when ``step_of`` cannot tell (set it before each ``dcp.save``).
        self.step: int | None = None
        self._starts: dict[str, int] = {}
        self._pending: dict[str, _Pending] = {}
        self._warned = False

    @classmethod
    def install(cls, recorder: CheckpointRecorder, *, logger_name: str = DCP_LOGGER_NAME,
                **kwargs: Any) -> DCPCheckpointHandler:
        """Attach a handler to DCP's logger (works before or after torch is imported)."""
        handler = cls(recorder, **kwargs)
        logger = logging.getLogger(logger_name)
        logger.setLevel(logging.DEBUG)  # what c10d_logger sets; needed if torch comes later
        logger.addHandler(handler)
        return handler

    def uninstall(self, logger_name: str = DCP_LOGGER_NAME) -> None:
        """Detach from DCP's logger."""
        logging.getLogger(logger_name).removeHandler(self)

    def emit(self, record: logging.LogRecord) -> None:
        """Handle one DCP event (``record.msg`` is the event dict)."""
        try:
            self._handle(record)
        except Exception:  # noqa: BLE001 - a logging handler must never break the save
            self.handleError(record)

    def _handle(self, record: logging.LogRecord) -> None:
        msg = record.msg
        if not isinstance(msg, dict):
            return
        func = str(msg.get("func_name", ""))
        event = msg.get("event")
        when_ns = msg.get("time")
        if not isinstance(when_ns, int):
            when_ns = int(record.created * 1e9)
        # DCP runs a save's steps inside ``save`` on the same thread (the upload thread for
        # ``async_save``), so a thread's step timings belong to its save in progress.
        key = f"thread:{record.thread}"
        column = self.phase_functions.get(func)
        if column is not None and event == "end":
            spent = msg.get("times_spent")
            if isinstance(spent, int):
                phases = self._pending.setdefault(key, _Pending({})).phases
                phases[column] = phases.get(column, 0.0) + spent / 1e9
            return
        if func not in self.save_functions:
            return
        uuid = str(msg.get("uuid", key))
        cid = msg.get("checkpoint_id")
        checkpoint_id = str(cid) if cid else None
        rank = self.recorder.rank
        raw_rank = msg.get("global_rank")
        if raw_rank is not None and str(raw_rank).isdigit():
            rank = int(str(raw_rank))
        if event == "start":
            self._starts[uuid] = when_ns
            self._pending[key] = _Pending({})  # drop steps of an earlier save that never ended
            step = self._step(checkpoint_id, warn=False)
            if step is not None:  # the start marker, written at once (the save may hang)
                self.recorder.started(step, rank=rank, start_time=when_ns / 1e9)
            return
        if event not in ("end", "exception"):
            return
        start_ns = self._starts.pop(uuid, None)
        spent = msg.get("times_spent")
        if start_ns is None and isinstance(spent, int):
            start_ns = when_ns - spent
        pending = self._pending.pop(key, _Pending({}))
        if start_ns is None:
            return  # an exception whose start we never saw: nothing to time
        step = self._step(checkpoint_id, warn=True)
        if step is None:
            return
        nbytes = self.bytes_of(checkpoint_id, rank) if self.bytes_of else 0
        self.recorder.record(
            step=step, rank=rank, start_time=start_ns / 1e9, end_time=max(when_ns, start_ns) / 1e9,
            bytes=nbytes, status="ok" if event == "end" else "error", **pending.phases)
        if event == "exception":
            self.recorder.flush()

    def _step(self, checkpoint_id: str | None, *, warn: bool) -> int | None:
        """The step of a save (``step_of``, else ``handler.step``); None, said once when
        ``warn``, when neither names one."""
        step = self.step_of(checkpoint_id)
        if step is None:
            step = self.step
        if step is None and warn and not self._warned:
            self._warned = True
            print(f"ckptwatch: DCP save of {checkpoint_id!r} names no step; set "
                  "handler.step before dcp.save or pass step_of= (record skipped)",
                  file=sys.stderr)
        return step


# --------------------------------------------------------------------------- Megatron-LM

#: Optional ``srun --label`` prefix (``"0: "``).
_RANK_PREFIX = re.compile(r"^\s*\d+: ")
#: Megatron-LM's own stamp (``[2025-01-31 12:00:00.123456]``, naive local time) or a leading
#: ISO-8601 stamp added by a log shipper (``2025-01-31T12:00:00.123Z``).
_BRACKET_TS = re.compile(r"\[(\d{4}-\d{2}-\d{2}[ T]\d{2}:\d{2}:\d{2}(?:\.\d+)?)\]")
_LEADING_TS = re.compile(
    r"^\s*(\d{4}-\d{2}-\d{2}[ T]\d{2}:\d{2}:\d{2}(?:[.,]\d+)?(?:Z|[+-]\d{2}:?\d{2})?)\b")
_SAVING = re.compile(r"(?<!successfully )saving checkpoint at iteration\s+(\d+)")
_SAVED = re.compile(r"successfully saved checkpoint (?:from|at) iteration\s+(\d+)")
#: ``(min, max) time across ranks (ms):`` / ``max time across ranks (ms):`` entries.
_TIMER = re.compile(r"(save-checkpoint(?:-non-persistent)?) ?\.*: \(?([\d.]+)(?:, ([\d.]+))?\)?")
#: ``times across ranks (ms):`` (``--timing-log-option all``): a name line, then rank lines.
_TIMER_ALL_NAME = re.compile(r"^\s*(save-checkpoint(?:-non-persistent)?):\s*$")
_TIMER_ALL_RANK = re.compile(r"^\s*rank\s+\d+: ([\d.]+)\s*$")


@dataclass
class _Save:
    step: int
    start: datetime | None = None
    end: datetime | None = None
    max_ms: float | None = None
    completed: bool = False
    non_persistent: bool = False


def _line_time(line: str, tz: tzinfo) -> datetime | None:
    m = _LEADING_TS.match(line) or _BRACKET_TS.search(line)
    if not m:
        return None
    try:
        ts = datetime.fromisoformat(m.group(1).replace(",", ".").replace("Z", "+00:00"))
    except ValueError:
        return None
    return ts.replace(tzinfo=tz) if ts.tzinfo is None else ts


def parse_megatron_log(lines: Iterable[str], *, job_id: str, tier: str,
                       node: str | None = None, target: str | None = None,
                       bytes_per_rank: int = 0, non_persistent_tier: str | None = None,
                       tz: tzinfo = UTC, default_time: datetime | None = None,
                       ) -> list[dict[str, Any]]:
    """Megatron-LM log lines -> one input-contract record per completed checkpoint save.

    Reads ``saving checkpoint at iteration N``, ``successfully saved checkpoint from|at
    iteration N`` and the ``save-checkpoint`` timer in every ``--timing-log-option`` layout
    (``(min, max)``, ``max``, ``all``), with or without ``srun --label`` prefixes. A timer
    belongs to the latest save started before it. Records: ``rank = 0``, ``status = "ok"``,
    duration = the timer's max across ranks (else end − start of the stamped lines); the start
    is the ``saving checkpoint`` stamp, else the end is the ``successfully saved`` stamp, else
    ``default_time``. With ``--async-save`` the timer measures the blocking part only.
    Megatron's stamps are naive local time (``tz``, default UTC). ``node`` None gives
    ``"unknown"``; ``bytes_per_rank`` defaults to 0 (Megatron logs no size). A save with neither
    a completion line nor a timer (the job died, or the log ends while it runs) gives a start
    marker (``status = "started"``, rank 0, no end or bytes) when its ``saving checkpoint``
    line is stamped, else nothing. Saves under the
    ``save-checkpoint-non-persistent`` timer get ``non_persistent_tier`` (default ``tier``).

    Raises ValueError when a completed save has no time at all (old Megatron prints no stamps):
    pass ``default_time`` (e.g. the log file's mtime) or stamp the log (``ts``, a log shipper).
    """
    for name, given in (("tier", tier), ("non_persistent_tier", non_persistent_tier)):
        if given is not None and given not in TIERS:
            raise ValueError(f"{name} must be one of {', '.join(TIERS)}, got {given!r}")
    saves: dict[int, _Save] = {}
    current: _Save | None = None
    all_mode: str | None = None
    for raw in lines:
        line = _RANK_PREFIX.sub("", raw.rstrip("\n"), count=1)
        ts = _line_time(line, tz)
        if all_mode is not None:
            m_rank = _TIMER_ALL_RANK.match(line)
            if m_rank and current is not None:
                current.max_ms = max(current.max_ms or 0.0, float(m_rank.group(1)))
                current.non_persistent = all_mode.endswith("non-persistent")
                continue
            all_mode = None
        m = _SAVING.search(line)
        if m:
            current = saves.setdefault(int(m.group(1)), _Save(int(m.group(1))))
            current.start = current.start or ts
        m = _SAVED.search(line)
        if m:
            step = int(m.group(1))
            if step not in saves:  # no "saving" line (e.g. a one-line excerpt): it is current
                current = saves[step] = _Save(step)
            # An async save's completion can come after the next save started: the timer that
            # follows then belongs to that next save, so ``current`` stays.
            saves[step].completed = True
            saves[step].end = ts or saves[step].end
        m = _TIMER.search(line)
        if m and current is not None and current.max_ms is None:
            current.max_ms = float(m.group(3) or m.group(2))
            current.non_persistent = m.group(1).endswith("non-persistent")
            continue
        m = _TIMER_ALL_NAME.match(line)
        if m:
            all_mode = m.group(1)
    records: list[dict[str, Any]] = []
    no_time: list[int] = []
    no_duration: list[int] = []
    for save in sorted(saves.values(), key=lambda s: s.step):
        if not save.completed and save.max_ms is None:
            # Started, never finished (the job died, or the save is still running): a start
            # marker when the start is stamped, so the checkpoint shows as unfinished.
            if save.start is not None:
                records.append({
                    "job_id": job_id, "step": save.step, "rank": 0, "node": node or "unknown",
                    "tier": tier, "start_time": iso_time(save.start), "target": target,
                    "status": STARTED})
            continue
        if save.max_ms is not None:
            duration = timedelta(milliseconds=save.max_ms)
        elif save.start is not None and save.end is not None:
            duration = max(save.end - save.start, timedelta(0))
        else:
            no_duration.append(save.step)
            continue
        # Anchor on the start when it is stamped: with --async-save the completion line comes
        # at finalisation, long after the blocking part that the timer measured.
        end = (save.start + duration if save.start is not None else None) or save.end \
            or default_time
        if end is None:
            no_time.append(save.step)
            continue
        if end.tzinfo is None:
            end = end.replace(tzinfo=tz)
        record_tier = (non_persistent_tier or tier) if save.non_persistent else tier
        records.append({
            "job_id": job_id, "step": save.step, "rank": 0, "node": node or "unknown",
            "tier": record_tier, "start_time": iso_time(end - duration),
            "end_time": iso_time(end), "bytes": int(bytes_per_rank), "target": target,
            "open_s": None, "write_s": None, "fsync_s": None, "close_s": None, "status": "ok"})
    problems = []
    if no_duration:
        problems.append(f"no save-checkpoint timer and no stamped start and end for the save(s) "
                        f"at iteration {no_duration} (the timer is printed by the last rank: "
                        "include its output)")
    if no_time:
        problems.append(f"no timestamp for the save(s) at iteration {no_time}: pass "
                        "default_time= (e.g. the log file's mtime) or stamp the log (ts, a log "
                        "shipper)")
    if problems:
        raise ValueError("Megatron log: " + "; ".join(problems))
    return records


# --------------------------------------------------------------------------- command line


def read_megatron_file(path: Path, **options: Any) -> tuple[list[dict[str, Any]], str | None]:
    """``parse_megatron_log`` over a log file, and the warning to show (or None): a log
    without timestamps ends its saves at the file's mtime. Raises OSError (unreadable) or
    ValueError (the parser's, naming the iterations)."""
    lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
    try:
        return parse_megatron_log(lines, **options), None
    except ValueError as exc:
        if "no timestamp" not in str(exc):
            raise
    mtime = datetime.fromtimestamp(path.stat().st_mtime, tz=UTC)
    return (parse_megatron_log(lines, default_time=mtime, **options),
            f"{path} has no timestamps; saves without one end at the file's mtime "
            f"{mtime.isoformat()}")


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m ckptwatch.collect.adapters megatron LOG …``: log -> checkpoint JSON Lines."""
    parser = argparse.ArgumentParser(
        prog="python -m ckptwatch.collect.adapters",
        description="Turn a Megatron-LM training log into ckptwatch checkpoint records "
        "(one per completed save, rank 0 = the barrier time; see docs/collecting.md).")
    sub = parser.add_subparsers(dest="what", required=True)
    p = sub.add_parser("megatron", help="parse a Megatron-LM log")
    p.add_argument("log", type=Path, help="the training log (stdout of rank 0 / the last rank)")
    p.add_argument("--job-id", required=True, help="job id written into every record")
    p.add_argument("--tier", choices=TIERS, required=True,
                   help="storage tier the checkpoints went to")
    p.add_argument("--node", default=None, help="node of rank 0 (default: 'unknown')")
    p.add_argument("--target", default=None, help="pool target or <node>:nvme0 (optional)")
    p.add_argument("--bytes-per-rank", type=int, default=0,
                   help="bytes each rank writes (Megatron does not log it; default 0)")
    p.add_argument("--out", type=Path, required=True,
                   help="JSON Lines file to append to (ship it to RAW/checkpoints/)")
    args = parser.parse_args(argv)
    options: dict[str, Any] = {"job_id": args.job_id, "tier": args.tier, "node": args.node,
                               "target": args.target, "bytes_per_rank": args.bytes_per_rank}
    try:
        records, warning = read_megatron_file(args.log, **options)
    except (OSError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if warning:
        print(f"warning: {warning}", file=sys.stderr)
    n = write_records(args.out, records)
    print(f"{n} checkpoint record(s) appended to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
