"""Checkpoint records from PyTorch DCP events captured to a file (stdlib only).

``DCPCheckpointHandler`` turns DCP's logger events into records inside the training process.
Where the training code cannot run ckptwatch's handler, it can keep the events instead: a
plain ``logging.FileHandler`` on DCP's logger (``adapters.DCP_LOGGER_NAME``) whose formatter
writes ``json.dumps(record.msg)`` gives one JSON object a line, the dict DCP logs (``event``,
``time`` in ns, ``times_spent``, ``uuid``, ``checkpoint_id``, ``func_name``, ``global_rank``).
``replay_dcp_events`` feeds such a file through the same handler, so the records are exactly
the ones the handler writes live. Events of different ranks may interleave: each rank's steps
belong to that rank's save in progress.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable
from dataclasses import dataclass, field

from ckptwatch.collect.adapters import DCPCheckpointHandler, dcp_rank_bytes
from ckptwatch.collect.recorder import CheckpointRecorder


@dataclass
class Replay:
    """What a replay read: DCP events handed to the handler, lines that were not events."""

    events: int = 0
    problems: list[str] = field(default_factory=list)


def replay_dcp_events(lines: Iterable[str], recorder: CheckpointRecorder, *,
                      stat_bytes: bool = False, origin: str = "events") -> Replay:
    """Feed captured DCP events (one JSON object a line) to a ``DCPCheckpointHandler`` writing
    to ``recorder``. ``stat_bytes``: size each rank's ``__<rank>_<n>.distcp`` files (the
    checkpoint directory must be reachable from here); else bytes are 0. A line that is not a
    JSON object with ``event`` and ``func_name`` is named in ``problems`` (at most 10, then a
    count) and skipped."""
    handler = DCPCheckpointHandler(recorder, bytes_of=dcp_rank_bytes if stat_bytes else None)
    out = Replay()
    bad = 0
    for number, line in enumerate(lines, start=1):
        text = line.strip()
        if not text:
            continue
        try:
            msg = json.loads(text)
        except (ValueError, RecursionError):
            msg = None
        if not isinstance(msg, dict) or "event" not in msg or "func_name" not in msg:
            bad += 1
            if bad <= 10:
                out.problems.append(f"{origin}:{number}: not a DCP event (a JSON object with "
                                    "'event' and 'func_name')")
            continue
        record = logging.LogRecord(DCPCheckpointHandler.__name__, logging.INFO, origin, number,
                                   msg, None, None)
        if isinstance(msg.get("time"), int):
            record.created = msg["time"] / 1e9
        # The handler groups a save's steps by thread; in a file, by rank.
        record.thread = int(str(msg.get("global_rank", 0))) \
            if str(msg.get("global_rank", "")).isdigit() else 0
        try:  # not handler.handle: its errors would print a traceback, not name the line
            handler._handle(record)
        except (ValueError, TypeError) as exc:
            out.problems.append(f"{origin}:{number}: {exc}")
            continue
        out.events += 1
    if bad > 10:
        out.problems.append(f"{origin}: {bad - 10} more line(s) that are not DCP events")
    recorder.flush()
    return out
