"""The daily report: what a nightly run found, as self-contained HTML and the same facts as JSON.

Per job and day: rank p50 / p99 and barrier time per checkpoint against the timeout and its
warning/critical levels, with the stalls marked by cause; the stalls with their causes and
evidence; every job's timeout headroom and the alerts sent (or due); the planning model's
verdict for each job's measured tail; what the lake holds and what was quarantined.

- :func:`build_report` gathers the facts into one JSON-ready dict (keys: ``docs/report.md``);
- :func:`render_html` draws the figures from that dict (:mod:`ckptwatch.report.plots`) and
  embeds them as base64 PNG, so the HTML is one file that opens anywhere;
- :func:`write_report` writes ``LAKE/reports/<YYYY-MM-DD>/report.{html,json}`` and copies both
  to ``LAKE/reports/latest/``.

:func:`daily_report` does the three in one call (the nightly flow's report task). The nightly
run keeps a JSON Lines file of every alert it sends in ``LAKE/reports/alerts.jsonl`` unless the
settings name another (:func:`nightly_settings`).
"""

from __future__ import annotations

import html
import json
import math
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, date, datetime, time, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

import duckdb
import polars as pl

from ckptwatch import __version__
from ckptwatch.analysis.findings import StallFindings, StallRecord
from ckptwatch.errors import CkptwatchError, ConfigError, SinkError
from ckptwatch.lake.query import connect, run_sql
from ckptwatch.lake.store import Lake, atomic_write_bytes
from ckptwatch.settings import Settings, redact

if TYPE_CHECKING:
    from ckptwatch.alerts.evaluate import AlertRun
    from ckptwatch.ingest.run import IngestReport

REPORT_VERSION = 1
REPORTS_DIR = "reports"
ALERTS_FILE = "alerts.jsonl"
LATEST = "latest"
QUARANTINE_SQL = "select source_file, line, reason from quarantine order by source_file, line"
TABLES = ("checkpoint_writes", "jobs", "nvme_smart", "fabric_counters", "pool_metrics",
          "topology", "quarantine")


class AlertsUndeliveredError(SinkError):
    """Alert sinks failed in a nightly run whose report was written (``result`` says where)."""

    def __init__(self, message: str, result: dict[str, Any]) -> None:
        super().__init__("nightly", message)
        self.result = result

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (str(self), self.result))


@dataclass(frozen=True)
class ReportFiles:
    """Where a report was written."""

    html: Path
    json: Path
    latest_html: Path
    latest_json: Path


def reports_dir(lake_root: Path | str) -> Path:
    """``LAKE/reports``."""
    return Path(lake_root) / REPORTS_DIR


def nightly_settings(settings: Settings, lake_root: Path | str) -> Settings:
    """The settings of a nightly run: alerts always go to a JSON Lines file as well — the
    settings' ``[sinks] jsonl`` if set, else ``LAKE/reports/alerts.jsonl`` beside the reports."""
    if settings.sinks.jsonl is not None:
        return settings
    sinks = replace(settings.sinks, jsonl=reports_dir(lake_root) / ALERTS_FILE)
    return replace(settings, sinks=sinks)


# -- facts ------------------------------------------------------------------------------------


