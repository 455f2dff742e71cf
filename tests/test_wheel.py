"""The wheel on its own: built from the checkout (and from its sdist), installed with the pins of
constraints.txt into a fresh venv, and every main command run from a directory outside the
checkout, with HOME and PREFECT_HOME in temporary directories.

One build and one venv per session. `make wheel-check` runs this file alone; `make test` runs it
with the rest of the suite.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
import tomllib
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parent.parent
PACKAGE_SRC = ROOT / "src" / "ckptwatch"

#: Top-level folders of the checkout the build does not read: local state, and data that may be
#: large (data/, bench/out/). Everything else is copied as it is in the working tree.
_NOT_BUILT = {".git", ".venv", ".prefect", ".pytest_cache", ".mypy_cache", ".ruff_cache",
              ".hypothesis", "build", "dist", "data", "bench"}

#: Variables of the calling shell that would let the installed package see the checkout or this
#: machine's settings (CKPTWATCH_SQL_DIR, PYTHONPATH, a Prefect profile, XDG folders…).
_ENV_DROPPED = ("CKPTWATCH_", "PREFECT_", "PYTHON", "VIRTUAL_ENV", "CONDA_", "JUPYTER", "IPYTHON",
                "MPL", "XDG_")

#: The simulated scenario, and the size of the training / evaluation scenarios (the smallest that
#: still holds stalls of more than one cause: seed 1000 at 4 nodes x 1 h holds only one).
SCENARIO = ["--seed", "3", "--nodes", "4", "--hours", "2"]
SMALL = ["--nodes", "4", "--hours", "2"]

#: How long one command may take: a cold Prefect start on a busy 2-CPU machine takes ~2 min.
COMMAND_TIMEOUT_S = 900

#: Run by the installed interpreter with -I (no cwd, no PYTHON* variables, no user site): import
#: every module of the package and say where everything came from.
_WHERE_FROM = r"""
import importlib, json, pkgutil, sys
from importlib.metadata import distribution

import ckptwatch
from ckptwatch import settings

names = [m.name for m in pkgutil.walk_packages(ckptwatch.__path__, "ckptwatch.")]
for name in names:
    importlib.import_module(name)
