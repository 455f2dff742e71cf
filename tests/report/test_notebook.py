"""Running the post-mortem notebook: the committed notebook, parameter injection, and the
notebook executed on the sample through ``ckptwatch postmortem``."""

from __future__ import annotations

import json
from pathlib import Path

import nbformat
import pytest
from tests.conftest import PROJECT_ROOT

from ckptwatch.cli.main import main
from ckptwatch.report import notebook

NOTEBOOK = PROJECT_ROOT / "notebooks" / "stall_postmortem.ipynb"


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
    once = notebook.inject_parameters(nb, {"lake": "/l", "job": "j", "step": 7})
    twice = notebook.inject_parameters(once, {"lake": "/l", "job": "j", "step": 8})
    idx = next(i for i, c in enumerate(twice.cells) if "parameters" in c.metadata.get("tags", []))
    injected = twice.cells[idx + 1]
    assert injected.metadata["tags"] == ["injected-parameters"]
    assert "step = 8\n" in injected.source and "job = 'j'\n" in injected.source
    assert len(twice.cells) == len(nb.cells) + 1


def test_postmortem_executes_the_notebook_and_exports_html(
        sample_lake: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out, executed = tmp_path / "pm.html", tmp_path / "pm.ipynb"
    rc = main(["postmortem", "--lake", str(sample_lake), "--job", "job-98372", "--step",
               "33117", "--out", str(out), "--save-notebook", str(executed)])
    captured = capsys.readouterr()
    assert rc == 0, captured.err
    assert f"post-mortem of job-98372 step 33117: {out} (3 figures" in captured.out
    assert "[3/12] Open the stall" in captured.err  # progress, one line per cell
    nb = nbformat.read(executed, as_version=4)
    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs]
    assert not [o for o in outputs if o.output_type == "error"]
    assert not [o for o in outputs if o.get("name") == "stderr"]
    assert notebook.count_images(nb) >= 3
    injected = next(c for c in nb.cells if "injected-parameters" in c.metadata.get("tags", []))
    assert "step = 33117" in injected.source
    page = out.read_text()
    assert page.count("data:image/png;base64,") >= 3
    assert "<script src=" not in page  # no CDN: opens offline
    assert "targets (pool0-tgt03): 0.95 of the window" in page
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
