"""The daily report's facts: what a nightly run found, gathered into one JSON-ready dict.

Per job and day: rank p50 / p99 and barrier time per checkpoint (the ``report_checkpoints``
mart) against the timeout and its warning/critical levels, with the stalls marked by cause; per
tier, the day's barrier p50 / p99 across jobs; the stalls with their causes and evidence; every
job's timeout headroom and the alerts sent (or due); the planning model's verdict for each
job's measured tail; what the lake holds and what was quarantined.

:func:`build_report` gathers them (keys: ``docs/report.md``); :mod:`ckptwatch.report.html`
draws them; :mod:`ckptwatch.report.daily` writes both. :func:`nightly_days` says which days a
nightly run reads.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping
from datetime import UTC, date, datetime, time, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

import duckdb
import polars as pl

from ckptwatch import __version__
from ckptwatch.alerts.levels import levels
from ckptwatch.analysis.findings import StallFindings, StallRecord
from ckptwatch.analysis.quantiles import quantiles
from ckptwatch.errors import CkptwatchError, ConfigError
from ckptwatch.lake.query import connect, run_sql
from ckptwatch.lake.store import Lake
from ckptwatch.report.bursts import BURSTS_VIEWS, day_facts
from ckptwatch.report.slow_hosts import SLOW_HOSTS_VIEWS, slow_hosts
from ckptwatch.safetext import shell_command
from ckptwatch.settings import Settings, redact

if TYPE_CHECKING:
    from ckptwatch.alerts.evaluate import AlertRun
    from ckptwatch.ingest.run import IngestReport
    from ckptwatch.planning.measure import LakeMeasurement

REPORT_VERSION = 1
#: The views :func:`build_report` reads (``connect(..., views=REPORT_VIEWS)`` builds these and
#: what they read, not every view of ``sql/``).
REPORT_VIEWS = ("checkpoint_latency", "report_checkpoints", "int_lake_table_rows",
                "stg_quarantine", *SLOW_HOSTS_VIEWS, *BURSTS_VIEWS)
QUARANTINE_SQL = "select source_file, line, reason from quarantine order by source_file, line"


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


#: The checkpoints that started in [t0, t1), in the report's order.
_CHECKPOINTS_SQL = """
select * from report_checkpoints
where start_ts >= $t0 and start_ts < $t1
order by job_id, tier, start_ts, step
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
        "n_unfinished": rec["n_unfinished"], "timed_out": rec["timed_out"],
        "timeout_reason": rec["timeout_reason"], "n_timed_out": rec["n_timed_out"],
        "why_timed_out": rec["why_timed_out"] or None,
        "barrier_is_lower_bound": rec["barrier_is_lower_bound"],
        "never_finished": rec["never_finished"],
        "cause": rec["cause"], "score": top["score"], "evidence": list(top["evidence"]),
        "telemetry": rec["telemetry"], "missing_telemetry": rec["missing_telemetry"],
        "causes": [{"cause": c["cause"], "score": c["score"], "supported": c["supported"],
                    "evidence": list(c["evidence"])} for c in rec["causes"]],
        "postmortem": shell_command(["ckptwatch", "postmortem", "--lake", lake_root,
                                     "--job", rec["job_id"], "--step", int(rec["step"])]),
    }


def _jobs(frame: pl.DataFrame, stalls: list[dict[str, Any]],
          settings: Settings) -> list[dict[str, Any]]:
    out = []
    for (job_id, tier), rows in frame.group_by("job_id", "tier", maintain_order=True):
        timeout = rows["timeout_s"][0]
        lv = levels(settings.alerts.for_job(str(job_id)), timeout)
        barrier = rows["barrier_s"]
        worst = rows.row(int(barrier.arg_max() or 0), named=True)
        mine = [s for s in stalls if s["job_id"] == job_id and s["tier"] == tier]
        # over the day's checkpoints, as job_latency computes them over all of the job's
        p50, p99 = quantiles(barrier.to_list(), (0.5, 0.99))
        out.append({
            "job_id": job_id, "tier": tier, "n_ranks": rows.select(pl.col("n_ranks").max()).item(),
            "timeout_s": timeout,
            "warning_s": None if lv is None else lv.warning_s,
            "critical_s": None if lv is None else lv.critical_s,
            "n_checkpoints": rows.height,
            "barrier_p50_s": p50,
            "barrier_p99_s": p99,
            "barrier_max_s": barrier.max(), "worst_step": worst["step"],
            "n_stalls": len(mine),
            "n_timed_out": int(rows["timed_out"].sum()),
            "checkpoints": rows.select("step", "start_ts", "end_ts", "p50_s", "p99_s",
                                       "barrier_s", "baseline_s", "is_stall", "n_unfinished",
                                       "timed_out", "timeout_reason",
                                       "n_timed_out").to_dicts(),
            "stalls": [{k: s[k] for k in ("step", "start_ts", "barrier_s", "cause")}
                       for s in mine],
        })
    return out


