"""`ckptwatch latency`, `stalls` and `explain` on timed-out checkpoints: whether and why
(timeout_reason), from literal rows. Job j (2 ranks, a 60 s timeout) checkpoints every 100 s
in 10 s; step 5's rank 1 reports "Killed" after 12 s, step 6's barrier reaches 60 s."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from tests.sql.test_marts import write
from tests.sql_seed import seed

from ckptwatch.analysis.timeouts import timeout_mark, why_timed_out
from ckptwatch.cli.main import main
from ckptwatch.lake.store import Lake


@pytest.fixture(scope="module")
def lake(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("timeouts")
    Lake(root).init()
    rows = [write("j", s, r, 10.0, start=100.0 * s) for s in range(5) for r in range(2)]
    rows += [write("j", 5, 0, 10.0, start=500), write("j", 5, 1, 12.0, start=500,
                                                       status="Killed"),
             write("j", 6, 0, 10.0, start=600), write("j", 6, 1, 60.0, start=600)]
    seed(root, "checkpoint_writes", rows)
    seed(root, "jobs", [{"job_id": "j", "n_ranks": 2, "checkpoint_timeout_s": 60.0}])
    return root


def test_latency_json_and_table_say_which_timed_out_and_why(
        lake: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["latency", "--lake", str(lake), "--by", "checkpoint", "--format", "json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [(r["step"], r["timeout_reason"], r["n_timed_out"]) for r in rows
            if r["timed_out"]] == [(5, "status", 1), (6, "barrier", 0)]
    assert main(["latency", "--lake", str(lake), "--by", "job"]) == 0
    out = capsys.readouterr().out
    header, _rule, row = out.splitlines()[:3]
    cells = dict(zip([c.strip() for c in header.split("|")], [c.strip() for c in row.split("|")],
                     strict=True))
    assert (cells["n_checkpoints"], cells["n_timed_out"]) == ("7", "2")


def test_stalls_and_explain_say_why(lake: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["stalls", "--lake", str(lake), "--format", "json"]) == 0
    stalls = {s["step"]: s for s in json.loads(capsys.readouterr().out)}
    assert (stalls[5]["timed_out"], stalls[5]["timeout_reason"], stalls[5]["n_timed_out"],
            stalls[5]["why_timed_out"]) == (True, "status", 1,
                                            "timed out: 1 of 2 ranks reports timeout")
    assert stalls[6]["why_timed_out"] == "timed out: the barrier reached the job's timeout"
    assert main(["stalls", "--lake", str(lake)]) == 0
    out = capsys.readouterr().out
    assert "| timed out (status) " in next(ln for ln in out.splitlines() if "| 5 " in ln)
    assert "\n  j step 5 timed out: 1 of 2 ranks reports timeout\n" in out
    assert main(["explain", "--lake", str(lake), "--job", "j", "--step", "6"]) == 0
    assert "\n  timed out: the barrier reached the job's timeout\n" in capsys.readouterr().out


def test_the_words_for_each_reason() -> None:
    assert why_timed_out(reason=None, n_timed_out=3, n_ranks=4) == ""
    assert why_timed_out(reason="status", n_timed_out=3, n_ranks=4) == (
        "timed out: 3 of 4 ranks report timeout")
    assert why_timed_out(reason="unfinished", timeout_s=70.0) == (
        "timed out: ranks still open at the job's 70 s timeout")
    assert why_timed_out(reason="barrier", timeout_s=600.0) == (
        "timed out: the barrier reached the job's 600 s timeout")
    assert (timeout_mark(True, "barrier"), timeout_mark(False, None)) == (
        "timed out (barrier)", "")


def test_the_nightly_summary_counts_the_timed_out_stalls() -> None:
    from ckptwatch.cli.nightly import render_result

    result = {"ingested": 27, "skipped": 0, "failed": 0, "quarantined": 0, "stalls": 8,
              "stalls_by_cause": {"metadata": 3, "gc": 2, "fabric_pause": 2, "unknown": 1},
              "stalls_timed_out": 4, "alerts_summary": "3 sent to stdout", "alerts_file": None,
              "alerts_dry_run": False, "report": "r.html", "report_json": "r.json",
              "latest": "latest/report.html", "latest_kept": None}
    text = render_result(result, Path("raw"), Path("lake"))
    assert "  stalls: 8 (metadata 3, gc 2, fabric_pause 2, unknown 1); 4 timed out\n" in text
    assert "timed out" not in render_result({**result, "stalls_timed_out": 0}, Path("raw"),
                                            Path("lake"))
