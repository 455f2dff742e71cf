"""The alerts timeout headroom raises: evaluation with hysteresis, and a run over a lake.

Two alerts per job and tier (:mod:`ckptwatch.alerts.names`): :data:`TAIL_ALERT` (the tail of
the completed checkpoints) and :data:`INFLIGHT_ALERT` (an open checkpoint's age; ``ckptwatch
watch``). ``severity`` is one of their labels, so a change of severity resolves the old alert
and fires the new one. Every alert says when the job's last checkpoint ended and how old its
newest data is; a job past its staleness horizon is history and its alerts resolve. Hysteresis
(the tail alert): a firing
alert is lowered or resolved only when the tail has been below its level minus
``resolve_margin`` × timeout (and, for a warning, the forecast no longer warns) for
``resolve_after`` consecutive evaluations. A firing alert is sent once, then again only every
``resend_after_s`` to keep Alertmanager's ``endsAt`` in the future; a resolution is sent once.

:func:`evaluate` is pure (frames + settings + previous state in, due alerts + new state out);
:func:`run_alerts` wires the lake (:func:`ckptwatch.alerts.headroom.load_window`), the state
file (:mod:`ckptwatch.alerts.state`) and the sinks (:mod:`ckptwatch.alerts.sinks`).

Stall attribution plugs in through a :data:`CauseProvider`: given the window's checkpoints it
returns ``{job_id: (step, cause)}`` for the worst recent stall of each job it can explain; the
alert then carries ``top_cause``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING

import polars as pl

from ckptwatch.alerts.forecast import Forecast, iso
from ckptwatch.alerts.headroom import (
    VIEWS,
    JobHeadroom,
    Severity,
    duration_text,
    headroom,
    job_intervals,
    load_window,
    stale_reason,
)
from ckptwatch.alerts.inflight import InFlight
from ckptwatch.alerts.names import BASIS, INFLIGHT_ALERT, TAIL_ALERT, alert_url
from ckptwatch.alerts.sinks import (
    Alert,
    AlertStatus,
    Sink,
    SinkResult,
    build_sinks,
    deliver,
    delivery_summary,
)
from ckptwatch.alerts.state import AlertRecord, AlertState, load_state, save_state, state_lock
from ckptwatch.errors import SinkError
from ckptwatch.settings import AlertSettings, Settings

if TYPE_CHECKING:
    import duckdb

log = logging.getLogger(__name__)

#: The across-checkpoint tail's alert; the in-flight one is :data:`INFLIGHT_ALERT`.
ALERTNAME = TAIL_ALERT
SEVERITY_RANK: dict[Severity | None, int] = {None: 0, "warning": 1, "critical": 2}

#: ``{job_id: (step, cause)}``: the worst recent stall of a job and its top attributed cause.
Causes = Mapping[str, tuple[int, str]]
#: The window's checkpoints -> :data:`Causes` (the nightly run passes
#: :meth:`ckptwatch.analysis.findings.StallFindings.top_causes`: stalls attributed once).
CauseProvider = Callable[[pl.DataFrame], Causes]


@dataclass
class Evaluation:
    """One evaluation: every job's headroom, the alerts due now, the state after sending."""

    jobs: list[JobHeadroom]
    skipped: dict[tuple[str, str], str]
    due: list[Alert]
    state: AlertState


