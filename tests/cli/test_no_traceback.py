"""Every command's error paths as a user meets them (issue 46): a bad path, a bad flag value,
a missing lake, a lake path that is a file, an input that cannot be read. Each case is one
subprocess of ``ckptwatch``; none may print a traceback, each fails with a non-zero status
and ends with one line naming the command. The case list covers every command main.py
registers (``test_every_command_has_a_case``); keep it small.

Also here: the commands leave the home alone (bug 7): matplotlib's and IPython's state go to
ckptwatch's cache directory."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from ckptwatch.cli.main import build_parser

#: (case id, the arguments; ``{t}``: the case's temporary directory). In it: ``file`` (a
#: regular file), ``dir`` (an empty directory), ``missing`` (nothing).
CASES: list[tuple[str, list[str]]] = [
    ("adapt-missing-log", ["adapt", "megatron", "{t}/missing", "--job-id", "j", "--tier",
                           "pool", "--out", "{t}/raw"]),
    ("adapt-input-is-a-dir", ["adapt", "slurm", "{t}/dir", "--out", "{t}/raw"]),
    ("alerts-missing-lake", ["alerts", "--lake", "{t}/missing"]),
    ("alerts-lake-is-a-file", ["alerts", "--lake", "{t}/file"]),
    ("check-missing-raw", ["check", "{t}/missing"]),
    ("check-raw-is-a-file", ["check", "{t}/file"]),
    ("collect-out-is-a-file", ["collect", "--out", "{t}/file", "--once", "--tools", "sysfs",
                               "--sysfs-root", "{t}/dir"]),
    ("collect-bad-interval", ["collect", "--out", "{t}/raw", "--interval", "-1"]),
    ("config-missing-file", ["config", "show", "--config", "{t}/missing.toml"]),
    ("config-file-is-a-dir", ["config", "show", "--config", "{t}/dir"]),
    ("demo-missing-raw", ["demo", "--raw", "{t}/missing", "--lake", "{t}/lake"]),
    ("evaluate-bad-seeds", ["evaluate", "--seeds", "ten-twenty"]),
    ("train-model-bad-seeds", ["train-model", "--seeds", "x", "--out", "{t}/m.joblib"]),
    ("ingest-missing-raw", ["ingest", "{t}/missing", "--lake", "{t}/lake"]),
    ("ingest-lake-is-a-file", ["ingest", "{t}/dir", "--lake", "{t}/file"]),
    ("ingest-bad-workers", ["ingest", "{t}/dir", "--lake", "{t}/lake", "--workers", "many"]),
    ("latency-missing-lake", ["latency", "--lake", "{t}/missing"]),
    ("latency-lake-is-a-file", ["latency", "--lake", "{t}/file"]),
    ("nightly-missing-raw", ["nightly", "{t}/missing", "--lake", "{t}/lake"]),
    ("nightly-lake-is-a-file", ["nightly", "{t}/dir", "--lake", "{t}/file"]),
    ("nightly-bad-date", ["nightly", "{t}/dir", "--lake", "{t}/lake", "--date", "yesterday"]),
    ("plan-bad-ranks", ["plan", "--ranks", "-5"]),
    ("postmortem-missing-lake", ["postmortem", "--lake", "{t}/missing", "--job", "j"]),
    ("pull-lake-is-a-file", ["pull", "prometheus", "http://127.0.0.1:9", "--lake", "{t}/file",
                             "--around-checkpoints"]),
    ("pull-bad-url", ["pull", "prometheus", "not a url", "--lake", "{t}/lake",
                      "--around-checkpoints"]),
    ("simulate-bad-nodes", ["simulate", "--nodes", "0", "--out", "{t}/sim"]),
    ("slow-hosts-lake-is-a-file", ["slow-hosts", "--lake", "{t}/file"]),
    ("bursts-no-lake", ["bursts", "--lake", "{t}/nolake"]),
    ("sql-missing-lake", ["sql", "--lake", "{t}/missing", "select 1"]),
    ("sql-bad-query", ["sql", "--lake", "{t}/dir", "select * from no_such_table"]),
    ("stalls-lake-is-a-file", ["stalls", "--lake", "{t}/file"]),
    ("explain-missing-lake", ["explain", "--lake", "{t}/missing", "--job", "j", "--step", "1"]),
    ("watch-missing-raw", ["watch", "{t}/missing", "--lake", "{t}/lake", "--once"]),
    ("watch-bad-port", ["watch", "{t}/dir", "--lake", "{t}/lake", "--metrics-port", "99999"]),
]


#: The cases whose command starts its local Prefect server before it fails.
_STARTS_PREFECT = {"demo-missing-raw"}


def _seed_prefect_database(home: Path, config: pytest.Config) -> None:
    """The Prefect database of the home's default Prefect home (~/.cache/ckptwatch/prefect)
    from the migrated copy the test harness keeps (tests/conftest.py), when there is one: the
    server then starts without migrating a new database (~8 CPU s less). What is checked here
    is the error path; the first start in a new home, migrations and all, is
    tests/cli/test_quiet_prefect.py's and the wheel check's demo."""
    from tests.conftest import prefect_db_template

    template = prefect_db_template(config, home / "no-cache")
    if template.is_file():
        db = home / ".cache" / "ckptwatch" / "prefect" / "prefect.db"
        db.parent.mkdir(parents=True)
        shutil.copyfile(template, db)


def _env(home: Path) -> dict[str, str]:
    """A new user's environment: no CKPTWATCH_/PREFECT_ variables, an empty home."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("CKPTWATCH_", "PREFECT_", "XDG_", "MPLCONFIGDIR", "IPYTHONDIR"))}
    env["HOME"] = str(home)
    return env


