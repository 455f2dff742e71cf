"""The post-mortem: its data functions, its figures, and the notebook executed on the sample."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import duckdb
import nbformat
import polars as pl
import pytest
from tests.conftest import PROJECT_ROOT

from ckptwatch.cli.main import main
from ckptwatch.errors import CkptwatchError
from ckptwatch.ingest.run import ingest
from ckptwatch.lake.query import connect
from ckptwatch.report import plots as report_plots
from ckptwatch.report import postmortem

SAMPLE = PROJECT_ROOT / "data" / "sample"
NOTEBOOK = PROJECT_ROOT / "notebooks" / "stall_postmortem.ipynb"


@pytest.fixture(scope="module")
def sample_lake(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """data/sample ingested into a fresh lake; rules-only attribution (no trained model)."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("CKPTWATCH_MODEL", "/nonexistent/attribution.joblib")
        lake = tmp_path_factory.mktemp("postmortem") / "lake"
        ingest(SAMPLE, lake)
        yield lake


@pytest.fixture(scope="module")
def lake_con(sample_lake: Path) -> Iterator[duckdb.DuckDBPyConnection]:
    """One connection with the views built, shared by this module's stalls."""
    con = connect(sample_lake)
    yield con
    con.close()


@pytest.fixture(scope="module")
def gc_case(sample_lake: Path, lake_con: duckdb.DuckDBPyConnection) -> postmortem.StallCase:
    """The sample's gc stall of job-98372: 4 of 16 ranks slow, all writing to pool0-tgt03."""
    return postmortem.open_stall(sample_lake, "job-98372", 33117, con=lake_con)


def test_committed_notebook_has_no_outputs_and_a_parameters_cell() -> None:
    nb = nbformat.read(NOTEBOOK, as_version=4)
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert all(c.outputs == [] and c.execution_count is None for c in code)
    params = [c for c in code if "parameters" in c.metadata.get("tags", [])]
    assert len(params) == 1
    assert all(f"{name} = " in params[0].source for name in ("lake", "job", "step"))
    assert not any("def " in c.source or "class " in c.source for c in code)  # package logic


def test_inject_parameters_after_the_tagged_cell_and_replaces_an_earlier_injection() -> None:
    nb = nbformat.read(NOTEBOOK, as_version=4)
    once = postmortem.inject_parameters(nb, {"lake": "/l", "job": "j", "step": 7})
    twice = postmortem.inject_parameters(once, {"lake": "/l", "job": "j", "step": 8})
    idx = next(i for i, c in enumerate(twice.cells) if "parameters" in c.metadata.get("tags", []))
    injected = twice.cells[idx + 1]
    assert injected.metadata["tags"] == ["injected-parameters"]
    assert "step = 8\n" in injected.source and "job = 'j'\n" in injected.source
    assert len(twice.cells) == len(nb.cells) + 1


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
    html = postmortem.show(ev)._repr_html_()
    assert "<th" in html and "targets (pool0-tgt03): 0.67 of the window" in html


def test_figures_render(gc_case: postmortem.StallCase) -> None:
    d = postmortem.rank_durations(gc_case)
    figs = [report_plots.timeline_figure(postmortem.rank_timeline(gc_case), gc_case.title,
                                         d.normal_rank_s),
            report_plots.durations_figure(d),
            report_plots.signals_figure(postmortem.signal_window(gc_case), gc_case.start_ts,
                                        gc_case.end_ts, gc_case.title)]
    for fig in figs:
        assert report_plots.png_bytes(fig).startswith(b"\x89PNG")
    assert len(figs[2].axes) == len(postmortem.SIGNAL_PANELS)


def test_postmortem_of_a_step_that_is_no_stall_is_one_line(
        sample_lake: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc = main(["postmortem", "--lake", str(sample_lake), "--job", "job-98372", "--step", "1",
               "--out", "x.html"])
    err = capsys.readouterr().err
    assert rc == 2
    assert err.startswith("ckptwatch postmortem: error: job job-98372 step 1 is not a stall")


def test_postmortem_executes_the_notebook_and_exports_html(
        sample_lake: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out, executed = tmp_path / "pm.html", tmp_path / "pm.ipynb"
    rc = main(["postmortem", "--lake", str(sample_lake), "--job", "job-98372", "--step",
               "33117", "--out", str(out), "--save-notebook", str(executed)])
    captured = capsys.readouterr()
    assert rc == 0, captured.err
    assert f"post-mortem of job-98372 step 33117: {out} (3 figures" in captured.out
    assert "[3/11] Open the stall" in captured.err  # progress, one line per cell
    nb = nbformat.read(executed, as_version=4)
    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs]
    assert not [o for o in outputs if o.output_type == "error"]
    assert not [o for o in outputs if o.get("name") == "stderr"]
    assert postmortem.count_images(nb) >= 3
    injected = next(c for c in nb.cells if "injected-parameters" in c.metadata.get("tags", []))
    assert "step = 33117" in injected.source
    page = out.read_text()
    assert page.count("data:image/png;base64,") >= 3
    assert "<script src=" not in page  # no CDN: opens offline
    assert "targets (pool0-tgt03): 0.67 of the window" in page
    assert 'alt="Rank timeline by phase (the main figure)"' in page
    assert json.loads(json.dumps(nb))  # a valid, serialisable notebook


def test_a_failing_cell_is_one_line_naming_the_cell(sample_lake: Path, tmp_path: Path,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    nb = nbformat.read(NOTEBOOK, as_version=4)
    params = next(c for c in nb.cells if "parameters" in c.metadata.get("tags", []))
    nb.cells = [params, nbformat.v4.new_code_cell("# Divide\n1 / 0")]
    bad = tmp_path / "bad.ipynb"
    nbformat.write(nb, bad)
    rc = main(["postmortem", "--lake", str(sample_lake), "--job", "job-98372", "--step",
               "33117", "--notebook", str(bad), "--out", str(tmp_path / "bad.html")])
    err = capsys.readouterr().err.splitlines()[-1]
    assert rc == 2
    assert err == ("ckptwatch postmortem: error: the notebook failed in cell 3/3 (Divide) for "
                   "job-98372 step 33117: ZeroDivisionError: division by zero "
                   "(--save-notebook FILE.ipynb keeps the traceback)")
    assert not (tmp_path / "bad.html").exists()