@dataclass(frozen=True)
class _Context:
    """What every alert's annotations of one evaluation draw on."""

    now: datetime
    settings: AlertSettings
    causes: Causes | None
    #: (job, tier) -> when its newest completed checkpoint ended.
    last_checkpoint: Mapping[tuple[str, str], datetime]
    #: job -> its newest record (a checkpoint's end, an open checkpoint's start or end).
    newest: Mapping[str, datetime]

    def data_notes(self, key: tuple[str, str]) -> tuple[dict[str, str], str]:
        """``last_checkpoint_at`` and ``data_age_s`` of a job and tier, and the summary's
        sentence saying both."""
        ann: dict[str, str] = {}
        last = self.last_checkpoint.get(key)
        if last is not None:
            ann["last_checkpoint_at"] = iso(last)
            parts = [f"Last checkpoint ended {iso(last)}"]
        else:
            parts = ["No completed checkpoint of it seen"]
        newest = self.newest.get(key[0])
        if newest is not None:
            age = max((self.now - newest).total_seconds(), 0.0)
            ann["data_age_s"] = f"{age:.0f}"
            parts.append(f"newest data {duration_text(age)} old")
        return ann, "; ".join(parts) + "."

    def links(self, alertname: str, key: tuple[str, str]) -> dict[str, str]:
        """``runbook_url`` and ``dashboard_url`` (those the settings do not leave empty)."""
        urls = {"runbook_url": self.settings.runbook_url,
                "dashboard_url": self.settings.dashboard_url}
        return {k: alert_url(v, alertname, *key) for k, v in urls.items() if v}


def _pct(part: float, whole: float) -> str:
    return f"{100 * part / whole:.0f}%"


def _s(seconds: float) -> str:
    """Seconds at one decimal, never "-0.0"."""
    text = f"{seconds:.1f}"
    return "0.0" if text == "-0.0" else text


def _left(h: JobHeadroom) -> str:
    """"12.3 s of headroom left", or how far past the timeout the tail is."""
    if h.headroom_s < 0 and _s(-h.headroom_s) != "0.0":
        return f"{_s(-h.headroom_s)} s past the timeout"
    return f"{_s(h.headroom_s)} s of headroom left"


def _annotations(h: JobHeadroom, severity: Severity | None, ctx: _Context,
                 resolved: str | None = None) -> dict[str, str]:
    tail = f"{h.tail_s:.1f} s ({h.tail_stat} of the last {h.n_checkpoints} checkpoints)"
    if resolved is not None:
        summary = (f"Checkpoint tail of job {h.job_id} ({h.tier}) {resolved}: {tail}, "
                   f"{_pct(h.tail_s, h.timeout_s)} of its {h.timeout_s:.1f} s timeout, "
                   f"{_left(h)}.")
    elif h.level is None and severity == "warning":
        when = h.forecast.warning_at or h.forecast.timeout_at
        what = "the warning level" if h.forecast.warning_at else "the timeout"
        summary = (f"Checkpoint tail of job {h.job_id} ({h.tier}) is rising: {tail}, "
                   f"{_pct(h.tail_s, h.timeout_s)} of its {h.timeout_s:.1f} s timeout; "
                   f"forecast to reach {what} at {iso(when) if when else '?'}.")
    else:
        summary = (f"Checkpoint tail of job {h.job_id} ({h.tier}) is {tail}, "
                   f"{_pct(h.tail_s, h.timeout_s)} of its {h.timeout_s:.1f} s timeout: "
                   f"{_left(h)} (warning at {h.warning_s:.1f} s, "
                   f"critical at {h.critical_s:.1f} s).")
    key = (h.job_id, h.tier)
    data, when_text = ctx.data_notes(key)
    ann = {
        "summary": f"{summary} {when_text}",
        "p50_s": f"{h.p50_s:.1f}", "p99_s": f"{h.p99_s:.1f}", "max_s": f"{h.max_s:.1f}",
        "timeout_s": f"{h.timeout_s:.1f}", "headroom_s": _s(h.headroom_s),
        "warning_s": f"{h.warning_s:.1f}", "critical_s": f"{h.critical_s:.1f}",
        "window": f"{h.n_checkpoints} checkpoints, {iso(h.first_ts)} .. {iso(h.last_ts)}",
        "worst_step": str(h.worst_step),
        "forecast": h.forecast.note,
        **data, **ctx.links(TAIL_ALERT, key),
    }
    if h.forecast.warning_at is not None:
        ann["forecast_warning_at"] = iso(h.forecast.warning_at)
    if h.forecast.timeout_at is not None:
        ann["forecast_timeout_at"] = iso(h.forecast.timeout_at)
    if ctx.causes and h.job_id in ctx.causes:
        step, cause = ctx.causes[h.job_id]
        ann["top_cause"] = f"{cause} (step {step})"
    return ann