def test_every_command_has_a_case() -> None:
    sub = next(a for a in build_parser()._actions if a.dest == "command")
    commands = set(sub.choices)  # type: ignore[arg-type]
    assert commands == {args[0] for _, args in CASES}


@pytest.mark.parametrize(("case", "argv"), CASES, ids=[c for c, _ in CASES])
def test_an_error_path_is_one_line_and_no_traceback(case: str, argv: list[str],
                                                    tmp_path: Path,
                                                    request: pytest.FixtureRequest) -> None:
    (tmp_path / "file").write_text("not a lake\n")
    (tmp_path / "dir").mkdir()
    (tmp_path / "home").mkdir()
    if case in _STARTS_PREFECT:
        _seed_prefect_database(tmp_path / "home", request.config)
    args = [a.replace("{t}", str(tmp_path)) for a in argv]
    done = subprocess.run([sys.executable, "-m", "ckptwatch.cli.main", *args],
                          cwd=tmp_path, env=_env(tmp_path / "home"), capture_output=True,
                          text=True, timeout=180, check=False)
    assert "Traceback" not in done.stderr, done.stderr[-3000:]
    assert done.returncode != 0, (done.stdout[-2000:], done.stderr[-2000:])
    last = done.stderr.strip().splitlines()[-1] if done.stderr.strip() else ""
    # argparse's "ckptwatch X: error: …" or the command's own one line
    assert last.startswith(("ckptwatch", "usage: ckptwatch")), done.stderr[-2000:]
    if case == "nightly-lake-is-a-file":  # refused before Prefect starts: nothing but the line
        assert done.stderr.splitlines() == [
            f"ckptwatch nightly: error: --lake {tmp_path / 'file'} is a file, not a directory: "
            "name a directory (it is created if missing)"]


def test_postmortem_writes_nothing_in_home(sample_lake: Path, tmp_path: Path) -> None:
    """The notebook's kernel (IPython) and its figures (matplotlib) keep their state under
    ckptwatch's cache directory, not ~/.ipython, ~/.config/matplotlib, ~/.cache/matplotlib."""
    home = tmp_path / "home"
    home.mkdir()
    done = subprocess.run(
        [sys.executable, "-m", "ckptwatch.cli.main", "postmortem", "--lake", str(sample_lake),
         "--job", "job-98372", "--step", "33117", "--out", str(tmp_path / "pm.html")],
        cwd=tmp_path, env=_env(home), capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    assert (tmp_path / "pm.html").is_file()
    found = sorted(str(p.relative_to(home)) for p in home.rglob("*") if p.is_dir())
    assert found[:2] == [".cache", ".cache/ckptwatch"], found
    assert {p.split("/")[2] for p in found[2:]} <= {"matplotlib", "ipython", "prefect"}, found
