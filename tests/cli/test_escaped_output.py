"""Job ids that hold terminal control sequences or shell syntax: every command prints them
escaped, JSON stays valid JSON of the same value, and commands to copy are shell-quoted."""

from __future__ import annotations

import json
import re
import shlex
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from tests.cli.test_latency import T0, seed

from ckptwatch.cli.main import main
from ckptwatch.lake.store import Lake

#: Clears the screen, sets the window title, rings the bell, and a C1 CSI.
EVIL = "evil\x1b[2J\x1b]0;owned\x07\x9b"
SHELLY = "j <x>; y"
RAW_CONTROL = re.compile(r"[\x00-\x09\x0b-\x1f\x7f-\x9f]")


@pytest.fixture(autouse=True)
def rules_only(monkeypatch: pytest.MonkeyPatch) -> None:
    """No trained model, no config file from the environment."""
    monkeypatch.setenv("CKPTWATCH_MODEL", "/nonexistent/attribution.joblib")
    monkeypatch.delenv("CKPTWATCH_CONFIG", raising=False)


@pytest.fixture
def lake(tmp_path: Path) -> Path:
    """Jobs EVIL and SHELLY: ten checkpoints of 2 ranks, barrier 10 s, step 9 a 60 s stall;
    node names with an ESC too. Timeout 61 s: both critical."""
    root = tmp_path / "lake"
    Lake(root).init()
    rows: list[dict[str, Any]] = []
    for job in (EVIL, SHELLY):
        for step in range(1, 11):
            start = T0 + timedelta(seconds=100 * step)
            slow = 60.0 if step == 9 else 10.0
            rows += [{"job_id": job, "step": step, "rank": r, "node": f"n{r}\x1b[31m",
                      "tier": "pool", "start_ts": start, "end_ts": start + timedelta(seconds=d),
                      "duration_s": d, "bytes": 1_000_000_000, "status": "ok"}
                     for r, d in enumerate((5.0, slow))]
    seed(root, "checkpoint_writes", rows)
    seed(root, "jobs", [{"job_id": j, "n_ranks": 2, "checkpoint_timeout_s": 61.0}
                        for j in (EVIL, SHELLY)])
    return root


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    """Run ``ckptwatch …``; exit code, stdout, stderr."""
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def strings(value: Any) -> set[str]:
    """Every string inside a JSON value."""
    if isinstance(value, str):
        return {value}
    items = value.values() if isinstance(value, dict) else value if isinstance(value, list) else []
    return set().union(*(strings(v) for v in items))


def assert_safe(text: str) -> None:
    """No control character but the newline, and the hostile id shown escaped."""
    assert not RAW_CONTROL.search(text), repr(text)
    assert "evil\\x1b[2J\\x1b]0;owned\\x07\\x9b" in text


@pytest.mark.parametrize("argv", [
    ("stalls",), ("latency",), ("latency", "--by", "job"),
    ("alerts", "--now", "2026-11-28T01:00:00Z"),
    ("sql", "select job_id, node from stg_checkpoint_writes"),
    ("sql", "select list(job_id) as ids from jobs"),
])
def test_tables_escape_control_characters(lake: Path, capsys: pytest.CaptureFixture[str],
                                          argv: tuple[str, ...]) -> None:
    code, out, err = run(capsys, argv[0], "--lake", str(lake), *argv[1:])
    assert code == 0, err
    assert_safe(out)
    assert not RAW_CONTROL.search(err)


def test_explain_escapes_the_id_and_the_evidence(lake: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "explain", "--lake", str(lake), "--job", EVIL, "--step", "9")
    assert code == 0
    assert_safe(out)
    assert out.startswith("stall evil\\x1b[2J")


def test_error_lines_escape_the_id(lake: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "explain", "--lake", str(lake), "--job", EVIL, "--step", "3")
    assert code == 2 and out == ""
    assert_safe(err)
    assert err == ("ckptwatch explain: error: job evil\\x1b[2J\\x1b]0;owned\\x07\\x9b step 3 "
                   "is not a stall (stalls of this job: 9)\n")
    code, out, err = run(capsys, "latency", "--lake", str(lake), "--job", EVIL + "x")
    assert code == 1
    assert_safe(err)


@pytest.mark.parametrize("argv", [
    ("stalls", "--format", "json"), ("explain", "--job", EVIL, "--step", "9", "--format", "json"),
    ("latency", "--format", "json"), ("alerts", "--format", "json", "--now",
                                      "2026-11-28T01:00:00Z"),
    ("sql", "--format", "json", "select job_id from jobs"),
])
def test_json_is_escaped_and_keeps_the_value(lake: Path, capsys: pytest.CaptureFixture[str],
                                             argv: tuple[str, ...]) -> None:
    code, out, _ = run(capsys, argv[0], "--lake", str(lake), *argv[1:])
    assert code == 0
    assert not RAW_CONTROL.search(out)
    assert EVIL in strings(json.loads(out))  # the same value, not a mangled one


def test_csv_keeps_values_exactly_unless_on_a_terminal(
        lake: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    argv = ("sql", "--lake", str(lake), "--format", "csv", "select job_id from jobs order by 1")
    code, out, _ = run(capsys, *argv)
    assert code == 0 and EVIL in out.splitlines()  # a pipe or a file: the data as it is
    monkeypatch.setattr("sys.stdout.isatty", lambda: True)
    code, out, _ = run(capsys, *argv)
    assert_safe(out)


def test_details_command_is_shell_quoted(lake: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "stalls", "--lake", str(lake), "--job", SHELLY)
    assert code == 0
    details = out.splitlines()[-1]
    assert details.startswith("Details: ")
    assert shlex.split(details.removeprefix("Details: ")) == [
        "ckptwatch", "explain", "--lake", str(lake), "--job", SHELLY, "--step", "STEP"]


def test_stalls_of_an_unknown_job_says_so_and_exits_1(
        lake: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "stalls", "--lake", str(lake), "--job", "UNKNOWN")
    assert code == 1 and out == ""
    assert err == (f"ckptwatch stalls: job 'UNKNOWN' has no checkpoints in {lake} (jobs there: "
                   "evil\\x1b[2J\\x1b]0;owned\\x07\\x9b, j <x>; y)\n")
    code, out, err = run(capsys, "stalls", "--lake", str(lake), "--job", "UNKNOWN",
                         "--format", "json")
    assert code == 1 and json.loads(out) == [] and "has no checkpoints" in err
    # a job the lake has, without stalls, is not an error
    code, out, err = run(capsys, "stalls", "--lake", str(lake), "--job", SHELLY,
                         "--stall-factor", "100")
    assert (code, out, err) == (0, "no stalls\n", "")