def _inflight_annotations(f: InFlight, h: JobHeadroom | None, ctx: _Context,
                          resolved: str | None = None) -> dict[str, str]:
    """The alert of an open checkpoint: which ranks are open, where, and the time left (or
    how far past its timeout it is: timed out)."""
    assert f.timeout_s is not None
    of = f" of {f.n_expected}" if f.n_expected else ""
    open_part = (f"{f.n_open}{of} ranks still open ({f.where()})" if f.n_open != 1 else
                 f"1{of} rank still open ({f.where()})")
    remaining = f.timeout_s - f.age_s
    head = f"Checkpoint step {f.step} of job {f.job_id} ({f.tier})"
    if resolved is not None:
        summary = f"{head} {resolved}."
    elif f.timed_out:
        summary = (f"{head} timed out: open {f.age_s:.0f} s, past its {f.timeout_s:.1f} s "
                   f"timeout by {_s(-remaining)} s; {open_part}.")
    else:
        until = (f"{_s(remaining)} s until the {f.timeout_s:.1f} s timeout" if remaining > 0.05
                 else f"past the {f.timeout_s:.1f} s timeout by {_s(-remaining)} s")
        summary = (f"{head} has been open {f.age_s:.0f} s, {_pct(f.age_s, f.timeout_s)} of its "
                   f"timeout: {open_part}; {until}.")
    data, when_text = ctx.data_notes(f.key)
    ann = {
        "summary": f"{summary} {when_text}",
        "step": str(f.step), "inflight_s": f"{f.age_s:.1f}", "timeout_s": f"{f.timeout_s:.1f}",
        "remaining_s": _s(remaining), "timed_out": "true" if f.timed_out else "false",
        "warning_s": f"{f.warning_s:.1f}", "critical_s": f"{f.critical_s:.1f}",
        "started_at": iso(f.started_at),
        "ranks_started": str(f.n_started), "ranks_finished": str(f.n_finished),
        "ranks_open": str(f.n_open), "open_ranks": f.where(),
        **data, **ctx.links(INFLIGHT_ALERT, f.key),
    }
    if f.evidence:
        ann["evidence"] = f.evidence
    if f.also_in_flight:
        ann["also_in_flight"] = "; ".join(f.also_in_flight)
        ann["summary"] = (f"{ann['summary'].rstrip()} Also in flight on the pool: "
                          f"{'; '.join(f.also_in_flight[:3])}"
                          + (f" (+{len(f.also_in_flight) - 3} more)"
                             if len(f.also_in_flight) > 3 else "") + ".")
    if h is not None:
        ann["tail"] = (f"{h.tail_s:.1f} s ({h.tail_stat} of the last {h.n_checkpoints} "
                       "completed checkpoints)")
        ann["forecast"] = h.forecast.note
    if ctx.causes and f.job_id in ctx.causes:
        step, cause = ctx.causes[f.job_id]
        ann["top_cause"] = f"{cause} (step {step})"
    return ann


Notes = Callable[[Severity | None, str | None], dict[str, str]]


def _tail_notes(h: JobHeadroom, ctx: _Context) -> Notes:
    """(severity, why resolved) -> the tail alert's annotations."""
    return lambda severity, resolved: _annotations(h, severity, ctx, resolved)


def _inflight_notes(f: InFlight, h: JobHeadroom | None, ctx: _Context) -> Notes:
    """(severity, why resolved) -> the in-flight alert's annotations."""
    return lambda _severity, resolved: _inflight_annotations(f, h, ctx, resolved)


