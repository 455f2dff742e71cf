"""Chronic slow hosts in the daily report (JSON and HTML) and in the post-mortem."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from tests.sql.test_slow_hosts import seeded_lake, slow_host_rows

from ckptwatch.analysis.findings import find_stalls
from ckptwatch.lake.query import connect
from ckptwatch.report.facts import build_report
from ckptwatch.report.html import _slow_hosts_html, render_html
from ckptwatch.report.postmortem import chronic_slow_hosts, next_steps, open_stall
from ckptwatch.settings import Settings


@pytest.fixture(scope="module")
def lake(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Job j1: host02 +5 % and host06 +7 % in every checkpoint; checkpoint 6 a stall, its
    slow ranks on host06. Job j2: homogeneous."""
    rows = slow_host_rows("j1", slow={"host02": 1.05, "host06": 1.07})
    for r in rows:
        if r["step"] == 6 and r["node"] == "host06":
            r["duration_s"] *= 3
            r["end_ts"] = r["start_ts"] + (r["end_ts"] - r["start_ts"]) * 3
    rows += slow_host_rows("j2", n_hosts=4, seed_=3)
    return seeded_lake(tmp_path_factory.mktemp("slow_hosts") / "lake", rows)


def test_the_daily_report_names_the_slow_hosts(lake: Path) -> None:
    findings = find_stalls(lake)
    con = connect(lake)
    try:
        report: dict[str, Any] = build_report(con, lake, day=None, findings=findings,
                                              settings=Settings(), plans=False)
    finally:
        con.close()
    hosts = report["slow_hosts"]
    assert [(h["job_id"], h["node"]) for h in hosts] == [("j1", "host06"), ("j1", "host02")]
    assert {"n_checkpoints", "n_slowest", "median_excess_pct", "p_value"} <= set(hosts[0])
    page = render_html(report)
    section = page.split("<h2>Chronic slow hosts</h2>")[1].split("<h2>")[0]
    assert section.index("host06") < section.index("host02")
    assert "host01" not in section


def test_a_report_without_slow_hosts_says_so() -> None:
    assert "No host is consistently slower" in _slow_hosts_html({"slow_hosts": []})


def test_the_postmortem_shows_the_jobs_chronic_slow_hosts(lake: Path) -> None:
    case = open_stall(lake, "j1", 6)
    try:
        hosts = chronic_slow_hosts(case)
        steps = next_steps(case)
    finally:
        case.con.close()
    assert hosts["node"].to_list() == ["host06", "host02"]
    assert hosts["slow_here"].to_list() == [True, False]
    assert hosts["n_checkpoints"].to_list() == [10, 10]
    assert f"`ckptwatch slow-hosts --lake {lake} --job j1`" in steps
