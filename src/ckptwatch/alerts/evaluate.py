"""The alerts timeout headroom raises: evaluation with hysteresis, and a run over a lake.

One alert (``alertname`` :data:`ALERTNAME`) per job and tier; ``severity`` is one of its labels,
so a change of severity resolves the old alert and fires the new one. Hysteresis: a firing
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
from dataclasses import dataclass, replace
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING

import polars as pl

from ckptwatch.alerts.forecast import Forecast, iso
from ckptwatch.alerts.headroom import VIEWS, JobHeadroom, Severity, headroom, load_window
from ckptwatch.alerts.inflight import InFlight
from ckptwatch.alerts.sinks import Alert, AlertStatus, Sink, build_sinks, deliver
from ckptwatch.alerts.state import AlertRecord, AlertState, load_state, save_state, state_lock
from ckptwatch.errors import SinkError
from ckptwatch.settings import AlertSettings, Settings

if TYPE_CHECKING:
    import duckdb

log = logging.getLogger(__name__)

ALERTNAME = "CheckpointTailNearTimeout"
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


def _annotations(h: JobHeadroom, severity: Severity | None, causes: Causes | None,
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
    ann = {
        "summary": summary,
        "p50_s": f"{h.p50_s:.1f}", "p99_s": f"{h.p99_s:.1f}", "max_s": f"{h.max_s:.1f}",
        "timeout_s": f"{h.timeout_s:.1f}", "headroom_s": _s(h.headroom_s),
        "warning_s": f"{h.warning_s:.1f}", "critical_s": f"{h.critical_s:.1f}",
        "window": f"{h.n_checkpoints} checkpoints, {iso(h.first_ts)} .. {iso(h.last_ts)}",
        "worst_step": str(h.worst_step),
        "forecast": h.forecast.note,
    }
    if h.forecast.warning_at is not None:
        ann["forecast_warning_at"] = iso(h.forecast.warning_at)
    if h.forecast.timeout_at is not None:
        ann["forecast_timeout_at"] = iso(h.forecast.timeout_at)
    if causes and h.job_id in causes:
        step, cause = causes[h.job_id]
        ann["top_cause"] = f"{cause} (step {step})"
    return ann


def _inflight_annotations(f: InFlight, h: JobHeadroom | None, causes: Causes | None,
                          resolved: str | None = None) -> dict[str, str]:
    """The alert of an open checkpoint: which ranks are open, where, and the time left."""
    assert f.timeout_s is not None
    of = f" of {f.n_expected}" if f.n_expected else ""
    open_part = (f"{f.n_open}{of} ranks still open ({f.where()})" if f.n_open != 1 else
                 f"1{of} rank still open ({f.where()})")
    remaining = f.timeout_s - f.age_s
    until = (f"{_s(remaining)} s until the {f.timeout_s:.1f} s timeout" if remaining > 0.05
             else f"past the {f.timeout_s:.1f} s timeout by {_s(-remaining)} s")
    if resolved is not None:
        summary = f"Checkpoint step {f.step} of job {f.job_id} ({f.tier}) {resolved}."
    else:
        summary = (f"Checkpoint step {f.step} of job {f.job_id} ({f.tier}) has been open "
                   f"{f.age_s:.0f} s, {_pct(f.age_s, f.timeout_s)} of its timeout: "
                   f"{open_part}; {until}.")
    ann = {
        "summary": summary,
        "step": str(f.step), "inflight_s": f"{f.age_s:.1f}", "timeout_s": f"{f.timeout_s:.1f}",
        "remaining_s": _s(remaining),
        "warning_s": f"{f.warning_s:.1f}", "critical_s": f"{f.critical_s:.1f}",
        "started_at": iso(f.started_at),
        "ranks_started": str(f.n_started), "ranks_finished": str(f.n_finished),
        "ranks_open": str(f.n_open), "open_ranks": f.where(),
    }
    if f.evidence:
        ann["evidence"] = f.evidence
    if h is not None:
        ann["tail"] = (f"{h.tail_s:.1f} s ({h.tail_stat} of the last {h.n_checkpoints} "
                       "completed checkpoints)")
        ann["forecast"] = h.forecast.note
    if causes and f.job_id in causes:
        step, cause = causes[f.job_id]
        ann["top_cause"] = f"{cause} (step {step})"
    return ann


def _holds(severity: Severity, h: JobHeadroom, margin_s: float) -> bool:
    """Is the tail still within the hysteresis band of ``severity``?"""
    if severity == "critical":
        return h.tail_s >= h.critical_s - margin_s
    return h.tail_s >= h.warning_s - margin_s or h.forecast.warns


def _target(h: JobHeadroom | None, f: InFlight | None, rec: AlertRecord | None,
            settings: AlertSettings, inflight_known: bool = True
            ) -> tuple[Severity | None, int, str]:
    """(severity the alert should have now, consecutive-clear count, basis) — with hysteresis
    for the tail; an open checkpoint's level holds exactly as long as it is open. Without
    ``inflight_known`` (a run that does not follow open checkpoints: ``ckptwatch alerts``, the
    nightly run) an in-flight alert is a floor: only the watcher lowers it."""
    tail = h.severity if h is not None else None
    age = f.level if f is not None else None
    raw = age if SEVERITY_RANK[age] > SEVERITY_RANK[tail] else tail
    basis = "inflight" if age is not None and raw == age else "tail"
    cur = rec.severity if rec else None
    if rec is not None and rec.basis == "inflight" and not inflight_known:
        if SEVERITY_RANK[tail] >= SEVERITY_RANK[cur]:
            return tail, 0, "tail"
        return cur, 0, "inflight"
    if SEVERITY_RANK[raw] >= SEVERITY_RANK[cur]:
        return raw, 0, basis
    assert rec is not None and cur is not None
    if rec.basis == "inflight" or h is None:  # the checkpoint completed (or there is no tail)
        return raw, 0, basis
    margin_s = settings.resolve_margin * h.timeout_s
    levels: tuple[Severity, ...] = ("critical", "warning")
    candidate = next((s for s in levels
                      if SEVERITY_RANK[s] <= SEVERITY_RANK[cur] and _holds(s, h, margin_s)),
                     None)
    if candidate == cur:
        return cur, 0, rec.basis
    ok = rec.ok_count + 1
    return (candidate, 0, basis) if ok >= settings.resolve_after else (cur, ok, rec.basis)


def _alert(rec: AlertRecord, status: AlertStatus, ends_at: datetime) -> Alert:
    return {"labels": dict(rec.labels), "annotations": dict(rec.annotations),
            "startsAt": rec.starts_at, "endsAt": iso(ends_at), "status": status,
            "fingerprint": rec.fingerprint}


def _notes(h: JobHeadroom | None, f: InFlight | None, basis: str, severity: Severity | None,
           causes: Causes | None, resolved: str | None = None) -> dict[str, str]:
    if f is not None and (basis == "inflight" or h is None) and f.timeout_s is not None:
        return _inflight_annotations(f, h, causes, resolved)
    assert h is not None
    return _annotations(h, severity, causes, resolved)


def evaluate(checkpoints: pl.DataFrame, jobs: pl.DataFrame, settings: AlertSettings,
             state: AlertState | None = None, *, now: datetime,
             causes: Causes | None = None,
             inflight: Mapping[tuple[str, str], InFlight] | None = None) -> Evaluation:
    """Evaluate every job against its levels and forecast; return due alerts and new state.

    Pure: nothing is read or written. ``state`` is the previous run's (None: first run).
    The returned state assumes the due alerts get sent; the caller adds what a sink missed
    to its ``pending``. ``causes`` (from a :data:`CauseProvider`) adds ``top_cause``.
    ``inflight`` (``ckptwatch watch``: :func:`ckptwatch.alerts.inflight.assess_inflight`): the
    oldest open checkpoint per (job, tier); the alert's severity is the higher of its age's
    level and the tail's, one alert per job and tier either way.
    """
    if now.tzinfo is None:
        raise ValueError("now must be timezone-aware")
    prev = state or AlertState()
    assessed, skipped = headroom(checkpoints, jobs, settings, now=now)
    open_now = {k: f for k, f in (inflight or {}).items() if f.timeout_s is not None}
    tails = {(h.job_id, h.tier): h for h in assessed}
    by_key = {rec.key: replace(rec) for rec in prev.firing.values()}  # don't mutate the input
    firing: dict[str, AlertRecord] = {}
    due: list[Alert] = []
    ttl = timedelta(seconds=settings.firing_ttl_s)
    stamp = iso(now)

    known = inflight is not None
    for key in sorted(set(tails) | set(open_now)):
        h, f = tails.get(key), open_now.get(key)
        rec = by_key.pop(key, None)
        target, ok, basis = _target(h, f, rec, settings, known)
        if rec is not None and target == rec.severity:  # still firing, same alert
            if known or basis != "inflight":  # else: the watcher's words stand
                rec.annotations = _notes(h, f, basis, target, causes)
            rec.ok_count, rec.basis = ok, basis
            last = datetime.fromisoformat(rec.sent_at) if rec.sent_at else None
            if last is None or (now - last).total_seconds() >= settings.resend_after_s:
                rec.sent_at = stamp
                due.append(_alert(rec, "firing", now + ttl))
            firing[rec.fingerprint] = rec
            continue
        if rec is not None:  # severity changed or recovered: resolve the old alert
            why = "has recovered" if target is None else f"is now {target}"
            if rec.basis == "inflight" and f is None:
                why = "has completed" if target is None else f"has completed; the tail is {target}"
                if h is not None:
                    rec.annotations = {**rec.annotations, "summary": (
                        f"Checkpoint of job {key[0]} ({key[1]}) {why}: "
                        f"{_annotations(h, None, causes, resolved=why)['summary']}")}
                else:
                    rec.annotations = {**rec.annotations, "summary": (
                        f"Checkpoint step {rec.annotations.get('step', '?')} of job {key[0]} "
                        f"({key[1]}) {why}.")}
            else:
                rec.annotations = _notes(h, f, rec.basis, None, causes, resolved=why)
            due.append(_alert(rec, "resolved", now))
        if target is not None:
            labels = {"alertname": ALERTNAME, "job_id": key[0], "tier": key[1],
                      "severity": target}
            new = AlertRecord(labels=labels, annotations=_notes(h, f, basis, target, causes),
                              starts_at=stamp, sent_at=stamp, basis=basis)
            due.append(_alert(new, "firing", now + ttl))
            firing[new.fingerprint] = new

    for key, rec in sorted(by_key.items()):  # firing alerts of jobs no longer assessed
        if rec.basis == "inflight" and not known:  # only the watcher knows it is over
            firing[rec.fingerprint] = rec
            continue
        if rec.basis == "inflight":
            reason = (f"checkpoint step {rec.annotations.get('step', '?')} is no longer open "
                      "(it completed, or the job is gone)")
        else:
            reason = skipped.get(key, "no checkpoints of this job and tier in the lake")
        rec.annotations = {**rec.annotations,
                           "summary": f"Alert on job {key[0]} ({key[1]}) resolved: {reason}."}
        due.append(_alert(rec, "resolved", now))

    pending = {sink: dict(alerts) for sink, alerts in prev.pending.items()}
    new_state = AlertState(firing=firing, pending=pending, evaluated_at=stamp)
    return Evaluation(jobs=assessed, skipped=skipped, due=due, state=new_state)


def _crossing_label(f: Forecast) -> str:
    if f.warning_at is not None:
        return f"warning level {iso(f.warning_at)}"
    if f.timeout_at is not None:
        return f"timeout {iso(f.timeout_at)}"
    return "-" if f.slope_s_per_h is not None else "n/a"


def headroom_frame(ev: Evaluation) -> pl.DataFrame:
    """Every assessed job as a table (the CLI's table format)."""
    severity = {r.key: r.severity for r in ev.state.firing.values()}
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
        return AlertRun(ev, _would_send(ev.due, ev.state.pending, sinks), [], sent=False)
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
    return AlertRun(ev, delivery.alerts, delivery.failures, sent=True)