def _holds(severity: Severity, h: JobHeadroom, margin_s: float) -> bool:
    """Is the tail still within the hysteresis band of ``severity``?"""
    if severity == "critical":
        return h.tail_s >= h.critical_s - margin_s
    return h.tail_s >= h.warning_s - margin_s or h.forecast.warns


def _tail_target(h: JobHeadroom, rec: AlertRecord | None, settings: AlertSettings
                 ) -> tuple[Severity | None, int]:
    """(severity the tail alert should have now, consecutive-clear count), with hysteresis."""
    raw = h.severity
    cur = rec.severity if rec else None
    if SEVERITY_RANK[raw] >= SEVERITY_RANK[cur]:
        return raw, 0
    assert rec is not None and cur is not None
    margin_s = settings.resolve_margin * h.timeout_s
    levels: tuple[Severity, ...] = ("critical", "warning")
    candidate = next((s for s in levels
                      if SEVERITY_RANK[s] <= SEVERITY_RANK[cur] and _holds(s, h, margin_s)),
                     None)
    if candidate == cur:
        return cur, 0
    ok = rec.ok_count + 1
    return (candidate, 0) if ok >= settings.resolve_after else (cur, ok)


def _alert(rec: AlertRecord, status: AlertStatus, ends_at: datetime) -> Alert:
    return {"labels": dict(rec.labels), "annotations": dict(rec.annotations),
            "startsAt": rec.starts_at, "endsAt": iso(ends_at), "status": status,
            "fingerprint": rec.fingerprint}


class _Run:
    """The due alerts and the firing records of one evaluation, as they are decided."""

    def __init__(self, now: datetime, settings: AlertSettings) -> None:
        self.now, self.settings = now, settings
        self.stamp = iso(now)
        self.ttl = timedelta(seconds=settings.firing_ttl_s)
        self.firing: dict[str, AlertRecord] = {}
        self.due: list[Alert] = []

    def send(self, rec: AlertRecord, status: AlertStatus) -> None:
        self.due.append(_alert(rec, status, self.now + self.ttl if status == "firing"
                               else self.now))
        if rec.replaces is not None:  # the name it was last sent under (state version 1)
            old = AlertRecord(labels=rec.replaces, annotations=rec.annotations,
                              starts_at=rec.starts_at)
            self.due.append(_alert(old, "resolved", self.now))
            rec.replaces = None

    def keep(self, rec: AlertRecord) -> None:
        self.firing[rec.fingerprint] = rec

    def step(self, slot: tuple[str, str, str], rec: AlertRecord | None,
             target: Severity | None, ok: int, notes: Notes, data_at: datetime | None,
             news: bool = False) -> None:
        """Fire, hold, re-send or resolve the alert of ``slot``; ``news``: what it says has
        changed in kind (an open checkpoint reached its timeout): send the update now."""
        alertname, job_id, tier = slot
        data = None if data_at is None else iso(data_at)
        if rec is not None and target == rec.severity:  # still firing, same alert
            rec.annotations, rec.ok_count, rec.data_at = notes(target, None), ok, data
            last = datetime.fromisoformat(rec.sent_at) if rec.sent_at else None
            if (news or last is None
                    or (self.now - last).total_seconds() >= self.settings.resend_after_s):
                rec.sent_at = self.stamp
                self.send(rec, "firing")
            self.keep(rec)
            return
        if rec is not None:  # severity changed or recovered: resolve the old alert
            why = "has recovered" if target is None else f"is now {target}"
            rec.annotations = notes(None, why)
            self.send(rec, "resolved")
        if target is not None:
            labels = {"alertname": alertname, "job_id": job_id, "tier": tier,
                      "severity": target}
            new = AlertRecord(labels=labels, annotations=notes(target, None),
                              starts_at=self.stamp, sent_at=self.stamp,
                              basis=BASIS[alertname], data_at=data)
            self.send(new, "firing")
            self.keep(new)

    def resolve(self, rec: AlertRecord, summary: str) -> None:
        rec.annotations = {**rec.annotations, "summary": summary}
        self.send(rec, "resolved")


