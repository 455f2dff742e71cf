"""The daily report and the post-mortem of a checkpoint whose ranks never finished: the words
("2 of 8 ranks never finished step 8; last seen on n1, leaf01, target t1"), the lower-bound
barrier, and the hung ranks in the post-mortem's rank timeline."""

from __future__ import annotations

from datetime import date
from pathlib import Path

import polars as pl
import pytest
from tests.stall_cases import STALL_STEP, Case, build

from ckptwatch.analysis.findings import find_stalls
from ckptwatch.lake.query import connect
from ckptwatch.report import postmortem
from ckptwatch.report.facts import build_report
from ckptwatch.report.html import render_html
from ckptwatch.settings import Settings

WORDS = "2 of 8 ranks never finished step 8; last seen on n1, leaf01, target t1"


@pytest.fixture(scope="module")
def hung_lake(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The stall cases' job with ranks 0 and 2 (node n1) hanging in the fabric pause."""
    return build(tmp_path_factory.mktemp("hung") / "lake",
                 Case(stall="fabric_pause", unfinished=(0, 2), markers=True))


def test_the_daily_report_says_which_ranks_never_finished(hung_lake: Path) -> None:
    findings = find_stalls(hung_lake)
    con = connect(hung_lake)
    try:
        facts = build_report(con, hung_lake, day=date(2026, 11, 28), findings=findings,
                             settings=Settings(), alerts_error="not evaluated", plans=False)
    finally:
        con.close()
    [stall] = facts["stalls"]
    assert (stall["step"], stall["n_unfinished"], stall["timed_out"],
            stall["barrier_is_lower_bound"], stall["barrier_s"]) == (STALL_STEP, 2, True, True,
                                                                     120.0)
    assert stall["never_finished"].startswith(WORDS)
    [job] = facts["jobs"]
    assert job["n_timed_out"] == 1 and job["n_stalls"] == 1
    hung = [c for c in job["checkpoints"] if c["n_unfinished"]]
    assert [(c["step"], c["timed_out"], c["is_stall"]) for c in hung] == [(STALL_STEP, True,
                                                                           True)]
    page = render_html(facts)
    assert f"<li>{WORDS}" in page
    assert "≥ 120.0 s" in page and "1 stall(s), 1 timed out" in page


def test_the_post_mortem_shows_the_hung_ranks(hung_lake: Path) -> None:
    case = postmortem.open_stall(hung_lake, "j", STALL_STEP)
    try:
        text = postmortem.headline(case)
        assert "≥ 120.0 s barrier" in text and f"- **{WORDS}" in text
        assert "**4 of 8 ranks slow**" in text
        tl = postmortem.rank_timeline(case)
        hung = tl.filter(pl.col("status") == "unfinished")
        # No phases: one 'total' segment each, from its start to the timeout (120 s).
        assert sorted(hung["rank"].to_list()) == [0, 2]
        assert set(hung["phase"]) == {"total"} and hung["phase_s"].to_list() == [120.0, 120.0]
        assert hung["is_slow"].all()
        slow = postmortem.slow_ranks(case)
        assert slow.filter(pl.col("status") == "unfinished")["rank"].to_list() == [0, 2]
    finally:
        case.con.close()
