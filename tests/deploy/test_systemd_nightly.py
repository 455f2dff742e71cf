"""deploy/systemd/ckptwatch-nightly.{service,timer}: the nightly without Prefect. The service runs
a ``nightly`` command the real CLI accepts, writes only the lake, and fails on a failed run; the
timer fires at prefect.yaml's cron (02:30 UTC); the cron line of deploy/README.md runs the same
command at the same time; ``systemd-analyze verify`` finds nothing."""

from __future__ import annotations

import configparser
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from tests.conftest import PROJECT_ROOT
from tests.deploy.promql_names import DEPLOY

from ckptwatch.cli.main import build_parser

SERVICE = DEPLOY / "systemd" / "ckptwatch-nightly.service"
TIMER = DEPLOY / "systemd" / "ckptwatch-nightly.timer"
INSTALLED_BINARY = "/opt/ckptwatch/venv/bin/ckptwatch"


def unit(path: Path) -> configparser.ConfigParser:
    parser = configparser.ConfigParser(strict=False, interpolation=None)
    parser.optionxform = str  # type: ignore[assignment,method-assign]  # keys are case-sensitive
    parser.read_string(path.read_text())
    return parser


def nightly_cron() -> str:
    spec = yaml.safe_load((PROJECT_ROOT / "prefect.yaml").read_text())
    (nightly,) = [d for d in spec["deployments"] if d["name"] == "nightly"]
    (schedule,) = nightly["schedules"]
    assert schedule["timezone"] == "UTC"
    return str(schedule["cron"])


def test_the_service_runs_the_nightly_once_as_its_own_user_writing_only_the_lake() -> None:
    s = unit(SERVICE)["Service"]
    assert s["Type"] == "oneshot" and s["User"] == s["Group"] == "ckptwatch"
    assert s["EnvironmentFile"].lstrip("-") == "/etc/ckptwatch/ckptwatch.env"
    assert "SuccessExitStatus" not in s  # exit 1 and 2 leave the unit failed
    assert s["ProtectSystem"] == "strict" and s["NoNewPrivileges"] == "yes"
    argv = shlex.split(s["ExecStart"])
    assert argv[0] == INSTALLED_BINARY
    args = build_parser().parse_args(argv[1:])
    assert args.command == "nightly"
    assert args.config == Path("/etc/ckptwatch/ckptwatch.toml")
    assert s["ReadWritePaths"].split() == [str(args.lake)]
    assert not str(args.raw_dir).startswith(str(args.lake))
    # the watcher's unit installs the same binary to the same place
    watch = unit(DEPLOY / "systemd" / "ckptwatch-watch.service")["Service"]["ExecStart"]
    assert shlex.split(watch)[0] == INSTALLED_BINARY


def test_the_timer_fires_at_the_prefect_deployments_cron_in_utc() -> None:
    t = unit(TIMER)
    minute, hour, *rest = nightly_cron().split()
    assert rest == ["*", "*", "*"]
    assert t["Timer"]["OnCalendar"] == f"*-*-* {int(hour):02d}:{int(minute):02d}:00 UTC"
    assert t["Timer"]["Persistent"] == "true"
    assert t["Install"]["WantedBy"] == "timers.target"
    # the timer starts the service of its own name
    assert "Unit" not in t["Timer"] and TIMER.stem == SERVICE.stem


def test_the_readme_cron_line_runs_the_services_command_at_the_same_time() -> None:
    text = (DEPLOY / "README.md").read_text()
    lines = [ln.strip() for ln in text.splitlines()
             if re.match(r"^\s*\d+ \d+ \* \* \* ckptwatch ", ln)]
    assert len(lines) == 1, lines
    fields = lines[0].split(None, 6)
    assert " ".join(fields[:5]) == nightly_cron() and fields[5] == "ckptwatch"
    assert "CRON_TZ=UTC" in text
    command = fields[6].split(">>")[0].strip()
    assert command == unit(SERVICE)["Service"]["ExecStart"]


def test_systemd_analyze_verify_finds_nothing(tmp_path: Path) -> None:
    analyze = shutil.which("systemd-analyze")
    if analyze is None:
        pytest.skip("systemd-analyze not installed: the units are checked by the tests above")
    here = Path(sys.executable).with_name("ckptwatch")  # verify wants ExecStart's binary
    for path in (SERVICE, TIMER):
        (tmp_path / path.name).write_text(path.read_text().replace(INSTALLED_BINARY, str(here)))
    done = subprocess.run([analyze, "verify", str(tmp_path / SERVICE.name),
                           str(tmp_path / TIMER.name)], capture_output=True, text=True,
                          timeout=60)
    assert (done.returncode, done.stdout, done.stderr) == (0, "", "")
    calendar = subprocess.run([analyze, "calendar", unit(TIMER)["Timer"]["OnCalendar"]],
                              capture_output=True, text=True, timeout=60)
    assert calendar.returncode == 0 and "Normalized form: *-*-* 02:30:00 UTC" in calendar.stdout
