"""The daily report's HTML page on the sample: every job, stall, cause and figure."""

from __future__ import annotations

import html
from pathlib import Path
from typing import Any

from ckptwatch.analysis.attribution import LABELS, NO_TELEMETRY
from ckptwatch.analysis.findings import StallFindings
from ckptwatch.lake.query import connect, run_sql
from ckptwatch.report.daily import ReportFiles


def _sample_jobs(lake: Path) -> list[str]:
    con = connect(lake)
    jobs = run_sql(con, "select distinct job_id from checkpoint_latency order by 1")
    con.close()
    return list(jobs["job_id"])


def test_report_html_shows_every_job_stall_cause_and_figure(
        written: tuple[dict[str, Any], ReportFiles], findings: StallFindings,
        sample_lake: Path) -> None:
    facts, files = written
    page = files.html.read_text()
    jobs = _sample_jobs(sample_lake)
    assert len(jobs) == 4 and all(j in page for j in jobs)
    # one figure per job, and one per shared pool (its demand against capacity)
    assert page.count("data:image/png;base64,") == len(jobs) + len(facts["pools"]["days"])
    assert "Shared pools: demand, capacity and bursts" in page
    assert len(findings.stalls) == 8  # the sample's labelled stalls
    stalls = [s.to_dict() for s in findings.stalls]
    for s in stalls:
        assert f"--job {s['job_id']} --step {s['step']}" in page  # its row and post-mortem
        assert f">{s['cause']} {s['causes'][0]['score']:.2f}</span>" in page  # cause badge
        assert html.escape(s["causes"][0]["evidence"][0]) in page
    # every cause, unknown too; the sample has every telemetry feed (no no_telemetry) and no
    # burst of its pool jobs (no saturation)
    assert {s["cause"] for s in stalls} == set(LABELS) - {NO_TELEMETRY, "saturation"}
    assert "<script" not in page and 'href="http' not in page  # self-contained, offline
    assert "Timeout headroom and alerts" in page and "CheckpointTailNearTimeout" in page
    assert "best strategy" in page and "local+replica" in page
    assert facts["summary"]["stalls"] == 8