def _clean(value: Any) -> Any:
    """JSON-ready: datetimes as ISO-8601 UTC, NaN/inf as None, floats to 6 significant
    digits."""
    if isinstance(value, float):
        return float(f"{value:.6g}") if math.isfinite(value) else None
    if isinstance(value, datetime):
        return value.astimezone(UTC).isoformat().replace("+00:00", "Z")
    if isinstance(value, date):
        return value.isoformat()
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, Mapping):
        return {str(k): _clean(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_clean(v) for v in value]
    return value


def report_day(con: duckdb.DuckDBPyConnection, day: date | None = None) -> date:
    """``day``, or the UTC day of the newest checkpoint in the lake (today when there is none).

    The nightly run reads files shipped once their day is over, so the newest day in the lake
    is the last complete day.
    """
    if day is not None:
        return day
    latest = run_sql(con, "select max(start_ts) as ts from checkpoint_latency")["ts"][0]
    if latest is None:
        return datetime.now(UTC).date()
    return latest.astimezone(UTC).date()


def nightly_days(lake_root: Path | str, day: date | None,
                 lookback_days: int) -> tuple[date, date]:
    """The days a nightly run reads: the report day (``day``, or the newest day with
    checkpoints) and the ``lookback_days`` before it (stall baselines and the alerts' trailing
    checkpoints come from there). Bounds the run's time and memory whatever the lake keeps."""
    if lookback_days < 0:
        raise ConfigError(f"lookback days must be 0 or more, not {lookback_days}")
    if day is None:  # the newest checkpoint partition: a directory listing, no views built
        known = Lake(lake_root).days("checkpoint_writes")
        day = known[-1] if known else datetime.now(UTC).date()
    return day - timedelta(days=lookback_days), day


def _day_bounds(day: date) -> tuple[datetime, datetime]:
    start = datetime.combine(day, time(0), tzinfo=UTC)
    return start, start + timedelta(days=1)


_CHECKPOINTS_SQL = """
with
stalls as (
    select * from stalls
),

jobs as (
    select * from stg_jobs
),

final as (
    select
        stalls.job_id,
        stalls.tier,
        stalls.step,
        stalls.start_ts,
        stalls.end_ts,
        stalls.n_ranks,
        stalls.p50_s,
        stalls.p99_s,
        stalls.barrier_s,
        stalls.baseline_s,
        stalls.is_stall,
        jobs.checkpoint_timeout_s as timeout_s,
    from stalls
    left join jobs using (job_id)
    where stalls.start_ts >= $t0 and stalls.start_ts < $t1
)

select * from final order by job_id, tier, start_ts, step
"""


def _stall_entry(stall: StallRecord, lake_root: Path) -> dict[str, Any]:
    rec = stall.to_dict()
    top = rec["causes"][0]
    return {
        "job_id": rec["job_id"], "step": int(rec["step"]), "tier": rec["tier"],
        "start_ts": rec["start_ts"], "end_ts": rec["end_ts"],
        "barrier_s": rec["barrier_s"], "baseline_s": rec["baseline_s"],
        "ratio_to_baseline": rec["ratio_to_baseline"], "p50_s": rec["p50_s"],
        "p99_s": rec["p99_s"], "n_ranks": rec["n_ranks"], "n_slow": rec["n_slow"],
        "cause": rec["cause"], "score": top["score"], "evidence": list(top["evidence"]),
        "causes": [{"cause": c["cause"], "score": c["score"], "supported": c["supported"],
                    "evidence": list(c["evidence"])} for c in rec["causes"]],
        "postmortem": (f"ckptwatch postmortem --lake {lake_root} --job {rec['job_id']} "
                       f"--step {int(rec['step'])}"),
    }


def _jobs(frame: pl.DataFrame, stalls: list[dict[str, Any]],
          settings: Settings) -> list[dict[str, Any]]:
    out = []
    for (job_id, tier), rows in frame.group_by("job_id", "tier", maintain_order=True):
        cfg = settings.alerts.for_job(str(job_id))
        timeout = rows["timeout_s"][0]
        barrier = rows["barrier_s"]
        worst = rows.row(int(barrier.arg_max() or 0), named=True)
        mine = [s for s in stalls if s["job_id"] == job_id and s["tier"] == tier]
        out.append({
            "job_id": job_id, "tier": tier, "n_ranks": rows.select(pl.col("n_ranks").max()).item(),
            "timeout_s": timeout,
            "warning_s": None if timeout is None else cfg.warning * timeout,
            "critical_s": None if timeout is None else cfg.critical * timeout,
            "n_checkpoints": rows.height,
            "barrier_p50_s": barrier.quantile(0.5, "linear"),
            "barrier_p99_s": barrier.quantile(0.99, "linear"),
            "barrier_max_s": barrier.max(), "worst_step": worst["step"],
            "n_stalls": len(mine),
            "checkpoints": rows.select("step", "start_ts", "end_ts", "p50_s", "p99_s",
                                       "barrier_s", "baseline_s", "is_stall").to_dicts(),
            "stalls": [{k: s[k] for k in ("step", "start_ts", "barrier_s", "cause")}
                       for s in mine],
        })
    return out


def _headroom(run: AlertRun | None) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    if run is None:
        return [], []
    ev = run.evaluation
    firing = {r.key: r.severity for r in ev.state.firing.values()}
    rows = [{
        "job_id": h.job_id, "tier": h.tier, "n_checkpoints": h.n_checkpoints,
        "p50_s": h.p50_s, "p99_s": h.p99_s, "max_s": h.max_s, "tail_stat": h.tail_stat,
        "tail_s": h.tail_s, "timeout_s": h.timeout_s, "headroom_s": h.headroom_s,
        "warning_s": h.warning_s, "critical_s": h.critical_s, "level": h.level or "ok",
        "alert": firing.get((h.job_id, h.tier)),
        "trend_s_per_h": h.forecast.slope_s_per_h, "forecast": h.forecast.note,
        "forecast_warning_at": h.forecast.warning_at,
        "forecast_timeout_at": h.forecast.timeout_at,
    } for h in ev.jobs]
    skipped = [{"job_id": j, "tier": t, "reason": why}
               for (j, t), why in sorted(ev.skipped.items())]
    return rows, skipped


def _alerts(run: AlertRun | None, settings: Settings, error: str | None) -> dict[str, Any]:
    from ckptwatch.alerts.sinks import build_sinks

    sinks = [s.name for s in build_sinks(settings)]
    out: dict[str, Any] = {"evaluated": run is not None, "sent": bool(run and run.sent),
                           "sinks": sinks, "jsonl": settings.sinks.jsonl, "alerts": [],
                           "firing": [], "failures": [], "error": error}
    if run is None:
        return out
    secrets = settings.secrets()
    out["alerts"] = [dict(a) for a in run.alerts]
    out["firing"] = [{"job_id": r.labels["job_id"], "tier": r.labels["tier"],
                      "severity": r.severity, "since": r.starts_at,
                      "summary": r.annotations.get("summary", "")}
                     for r in sorted(run.evaluation.state.firing.values(), key=lambda r: r.key)]
    out["failures"] = [redact(f"{f.sink}: {f}", secrets) for f in run.failures]
    return out


def plan_verdict(lake_root: Path | str, job_id: str) -> dict[str, Any]:
    """The planning model on one job's measured barrier times (as ``ckptwatch plan
    --from-lake``): best strategy, its interval and lost work, the job's current tier's cost,
    where the verdict flips, and the tail factor at which it would flip."""
    from ckptwatch.planning.model import (
        PARAMETERS,
        PlanInputs,
        calibrate,
        make_plan,
        measure_from_lake,
        sweep,
    )

    command = f"ckptwatch plan --from-lake {lake_root} --job {job_id}"
    try:
        m = measure_from_lake(lake_root, job_id)
        inputs = calibrate(PlanInputs(), m)
        plan = make_plan(inputs, measurement=m)
        tail_param = "tail_factor" if m.tier == "pool" else "local_tail_factor"
        tail_flips = sweep(inputs, tail_param, 1.0, max(4.0, 2.0 * m.tail_factor), 17).flips
    except (CkptwatchError, ValueError, ArithmeticError) as exc:  # inputs the model rejects
        return {"job_id": job_id, "error": f"{type(exc).__name__}: {exc}"
                if not isinstance(exc, CkptwatchError) else str(exc), "command": command}

    def strat(name: str) -> dict[str, Any]:
        s = plan.strategy(name)
        return {"name": s.name, "optimal_interval_s": s.optimal_interval_s,
                "lost_work_per_failure_s": s.lost_work_per_failure_s,
                "overhead_fraction": s.overhead_fraction,
                "lost_gpu_hours_per_year": s.lost_gpu_hours_per_year,
                "checkpoint_s_p99": s.checkpoint_s_p99}

    def flip(f: Any) -> dict[str, Any]:
        p = PARAMETERS[f.parameter]
        return {**f.to_dict(), "now": p.describe(float(getattr(inputs, p.field)))}

    return {
        "job_id": job_id, "tier": m.tier, "error": None, "command": command,
        "measured": {"checkpoints": m.checkpoints, "p50_s": m.p50_s, "p99_s": m.p99_s,
                     "tail_factor": m.tail_factor},
        "best": strat(plan.best),
        "current": strat(m.tier) if m.tier in {s.name for s in plan.strategies} else None,
        "flips": [flip(f) for f in plan.flips],
        "tail_flip": flip(tail_flips[0]) if tail_flips else None,
    }


def _data(con: duckdb.DuckDBPyConnection, lake_root: Path,
          ingest: IngestReport | None) -> dict[str, Any]:
    counts = run_sql(con, 'select table_name as "table", n_rows as n from int_lake_table_rows')
    by_file = run_sql(con, """
        select source_file, count(*) as n, any_value(reason order by line) as example_reason,
        from stg_quarantine group by source_file order by n desc, source_file limit 10
    """)
    days = run_sql(con, """
        select cast(start_ts at time zone 'UTC' as date) as day, count(*) as checkpoints,
        from checkpoint_latency group by day order by day desc limit 14
    """)
    rows = dict(zip(counts["table"].to_list(), counts["n"].to_list(), strict=True))
    ingest_facts = None
    if ingest is not None:
        ingest_facts = {
            "raw_dir": ingest.raw_dir, "files_seen": len(ingest.files),
            **{k: ingest.count(k) for k in ("ingested", "skipped", "ignored", "failed")},
            "rows": ingest.rows, "quarantined": ingest.quarantined,
            "recovered": ingest.recovered, "elapsed_s": ingest.elapsed_s,
            "failed_files": [{"file": f.rel, "error": f.error} for f in ingest.files
                             if f.status == "failed"][:20],
        }
    return {
        "rows": rows, "quarantined": rows.get("quarantine", 0),
        "quarantine_by_file": by_file.to_dicts(),
        "quarantine_query": f'ckptwatch sql --lake {lake_root} "{QUARANTINE_SQL}"',
        "days": days.to_dicts(), "ingest": ingest_facts,
    }


def build_report(con: duckdb.DuckDBPyConnection, lake_root: Path | str, *, day: date | None,
                 findings: StallFindings, settings: Settings,
                 alert_run: AlertRun | None = None, alerts_error: str | None = None,
                 ingest: IngestReport | None = None, plans: bool = True,
                 now: datetime | None = None) -> dict[str, Any]:
    """Every fact of the daily report as a JSON-ready dict (see ``docs/report.md``).

    ``findings``: the stalls (all days; the report keeps the day's). ``alert_run``: this run's
    alert evaluation (None with ``alerts_error`` when it could not run). ``ingest``: this run's
    ingest, for the data section. ``plans``: run the planning model per job (~0.3 s a job).
    """
    lake_root = Path(lake_root)
    day = report_day(con, day)
    t0, t1 = _day_bounds(day)
    stalls = [_stall_entry(r, lake_root) for r in findings.stalls
              if r.start_ts is not None and t0 <= datetime.fromisoformat(r.start_ts) < t1]
    stalls.sort(key=lambda s: (s["start_ts"], s["job_id"], s["step"]))
    frame = run_sql(con, _CHECKPOINTS_SQL, {"t0": t0, "t1": t1})
    jobs = _jobs(frame, stalls, settings)
    headroom, skipped = _headroom(alert_run)
    verdicts = [plan_verdict(lake_root, j) for j in sorted({j["job_id"] for j in jobs})] \
        if plans else []
    report = {
        "report_version": REPORT_VERSION,
        "ckptwatch_version": __version__,
        "generated_at": (now or datetime.now(UTC)).replace(microsecond=0),
        "date": day, "window": {"start": t0, "end": t1},
        "lake": lake_root,
        "attribution": "rules + model" if findings.with_model else "rules only",
        "summary": {
            "jobs": len(jobs), "checkpoints": frame.height, "stalls": len(stalls),
            "stalls_by_cause": dict(Counter(s["cause"] for s in stalls).most_common()),
            "alerts": len(alert_run.alerts) if alert_run else 0,
            "alerts_firing": len(alert_run.evaluation.state.firing) if alert_run else 0,
            "jobs_critical": sum(h["level"] == "critical" for h in headroom),
            "jobs_warning": sum(h["level"] == "warning" for h in headroom),
        },
        "jobs": jobs, "stalls": stalls,
        "headroom": headroom, "headroom_skipped": skipped,
        "alerts": _alerts(alert_run, settings, alerts_error),
        "plans": verdicts,
        "data": _data(con, lake_root, ingest),
    }
    out: dict[str, Any] = _clean(report)
    return out


# -- HTML -------------------------------------------------------------------------------------

_CSS = """
body{font:14px/1.45 -apple-system,"Segoe UI",Roboto,"Helvetica Neue",Arial,sans-serif;
 color:#1f2d3d;background:#f6f7f9;margin:0}
main{max-width:1120px;margin:0 auto;padding:20px 28px 40px}
h1{font-size:22px;margin:8px 0 2px}h2{font-size:17px;margin:30px 0 8px;border-bottom:1px solid
 #dde1e6;padding-bottom:4px}h3{font-size:15px;margin:18px 0 6px}
.sub{color:#5b6b7c;margin:0 0 14px}.cards{display:flex;flex-wrap:wrap;gap:10px;margin:12px 0}
.card{background:#fff;border:1px solid #dde1e6;border-radius:8px;padding:8px 14px;min-width:110px}
.card b{display:block;font-size:22px}.card span{color:#5b6b7c;font-size:12px}
.panel{background:#fff;border:1px solid #dde1e6;border-radius:8px;padding:12px 16px;margin:10px 0}
table{border-collapse:collapse;width:100%;font-size:12.5px;background:#fff}
td:first-child{white-space:nowrap}
th,td{padding:5px 8px;border-bottom:1px solid #eceff2;text-align:left;vertical-align:top}
th{background:#f0f2f5;font-weight:600}td.n,th.n{text-align:right;font-variant-numeric:tabular-nums}
.badge{display:inline-block;border-radius:10px;padding:1px 8px;color:#fff;font-size:11.5px;
 font-weight:600;white-space:nowrap}
.ok{background:#54a24b}.warning{background:#d4ac0d}.critical{background:#c0392b}
.none{background:#9aa5b1}ul.ev{margin:2px 0;padding-left:16px}ul.ev li{margin:1px 0}
.small{font-size:11.5px;color:#5b6b7c}code{font-size:11.5px;background:#f0f2f5;padding:1px 4px;
 border-radius:3px;word-break:break-all}.err{border-color:#e6b0aa;background:#fdf2f1}
img{max-width:100%;height:auto;display:block}.alert{font-family:ui-monospace,Menlo,monospace;
 font-size:12px;white-space:pre-wrap;background:#f8f9fb;border-left:3px solid #c0392b;
 padding:6px 10px;margin:6px 0}.alert.resolved{border-left-color:#54a24b}
footer{margin-top:30px;color:#8795a1;font-size:12px}
"""


def _e(value: Any) -> str:
    return html.escape("" if value is None else str(value))


def _s(value: Any, digits: int = 1) -> str:
    if value is None:
        return "–"
    v = float(value)
    return f"{0.0 if round(v, digits) == 0 else v:,.{digits}f}"


def _dur(seconds: float | None) -> str:
    if seconds is None:
        return "–"
    if seconds >= 2 * 3600:
        return f"{seconds / 3600:.1f} h"
    if seconds >= 120:
        return f"{seconds / 60:.0f} min"
    return f"{seconds:.0f} s"


def _time(ts: str | None) -> str:
    return "–" if not ts else datetime.fromisoformat(ts).strftime("%H:%M:%S")


def _cause_badge(cause: str, score: float | None = None) -> str:
    from ckptwatch.report.plots import CAUSE_COLORS

    color = CAUSE_COLORS.get(cause, CAUSE_COLORS["unknown"])
    text = cause if score is None else f"{cause} {score:.2f}"
    return f'<span class="badge" style="background:{color}">{_e(text)}</span>'


def _level_badge(level: str | None) -> str:
    level = level or "none"
    return f'<span class="badge {_e(level)}">{_e(level if level != "none" else "–")}</span>'


def _table(header: Sequence[str], rows: Sequence[Sequence[str]],
           numeric: Sequence[int] = ()) -> str:
    head = "".join(f'<th class="{"n" if i in numeric else ""}">{h}</th>'
                   for i, h in enumerate(header))
    body = "".join("<tr>" + "".join(f'<td class="{"n" if i in numeric else ""}">{c}</td>'
                                    for i, c in enumerate(r)) + "</tr>" for r in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _summary_html(r: Mapping[str, Any]) -> str:
    s = r["summary"]
    causes = ", ".join(f"{n} {c}" for c, n in s["stalls_by_cause"].items()) or "none"
    cards = [(s["jobs"], "jobs"), (s["checkpoints"], "checkpoints"), (s["stalls"], "stalls"),
             (s["jobs_critical"], "jobs critical"), (s["jobs_warning"], "jobs warning"),
             (s["alerts"], "alerts sent" if r["alerts"]["sent"] else "alerts due"),
             (r["data"]["quarantined"], "quarantined records")]
    return ('<div class="cards">' + "".join(
        f'<div class="card"><b>{_e(n)}</b><span>{_e(label)}</span></div>'
        for n, label in cards) + "</div>"
        + f'<p class="small">stalls by cause: {_e(causes)}; attribution: '
        f'{_e(r["attribution"])}</p>')


def _jobs_html(r: Mapping[str, Any]) -> str:
    from ckptwatch.report.plots import barrier_figure, png_base64

    if not r["jobs"]:
        return '<p class="panel">No checkpoints on this day.</p>'
    head = {(h["job_id"], h["tier"]): h for h in r["headroom"]}
    parts = []
    for job in r["jobs"]:
        fig = barrier_figure(job)
        h = head.get((job["job_id"], job["tier"]))
        hr = ("" if h is None else
              f' · headroom {_s(h["headroom_s"])} s ({h["tail_stat"]} of last '
              f'{h["n_checkpoints"]}) {_level_badge(h["level"])}')
        parts.append(
            f'<div class="panel"><h3>{_e(job["job_id"])} <span class="small">'
            f'{_e(job["tier"])} tier · {job["n_ranks"]} ranks · timeout '
            f'{_s(job["timeout_s"])} s</span></h3>'
            f'<p class="small">barrier over the day\'s {job["n_checkpoints"]} checkpoints: '
            f'p50 {_s(job["barrier_p50_s"])} s · p99 {_s(job["barrier_p99_s"])} s · max '
            f'{_s(job["barrier_max_s"])} s (step {job["worst_step"]}) · '
            f'{job["n_stalls"]} stall(s){hr}</p>'
            f'<img alt="barrier time of {_e(job["job_id"])}" src="{png_base64(fig)}"></div>')
    return "".join(parts)


def _stalls_html(r: Mapping[str, Any]) -> str:
    if not r["stalls"]:
        return '<p class="panel">No stalls on this day.</p>'
    rows = []
    for s in r["stalls"]:
        ev = "".join(f"<li>{_e(line)}</li>" for line in s["evidence"][:3])
        others = [c for c in s["causes"][1:] if c["supported"]]
        more = ("" if not others else '<div class="small">also: ' + ", ".join(
            f'{_e(c["cause"])} {c["score"]:.2f}' for c in others) + "</div>")
        rows.append([
            _e(s["job_id"]), str(s["step"]), _time(s["start_ts"]),
            f'{_s(s["barrier_s"])} s', f'{_s(s["baseline_s"])} s',
            f'×{_s(s["ratio_to_baseline"])}', f'{s["n_slow"]}/{s["n_ranks"]}',
            _cause_badge(s["cause"], s["score"]),
            f'<ul class="ev">{ev}</ul>{more}<code>{_e(s["postmortem"])}</code>'])
    return _table(["job", "step", "start (UTC)", "barrier", "baseline", "", "slow ranks",
                   "cause", "evidence · post-mortem"], rows, numeric=(1, 3, 4, 5, 6))


def _alerts_html(r: Mapping[str, Any]) -> str:
    a = r["alerts"]
    out = []
    if a["error"]:
        out.append(f'<div class="panel err"><b>Alerts were not evaluated:</b> '
                   f'{_e(a["error"])}</div>')
    if r["headroom"]:
        rows = [[_e(h["job_id"]), _e(h["tier"]), str(h["n_checkpoints"]), _s(h["p50_s"]),
                 _s(h["p99_s"]), _s(h["max_s"]), _s(h["timeout_s"]), _s(h["headroom_s"]),
                 _level_badge(h["level"]), _level_badge(h["alert"]),
                 f'<span class="small">{_e(h["forecast"])}</span>'] for h in r["headroom"]]
        out.append(_table(["job", "tier", "window", "p50 s", "p99 s", "max s", "timeout s",
                           "headroom s", "level", "alert", "forecast"], rows,
                          numeric=(2, 3, 4, 5, 6, 7)))
    for sk in r["headroom_skipped"]:
        out.append(f'<p class="small">not evaluated: {_e(sk["job_id"])} ({_e(sk["tier"])}): '
                   f'{_e(sk["reason"])}</p>')
    if a["evaluated"]:
        verb = "sent" if a["sent"] else "due (not sent: dry run)"
        where = f' to {", ".join(a["sinks"])}' if a["sent"] and a["sinks"] else ""
        jsonl = f' · JSON Lines file: <code>{_e(a["jsonl"])}</code>' if a["jsonl"] else ""
        out.append(f'<p>{len(a["alerts"])} alert(s) {verb}{_e(where)} in this run; '
                   f'{len(a["firing"])} firing{jsonl}</p>')
        from ckptwatch.alerts.sinks import render_alert

        for alert in a["alerts"]:
            cls = "alert resolved" if alert.get("status") == "resolved" else "alert"
            out.append(f'<div class="{cls}">{_e(render_alert(alert))}</div>')
        if not a["alerts"] and a["firing"]:
            out.append('<p class="small">Firing alerts were sent on an earlier run and are '
                       'not repeated: ' + ", ".join(
                           f'{_e(f["job_id"])} ({_e(f["severity"])} since {_e(f["since"])})'
                           for f in a["firing"]) + "</p>")
    for f in a["failures"]:
        out.append(f'<div class="panel err"><b>Sink failed:</b> {_e(f)} — the alerts stay '
                   "pending and are retried on the next run.</div>")
    return "".join(out)


def _plans_html(r: Mapping[str, Any]) -> str:
    if not r["plans"]:
        return '<p class="panel">No planning verdicts (no jobs on this day).</p>'
    rows = []
    for p in r["plans"]:
        if p["error"]:
            rows.append([_e(p["job_id"]), "", "", "", "", f'<span class="small">'
                         f'{_e(p["error"])}</span>', "", ""])
            continue
        m, b, cur = p["measured"], p["best"], p["current"]
        cur_text = ("–" if cur is None else
                    f'{_e(cur["name"])}: {100 * cur["overhead_fraction"]:.2f} %')
        ranked = sorted(p["flips"], key=lambda f: f["parameter"] != "pool_bandwidth")
        flips = [f'{_e(f["parameter"])} = {_e(f["display"])}: {_e(f["from"])} → '
                 f'{_e(f["to"])} (now {_e(f["now"])})' for f in ranked[:3]]
        if p["tail_flip"]:
            t = p["tail_flip"]
            flips.insert(0, f'<b>{_e(t["from"])}</b> would win with a tail factor below '
                         f'{_e(t["display"])} (measured {m["tail_factor"]:.2f})')
        rows.append([
            _e(p["job_id"]), _e(p["tier"]),
            f'{_s(m["p50_s"])} / {_s(m["p99_s"])} s (×{m["tail_factor"]:.2f}, '
            f'{m["checkpoints"]} ckpts)',
            f'<b>{_e(b["name"])}</b>', _dur(b["optimal_interval_s"]),
            f'{_dur(b["lost_work_per_failure_s"])} · {100 * b["overhead_fraction"]:.2f} %',
            cur_text,
            "<br>".join(flips) or '<span class="small">no flip in range</span>'])
    return (_table(["job", "tier", "measured barrier p50 / p99", "best strategy",
                    "checkpoint every", "lost per failure · overhead", "current tier",
                    "verdict flips at"], rows)
            + '<p class="small">Model defaults for failure rates, restart and bandwidths of '
            'the tier not measured; details and sweeps: <code>ckptwatch plan --from-lake '
            f'{_e(r["lake"])} --job JOB</code> (docs/planning.md).</p>')


def _data_html(r: Mapping[str, Any]) -> str:
    d = r["data"]
    rows = [[_e(t), f"{d['rows'].get(t, 0):,}"] for t in TABLES]
    out = ['<div style="display:flex;gap:16px;flex-wrap:wrap"><div style="flex:1;'
           'min-width:260px">' + _table(["lake table", "rows"], rows, numeric=(1,)) + "</div>"]
    side = []
    ing = d["ingest"]
    if ing:
        side.append(f'<p>This run ingested {ing["ingested"]} of {ing["files_seen"]} files from '
                    f'<code>{_e(ing["raw_dir"])}</code> ({ing["skipped"]} already in the lake, '
                    f'{ing["ignored"]} ignored, {ing["failed"]} failed) and quarantined '
                    f'{ing["quarantined"]:,} record(s).</p>')
        for f in ing["failed_files"]:
            side.append(f'<p class="small">failed: {_e(f["file"])}: {_e(f["error"])}</p>')
    side.append(f'<p>{d["quarantined"]:,} record(s) in quarantine in total. See why: '
                f'<code>{_e(d["quarantine_query"])}</code></p>')
    if d["quarantine_by_file"]:
        side.append(_table(["file", "records", "first reason"], [
            [_e(q["source_file"]), str(q["n"]), _e(q["example_reason"])]
            for q in d["quarantine_by_file"]], numeric=(1,)))
    days = ", ".join(f'{x["day"]} ({x["checkpoints"]})' for x in d["days"])
    side.append(f'<p class="small">days with checkpoints (newest first): {_e(days)}</p>')
    out.append('<div style="flex:2;min-width:320px">' + "".join(side) + "</div></div>")
    return "".join(out)


def render_html(report: Mapping[str, Any]) -> str:
    """The report as one self-contained HTML page (figures embedded as base64 PNG)."""
    title = f"ckptwatch daily report {report['date']}"
    body = [
        f"<h1>{_e(title)}</h1>",
        f'<p class="sub">Checkpoints that started {_e(report["date"])} 00:00–24:00 UTC in '
        f'<code>{_e(report["lake"])}</code>. Headroom and alerts as of the run '
        f'({_e(report["generated_at"])}). Same facts as JSON: '
        '<a href="report.json">report.json</a>.</p>',
        _summary_html(report),
        "<h2>Barrier time per job</h2>",
        '<p class="small">Per checkpoint: rank p50 and p99 (over its ranks) and the barrier '
        "time (its slowest rank: training waits for it), against the job's checkpoint timeout "
        "and the warning and critical levels. Dots: stalls (barrier far above the job's "
        "rolling median), coloured by attributed cause, labelled by step.</p>",
        _jobs_html(report),
        "<h2>Stalls and their causes</h2>", _stalls_html(report),
        "<h2>Timeout headroom and alerts</h2>",
        '<p class="small">Tail of each job\'s last checkpoints against its timeout (warning '
        "and critical are fractions of it); a rising trend forecast to cross also warns.</p>",
        _alerts_html(report),
        "<h2>Planning: local, pool or tiered, from the measured tail</h2>",
        _plans_html(report),
        "<h2>Data</h2>", _data_html(report),
        f'<footer>ckptwatch {_e(report["ckptwatch_version"])} · report version '
        f'{report["report_version"]} · generated {_e(report["generated_at"])}</footer>',
    ]
    return (f'<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">'
            f'<meta name="viewport" content="width=device-width, initial-scale=1">'
            f"<title>{_e(title)}</title><style>{_CSS}</style></head>"
            f"<body><main>{''.join(body)}</main></body></html>\n")


# -- files ------------------------------------------------------------------------------------


def write_report(lake_root: Path | str, report: Mapping[str, Any], page: str) -> ReportFiles:
    """Write ``LAKE/reports/<date>/report.{html,json}`` and copies in ``LAKE/reports/latest``
    (copies, not a symlink: the lake may be synced to storage without links). Atomic."""
    base = reports_dir(lake_root)
    data = (json.dumps(report, indent=1, sort_keys=False) + "\n").encode()
    text = page.encode()
    day_dir, latest = base / str(report["date"]), base / LATEST
    for folder in (day_dir, latest):
        atomic_write_bytes(folder / "report.json", data)
        atomic_write_bytes(folder / "report.html", text)
    return ReportFiles(day_dir / "report.html", day_dir / "report.json",
                       latest / "report.html", latest / "report.json")


def daily_report(lake_root: Path | str, *, day: date | None, findings: StallFindings,
                 settings: Settings, alert_run: AlertRun | None = None,
                 alerts_error: str | None = None, ingest: IngestReport | None = None,
                 plans: bool = True, days: tuple[date, date] | None = None,
                 memory_limit: str | None = None) -> tuple[dict[str, Any], ReportFiles]:
    """Build, render and write the day's report; returns its facts and where it went.
    ``days``, ``memory_limit``: as for :func:`ckptwatch.lake.query.connect`."""
    con = connect(lake_root, days=days, memory_limit=memory_limit)
    try:
        report = build_report(con, lake_root, day=day, findings=findings, settings=settings,
                              alert_run=alert_run, alerts_error=alerts_error, ingest=ingest,
                              plans=plans)
    finally:
        con.close()
    return report, write_report(lake_root, report, render_html(report))
