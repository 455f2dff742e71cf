"""`ckptwatch stalls` / `explain` on a checkpoint whose ranks never finished: the JSON keys
(n_started, n_unfinished, timed_out, barrier_is_lower_bound, never_finished) and the words."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from tests.stall_cases import STALL_STEP, Case, build

from ckptwatch.cli.main import main


@pytest.fixture(scope="module")
def hung_lake(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The stall cases' job with ranks 0 and 2 (node n1) hanging in the fabric pause."""
    return build(tmp_path_factory.mktemp("hung") / "lake",
                 Case(stall="fabric_pause", unfinished=(0, 2), markers=True))


def test_stalls_json_says_the_checkpoint_timed_out(hung_lake: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["stalls", "--lake", str(hung_lake), "--format", "json"]) == 0
    [stall] = json.loads(capsys.readouterr().out)
    assert (stall["step"], stall["n_started"], stall["n_unfinished"], stall["timed_out"],
            stall["barrier_is_lower_bound"], stall["barrier_s"]) == (
        STALL_STEP, 8, 2, True, True, 120.0)
    assert stall["never_finished"].startswith(
        "2 of 8 ranks never finished step 8; last seen on n1, leaf01, target t1")


def test_stalls_table_and_explain_say_it_in_words(hung_lake: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["stalls", "--lake", str(hung_lake)]) == 0
    out = capsys.readouterr().out
    row = next(line for line in out.splitlines() if "| 8 " in line)
    assert "| 2 timed out " in row and "| 4/8 " in row  # n1: 2 slow, 2 never finished
    assert ("barrier_s is a lower bound where ranks are unfinished:\n  2 of 8 ranks never "
            "finished step 8; last seen on n1, leaf01, target t1") in out
    assert main(["explain", "--lake", str(hung_lake), "--job", "j", "--step", "8"]) == 0
    out = capsys.readouterr().out
    assert "  barrier >= 120.0 s = x" in out
    assert "\n  2 of 8 ranks never finished step 8; last seen on n1, leaf01, target t1" in out
