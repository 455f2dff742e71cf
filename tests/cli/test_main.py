"""The CLI edge: exit codes, one-line errors, summaries a person can act on."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from ckptwatch.cli.main import _command_modules, build_parser, main


def test_ingest_summary_names_counts_and_where_to_look(bad_raw_dir: Path, tmp_path: Path,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    rc = main(["ingest", str(bad_raw_dir), "--lake", str(tmp_path / "lake"), "--quiet"])
    out = capsys.readouterr().out
    assert rc == 0
    assert "rows written: checkpoint_writes 6, jobs 2" in out
    assert f"quarantined: 4 record(s) from 3 file(s) -> {tmp_path / 'lake' / 'quarantine'}" in out
    assert "checkpoints/j1.jsonl: 2" in out
    assert "ckptwatch sql --lake" in out


def test_ingest_of_missing_dir_is_one_line_and_exit_2(tmp_path: Path,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    rc = main(["ingest", str(tmp_path / "nope"), "--lake", str(tmp_path / "lake")])
    err = capsys.readouterr().err
    assert rc == 2
    assert err == f"ckptwatch ingest: error: raw directory {tmp_path / 'nope'} does not exist\n"


def test_sql_over_views_in_json(raw_dir: Path, tmp_path: Path,
                                capsys: pytest.CaptureFixture[str]) -> None:
    lake = tmp_path / "lake"
    main(["ingest", str(raw_dir), "--lake", str(lake), "--quiet"])
    capsys.readouterr()
    rc = main(["sql", "--lake", str(lake), "--format", "json",
               "select job_id, n_ranks, barrier_s from checkpoint_latency order by job_id"])
    rows = json.loads(capsys.readouterr().out)
    assert rc == 0
    assert rows == [{"job_id": "j1", "n_ranks": 4, "barrier_s": 20.5},
                    {"job_id": "j2", "n_ranks": 2, "barrier_s": 6.0}]


def test_sql_error_and_missing_lake_are_one_line(tmp_path: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["sql", "--lake", str(tmp_path / "none"), "select 1"]) == 2
    assert "no lake at" in capsys.readouterr().err
    (tmp_path / "raw").mkdir()
    main(["ingest", str(tmp_path / "raw"), "--lake", str(tmp_path / "lake"), "--quiet"])
    capsys.readouterr()
    assert main(["sql", "--lake", str(tmp_path / "lake"), "select * from nosuchtable"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("ckptwatch sql: error: Catalog Error") and err.count("\n") == 1


def test_every_command_has_help() -> None:
    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    for name, p in sub.choices.items():  # type: ignore[union-attr]
        assert p.description, f"{name} has no description"
        for action in p._actions:
            if action.dest != "help":
                assert action.help, f"{name} {action.dest} has no help"


def test_error_lines_escape_control_characters(capsys: pytest.CaptureFixture[str]) -> None:
    from ckptwatch.cli.main import main

    assert main(["explain", "--lake", "/nonexistent\x1b[2J\x07", "--job", "x", "--step", "1"]) == 2
    err = capsys.readouterr().err
    assert "\x1b" not in err and "\x07" not in err
    assert "no lake at /nonexistent\\x1b[2J\\x07" in err


def test_a_command_of_its_own_module_registers_only_that_module() -> None:
    """``ckptwatch sql …`` imports the sql module alone; the command it builds is the one the
    full parser has (same description and options). Commands of another module's name
    (``train-model``, ``explain``) and ``--help`` register every module."""
    def commands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
        sub = next(a for a in parser._actions if a.dest == "command")
        return dict(sub.choices)  # type: ignore[arg-type]

    full = commands(build_parser())
    own = [name for name in full if name.replace("-", "_") in _command_modules()]
    assert {"sql", "slow-hosts", "stalls", "ingest"} <= set(own)
    for name in own:
        lone = commands(build_parser([name, "--help"]))
        assert name in lone and len(lone) < len(full), name
        assert lone[name].description == full[name].description, name
        assert [a.dest for a in lone[name]._actions] == [a.dest for a in full[name]._actions]
    for argv in (["train-model"], ["explain"], ["--help"], [], ["nosuchcommand"]):
        assert commands(build_parser(argv)).keys() == full.keys(), argv
