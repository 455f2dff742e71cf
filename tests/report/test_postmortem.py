"""The post-mortem's data functions on the sample's gc stall, and a wrong step on the CLI."""

from __future__ import annotations

from pathlib import Path

import duckdb
import polars as pl
import pytest

from ckptwatch.cli.main import main
from ckptwatch.errors import CkptwatchError
from ckptwatch.report import postmortem


def test_open_stall_picks_the_worst_and_names_the_stalls_of_a_wrong_step(
        sample_lake: Path, lake_con: duckdb.DuckDBPyConnection) -> None:
    worst = postmortem.open_stall(sample_lake, "job-98372", con=lake_con)
    assert worst.report["barrier_s"] == pytest.approx(70.0, abs=0.01)
    with pytest.raises(CkptwatchError, match=r"job job-98372 step 1 is not a stall \(stalls of "
                       r"this job: 33117, 33516, 37905\)"):
        postmortem.open_stall(sample_lake, "job-98372", 1, con=lake_con)
    with pytest.raises(CkptwatchError, match=r"job 'nope' has no checkpoints .* \(jobs there: "
                       r"job-45972"):
        postmortem.open_stall(sample_lake, "nope", con=lake_con)


def test_rank_timeline_lays_the_phases_end_to_end(gc_case: postmortem.StallCase) -> None:
    tl = postmortem.rank_timeline(gc_case)
    assert set(tl["phase"]) <= {*postmortem.PHASES, "other"}
    per_rank = tl.group_by("rank").agg(pl.col("phase_s").sum(), pl.col("duration_s").first(),
                                       pl.col("is_slow").first(), pl.col("target").first())
    assert per_rank.height == 16
    assert ((per_rank["phase_s"] - per_rank["duration_s"]).abs() < 0.01).all()
    slow = per_rank.filter(pl.col("is_slow"))
    assert slow.height == 4 and set(slow["target"]) == {"pool0-tgt03"}
    assert tl["phase_start_s"].min() == 0.0


def test_rank_durations_against_the_normal(gc_case: postmortem.StallCase) -> None:
    d = postmortem.rank_durations(gc_case)
    assert d.this.height == 16 and int(d.this["is_slow"].sum()) == 4
    assert d.n_normal_checkpoints == 14 and d.normal.height == 14 * 16
    assert d.this.filter(pl.col("is_slow"))["duration_s"].min() >= d.slow_threshold_s
    summary = postmortem.duration_summary(d)
    assert summary["ranks of"].to_list() == ["this checkpoint", "normal checkpoints"]
    assert summary["max_s"][0] > 3 * summary["p50_s"][1]


def test_signal_window_highlights_the_slow_target(gc_case: postmortem.StallCase) -> None:
    sig = postmortem.signal_window(gc_case)
    assert set(sig["panel"]) == {p for p, _, _ in postmortem.SIGNAL_PANELS}
    roles = dict(sig.select("host", "role").unique().iter_rows())
    assert roles["pool0-tgt03"] == "slow" and roles["node001"] == "slow"
    assert roles["node003"] == "same leaf" and roles["node005"] == "other"
    gc = postmortem.signal_summary(sig, gc_case).filter(pl.col("panel") == "gc_active")
    assert gc.filter(pl.col("role") == "slow")["during_peak"][0] == 1.0
    assert gc_case.start_ts > sig["ts"].min() and gc_case.end_ts < sig["ts"].max()


def test_evidence_table_and_headline(gc_case: postmortem.StallCase) -> None:
    ev = postmortem.evidence_table(gc_case)
    assert ev["cause"][0] == "gc" and ev["rank"][0] == 1
    assert any("pool0-tgt03" in line for line in ev["evidence"])
    assert "top cause: **gc**" in postmortem.headline(gc_case)


def test_postmortem_of_a_step_that_is_no_stall_is_one_line(
        sample_lake: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc = main(["postmortem", "--lake", str(sample_lake), "--job", "job-98372", "--step", "1",
               "--out", "x.html"])
    err = capsys.readouterr().err
    assert rc == 2
    assert err.startswith("ckptwatch postmortem: error: job job-98372 step 1 is not a stall")