def evaluate(checkpoints: pl.DataFrame, jobs: pl.DataFrame, settings: AlertSettings,
             state: AlertState | None = None, *, now: datetime,
             causes: Causes | None = None,
             inflight: Mapping[tuple[str, str], InFlight] | None = None) -> Evaluation:
    """Evaluate every job against its levels and forecast; return due alerts and new state.

    Pure: nothing is read or written. ``state`` is the previous run's (None: first run).
    The returned state assumes the due alerts get sent; the caller adds what a sink missed
    to its ``pending``. ``causes`` (from a :data:`CauseProvider`) adds ``top_cause``.
    ``jobs``: job_id, checkpoint_timeout_s and, optionally, checkpoint_interval_s (the
    staleness horizon). Two alerts per job and tier: :data:`TAIL_ALERT` from the completed
    checkpoints' tail (with hysteresis), and with ``inflight`` (``ckptwatch watch``:
    :func:`ckptwatch.alerts.inflight.assess_inflight`, the oldest open checkpoint per job and
    tier) :data:`INFLIGHT_ALERT` from its age, held exactly as long as it is open. A run
    without ``inflight`` leaves the watcher's in-flight alerts as they are, unless their job
    has gone stale. A job whose newest record is past its staleness horizon is history: its
    alerts resolve.
    """
    if now.tzinfo is None:
        raise ValueError("now must be timezone-aware")
    prev = state or AlertState()
    known = inflight is not None
    intervals = job_intervals(jobs)
    ends = (checkpoints.filter(pl.col("end_ts").is_not_null() & pl.col("barrier_s").is_not_null())
            .group_by("job_id", "tier").agg(pl.col("end_ts").max()))
    last_checkpoint = {(str(j), str(t)): end for j, t, end in ends.iter_rows()}
    newest: dict[str, datetime] = {}
    for (job_id, _), end in last_checkpoint.items():
        newest[job_id] = max(end, newest.get(job_id, end))
    open_all = {k: f for k, f in (inflight or {}).items() if f.timeout_s is not None}
    for f in open_all.values():
        newest[f.job_id] = max(f.data_at, newest.get(f.job_id, f.data_at))
    for rec in prev.firing.values():  # what the watcher saw last (a run that does not watch)
        if rec.data_at is not None:
            seen = datetime.fromisoformat(rec.data_at)
            newest[rec.key[0]] = max(seen, newest.get(rec.key[0], seen))
    newest_s = {j: t.timestamp() for j, t in newest.items()}
    assessed, skipped = headroom(checkpoints, jobs, settings, now=now, newest=newest_s)
    open_now: dict[tuple[str, str], InFlight] = {}
    for key, f in open_all.items():
        stale = stale_reason(f.job_id, newest_s[f.job_id], settings, intervals, now)
        if stale is None:
            open_now[key] = f
        else:
            skipped.setdefault(key, stale)
    tails = {(h.job_id, h.tier): h for h in assessed}
    ctx = _Context(now, settings, causes, last_checkpoint, newest)
    by_slot: dict[tuple[str, str, str], AlertRecord] = {
        rec.slot: replace(rec) for rec in prev.firing.values()}  # don't mutate the input
    run = _Run(now, settings)

    for key, h in sorted(tails.items()):
        slot = (TAIL_ALERT, key[0], key[1])
        held = by_slot.pop(slot, None)
        target, ok = _tail_target(h, held, settings)
        run.step(slot, held, target, ok, _tail_notes(h, ctx), newest.get(key[0]))

    for key, f in sorted(open_now.items()) if known else ():
        slot = (INFLIGHT_ALERT, key[0], key[1])
        held = by_slot.pop(slot, None)
        news = (f.timed_out and held is not None
                and held.annotations.get("timed_out") != "true")
        run.step(slot, held, f.level, 0, _inflight_notes(f, tails.get(key), ctx),
                 newest.get(key[0]), news)

    for (alertname, job_id, tier), rec in sorted(by_slot.items()):  # no longer assessed
        key = (job_id, tier)
        stale = (stale_reason(job_id, newest[job_id].timestamp(), settings, intervals, now)
                 if job_id in newest else None)
        if alertname == INFLIGHT_ALERT:
            step = rec.annotations.get("step", "?")
            if stale is not None:
                run.resolve(rec, f"Checkpoint step {step} of job {job_id} ({tier}) is no "
                            f"longer followed: {stale}.")
            elif known:
                run.resolve(rec, f"Checkpoint step {step} of job {job_id} ({tier}) is no "
                            "longer open: it has completed, or a later checkpoint of the job "
                            "started.")
            else:  # only the watcher knows whether it is still open
                run.keep(rec)
            continue
        reason = skipped.get(key) or stale or "no checkpoints of this job and tier in the lake"
        run.resolve(rec, f"Alert on job {job_id} ({tier}) resolved: {reason}.")

    pending = {sink: dict(alerts) for sink, alerts in prev.pending.items()}
    new_state = AlertState(firing=run.firing, pending=pending, evaluated_at=run.stamp)
    return Evaluation(jobs=assessed, skipped=skipped, due=run.due, state=new_state)


