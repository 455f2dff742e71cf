"""The README's commands and flows exist, have help, and the two set-up commands are named."""

from __future__ import annotations

import re
from pathlib import Path

import yaml
from prefect import Flow
from prefect.flows import load_flow_from_entrypoint

from ckptwatch.cli.main import build_parser

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text()


def _commands() -> dict[str, object]:
    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    return dict(sub.choices)  # type: ignore[arg-type]


def test_readme_names_the_two_commands() -> None:
    assert "make demo" in README and "make test" in README
    makefile = (ROOT / "Makefile").read_text()
    assert re.search(r"^demo:", makefile, re.M) and re.search(r"^test:", makefile, re.M)
    assert "make test" in (ROOT / ".ci" / "run").read_text()


def test_every_command_in_the_readme_exists_with_help() -> None:
    named = set(re.findall(r"`ckptwatch ([a-z][a-z-]+)", README))
    commands = _commands()
    assert named, "README names no command"
    missing = sorted(named - set(commands))
    assert not missing, f"README names commands that do not exist: {missing}"
    for name in named:
        assert commands[name].format_help()  # type: ignore[attr-defined]


def test_every_command_is_in_the_readme() -> None:
    named = set(re.findall(r"`ckptwatch ([a-z][a-z-]+)", README))
    assert set(_commands()) <= named


def test_flows_in_readme_and_prefect_yaml_exist() -> None:
    spec = yaml.safe_load((ROOT / "prefect.yaml").read_text())
    for dep in spec["deployments"]:
        path, func = dep["entrypoint"].split(":")
        # Load the entry point as Prefect does (by file path): it names a flow object.
        flow_obj = load_flow_from_entrypoint(str(ROOT / path) + ":" + func)
        assert isinstance(flow_obj, Flow), dep["entrypoint"]
        assert f"`{dep['entrypoint']}`" in README
        for sched in dep.get("schedules", []):
            assert sched["timezone"] == "UTC"
            assert f"`{sched['cron']}`" in README
