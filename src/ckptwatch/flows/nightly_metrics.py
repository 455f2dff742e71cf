"""The nightly run's findings as Prometheus metrics, for node_exporter's textfile collector.

:func:`render` turns the daily report's facts (:func:`ckptwatch.report.facts.build_report`, as
written to ``report.json``) and the run's verdict into the text exposition format 0.0.4 (the
watcher's escapes and number format, :mod:`ckptwatch.live.metrics`); :func:`write_metrics`
writes it atomically (:func:`ckptwatch.live.metrics.write_textfile`). Nothing is computed
here: each value is a fact of the report (the day's stalls by cause and tier, its timed-out
checkpoints per job, the headroom the alerts computed, the tiers' barrier p50 / p99) or of the
run (when it ran, its exit status, the files it could not ingest).

The run's status is written by every run, a failed one too; the findings only by a run that got
to its report. ``ckptwatch_nightly_last_success_timestamp_seconds`` moves only on exit 0: any
other run carries the previous file's value over (absent until a run succeeds), so the
"no success for 26 h" rule (``deploy/prometheus/ckptwatch-nightly-rules.yml``) sees a run
that keeps failing.

The names are a contract (the rules, the Grafana dashboard ``ckptwatch-nightly`` and
``deploy/README.md`` read them): :data:`METRICS`. Cardinality is bounded by the report day:
the job series are the (job, tier) pairs with checkpoints that day, the stall series at most
every cause label × the day's tiers.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from datetime import UTC, date, datetime, time
from pathlib import Path
from typing import Any

from ckptwatch.analysis.attribution import LABELS
from ckptwatch.errors import CkptwatchError, MetricsFileError
from ckptwatch.live.metrics import escape_help, escape_label_value, format_value, write_textfile

STALLS = "ckptwatch_nightly_stalls"
CHECKPOINTS = "ckptwatch_nightly_checkpoints"
TIMED_OUT = "ckptwatch_nightly_timed_out_checkpoints"
HEADROOM = "ckptwatch_nightly_headroom_seconds"
TIMEOUT = "ckptwatch_nightly_timeout_seconds"
BARRIER_P50 = "ckptwatch_nightly_barrier_p50_seconds"
BARRIER_P99 = "ckptwatch_nightly_barrier_p99_seconds"
REPORT_DAY = "ckptwatch_nightly_report_day_timestamp_seconds"
LAST_RUN = "ckptwatch_nightly_last_run_timestamp_seconds"
LAST_SUCCESS = "ckptwatch_nightly_last_success_timestamp_seconds"
EXIT_CODE = "ckptwatch_nightly_last_run_exit_code"
FILES_FAILED = "ckptwatch_nightly_files_failed"

#: Every metric family: name -> (type, labels, help). deploy/README.md's table lists the same.
METRICS: dict[str, tuple[str, tuple[str, ...], str]] = {
    STALLS: ("gauge", ("cause", "tier"),
             "Stalls of the report day by top cause and tier; 0 for a cause without any."),
    CHECKPOINTS: ("gauge", ("tier",), "Checkpoints of the report day per tier."),
    TIMED_OUT: ("gauge", ("job_id", "tier"),
                "Checkpoints of the report day that timed out, per job of the day."),
    HEADROOM: ("gauge", ("job_id", "tier"),
               "Timeout minus the tail of the job's trailing window, as the alerts computed "
               "it; no series for a job not assessed (stale, no timeout)."),
    TIMEOUT: ("gauge", ("job_id", "tier"),
              "The job's checkpoint_timeout_s the headroom is measured against."),
    BARRIER_P50: ("gauge", ("tier",),
                  "Median barrier time (slowest rank) over the report day's checkpoints."),
    BARRIER_P99: ("gauge", ("tier",),
                  "99th percentile barrier time over the report day's checkpoints."),
    REPORT_DAY: ("gauge", (), "Unix time of the start (00:00 UTC) of the day the findings cover."),
    LAST_RUN: ("gauge", (), "Unix time the last nightly run ended, whatever its outcome."),
    LAST_SUCCESS: ("gauge", (),
                   "Unix time the last nightly run that exited 0 ended; absent before one."),
    EXIT_CODE: ("gauge", (),
                "Exit status of the last nightly run: 0 ok; 1 a file not ingested, no raw file "
                "or alerts undelivered (report written); 2 the run failed."),
    FILES_FAILED: ("gauge", (), "Raw files the last nightly run could not ingest."),
}

#: Findings and status: the families a run that got to its report writes, in this order.
FINDINGS = (STALLS, CHECKPOINTS, TIMED_OUT, HEADROOM, TIMEOUT, BARRIER_P50, BARRIER_P99,
            REPORT_DAY)
STATUS = (LAST_RUN, LAST_SUCCESS, EXIT_CODE, FILES_FAILED)

_SUCCESS_LINE = re.compile(rf"^{LAST_SUCCESS}\s+(\S+)\s*$", re.MULTILINE)

#: One sample: its labels and value (None: no sample).
Sample = tuple[dict[str, str], float | None]


def _labels(values: Mapping[str, str]) -> str:
    if not values:
        return ""
    inner = ",".join(f'{k}="{escape_label_value(str(v))}"' for k, v in values.items())
    return f"{{{inner}}}"


def _day_start(day: str) -> float:
    """00:00 UTC of ``day`` (YYYY-MM-DD) in Unix seconds."""
    return datetime.combine(date.fromisoformat(day), time(0), tzinfo=UTC).timestamp()


def findings(report: Mapping[str, Any]) -> dict[str, list[Sample]]:
    """The findings' samples of each family from the report's facts (``report.json``); a
    fact that is null (a quantile of no value) is written as no sample."""
    jobs = {(str(j["job_id"]), str(j["tier"])) for j in report["jobs"]}
    tiers = sorted({str(t["tier"]) for t in report["tiers"]}
                   | {str(s["tier"]) for s in report["stalls"]})
    counts: dict[tuple[str, str], int] = {}
    for s in report["stalls"]:
        key = (str(s["cause"]), str(s["tier"]))
        counts[key] = counts.get(key, 0) + 1
    causes = sorted(set(LABELS) | {c for c, _ in counts})
    out: dict[str, list[Sample]] = {name: [] for name in FINDINGS}
    out[STALLS] = [({"cause": c, "tier": t}, counts.get((c, t), 0))
                   for c in causes for t in tiers]
    for t in report["tiers"]:
        tier = {"tier": str(t["tier"])}
        out[CHECKPOINTS].append((tier, t["n_checkpoints"]))
        out[BARRIER_P50].append((tier, t["barrier_p50_s"]))
        out[BARRIER_P99].append((tier, t["barrier_p99_s"]))
    for j in report["jobs"]:
        out[TIMED_OUT].append(({"job_id": str(j["job_id"]), "tier": str(j["tier"])},
                               j["n_timed_out"]))
    for h in report["headroom"]:
        key = (str(h["job_id"]), str(h["tier"]))
        if key in jobs:  # the jobs of the day only
            labels = {"job_id": key[0], "tier": key[1]}
            out[HEADROOM].append((labels, h["headroom_s"]))
            out[TIMEOUT].append((labels, h["timeout_s"]))
    out[REPORT_DAY] = [({}, _day_start(str(report["date"])))]
    for name in (CHECKPOINTS, BARRIER_P50, BARRIER_P99):
        out[name].sort(key=lambda sample: sample[0]["tier"])
    for name in (TIMED_OUT, HEADROOM, TIMEOUT):
        out[name].sort(key=lambda sample: (sample[0]["job_id"], sample[0]["tier"]))
    return out


def render(report: Mapping[str, Any] | None, *, exit_code: int, files_failed: int | None,
           now: float, last_success: float | None) -> str:
    """The exposition text of one run: its findings (``report``: the report's facts; None for
    a run that stopped before its report) and its status. ``last_success``: the previous
    success's Unix time, written as it is unless this run exited 0 (then ``now``)."""
    samples: dict[str, list[Sample]] = findings(report) if report is not None else {}
    success = now if exit_code == 0 else last_success
    samples[LAST_RUN] = [({}, now)]
    samples[LAST_SUCCESS] = [] if success is None else [({}, success)]
    samples[EXIT_CODE] = [({}, exit_code)]
    samples[FILES_FAILED] = [] if files_failed is None else [({}, files_failed)]
    lines: list[str] = []
    for name in (*FINDINGS, *STATUS):
        if name not in samples:
            continue
        kind, _labels_of, text = METRICS[name]
        lines.append(f"# HELP {name} {escape_help(text)}")
        lines.append(f"# TYPE {name} {kind}")
        lines.extend(f"{name}{_labels(labels)} {format_value(value)}"
                     for labels, value in samples[name] if value is not None)
    return "\n".join(lines) + "\n"


def previous_success(path: Path) -> float | None:
    """The last success's Unix time in the metrics file at ``path`` (None: no file, none
    written yet, or a file that does not say)."""
    try:
        text = Path(path).read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    match = _SUCCESS_LINE.search(text)
    if match is None:
        return None
    try:
        return float(match.group(1))
    except ValueError:
        return None


def write_metrics(path: Path, report: Mapping[str, Any] | None, *, exit_code: int,
                  files_failed: int | None, now: float) -> None:
    """Write the run's metrics to ``path`` atomically, the last success carried over from the
    file there unless this run exited 0. Raises :class:`~ckptwatch.errors.MetricsFileError`
    naming the file when it cannot be written."""
    path = Path(path)
    text = render(report, exit_code=exit_code, files_failed=files_failed, now=now,
                  last_success=previous_success(path))
    try:
        write_textfile(path, text)
    except CkptwatchError as exc:
        cause = exc.__cause__
        reason = (getattr(cause, "strerror", None) or str(cause)) if cause else str(exc)
        raise MetricsFileError(
            f"cannot write the nightly's metrics file {path}: {reason} — make its directory "
            "(node_exporter's textfile directory) writable by this user, or change "
            "--metrics-file / [nightly] metrics_file") from exc
