"""Names never shape paths or terminals: the report's commands are shell-quoted, the
post-mortem's file name is made safe and stays in its directory, a missing --out directory
is an error, and the notebook kernel's files go to the runtime directory it is given (that it
writes nothing in the working directory: test_notebook.py, on that file's one notebook run)."""

from __future__ import annotations

import dataclasses
import html
import shlex
from pathlib import Path
from typing import Any

import pytest

from ckptwatch.analysis.findings import StallFindings
from ckptwatch.cli.main import main
from ckptwatch.report import notebook
from ckptwatch.report.daily import ReportFiles
from ckptwatch.report.facts import _stall_entry, plan_verdict
from ckptwatch.report.html import render_html

#: Shell syntax a pasted command must not run.
SHELLY = "j <x>; rm -rf y"
ESCAPE = "../../../../tmp/x/PWNED"


def test_report_commands_are_shell_quoted(findings: StallFindings, sample_lake: Path) -> None:
    stall = dataclasses.replace(findings.stalls[0], job_id=SHELLY)
    entry = _stall_entry(stall, sample_lake / "a b")
    assert shlex.split(entry["postmortem"]) == [
        "ckptwatch", "postmortem", "--lake", str(sample_lake / "a b"), "--job", SHELLY,
        "--step", str(stall.step)]
    verdict = plan_verdict(sample_lake, SHELLY)  # not in the lake: an error, and the command
    assert verdict["error"]
    assert shlex.split(verdict["command"]) == [
        "ckptwatch", "plan", "--from-lake", str(sample_lake), "--job", SHELLY]


def test_report_json_and_html_carry_quoted_commands(
        written: tuple[dict[str, Any], ReportFiles]) -> None:
    facts, _ = written
    argv = shlex.split(facts["data"]["quarantine_query"])
    assert argv[:4] == ["ckptwatch", "sql", "--lake", str(facts["lake"])]
    assert argv[4].startswith("select source_file, line, reason from quarantine")
    hostile = {**facts, "stalls": [{**s, "job_id": SHELLY, "postmortem": shlex.join(
        ["ckptwatch", "postmortem", "--job", SHELLY])} for s in facts["stalls"]]}
    page = render_html(hostile)
    quoted = html.escape("ckptwatch postmortem --job 'j <x>; rm -rf y'")
    assert f"<code>{quoted}</code>" in page
    assert "<x>" not in page  # HTML-escaped on top of the shell quoting


def test_default_output_name_stays_in_the_working_directory() -> None:
    assert notebook.default_output("job-98372", 33117) == Path("postmortem-job-98372-33117.html")
    out = notebook.default_output(ESCAPE, 7)
    assert len(out.parts) == 1 and out.name.startswith("postmortem-_.._")
    assert out.name.endswith("_tmp_x_PWNED-7b17cc5b-7.html")
    assert (Path.cwd() / out).resolve().parent == Path.cwd().resolve()


def test_postmortem_of_a_path_like_job_writes_in_the_working_directory(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    seen: dict[str, Any] = {}

    def fake_execute(lake: Path, job: str, step: int, out: Path, **_: Any) -> Any:
        seen.update(job=job, out=out)
        return notebook.NotebookRun(out, None, 0, 0.0)

    monkeypatch.setattr(notebook, "execute_notebook", fake_execute)
    monkeypatch.chdir(tmp_path)
    rc = main(["postmortem", "--lake", str(tmp_path), "--job", ESCAPE, "--step", "7"])
    assert rc == 0, capsys.readouterr().err
    assert seen["job"] == ESCAPE  # the notebook still gets the real id
    assert (tmp_path / seen["out"]).resolve().parent == tmp_path.resolve()
    assert capsys.readouterr().out == (f"post-mortem of {ESCAPE} step 7: postmortem-_.._.._.._"
                                       "tmp_x_PWNED-7b17cc5b-7.html (0 figures, 0.0 s)\n")


def test_out_in_a_missing_directory_is_one_line_and_creates_nothing(
        sample_lake: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "nonexistent-dir" / "x.html"
    rc = main(["postmortem", "--lake", str(sample_lake), "--job", "job-98372", "--out", str(out)])
    assert rc == 2
    assert capsys.readouterr().err == (
        f"ckptwatch postmortem: error: cannot write {out}: directory {out.parent} does not "
        "exist (create it first, or choose another --out)\n")
    assert not out.parent.exists()
    rc = main(["postmortem", "--lake", str(sample_lake), "--job", "job-98372", "--step",
               "33117", "--out", str(tmp_path / "x.html"), "--save-notebook",
               str(out.with_suffix(".ipynb"))])
    assert rc == 2 and "choose another --save-notebook" in capsys.readouterr().err
    assert not out.parent.exists()


def test_kernel_files_go_to_the_given_runtime_dir(tmp_path: Path) -> None:
    km = notebook._this_python_kernel(tmp_path)
    assert Path(km.connection_file).parent == tmp_path
    assert Path(km.ip).parent == tmp_path and km.transport == "ipc"