sql = settings.sql_dir()
print(json.dumps({
    "package": ckptwatch.__file__,
    "version": ckptwatch.__version__,
    "modules": names,
    "files": sorted({getattr(m, "__file__", None) or "" for m in list(sys.modules.values())}
                    - {""}),
    "sys_path": sys.path,
    "sql_dir": str(sql),
    "sql": sorted(p.relative_to(sql).as_posix() for p in sql.rglob("*") if p.is_file()),
    "notebook": str(settings.notebook_path()),
    "notebook_is_file": settings.notebook_path().is_file(),
    "direct_url": distribution("ckptwatch").read_text("direct_url.json") or "",
}))
"""


@dataclass(frozen=True)
class Wheels:
    """The two wheels (direct from the source tree, and from its sdist) and the sdist."""

    direct: Path
    from_sdist: Path
    sdist: Path
    seconds: dict[str, float]


@dataclass
class Installed:
    """A fresh venv holding the wheel, and a working directory outside the checkout."""

    venv: Path
    work: Path
    env: dict[str, str]
    seconds: dict[str, float] = field(default_factory=dict)

    @property
    def python(self) -> Path:
        """The venv's interpreter."""
        return self.venv / "bin" / "python"

    def run(self, *args: str | Path, codes: tuple[int, ...] = (0,), cwd: Path | None = None,
            env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
        """Run the venv's ``ckptwatch`` with ``args`` and check its exit code."""
        argv = [str(self.venv / "bin" / "ckptwatch"), *map(str, args)]
        return self.call(argv, codes=codes, cwd=cwd, env=env)

    def call(self, argv: list[str], *, codes: tuple[int, ...] = (0,), cwd: Path | None = None,
             env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
        """Run ``argv`` in the working directory (or ``cwd``) with the clean environment."""
        t0 = time.monotonic()
        proc = subprocess.run(argv, cwd=cwd or self.work, env=env or self.env, text=True,
                              capture_output=True, timeout=COMMAND_TIMEOUT_S, check=False)
        step = " ".join([Path(argv[0]).name, *argv[1:]]).replace("\n", " ")[:90]
        self.seconds[step] = time.monotonic() - t0
        assert proc.returncode in codes, (
            f"{' '.join(argv)} exited {proc.returncode} (expected {codes})\n"
            f"--- stdout\n{proc.stdout[-6000:]}\n--- stderr\n{proc.stderr[-6000:]}")
        return proc


def _timed(seconds: dict[str, float], key: str, argv: list[str], **kwargs: Any) -> None:
    """Run one build or install step, recording how long it took."""
    t0 = time.monotonic()
    proc = subprocess.run(argv, text=True, capture_output=True, check=False, **kwargs)
    seconds[key] = time.monotonic() - t0
    assert proc.returncode == 0, (f"{' '.join(argv)} exited {proc.returncode}\n"
                                  f"--- stdout\n{proc.stdout[-6000:]}\n"
                                  f"--- stderr\n{proc.stderr[-6000:]}")


def _copy_source(dest: Path) -> Path:
    """The working tree without local state, so a stale build/ or egg-info of the checkout
    cannot leak into the wheel and the build writes nothing into the checkout."""

    def ignore(folder: str, names: list[str]) -> set[str]:
        skipped = {n for n in names if n == "__pycache__" or n.endswith(".egg-info")}
        if Path(folder) == ROOT:
            skipped |= _NOT_BUILT & set(names)
        return skipped

    shutil.copytree(ROOT, dest, symlinks=True, ignore=ignore)
    return dest


def _clean_env(home: Path, venv: Path) -> dict[str, str]:
    """The calling environment without what could point into the checkout; HOME and
    PREFECT_HOME in ``home``, the venv's bin first on PATH."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(_ENV_DROPPED)}
    env.update(
        HOME=str(home),
        PREFECT_HOME=str(home / ".prefect"),
        PATH=f"{venv / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}",
        PREFECT_SERVER_ANALYTICS_ENABLED="false",
        PREFECT_LOGGING_LEVEL="WARNING",
        # The default 20 s is too short for a cold start on a busy CI machine (the test harness
        # of the other tests waits 120 s too).
        PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS="120",
    )
    return env


def _under(path: str | Path, folder: Path) -> bool:
    return Path(path).resolve().is_relative_to(folder.resolve())


def _members(wheel: Path) -> dict[str, bytes]:
    """The wheel's files below ckptwatch/ by name, with their content."""
    with zipfile.ZipFile(wheel) as zf:
        return {n: zf.read(n) for n in zf.namelist() if n.startswith("ckptwatch/")}


@pytest.fixture(scope="session")
def wheels(tmp_path_factory: pytest.TempPathFactory) -> Wheels:
    """The wheel built from a copy of the working tree, and the sdist -> wheel path."""
    base = tmp_path_factory.mktemp("wheel-build")
    src = _copy_source(base / "src")
    seconds: dict[str, float] = {}
    # sdist first, then the wheel from the unpacked sdist (build's default).
    _timed(seconds, "build sdist -> wheel",
           [sys.executable, "-m", "build", "--outdir", str(base / "sdist"), str(src)])
    _timed(seconds, "pip wheel (direct)",
           [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w",
            str(base / "direct"), str(src)])
    (direct,) = (base / "direct").glob("ckptwatch-*.whl")
    (from_sdist,) = (base / "sdist").glob("ckptwatch-*.whl")
    (sdist,) = (base / "sdist").glob("ckptwatch-*.tar.gz")
    return Wheels(direct, from_sdist, sdist, seconds)


@pytest.fixture(scope="session")
def installed(wheels: Wheels, tmp_path_factory: pytest.TempPathFactory,
              request: pytest.FixtureRequest) -> Iterator[Installed]:
    """The direct wheel and its ``notebooks`` extra in a fresh venv, pinned by constraints.txt.

    The venv is made without pip and filled by this environment's pip (``--python``): it skips
    ensurepip and the old pip it bundles. ``--no-compile`` skips byte-compiling every dependency;
    the commands compile what they import, once (PYTHONDONTWRITEBYTECODE is not passed on).
    """
    base = tmp_path_factory.mktemp("wheel-venv")
    assert not _under(base, ROOT), f"{base} is inside the checkout (--basetemp?)"
    venv, home, work = base / "venv", base / "home", base / "work"
    home.mkdir()
    work.mkdir()
    seconds: dict[str, float] = dict(wheels.seconds)
    _timed(seconds, "venv", [sys.executable, "-m", "venv", "--without-pip", str(venv)])
    _timed(seconds, "pip install wheel[notebooks]",
           [sys.executable, "-m", "pip", "--python", str(venv / "bin" / "python"), "install",
            "-q", "--no-compile", "-c", str(ROOT / "constraints.txt"),
            f"{wheels.direct}[notebooks]"])
    box = Installed(venv, work, _clean_env(home, venv), seconds)
    yield box
    shutil.rmtree(venv, ignore_errors=True)  # 1 GB; pytest keeps the last three temp dirs
    # The time of each step, on the terminal even when pytest captures the output.
    reporter = request.config.pluginmanager.get_plugin("terminalreporter")
    capture = request.config.pluginmanager.get_plugin("capturemanager")
    if reporter is not None and capture is not None:
        with capture.global_and_fixture_disabled():
            reporter.write_line("")
            reporter.write_line(f"wheel check: {sum(box.seconds.values()):.0f} s in all")
            for step, s in box.seconds.items():
                reporter.write_line(f"  {s:7.1f} s  {step}")


@dataclass(frozen=True)
class SmallLake:
    """A simulated raw directory ingested into a lake, and what the two commands printed."""

    raw: Path
    lake: Path
    simulate_out: str
    ingest_out: str


@pytest.fixture(scope="session")
def small_lake(installed: Installed) -> SmallLake:
    """``ckptwatch simulate`` (small) then ``ckptwatch ingest`` into a lake."""
    raw, lake = installed.work / "raw", installed.work / "lake"
    sim = installed.run("simulate", raw, *SCENARIO)
    ing = installed.run("ingest", raw, "--lake", lake)
    return SmallLake(raw, lake, sim.stdout, ing.stdout + ing.stderr)


@pytest.fixture(scope="session")
def stalls(installed: Installed, small_lake: SmallLake) -> list[dict[str, Any]]:
    """``ckptwatch stalls --format json`` of the small lake, parsed."""
    out = installed.run("stalls", "--lake", small_lake.lake, "--format", "json").stdout
    found = json.loads(out)
    assert isinstance(found, list)
    return found


def test_the_wheel_holds_the_package_the_sql_views_and_the_notebook(wheels: Wheels) -> None:
    members = _members(wheels.direct)
    with zipfile.ZipFile(wheels.direct) as zf:
        tops = {n.split("/", 1)[0] for n in zf.namelist()}
    assert tops == {"ckptwatch", "ckptwatch-0.1.0.dist-info"}
    modules = {f"ckptwatch/{p.relative_to(PACKAGE_SRC).as_posix()}"
               for p in PACKAGE_SRC.rglob("*.py") if "__pycache__" not in p.parts}
    assert modules - set(members) == set(), "modules missing (a subpackage without __init__.py?)"
    sql = {f"ckptwatch/sql/{p.relative_to(ROOT / 'sql').as_posix()}"
           for p in (ROOT / "sql").rglob("*") if p.suffix in (".sql", ".yml", ".md")}
    assert sql - set(members) == set()
    assert len([n for n in members if n.startswith("ckptwatch/sql/marts/")
                and n.endswith(".sql")]) >= 8
    assert "ckptwatch/notebooks/stall_postmortem.ipynb" in members
    assert "ckptwatch/py.typed" in members
    # Every package-data pattern of pyproject.toml matches something.
    patterns = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"][
        "package-data"]["ckptwatch"]
    for pattern in patterns:
        assert list(PACKAGE_SRC.glob(pattern)), pattern


def test_the_sdist_builds_the_same_wheel(wheels: Wheels) -> None:
    direct, from_sdist = _members(wheels.direct), _members(wheels.from_sdist)
    assert sorted(from_sdist) == sorted(direct)
    assert [n for n in direct if direct[n] != from_sdist[n]] == []


def test_the_installed_package_is_the_wheel_not_the_checkout(installed: Installed) -> None:
    proc = installed.call([str(installed.python), "-I", "-c", _WHERE_FROM])
    where = json.loads(proc.stdout)
    assert _under(where["package"], installed.venv), where["package"]
    assert "ckptwatch.cli.main" in where["modules"]
    assert "ckptwatch.flows.nightly" in where["modules"]
    from_checkout = [f for f in where["files"] if _under(f, ROOT)]
    assert from_checkout == [], from_checkout
    assert not any(_under(p, ROOT) for p in where["sys_path"] if p)
    assert '"editable": true' not in where["direct_url"]
    assert _under(where["sql_dir"], installed.venv)
    checkout_sql = sorted(p.relative_to(ROOT / "sql").as_posix()
                          for p in (ROOT / "sql").rglob("*")
                          if p.is_file() and p.suffix in (".sql", ".yml", ".md"))
    assert where["sql"] == checkout_sql
    assert "build.sql" in where["sql"] and "marts/checkpoint_latency.sql" in where["sql"]
    assert _under(where["notebook"], installed.venv) and where["notebook_is_file"]
    version = installed.run("--version").stdout
    assert where["version"] in version


def test_simulate_then_ingest(small_lake: SmallLake) -> None:
    assert f"scenario seed 3 -> {small_lake.raw}" in small_lake.simulate_out
    assert re.search(r"labelled stalls: [1-9]", small_lake.simulate_out)
    assert (small_lake.raw / "labels.json").is_file()
    assert f"ingest {small_lake.raw} -> {small_lake.lake}" in small_lake.ingest_out
    assert re.search(r"files: \d+ seen, [1-9]\d* ingested, 0 already in the lake, \d+ ignored, "
                     r"0 failed", small_lake.ingest_out)
    assert "quarantined: 0" in small_lake.ingest_out


def test_stalls_json_then_explain_one(installed: Installed, small_lake: SmallLake,
                                      stalls: list[dict[str, Any]]) -> None:
    assert stalls, "the small scenario has labelled stalls; none found"
    first = stalls[0]
    assert {"job_id", "step", "cause", "causes", "barrier_s", "baseline_s"} <= set(first)
    assert {s["cause"] for s in stalls} <= {"gc", "metadata", "fabric_pause", "unknown"}
    out = installed.run("explain", "--lake", small_lake.lake, "--job", first["job_id"],
                        "--step", str(first["step"])).stdout
    assert f"stall {first['job_id']} step {first['step']}" in out
    assert first["cause"] in out


def test_alerts(installed: Installed, small_lake: SmallLake) -> None:
    out = installed.run("alerts", "--lake", small_lake.lake).stdout
    assert re.search(r"timeout headroom of [1-9]\d* job\(s\)", out)
    assert "alert(s) due (dry run: --send delivers them)" in out


def test_latency_json_and_sql_agree(installed: Installed, small_lake: SmallLake) -> None:
    rows = json.loads(installed.run("latency", "--lake", small_lake.lake, "--format",
                                    "json").stdout)
    assert isinstance(rows, list) and rows
    assert all(r["p50_s"] <= r["p99_s"] <= r["max_s"] for r in rows)
    out = installed.run("sql", "--lake", small_lake.lake,
                        "select count(*) from checkpoint_latency").stdout
    counts = re.findall(r"^\|\s*(\d+)\s*\|$", out, re.M)
    assert counts == [str(len(rows))], out


def test_nightly_without_sending(installed: Installed, small_lake: SmallLake,
                                 stalls: list[dict[str, Any]]) -> None:
    lake = small_lake.lake
    out = installed.run("nightly", small_lake.raw, "--lake", lake, "--no-send").stdout
    assert f"nightly {small_lake.raw} -> {lake}" in out
    assert "0 file(s) ingested" in out and "0 failed" in out
    assert f"stalls: {len(stalls)}" in out
    assert "(not sent: --no-send)" in out
    assert (lake / "reports" / "latest" / "report.html").is_file()
    (report,) = (lake / "reports").glob("[0-9]*/report.json")  # the report day's folder
    assert json.loads(report.read_text())["summary"]["stalls"] == len(stalls)
    # A dry run sends and records nothing.
    assert not (lake / "reports" / "alerts.jsonl").exists()
    assert not (lake / "_state").exists()


def test_postmortem_html(installed: Installed, small_lake: SmallLake,
                         stalls: list[dict[str, Any]]) -> None:
    job = stalls[0]["job_id"]
    html = installed.work / "postmortem.html"
    proc = installed.run("postmortem", "--lake", small_lake.lake, "--job", job, "--out", html)
    assert f"post-mortem of {job} step" in proc.stdout
    text = html.read_text()
    assert text.lstrip().lower().startswith("<!doctype html")
    assert "data:image/png;base64," in text


def test_plan(installed: Installed) -> None:
    out = installed.run("plan").stdout
    assert re.search(r"^best: \S+", out, re.M)
    for strategy in ("local", "local+replica", "pool", "tiered"):
        assert re.search(rf"^  {re.escape(strategy)}\b", out, re.M), strategy


def test_train_model_then_evaluate(installed: Installed) -> None:
    model = installed.work / "models" / "attribution.joblib"
    installed.run("train-model", "--seeds", "1000-1000", *SMALL, "--out", model, "--quiet")
    assert model.is_file()
    card = json.loads(model.with_suffix(".json").read_text())
    assert card["training_seeds"] == [1000]
    out = installed.run("evaluate", "--seeds", "2000-2000", *SMALL, "--model", model,
                        "--format", "json", "--quiet").stdout
    report = json.loads(out)
    assert report["seeds"] == [2000]
    assert report["model"]["training_seeds"] == [1000]
    assert 0.0 <= report["detection"]["precision"] <= 1.0
    assert 0.0 <= report["detection"]["recall"] <= 1.0


def test_demo_simulates_the_sample(installed: Installed) -> None:
    """Outside a checkout ``demo`` simulates the bundled sample: the same files, byte for byte."""
    work = installed.work / "demo"
    work.mkdir()
    env = {**installed.env, "PREFECT_HOME": str(work / ".prefect")}
    out = installed.run("demo", "--lake", "L2", cwd=work, env=env).stdout
    assert "simulating the sample scenario" in out
    assert re.search(r"^\d+ stall\(s\); attribution: ", out, re.M)
    assert "Open the daily report: L2/reports/" in out
    assert (work / "L2" / "reports" / "latest" / "report.html").is_file()
    assert (work / "L2" / "reports" / "alerts.jsonl").is_file()
    sample = ROOT / "data" / "sample"
    if sample.is_dir():
        made = work / "sample-raw"
        names = sorted(p.relative_to(sample).as_posix() for p in sample.rglob("*")
                       if p.is_file() and p.name != "README.md")
        assert sorted(p.relative_to(made).as_posix() for p in made.rglob("*")
                      if p.is_file()) == names
        assert [n for n in names if (made / n).read_bytes() != (sample / n).read_bytes()] == []
