"""`ckptwatch slow-hosts`: the JSON contract (a list, most consistently slow first), --job,
the table, and an empty answer for a homogeneous lake."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from tests.sql.test_slow_hosts import seeded_lake, slow_host_rows

from ckptwatch.cli.main import main

KEYS = {"job_id", "node", "n_checkpoints", "n_slowest", "median_excess_pct"}


@pytest.fixture
def lake(tmp_path: Path) -> Path:
    """Job j1 with host02 +5 % and host06 +7 %; job j2 homogeneous."""
    rows = slow_host_rows("j1", slow={"host02": 1.05, "host06": 1.07})
    rows += slow_host_rows("j2", n_hosts=4, seed_=3)
    return seeded_lake(tmp_path / "lake", rows)


def test_json_lists_the_slow_hosts_most_consistently_slow_first(
        lake: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["slow-hosts", "--lake", str(lake), "--format", "json"]) == 0
    got = json.loads(capsys.readouterr().out)
    assert isinstance(got, list) and all(set(o) >= KEYS for o in got)
    assert [(o["job_id"], o["node"]) for o in got] == [("j1", "host06"), ("j1", "host02")]
    assert got[0]["n_checkpoints"] == 10 and got[0]["n_slowest"] == 10
    assert got[0]["median_excess_pct"] > got[1]["median_excess_pct"] > 4.0


def test_a_homogeneous_job_names_none(lake: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["slow-hosts", "--lake", str(lake), "--job", "j2", "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out) == []
    assert main(["slow-hosts", "--lake", str(lake), "--job", "j2"]) == 0
    assert capsys.readouterr().out.startswith("no slow hosts for job j2 in ")


def test_all_lists_every_host_compared(lake: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["slow-hosts", "--lake", str(lake), "--job", "j2", "--all",
                 "--format", "json"]) == 0
    got = json.loads(capsys.readouterr().out)
    assert sorted(o["node"] for o in got) == [f"host{i:02d}" for i in range(4)]
    assert not any(o["is_slow"] for o in got)


def test_table(lake: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["slow-hosts", "--lake", str(lake)]) == 0
    out = capsys.readouterr().out
    lines = [line for line in out.splitlines() if line.startswith("| j1")]
    assert [line.split("|")[2].strip() for line in lines] == ["host06", "host02"]
    assert "(2 slow hosts;" in out


def test_no_lake_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["slow-hosts", "--lake", str(tmp_path / "none")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("ckptwatch slow-hosts: error: no lake at ") and err.count("\n") == 1
