"""Open checkpoints against the job's timeout: the in-flight half of the timeout alerts.

Vocabulary (docs/concepts.md): a checkpoint is *open* while a rank that wrote a start marker
has not written its finished record. Its *age* is now − its earliest start. Per job and tier
the oldest open checkpoint counts: ``critical`` when age ≥ critical × timeout, ``warning``
when age ≥ warning × timeout (the same fractions, per-job overrides included, as the tail;
:class:`ckptwatch.settings.JobAlertSettings`). ``ckptwatch watch`` assesses what it follows;
:func:`ckptwatch.alerts.evaluate.evaluate` merges the result with the tail of the completed
checkpoints into one alert per job and tier.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime

from ckptwatch.alerts.forecast import from_epoch
from ckptwatch.alerts.levels import Severity, classify, levels
from ckptwatch.settings import AlertSettings

#: Open ranks an alert names one by one; the rest are counted.
SHOWN_RANKS = 8
#: The shared tier: its open checkpoints of several jobs share the pool's bandwidth.
POOL_TIER = "pool"


@dataclass(frozen=True)
class OpenRank:
    """A rank that started a checkpoint and has not finished it."""

    rank: int
    node: str
    target: str | None = None
    leaf_switch: str | None = None


@dataclass(frozen=True)
class InFlight:
    """The oldest open checkpoint of one job and tier, as of ``now``."""

    job_id: str
    tier: str
    step: int
    started_at: datetime
    age_s: float
    #: None: the job's timeout is unknown (no level, no alert; the age is still a metric).
    timeout_s: float | None
    warning_s: float | None
    critical_s: float | None
    n_started: int
    n_finished: int
    #: Ranks the job has (jobs table), when known.
    n_expected: int | None
    #: The open ranks, lowest rank first (all of them: the alert shows ``SHOWN_RANKS``).
    open_ranks: tuple[OpenRank, ...]
    #: Live evidence of a cause from telemetry already in the lake, when there is some.
    evidence: str | None = None
    #: The open checkpoint's newest record (a start marker or a rank's end; None: its start).
    last_record_at: datetime | None = None
    #: The other jobs' checkpoints open on the pool tier at the same time (a pool checkpoint
    #: only): "job-B step 300 (512 ranks open, 130 s)", longest open first. Their bursts
    #: share the pool's bandwidth (docs/bursts.md).
    also_in_flight: tuple[str, ...] = ()

    @property
    def key(self) -> tuple[str, str]:
        """(job_id, tier)."""
        return self.job_id, self.tier

    @property
    def n_open(self) -> int:
        """Ranks started and not finished."""
        return len(self.open_ranks)

    @property
    def remaining_s(self) -> float | None:
        """Seconds until the timeout (negative: past it)."""
        return None if self.timeout_s is None else self.timeout_s - self.age_s

    @property
    def timed_out(self) -> bool:
        """Open at (or past) the job's timeout: its watchdog has fired."""
        return self.timeout_s is not None and self.age_s >= self.timeout_s

    @property
    def data_at(self) -> datetime:
        """The newest record of this checkpoint."""
        return self.last_record_at or self.started_at

    @property
    def level(self) -> Severity | None:
        """``critical``, ``warning`` or None from the age against the levels."""
        return classify(self.age_s, self.warning_s, self.critical_s)

    def where(self) -> str:
        """The open ranks' places: "ranks 5, 9 on node017 (leaf03), target pool0-tgt07"."""
        shown = self.open_ranks[:SHOWN_RANKS]
        ranks = ", ".join(str(r.rank) for r in shown)
        if self.n_open > len(shown):
            ranks += f" (+{self.n_open - len(shown)} more)"
        word = "rank" if self.n_open == 1 else "ranks"
        text = f"{word} {ranks} on {_most_common(r.node for r in self.open_ranks)}"
        leaves = [r.leaf_switch for r in self.open_ranks if r.leaf_switch]
        if leaves:
            text += f" ({_most_common(leaves)})"
        targets = [r.target for r in self.open_ranks if r.target]
        if targets:
            text += f", target {_most_common(targets)}"
        return text


def _most_common(values: Iterable[str], shown: int = 3) -> str:
    counts = Counter(values).most_common()
    names = ", ".join(v for v, _ in counts[:shown])
    return names + (f" +{len(counts) - shown} more" if len(counts) > shown else "")


@dataclass(frozen=True)
class OpenCheckpoint:
    """What the watcher knows of one open checkpoint (input of :func:`assess_inflight`)."""

    job_id: str
    tier: str
    step: int
    first_start_s: float
    n_started: int
    n_finished: int
    open_ranks: tuple[OpenRank, ...]
    #: Newest record of the checkpoint (start marker or end), epoch s (None: its first start).
    last_record_s: float | None = None


def assess_inflight(open_checkpoints: Sequence[OpenCheckpoint], timeouts: dict[str, float],
                    n_ranks: dict[str, int], settings: AlertSettings, *,
                    now_s: float) -> dict[tuple[str, str], InFlight]:
    """The oldest open checkpoint of every (job, tier) with its levels; jobs whose alerting
    is disabled in the settings are left out."""
    oldest: dict[tuple[str, str], OpenCheckpoint] = {}
    for ck in open_checkpoints:
        key = (ck.job_id, ck.tier)
        if not ck.open_ranks:
            continue
        best = oldest.get(key)
        if best is None or (ck.first_start_s, ck.step) < (best.first_start_s, best.step):
            oldest[key] = ck
    out: dict[tuple[str, str], InFlight] = {}
    for key, ck in sorted(oldest.items()):
        cfg = settings.for_job(ck.job_id)
        if not cfg.enabled:
            continue
        lv = levels(cfg, timeouts.get(ck.job_id))
        out[key] = InFlight(
            job_id=ck.job_id, tier=ck.tier, step=ck.step,
            started_at=from_epoch(ck.first_start_s), age_s=max(now_s - ck.first_start_s, 0.0),
            timeout_s=None if lv is None else timeouts[ck.job_id],
            warning_s=None if lv is None else lv.warning_s,
            critical_s=None if lv is None else lv.critical_s,
            n_started=ck.n_started, n_finished=ck.n_finished, n_expected=n_ranks.get(ck.job_id),
            open_ranks=tuple(sorted(ck.open_ranks, key=lambda r: r.rank)),
            last_record_at=None if ck.last_record_s is None else from_epoch(ck.last_record_s),
            also_in_flight=_also_in_flight(ck, open_checkpoints, now_s))
    return out


def _also_in_flight(ck: OpenCheckpoint, open_checkpoints: Sequence[OpenCheckpoint],
                    now_s: float) -> tuple[str, ...]:
    """The other jobs' open pool checkpoints beside ``ck`` (a pool one), longest open first."""
    if ck.tier != POOL_TIER:
        return ()
    others = sorted((o for o in open_checkpoints
                     if o.tier == POOL_TIER and o.job_id != ck.job_id and o.open_ranks),
                    key=lambda o: (o.first_start_s, o.job_id, o.step))
    out = []
    for o in others:
        n = len(o.open_ranks)
        out.append(f"{o.job_id} step {o.step} ({n} rank{'s' if n != 1 else ''} open, "
                   f"{max(now_s - o.first_start_s, 0.0):.0f} s)")
    return tuple(out)