def _crossing_label(f: Forecast) -> str:
    if f.warning_at is not None:
        return f"warning level {iso(f.warning_at)}"
    if f.timeout_at is not None:
        return f"timeout {iso(f.timeout_at)}"
    return "-" if f.slope_s_per_h is not None else "n/a"


def headroom_frame(ev: Evaluation) -> pl.DataFrame:
    """Every assessed job as a table (the CLI's table format)."""
    severity = {r.key: r.severity for r in ev.state.firing.values()
                if r.alertname == TAIL_ALERT}
    rows = [{
        "job_id": h.job_id, "tier": h.tier, "n": h.n_checkpoints, "p50_s": h.p50_s,
        "p99_s": h.p99_s, "max_s": h.max_s, "timeout_s": h.timeout_s,
        "headroom_s": h.headroom_s, "level": h.level or "ok",
        "alert": severity.get((h.job_id, h.tier), "-"),
        "trend_s_per_h": h.forecast.slope_s_per_h,
        "forecast": _crossing_label(h.forecast),
    } for h in ev.jobs]
    schema = {"job_id": pl.String, "tier": pl.String, "n": pl.Int64, "p50_s": pl.Float64,
              "p99_s": pl.Float64, "max_s": pl.Float64, "timeout_s": pl.Float64,
              "headroom_s": pl.Float64, "level": pl.String, "alert": pl.String,
              "trend_s_per_h": pl.Float64, "forecast": pl.String}
    return pl.DataFrame(rows, schema=schema)


@dataclass
class AlertRun:
    """One run over a lake: the evaluation, what was (or would be) sent, sink failures."""

    evaluation: Evaluation
    alerts: list[Alert]
    failures: list[SinkError]
    sent: bool
    #: What each sink took (sent runs only; :func:`ckptwatch.alerts.sinks.delivery_summary`).
    delivery: list[SinkResult] = field(default_factory=list)
    #: The names of the sinks the run sends (or, dry, would send) to.
    sinks: list[str] = field(default_factory=list)

    @property
    def delivered(self) -> bool:
        """Sent, and every sink took every alert handed to it."""
        return self.sent and not self.failures

    def summary(self, noun: str = "") -> str:
        """The round in one line, counted per sink (:func:`delivery_summary`)."""
        return delivery_summary(len(self.alerts), self.delivery, sent=self.sent,
                                sinks=self.sinks, noun=noun,
                                n_resolved=sum(a["status"] == "resolved" for a in self.alerts))