def _tiers(frame: pl.DataFrame) -> list[dict[str, Any]]:
    """Per tier, over the day's checkpoints of every job: the barrier p50 / p99 / max as the
    ``tier_latency`` mart computes them over the days a connection reads (``quantiles`` is its
    ``quantile_cont``); the nightly's Prometheus metrics read these."""
    out = []
    for (tier,), rows in frame.sort("tier").group_by("tier", maintain_order=True):
        barrier = rows["barrier_s"]
        p50, p99 = quantiles(barrier.to_list(), (0.5, 0.99))
        out.append({
            "tier": tier, "n_jobs": rows["job_id"].n_unique(), "n_checkpoints": rows.height,
            "barrier_p50_s": p50, "barrier_p99_s": p99, "barrier_max_s": barrier.max(),
            "n_timed_out": int(rows["timed_out"].sum()),
        })
    return out


def _headroom(run: AlertRun | None) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    if run is None:
        return [], []
    from ckptwatch.alerts.names import TAIL_ALERT

    ev = run.evaluation
    firing = {r.key: r.severity for r in ev.state.firing.values()
              if r.alertname == TAIL_ALERT}  # the tail's alert (the in-flight one is listed)
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
    # "sent": every sink took every alert handed to it; "delivery": what each sink took
    out: dict[str, Any] = {"evaluated": run is not None, "sent": bool(run and run.delivered),
                           "dry_run": bool(run and not run.sent),
                           "sinks": sinks, "jsonl": settings.sinks.jsonl, "alerts": [],
                           "firing": [], "failures": [], "error": error,
                           "delivery": [], "summary": None}
    if run is None:
        return out
    secrets = settings.secrets()
    out["delivery"] = [{k: redact(v, secrets) if isinstance(v, str) else v
                        for k, v in r.to_dict().items()} for r in run.delivery]
    out["summary"] = redact(run.summary(noun=" alert(s)"), secrets)
    out["alerts"] = [dict(a) for a in run.alerts]
    out["firing"] = [{"alertname": r.alertname,
                      "job_id": r.labels["job_id"], "tier": r.labels["tier"],
                      "severity": r.severity, "since": r.starts_at,
                      "summary": r.annotations.get("summary", "")}
                     for r in sorted(run.evaluation.state.firing.values(), key=lambda r: r.key)]
    out["failures"] = [redact(str(f), secrets) for f in run.failures]
    return out


def plan_verdict(lake_root: Path | str, job_id: str, *,
                 con: duckdb.DuckDBPyConnection | None = None) -> dict[str, Any]:
    """The planning model on one job's measured barrier times (as ``ckptwatch plan
    --from-lake``): best strategy, its interval and lost work, the job's current tier's cost,
    where the verdict flips, and the tail factor at which it would flip. ``con``: a connection
    over every day of the lake to share between jobs (None: one of its own)."""
    from ckptwatch.planning.measure import measure_jobs_from_lake

    measured: LakeMeasurement | CkptwatchError
    try:
        measured = measure_jobs_from_lake(lake_root, [job_id], con=con)[job_id]
    except CkptwatchError as exc:  # no lake, or one the views cannot read
        measured = exc
    return _verdict(lake_root, job_id, measured)


def _verdict(lake_root: Path | str, job_id: str,
             measured: LakeMeasurement | CkptwatchError) -> dict[str, Any]:
    """:func:`plan_verdict` of a job measured already (or the error that says why not)."""
    from ckptwatch.planning.measure import calibrate, resolve_timeouts
    from ckptwatch.planning.model import PARAMETERS, PlanInputs
    from ckptwatch.planning.sweep import make_plan, sweep

    command = shell_command(["ckptwatch", "plan", "--from-lake", lake_root, "--job", job_id])
    if isinstance(measured, CkptwatchError):
        return {"job_id": job_id, "error": str(measured), "command": command}
    try:
        # as the command: the job's own timeout (none: an error, not a default)
        m = resolve_timeouts(measured)
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
                     "tail_factor": m.tail_factor, "timeout_s": inputs.checkpoint_timeout_s,
                     "timeouts_per_year": None if m.timeouts is None else m.timeouts.per_year},
        "best": strat(plan.best),
        "current": strat(m.tier) if m.tier in {s.name for s in plan.strategies} else None,
        "flips": [flip(f) for f in plan.flips],
        "tail_flip": flip(tail_flips[0]) if tail_flips else None,
    }


