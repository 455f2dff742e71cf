"""The checkpoints the watcher has seen start and not yet seen complete.

Records come in as the ingest's canonical frames: start markers (``checkpoint_starts``) and
finished records (``checkpoint_writes``). Per checkpoint (job, step) the tracker keeps which
ranks started (node, target, start) and which finished (duration, end). A checkpoint is
*open* while a started rank has not finished. It is *complete* when none is open and either
every rank the job has (``jobs.n_ranks``) was seen or nothing new arrived for ``settle_s``;
its barrier time is then its slowest rank.

An open checkpoint stays open past its timeout (the watcher reports it as timed out) until it
is *given up*: its newest record is older than the job's staleness horizon (it is history), a
later checkpoint of the job and tier has started since it passed its timeout (the job moved
on), or, for a job without a timeout, it is older than ``max_open_s``. A checkpoint given up is
handed on with its unfinished ranks counted; it never joins the tail of completed checkpoints
(its age is not a barrier time: the batch views count it, as timed out).

Memory is bounded: ``max_checkpoints`` tracked at once (the oldest dropped beyond it, said in
the log), and ``done_keys`` completed keys remembered so that late records of a completed
checkpoint do not reopen it.
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import polars as pl

from ckptwatch.alerts.inflight import OpenCheckpoint, OpenRank
from ckptwatch.safetext import escape_controls

log = logging.getLogger(__name__)


@dataclass
class Tracked:
    """One checkpoint being followed."""

    job_id: str
    step: int
    tier: str
    #: rank -> (node, target, start epoch s) from its start marker.
    started: dict[int, tuple[str, str | None, float]] = field(default_factory=dict)
    #: rank -> (duration s, end epoch s) from its finished record.
    finished: dict[int, tuple[float, float]] = field(default_factory=dict)
    first_start_s: float = float("inf")
    #: Wall-clock time of the last record (for ``settle_s``).
    last_change_s: float = 0.0

    @property
    def open_ranks(self) -> list[int]:
        """Started, not finished."""
        return [r for r in self.started if r not in self.finished]

    @property
    def last_record_s(self) -> float:
        """The newest record's time (a start marker or a rank's end), epoch s."""
        return max([*(s for _, _, s in self.started.values()),
                    *(e for _, e in self.finished.values()), float("-inf")])

    def to_json(self) -> dict[str, Any]:
        """JSON form for the watcher's state."""
        return {"job_id": self.job_id, "step": self.step, "tier": self.tier,
                "started": [[r, n, t, s] for r, (n, t, s) in self.started.items()],
                "finished": [[r, d, e] for r, (d, e) in self.finished.items()],
                "first_start_s": self.first_start_s if self.started else None,
                "last_change_s": self.last_change_s}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Tracked:
        """Inverse of :meth:`to_json`."""
        out = cls(str(data["job_id"]), int(data["step"]), str(data["tier"]))
        out.started = {int(r): (str(n), None if t is None else str(t), float(s))
                       for r, n, t, s in data.get("started", [])}
        out.finished = {int(r): (float(d), float(e)) for r, d, e in data.get("finished", [])}
        first = data.get("first_start_s")
        out.first_start_s = float("inf") if first is None else float(first)
        out.last_change_s = float(data.get("last_change_s", 0.0))
        return out


@dataclass(frozen=True)
class Completed:
    """A checkpoint the watcher saw complete (or gave up with ranks still open)."""

    job_id: str
    tier: str
    step: int
    end_s: float
    barrier_s: float
    n_ranks: int
    #: Ranks that never finished (given up: the job's watchdog fired).
    n_unfinished: int = 0
    #: Why a checkpoint with open ranks was given up (None: it completed).
    given_up: str | None = None

    @property
    def timed_out(self) -> bool:
        """Given up with ranks still open."""
        return self.n_unfinished > 0