def _would_send(due: Sequence[Alert], pending: Mapping[str, Mapping[str, Alert]],
                sinks: Sequence[Sink]) -> list[Alert]:
    out = {(a["fingerprint"], a["status"]): a for a in due}
    due_fps = {a["fingerprint"] for a in due}
    for sink in sinks:
        for fp, a in pending.get(sink.name, {}).items():
            if fp not in due_fps:
                out.setdefault((fp, a["status"]), a)
    return list(out.values())


def run_alerts(lake_root: Path | str, settings: Settings, *, send: bool,
               now: datetime | None = None, sinks: Sequence[Sink] | None = None,
               cause_provider: CauseProvider | None = None,
               lock_wait_s: float = 600.0,
               days: tuple[date, date] | None = None,
               memory_limit: str | None = None,
               con: duckdb.DuckDBPyConnection | None = None) -> AlertRun:
    """Evaluate the lake's jobs; with ``send``, deliver due alerts and record the state.

    ``now`` (default: the current time) given explicitly evaluates as of that time: checkpoints
    that ended later are left out. Without ``send`` nothing is written: ``alerts`` are those a
    send would deliver now. With
    ``send`` the alert state's lock is held from reading the state to writing it (not the
    writers' lake lock: an ingest does not delay alerts); a sink that fails keeps
    its alerts pending in the state for the next run and is listed in ``failures``.
    ``sinks`` defaults to those the settings configure. ``days``: read only those days of the
    lake (see ``query.connect``; the nightly run passes its report day and lookback).
    ``con``: an open connection of the lake that builds ``VIEWS`` (the nightly run's), read
    instead of a new one (``days`` and ``memory_limit`` are then its own) and left open.
    """
    from ckptwatch.lake.query import connect

    as_of = now  # an explicit time is a replay: leave out checkpoints that ended after it
    now = now or datetime.now(UTC)
    sinks = build_sinks(settings) if sinks is None else list(sinks)
    if con is not None:
        checkpoints, jobs = load_window(con, settings.alerts, as_of)
    else:
        own = connect(lake_root, days=days, memory_limit=memory_limit, views=VIEWS)
        try:
            checkpoints, jobs = load_window(own, settings.alerts, as_of)
        finally:
            own.close()
    causes = cause_provider(checkpoints) if cause_provider else None
    if not send:
        ev = evaluate(checkpoints, jobs, settings.alerts, load_state(lake_root), now=now,
                      causes=causes)
        return AlertRun(ev, _would_send(ev.due, ev.state.pending, sinks), [], sent=False,
                        sinks=[s.name for s in sinks])
    run = send_alerts(lake_root, checkpoints, jobs, settings, sinks, now=now, causes=causes,
                      lock_wait_s=lock_wait_s)
    log.info("alerts: %d job(s) evaluated, %d alert(s) sent, %d sink failure(s)",
             len(run.evaluation.jobs), len(run.alerts), len(run.failures))
    return run


def send_alerts(lake_root: Path | str, checkpoints: pl.DataFrame, jobs: pl.DataFrame,
                settings: Settings, sinks: Sequence[Sink], *, now: datetime,
                causes: Causes | None = None,
                inflight: Mapping[tuple[str, str], InFlight] | None = None,
                lock_wait_s: float = 600.0) -> AlertRun:
    """Evaluate, deliver what is due and record the state, holding the alert state's lock
    from reading the state to writing it (:func:`run_alerts` and ``ckptwatch watch``)."""
    with state_lock(lake_root, lock_wait_s):
        ev = evaluate(checkpoints, jobs, settings.alerts, load_state(lake_root), now=now,
                      causes=causes, inflight=inflight)
        delivery = deliver(ev.due, sinks, ev.state.pending)
        ev.state.pending = delivery.pending
        save_state(lake_root, ev.state)
    return AlertRun(ev, delivery.alerts, delivery.failures, sent=True,
                    delivery=delivery.results, sinks=[s.name for s in sinks])