def _plan_verdicts(lake_root: Path, job_ids: list[str],
                   memory_limit: str | None) -> list[dict[str, Any]]:
    """:func:`plan_verdict` of each job: the views built once, and every job measured in one
    pass (``measure_jobs_from_lake``), for all of them."""
    from ckptwatch.planning.measure import measure_jobs_from_lake, measurement_views

    if not job_ids:
        return []
    measured: Mapping[str, LakeMeasurement | CkptwatchError]
    con = connect(lake_root, memory_limit=memory_limit, views=measurement_views())
    try:
        measured = measure_jobs_from_lake(lake_root, job_ids, con=con)
    except CkptwatchError as exc:  # no checkpoint writes, or views that cannot read them
        measured = dict.fromkeys(job_ids, exc)
    finally:
        con.close()
    return [_verdict(lake_root, j, measured[j]) for j in job_ids]


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
        from ckptwatch.ingest.run import unused_metrics_lines

        ingest_facts = {
            "raw_dir": ingest.raw_dir, "files_seen": len(ingest.files),
            **{k: ingest.count(k) for k in ("ingested", "skipped", "ignored", "failed")},
            "rows": ingest.rows, "quarantined": ingest.quarantined,
            "recovered": ingest.recovered, "elapsed_s": ingest.elapsed_s,
            "failed_files": [{"file": f.rel, "error": f.error} for f in ingest.files
                             if f.status == "failed"][:20],
            "unused_metrics": [u.to_dict() for u in ingest.unused_metrics],
            "unused_metrics_lines": unused_metrics_lines(ingest.unused_metrics),
        }
    return {
        "rows": rows, "quarantined": rows.get("quarantine", 0),
        "quarantine_by_file": by_file.to_dicts(),
        "quarantine_query": shell_command(["ckptwatch", "sql", "--lake", lake_root,
                                           QUARANTINE_SQL]),
        "days": days.to_dicts(), "ingest": ingest_facts,
    }


def _slow_hosts(con: duckdb.DuckDBPyConnection, job_ids: set[str]) -> list[dict[str, Any]]:
    """The chronic slow hosts (``slow_hosts`` mart, over the days the connection reads) of the
    jobs in the report, most consistently slow first."""
    return [r for r in slow_hosts(con).to_dicts() if r["job_id"] in job_ids]


def _pools(con: duckdb.DuckDBPyConnection, settings: Settings, t0: datetime,
           t1: datetime) -> dict[str, Any]:
    """The shared pools' day (``ckptwatch.report.bursts.day_facts``), against the bandwidth
    the settings give (``[pool] write_bandwidth_gbs``; else estimated from the lake)."""
    settings.pool.apply(con)
    return day_facts(con, t0, t1)


def build_report(con: duckdb.DuckDBPyConnection, lake_root: Path | str, *, day: date | None,
                 findings: StallFindings, settings: Settings,
                 alert_run: AlertRun | None = None, alerts_error: str | None = None,
                 ingest: IngestReport | None = None, plans: bool = True,
                 now: datetime | None = None,
                 memory_limit: str | None = None) -> dict[str, Any]:
    """Every fact of the daily report as a JSON-ready dict (see ``docs/report.md``).

    ``findings``: the stalls (all days; the report keeps the day's). ``alert_run``: this run's
    alert evaluation (None with ``alerts_error`` when it could not run). ``ingest``: this run's
    ingest, for the data section. ``plans``: run the planning model per job (~0.1 s a job)
    over one connection to every day of the lake (``memory_limit``: its DuckDB cap), as
    ``ckptwatch plan --from-lake`` measures.
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
    verdicts = _plan_verdicts(lake_root, sorted({j["job_id"] for j in jobs}), memory_limit) \
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
            "checkpoints_timed_out": int(frame["timed_out"].sum()),
            "stalls_by_cause": dict(Counter(s["cause"] for s in stalls).most_common()),
            "alerts": len(alert_run.alerts) if alert_run else 0,
            "alerts_firing": len(alert_run.evaluation.state.firing) if alert_run else 0,
            "jobs_critical": sum(h["level"] == "critical" for h in headroom),
            "jobs_warning": sum(h["level"] == "warning" for h in headroom),
        },
        "jobs": jobs, "tiers": _tiers(frame), "stalls": stalls,
        "headroom": headroom, "headroom_skipped": skipped,
        "alerts": _alerts(alert_run, settings, alerts_error),
        "plans": verdicts,
        "slow_hosts": _slow_hosts(con, {j["job_id"] for j in jobs}),
        "pools": _pools(con, settings, t0, t1),
        "data": _data(con, lake_root, ingest),
    }
    out: dict[str, Any] = _clean(report)
    return out