class Tracker:
    """Open checkpoints, fed with canonical frames; see the module docstring."""

    def __init__(self, *, settle_s: float = 30.0, max_open_s: float = 6 * 3600.0,
                 max_checkpoints: int = 256, done_keys: int = 4096) -> None:
        self.settle_s = settle_s
        self.max_open_s = max_open_s
        self.max_checkpoints = max_checkpoints
        self.done_keys = done_keys
        self.tracked: OrderedDict[tuple[str, int], Tracked] = OrderedDict()
        self.done: OrderedDict[tuple[str, int], None] = OrderedDict()
        #: (job, tier) -> the latest start marker seen (a job that moved on past an open one).
        self.latest_start: dict[tuple[str, str], float] = {}

    # -- input ------------------------------------------------------------------------
    def _get(self, job_id: str, step: int, tier: str, now_s: float) -> Tracked | None:
        key = (job_id, step)
        if key in self.done:
            return None
        ck = self.tracked.get(key)
        if ck is None:
            ck = self.tracked[key] = Tracked(job_id, step, tier)
            while len(self.tracked) > self.max_checkpoints:
                (old_job, old_step), _ = self.tracked.popitem(last=False)
                log.warning("following more than %d checkpoints at once; forgot step %d "
                            "of job %s", self.max_checkpoints, old_step,
                            escape_controls(old_job))
        ck.last_change_s = now_s
        return ck

    def add_starts(self, starts: pl.DataFrame, now_s: float) -> int:
        """Start markers (columns of ``checkpoint_starts``); returns how many were new."""
        n = 0
        for job_id, step, rank, node, tier, target, start in starts.select(
                "job_id", "step", "rank", "node", "tier", "target",
                pl.col("start_ts").dt.epoch("us") / 1e6).iter_rows():
            ck = self._get(job_id, step, tier, now_s)
            if ck is None or rank in ck.started:
                continue
            ck.started[rank] = (node, target, start)
            ck.first_start_s = min(ck.first_start_s, start)
            key = (job_id, ck.tier)
            self.latest_start[key] = max(start, self.latest_start.get(key, start))
            n += 1
        return n

    def add_writes(self, writes: pl.DataFrame, now_s: float) -> list[tuple[str, str, float]]:
        """Finished records (columns of ``checkpoint_writes``); returns (job, tier, duration)
        of each rank newly finished (the duration histogram)."""
        out: list[tuple[str, str, float]] = []
        for job_id, step, rank, tier, duration, end in writes.select(
                "job_id", "step", "rank", "tier", "duration_s",
                pl.col("end_ts").dt.epoch("us") / 1e6).iter_rows():
            ck = self._get(job_id, step, tier, now_s)
            if ck is None or rank in ck.finished:
                continue
            ck.finished[rank] = (duration, end)
            out.append((job_id, ck.tier, duration))
        return out

    # -- progress ---------------------------------------------------------------------
    def settle(self, now_s: float, n_ranks: dict[str, int], timeouts: dict[str, float],
               horizons: Callable[[str], float] | None = None) -> list[Completed]:
        """Hand on the checkpoints that completed or were given up since the last call;
        ``horizons``: job_id -> its staleness horizon, seconds (None: ``max_open_s``)."""
        out: list[Completed] = []
        for key, ck in list(self.tracked.items()):
            open_ranks = ck.open_ranks
            if open_ranks:
                why = self._give_up(ck, now_s, timeouts.get(ck.job_id),
                                    horizons(ck.job_id) if horizons else self.max_open_s,
                                    self.latest_start.get((ck.job_id, ck.tier),
                                                          ck.first_start_s))
                if why is None:
                    continue
                known = [d for d, _ in ck.finished.values()]
                out.append(Completed(ck.job_id, ck.tier, ck.step, now_s,
                                     max([now_s - ck.first_start_s, *known]), len(ck.started),
                                     len(open_ranks), why))
            else:
                expected = n_ranks.get(ck.job_id)
                seen = len(set(ck.started) | set(ck.finished))
                quiet = now_s - ck.last_change_s >= self.settle_s
                if not ((expected and seen >= expected) or quiet) or not ck.finished:
                    if quiet and not ck.finished:  # markers never followed by anything
                        del self.tracked[key]
                    continue
                out.append(Completed(ck.job_id, ck.tier, ck.step,
                                     max(e for _, e in ck.finished.values()),
                                     max(d for d, _ in ck.finished.values()), seen))
            del self.tracked[key]
            self.done[key] = None
            while len(self.done) > self.done_keys:
                self.done.popitem(last=False)
        return out

    def _give_up(self, ck: Tracked, now_s: float, timeout: float | None, horizon_s: float,
                 newest_start_s: float) -> str | None:
        """Why an open checkpoint is no longer followed, or None while it is."""
        if now_s - ck.last_record_s > horizon_s:
            return f"history: no record of it for more than {horizon_s:.0f} s"
        if timeout is None:
            return (f"open for more than {self.max_open_s:.0f} s (the job has no timeout)"
                    if now_s - ck.first_start_s > self.max_open_s else None)
        if newest_start_s > ck.first_start_s + timeout:
            return "a later checkpoint of the job started after its timeout"
        return None

    def open_checkpoints(self, leaves: dict[str, str]) -> list[OpenCheckpoint]:
        """Every checkpoint with a rank open (for ``alerts.inflight.assess_inflight``)."""
        out = []
        for ck in self.tracked.values():
            ranks = ck.open_ranks
            if not ranks:
                continue
            out.append(OpenCheckpoint(
                job_id=ck.job_id, tier=ck.tier, step=ck.step, first_start_s=ck.first_start_s,
                n_started=len(ck.started), n_finished=len(ck.finished),
                last_record_s=ck.last_record_s,
                open_ranks=tuple(OpenRank(r, ck.started[r][0], ck.started[r][1],
                                          leaves.get(ck.started[r][0])) for r in ranks)))
        return out

    def jobs(self) -> Iterable[tuple[str, str]]:
        """(job, tier) of everything tracked."""
        return {(ck.job_id, ck.tier) for ck in self.tracked.values()}

    # -- state ------------------------------------------------------------------------
    def to_json(self) -> dict[str, Any]:
        """JSON form for the watcher's state."""
        return {"tracked": [ck.to_json() for ck in self.tracked.values()],
                "done": [[j, s] for j, s in self.done],
                "latest_start": [[j, t, s] for (j, t), s in sorted(self.latest_start.items())]}

    def load(self, data: dict[str, Any]) -> None:
        """Restore :meth:`to_json`'s form."""
        for item in data.get("tracked", []):
            ck = Tracked.from_json(item)
            self.tracked[(ck.job_id, ck.step)] = ck
        for j, s in data.get("done", []):
            self.done[(str(j), int(s))] = None
        for j, t, s in data.get("latest_start", []):
            self.latest_start[(str(j), str(t))] = float(s)
