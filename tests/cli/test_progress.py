"""The progress line of the long commands (cli/_progress.py): a rewritten line on a terminal,
plain lines in a log, nothing when quiet; the nightly's steps reach it through
ckptwatch.progress."""

from __future__ import annotations

import io
import re

import pytest

from ckptwatch import progress as progress_module
from ckptwatch.cli import _progress as progress_line
from ckptwatch.cli._progress import Progress
from ckptwatch.flows.run import StepClock

LOG_LINE = re.compile(r"ckptwatch nightly: \[\d+ s\] (.+)")


def test_in_a_log_each_stage_is_one_plain_line() -> None:
    out = io.StringIO()
    with Progress("nightly", out, tty=False) as p:
        p.stage("ingest")
        p.stage("ingest", "3/10 files")
        p.stage("ingest", "done in 1.2 s")
    lines = out.getvalue().splitlines()
    assert [LOG_LINE.fullmatch(line).group(1) for line in lines] == [  # type: ignore[union-attr]
        "ingest…", "ingest: 3/10 files", "ingest: done in 1.2 s"]
    assert "\r" not in out.getvalue() and "\033" not in out.getvalue()


def test_on_a_terminal_the_stages_share_one_line_cleared_at_the_end(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(progress_line, "TICK_S", 60.0)  # no redraw by the ticker meanwhile
    out = io.StringIO()
    with Progress("pull", out, tty=True) as p:
        p.stage("pull", "1/4 chunks")
        p.stage("pull", "2/4 chunks")
    text = out.getvalue()
    assert "\n" not in text  # rewritten in place, never a new line
    assert text.count("\r\033[K") == 3  # two stages drawn, then the line cleared
    assert text.endswith("\r\033[K")
    assert "ckptwatch pull: [0 s] pull: 2/4 chunks" in text


def test_quiet_writes_nothing() -> None:
    out = io.StringIO()
    with Progress("ingest", out, tty=False, quiet=True) as p:
        p.stage("ingest")
        p.count("ingest", 10, 10, "files")
    assert out.getvalue() == ""


def test_counts_in_a_log_come_about_a_tenth_at_a_time() -> None:
    out = io.StringIO()
    p = Progress("pull", out, tty=False)
    for i in range(1, 101):
        p.count("pull", i, 100, "chunks")
    shown = [line.split("] ", 1)[1] for line in out.getvalue().splitlines()]
    assert shown == [f"pull: {i}/100 chunks" for i in range(10, 101, 10)]


def test_the_nightly_steps_reach_the_line_only_inside_the_hook() -> None:
    out = io.StringIO()
    p = Progress("nightly", out, tty=False)
    clock = StepClock()
    with clock.step("outside"):  # no command watching: nothing shown, nothing raised
        pass
    with p.hook():
        with clock.step("views"):
            pass
        progress_module.progress("ingest", "4/8 files")
    assert progress_module.progress_hook is None  # put back
    steps = [line.split("] ", 1)[1] for line in out.getvalue().splitlines()]
    assert steps == ["views…", "views: done in 0.0 s", "ingest: 4/8 files"]
