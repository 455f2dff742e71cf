"""The sample's timed-out checkpoints in the daily report, the post-mortem and the plan:
data/sample has 58 rank records with status timeout in 4 checkpoints; the report counts them in
a summary card, marks their rows and says why (report.json: timed_out, timeout_reason,
n_timed_out); `plan --from-lake` takes the job's timeout and its measured timeouts."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import duckdb
import pytest

from ckptwatch.cli.main import main
from ckptwatch.planning.model import SECONDS_PER_YEAR
from ckptwatch.report.daily import ReportFiles
from ckptwatch.report.postmortem import headline, open_stall

TIMED_OUT = {("job-45972", 70512): 16, ("job-56099", 33500): 12, ("job-98372", 33516): 16,
             ("job-98372", 37905): 14}


def test_the_report_counts_marks_and_explains_the_timed_out_checkpoints(
        written: tuple[dict[str, Any], ReportFiles]) -> None:
    facts, files = written
    assert facts["summary"]["checkpoints_timed_out"] == 4
    stalls = {(s["job_id"], s["step"]): s for s in facts["stalls"] if s["timed_out"]}
    assert {k: s["n_timed_out"] for k, s in stalls.items()} == TIMED_OUT
    assert {s["timeout_reason"] for s in stalls.values()} == {"status"}
    assert stalls[("job-98372", 37905)]["why_timed_out"] == (
        "timed out: 14 of 16 ranks report timeout")
    rows = [c for job in facts["jobs"] for c in job["checkpoints"] if c["timed_out"]]
    assert sorted((c["step"], c["timeout_reason"], c["n_timed_out"]) for c in rows) == sorted(
        (step, "status", n) for (_job, step), n in TIMED_OUT.items())
    assert sum(job["n_timed_out"] for job in facts["jobs"]) == 4
    page = files.html.read_text()
    assert "<b>4</b><span>timed out</span>" in page  # the summary card
    assert page.count('">timed out</span>') == 4  # the mark on each row
    assert "<li>timed out: 12 of 16 ranks report timeout</li>" in page


def test_the_post_mortem_says_the_checkpoint_timed_out(
        sample_lake: Path, lake_con: duckdb.DuckDBPyConnection) -> None:
    case = open_stall(sample_lake, "job-56099", 33500, con=lake_con)
    assert "\n- **timed out: 12 of 16 ranks report timeout**\n" in headline(case)
    case = open_stall(sample_lake, "job-98372", 33117, con=lake_con)  # a stall, not timed out
    assert "timed out" not in headline(case)


def test_plan_from_the_sample_uses_the_jobs_timeout_and_its_timeouts(
        sample_lake: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # job-98372: a 70 s timeout, an 830 s interval, 2 of its 17 checkpoints timed out
    assert main(["plan", "--from-lake", str(sample_lake), "--job", "job-98372",
                 "--format", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["inputs"]["checkpoint_timeout_s"] == 70.0
    t = data["measured"]["timeouts"]
    assert (t["timeout_source"], t["interval_s"], t["interval_source"]) == (
        "jobs.checkpoint_timeout_s", 830.0, "jobs.checkpoint_interval_s")
    per_year = 2 / data["measured"]["observed_s"] * SECONDS_PER_YEAR
    assert t["per_year"] == pytest.approx(per_year)
    pool = next(s for s in data["strategies"] if s["name"] == "pool")
    assert pool["timeout_probability"] == pytest.approx(per_year * 830 / SECONDS_PER_YEAR)
    assert pool["timeouts_per_year"] > 0
