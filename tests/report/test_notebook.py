"""Running the post-mortem notebook: the committed notebook, parameter injection, and the
notebook executed on the sample through ``ckptwatch postmortem`` (once for the file: from a
working directory on a read-only mount, or watched, where the kernel must write nothing; the
HTML and the executed notebook of that run are checked for what the notebook shows)."""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import nbformat
import pytest
from tests.conftest import PROJECT_ROOT

from ckptwatch.cli.main import main
from ckptwatch.report import notebook

NOTEBOOK = PROJECT_ROOT / "notebooks" / "stall_postmortem.ipynb"
STALL = ["--job", "job-98372", "--step", "33117"]


@dataclass(frozen=True)
class PostmortemRun:
    """One ``ckptwatch postmortem`` of the sample's gc stall with ``--out`` and
    ``--save-notebook`` outside the working directory ``cwd``: its exit code and output; on a
    read-only ``cwd``, the one line of a second run without ``--out`` (else ``None``), and
    else what ``cwd`` held at each progress line."""

    cwd: Path
    out: Path
    executed: Path
    rc: int
    stdout: str
    stderr: str
    without_out: tuple[int, str] | None
    listings: list[list[str]]


def _read_only_bind_works(tmp_path: Path) -> bool:
    probe = tmp_path / "probe"
    probe.mkdir()
    script = f"mount --bind {probe} {probe} && mount -o remount,bind,ro {probe} && touch {probe}/x"
    try:
        done = subprocess.run(["unshare", "-m", "sh", "-c", script], capture_output=True,
                              timeout=30, check=False)
    except (OSError, subprocess.SubprocessError):
        return False
    return b"Read-only file system" in done.stderr


def _run_from_a_read_only_cwd(lake: Path, base: Path) -> PostmortemRun:
    """The command from a directory on a read-only mount (a bind mount in a private mount
    namespace: as root, a chmod'ed directory would still be writable), with --out elsewhere,
    then again without --out."""
    ro, out = base / "ro", base / "out"
    ro.mkdir()
    out.mkdir()
    cli = [sys.executable, "-m", "ckptwatch.cli.main", "postmortem", "--lake", str(lake), *STALL]
    files = ["--out", str(out / "pm.html"), "--save-notebook", str(out / "pm.ipynb")]
    script = (f"mount --bind {ro} {ro} && mount -o remount,bind,ro {ro} && cd {ro} && "
              f"{shlex.join(cli + files)}; echo \"rc=$?\"; echo >&2 '-- without --out'; "
              f"{shlex.join(cli)}")
    done = subprocess.run(["unshare", "-m", "sh", "-c", script], capture_output=True, text=True,
                          timeout=300, check=False)
    found = re.search(r"^rc=(\d+)$", done.stdout, re.M)
    assert found, (done.stdout, done.stderr[-3000:])
    first_err, _, second_err = done.stderr.partition("-- without --out\n")
    return PostmortemRun(ro, out / "pm.html", out / "pm.ipynb", int(found[1]), done.stdout,
                         first_err, (done.returncode, second_err), [])


def _run_from_a_watched_cwd(lake: Path, base: Path) -> PostmortemRun:
    """Where no read-only mount can be made: the command in-process, the working directory
    listed at each progress line of the kernel's run (as root, a chmod 0o555 directory would
    still be writable, so it looks instead)."""
    cwd, out = base / "cwd", base / "out"
    cwd.mkdir()
    out.mkdir()
    listings: list[list[str]] = []
    execute = notebook.execute_notebook

    def watched(*args: Any, progress: Callable[[str], None] | None = None,
                **kwargs: Any) -> notebook.NotebookRun:
        assert progress is None  # the command's own: one line per cell on stderr

        def look(line: str) -> None:
            listings.append(os.listdir(cwd))
            print(line, file=sys.stderr, flush=True)

        return execute(*args, progress=look, **kwargs)

    stdout, stderr = io.StringIO(), io.StringIO()
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(notebook, "execute_notebook", watched)
        mp.chdir(cwd)
        with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
            rc = main(["postmortem", "--lake", str(lake), *STALL, "--out", str(out / "pm.html"),
                       "--save-notebook", str(out / "pm.ipynb")])
    return PostmortemRun(cwd, out / "pm.html", out / "pm.ipynb", rc, stdout.getvalue(),
                         stderr.getvalue(), None, listings)


@pytest.fixture(scope="module")
def postmortem_run(sample_lake: Path, rules_only: None,
                   tmp_path_factory: pytest.TempPathFactory) -> PostmortemRun:
    """The sample's gc stall through ``ckptwatch postmortem``, once for the file."""
    base = tmp_path_factory.mktemp("postmortem")
    if shutil.which("unshare") and _read_only_bind_works(base):
        return _run_from_a_read_only_cwd(sample_lake, base)
    return _run_from_a_watched_cwd(sample_lake, base)


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
        postmortem_run: PostmortemRun) -> None:
    run, out, executed = postmortem_run, postmortem_run.out, postmortem_run.executed
    assert run.rc == 0, run.stderr
    assert f"post-mortem of job-98372 step 33117: {out} (3 figures" in run.stdout
    assert "[3/12] Open the stall" in run.stderr  # progress, one line per cell
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


def test_postmortem_writes_nothing_in_the_working_directory(
        postmortem_run: PostmortemRun) -> None:
    """The kernel's connection file and IPC sockets (in the working directory before) go
    elsewhere. From a directory on a read-only mount: with --out elsewhere it works; without,
    one line says the directory is not writable. Before, the kernel's sockets in the working
    directory failed with three tracebacks. Where no such mount can be made (no unshare, no
    privilege), the working directory is watched during the run instead."""
    run = postmortem_run
    assert "Traceback" not in run.stderr, run.stderr
    assert run.rc == 0 and run.out.is_file()
    if run.without_out is None:  # watched
        assert len(run.listings) > 3
        assert all(names == [] for names in run.listings), run.listings
    else:
        rc, err = run.without_out
        assert "Traceback" not in err, err
        assert rc == 2
        assert err.splitlines()[-1] == (
            "ckptwatch postmortem: error: cannot write postmortem-job-98372-33117.html: "
            f"directory {run.cwd} is not writable (choose another --out)")
    assert os.listdir(run.cwd) == []


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
