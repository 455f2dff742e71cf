"""The daily report's step of the nightly run: build the facts, render the page, write both.

- :func:`ckptwatch.report.facts.build_report` gathers the facts into one JSON-ready dict (keys:
  ``docs/report.md``);
- :func:`ckptwatch.report.html.render_html` draws the figures from that dict
  (:mod:`ckptwatch.report.plots`) and embeds them as base64 PNG, so the HTML is one file that
  opens anywhere;
- :func:`write_report` writes ``LAKE/reports/<YYYY-MM-DD>/report.{html,json}`` and copies both
  to ``LAKE/reports/latest/`` when the day has checkpoints and is not older than the day
  ``latest/`` holds (a rerun of an older or an empty day leaves ``latest/`` as it is).

:func:`daily_report` does the three in one call (the nightly flow's report task). The nightly
run keeps a JSON Lines file of every alert it sends in ``LAKE/reports/alerts.jsonl`` unless the
settings name another (:func:`nightly_settings`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, replace
from datetime import date
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ckptwatch.analysis.findings import StallFindings
from ckptwatch.lake.query import connect
from ckptwatch.lake.store import atomic_write_bytes
from ckptwatch.report.facts import REPORT_VIEWS, build_report
from ckptwatch.report.html import render_html
from ckptwatch.settings import Settings

if TYPE_CHECKING:
    import duckdb

    from ckptwatch.alerts.evaluate import AlertRun
    from ckptwatch.ingest.run import IngestReport

REPORTS_DIR = "reports"
ALERTS_FILE = "alerts.jsonl"
LATEST = "latest"


@dataclass(frozen=True)
class ReportFiles:
    """Where a report was written."""

    html: Path
    json: Path
    latest_html: Path
    latest_json: Path
    #: Why ``latest/`` was left as it was (``None``: this report is in it now).
    latest_kept: str | None = None


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


def write_report(lake_root: Path | str, report: Mapping[str, Any], page: str) -> ReportFiles:
    """Write ``LAKE/reports/<date>/report.{html,json}`` and copies in ``LAKE/reports/latest``
    (copies, not a symlink: the lake may be synced to storage without links). Atomic.

    ``latest/`` is the newest day with checkpoints: a report of a day without any, or of a
    day older than the one ``latest/`` holds, is written to its own folder only
    (:attr:`ReportFiles.latest_kept` says why)."""
    base = reports_dir(lake_root)
    data = (json.dumps(report, indent=1, sort_keys=False) + "\n").encode()
    text = page.encode()
    day_dir, latest = base / str(report["date"]), base / LATEST
    kept = latest_kept(report, latest)
    for folder in (day_dir,) if kept else (day_dir, latest):
        atomic_write_bytes(folder / "report.json", data)
        atomic_write_bytes(folder / "report.html", text)
    return ReportFiles(day_dir / "report.html", day_dir / "report.json",
                       latest / "report.html", latest / "report.json", kept)


def latest_kept(report: Mapping[str, Any], latest: Path) -> str | None:
    """Why ``report`` must not replace the one in ``latest`` (``None``: it may): its day has no
    checkpoints, or ``latest`` holds a newer day. An unreadable ``latest`` is replaced."""
    day = str(report["date"])
    if not report.get("summary", {}).get("checkpoints"):
        return f"{day} has no checkpoints"
    try:
        held = str(json.loads((latest / "report.json").read_text())["date"])
    except (OSError, ValueError, TypeError, KeyError):
        return None
    return f"it holds {held}, newer than {day}" if held > day else None


def daily_report(lake_root: Path | str, *, day: date | None, findings: StallFindings,
                 settings: Settings, alert_run: AlertRun | None = None,
                 alerts_error: str | None = None, ingest: IngestReport | None = None,
                 plans: bool = True, days: tuple[date, date] | None = None,
                 memory_limit: str | None = None,
                 con: duckdb.DuckDBPyConnection | None = None,
                 ) -> tuple[dict[str, Any], ReportFiles]:
    """Build, render and write the day's report; returns its facts and where it went.
    ``days``, ``memory_limit``: as for :func:`ckptwatch.lake.query.connect`. ``con``: an
    open connection of the lake that builds ``REPORT_VIEWS`` (the nightly run's, over its
    days), read instead of a new one and left open (``memory_limit`` still caps the plans'
    connection to every day)."""
    def build(db: duckdb.DuckDBPyConnection) -> dict[str, Any]:
        return build_report(db, lake_root, day=day, findings=findings, settings=settings,
                            alert_run=alert_run, alerts_error=alerts_error, ingest=ingest,
                            plans=plans, memory_limit=memory_limit)

    if con is not None:
        report = build(con)
    else:
        own = connect(lake_root, days=days, memory_limit=memory_limit, views=REPORT_VIEWS)
        try:
            report = build(own)
        finally:
            own.close()
    return report, write_report(lake_root, report, render_html(report))
