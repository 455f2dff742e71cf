"""deploy/systemd/ckptwatch-watch.service: the keys the brief asks for, an ExecStart the real
CLI accepts, and ``systemd-analyze verify`` clean where systemd is installed."""

from __future__ import annotations

import configparser
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from tests.deploy.promql_names import DEPLOY

from ckptwatch.cli.main import build_parser

UNIT = DEPLOY / "systemd" / "ckptwatch-watch.service"
INSTALLED_BINARY = "/opt/ckptwatch/venv/bin/ckptwatch"


def unit() -> configparser.ConfigParser:
    parser = configparser.ConfigParser(strict=False, interpolation=None)
    parser.optionxform = str  # type: ignore[assignment,method-assign]  # keys are case-sensitive
    parser.read_string(UNIT.read_text())
    return parser


def exec_start() -> list[str]:
    return shlex.split(unit()["Service"]["ExecStart"])


def test_the_service_runs_the_watcher_as_its_own_user_and_restarts_on_failure() -> None:
    s = unit()["Service"]
    assert s["Type"] == "simple"
    assert s["Restart"] == "on-failure"
    assert s["KillSignal"] == "SIGTERM"
    assert s["User"] == s["Group"] == "ckptwatch"
    assert s["EnvironmentFile"].lstrip("-") == "/etc/ckptwatch/ckptwatch.env"
    assert s["ProtectSystem"] == "strict" and s["NoNewPrivileges"] == "yes"
    assert unit()["Install"]["WantedBy"] == "multi-user.target"


def test_exec_start_is_a_watch_command_the_cli_accepts() -> None:
    argv = exec_start()
    assert argv[0] == INSTALLED_BINARY and argv[1] == "watch"
    args = build_parser().parse_args(argv[1:])
    assert args.command == "watch"
    assert args.metrics_port == 9464
    assert args.config == Path("/etc/ckptwatch/ckptwatch.toml")
    # the only place it writes is the lake: ProtectSystem=strict makes the rest read-only
    assert str(args.lake) in unit()["Service"]["ReadWritePaths"].split()


def test_systemd_analyze_verify_finds_nothing(tmp_path: Path) -> None:
    analyze = shutil.which("systemd-analyze")
    if analyze is None:
        pytest.skip("systemd-analyze not installed: the unit is checked by the tests above")
    # verify wants ExecStart's binary to exist: point it at this checkout's ckptwatch
    here = Path(sys.executable).with_name("ckptwatch")
    copy = tmp_path / UNIT.name
    copy.write_text(UNIT.read_text().replace(INSTALLED_BINARY, str(here)))
    done = subprocess.run([analyze, "verify", str(copy)], capture_output=True, text=True,
                          timeout=60)
    # unknown keys and bad values are only warnings (exit 0): any output is a failure
    assert (done.returncode, done.stdout, done.stderr) == (0, "", "")
