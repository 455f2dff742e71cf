"""The wheel on its own: the sdist built from a copy of the checkout and the wheel built from
that sdist (the files of the source tree, byte for byte), installed into a fresh venv that holds
only the wheel's declared dependencies at the pins of constraints.txt, and every main command run
from a directory outside the checkout, with HOME and PREFECT_HOME in temporary directories.

The dependencies are not downloaded and unpacked again: the fresh venv gets hard links (copies
across file systems) of exactly the files, per RECORD, of the distributions the wheel's
Requires-Dist (with its ``notebooks`` extra) pulls in, taken from the dev venv that ``make``
installed with ``-c constraints.txt``; the tests check those versions against the pins and the
wheel's specifiers, and run ``pip check`` in the new venv. The wheel itself goes in by ``pip
install --no-deps``. Nothing else of the dev venv is visible (no .pth to it, no editable
ckptwatch), so a dependency missing from pyproject.toml still fails the commands here.

One build and one venv per session. `make wheel-check` runs this file alone; `make test` runs it
with the rest of the suite.
"""

from __future__ import annotations

import email.parser
import json
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import time
import tomllib
import zipfile
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

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
    """The sdist built from a copy of the source tree, the wheel built from that sdist, and
    the copy's package folder (src/ckptwatch)."""

    from_sdist: Path
    sdist: Path
    package_src: Path
    seconds: dict[str, float]


@dataclass
class Installed:
    """A fresh venv holding the wheel, and a working directory outside the checkout."""

    venv: Path
    work: Path
    env: dict[str, str]
    seconds: dict[str, float] = field(default_factory=dict)
    #: The distributions linked in from the dev venv: canonical name -> version.
    linked: dict[str, str] = field(default_factory=dict)

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


def _package_patterns() -> list[str]:
    """The package-data patterns of pyproject.toml."""
    patterns: list[str] = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"][
        "setuptools"]["package-data"]["ckptwatch"]
    return patterns


def _source_files(package_src: Path) -> dict[str, Path]:
    """What a wheel built straight from the source tree holds below ckptwatch/: every module
    of src/ckptwatch, and every file a package-data pattern matches (through the sql/ and
    notebooks/ links), by wheel member name."""
    files = {p for p in package_src.rglob("*.py") if "__pycache__" not in p.parts}
    for pattern in _package_patterns():
        files |= {p for p in package_src.glob(pattern) if p.is_file()}
    return {f"ckptwatch/{p.relative_to(package_src).as_posix()}": p for p in files}


#: The dev venv (``make install``: the checkout editable, every dependency at the pins of
#: constraints.txt) whose dependency files the fresh venv links to.
DEV_PREFIX = Path(sys.prefix)
DEV_SITE = Path(sysconfig.get_paths()["purelib"])


def _requires(wheel: Path) -> list[str]:
    """The wheel's Requires-Dist lines."""
    with zipfile.ZipFile(wheel) as zf:
        (meta,) = [n for n in zf.namelist() if n.endswith(".dist-info/METADATA")]
        msg = email.parser.Parser().parsestr(zf.read(meta).decode())
    return msg.get_all("Requires-Dist") or []


def _dependency_closure(requires: list[str], extras: set[str]) -> dict[str, Any]:
    """The distributions of the dev venv that ``requires`` (with ``extras``) pulls in,
    transitively, by canonical name; each one's version must meet every specifier on the way."""
    from importlib.metadata import distributions

    have = {canonicalize_name(d.metadata["Name"]): d for d in distributions(path=[str(DEV_SITE)])}
    found: dict[str, Any] = {}
    seen: set[tuple[str, frozenset[str]]] = set()
    todo = [(r, frozenset(extras)) for r in requires]
    while todo:
        text, wanted = todo.pop()
        req = Requirement(text)
        if req.marker is not None and not any(req.marker.evaluate({"extra": e})
                                               for e in (wanted or {""})):
            continue
        name = canonicalize_name(req.name)
        assert name in have, f"{text}: not installed in the dev venv {DEV_PREFIX} (make install)"
        dist = have[name]
        assert req.specifier.contains(dist.version, prereleases=True), (
            f"{text}: the dev venv holds {name} {dist.version} (make install)")
        key = (name, frozenset(req.extras))
        if key in seen:
            continue
        seen.add(key)
        found[name] = dist
        todo += [(r, frozenset(req.extras)) for r in dist.requires or []]
    return found


def _link_distribution(dist: Any, venv: Path, site: Path) -> int:
    """Every file of ``dist``'s RECORD into the venv, as it would be installed there: hard
    links (copies across file systems); scripts get the venv's interpreter. Returns how many
    files had to be copied."""
    copied = 0
    for rel in dist.files or []:
        src = Path(os.path.normpath(DEV_SITE / rel))
        if not src.is_file():
            continue  # a .pyc listed but never written
        if src.is_relative_to(DEV_SITE):
            dest = site / src.relative_to(DEV_SITE)
        elif src.is_relative_to(DEV_PREFIX):
            dest = venv / src.relative_to(DEV_PREFIX)
        else:
            continue
        dest.parent.mkdir(parents=True, exist_ok=True)
        if dest.parent == venv / "bin":
            data = src.read_bytes()
            if data.startswith(b"#!"):
                first, _, rest = data.partition(b"\n")
                data = first.replace(str(DEV_PREFIX / "bin" / "python").encode(),
                                     str(venv / "bin" / "python").encode()) + b"\n" + rest
            dest.write_bytes(data)
            shutil.copymode(src, dest)
            continue
        try:
            os.link(src, dest)
        except OSError:
            shutil.copy2(src, dest)
            copied += 1
    return copied


@pytest.fixture(scope="session")
def wheels(tmp_path_factory: pytest.TempPathFactory) -> Wheels:
    """The sdist of a copy of the working tree, and the wheel built from it.

    No second wheel straight from the tree: what that one would hold (``_source_files``) is
    compared with the sdist's wheel file by file instead, which costs no build.
    """
    base = tmp_path_factory.mktemp("wheel-build")
    src = _copy_source(base / "src")
    seconds: dict[str, float] = {}
    # sdist first, then the wheel from the unpacked sdist (build's default).
    _timed(seconds, "build sdist -> wheel",
           [sys.executable, "-m", "build", "--outdir", str(base / "sdist"), str(src)])
    (from_sdist,) = (base / "sdist").glob("ckptwatch-*.whl")
    (sdist,) = (base / "sdist").glob("ckptwatch-*.tar.gz")
    return Wheels(from_sdist, sdist, src / "src" / "ckptwatch", seconds)


@pytest.fixture(scope="session")
def installed(wheels: Wheels, tmp_path_factory: pytest.TempPathFactory,
              request: pytest.FixtureRequest) -> Iterator[Installed]:
    """The wheel and its ``notebooks`` extra in a fresh venv, at the pins of constraints.txt.

    The venv is made without pip; the dependencies the wheel declares are linked in from the
    dev venv (see the module docstring), then this environment's pip (``--python``) installs the
    wheel alone (``--no-deps --no-index``).
    """
    base = tmp_path_factory.mktemp("wheel-venv")
    assert not _under(base, ROOT), f"{base} is inside the checkout (--basetemp?)"
    venv, home, work = base / "venv", base / "home", base / "work"
    home.mkdir()
    work.mkdir()
    seconds: dict[str, float] = dict(wheels.seconds)
    _timed(seconds, "venv", [sys.executable, "-m", "venv", "--without-pip", str(venv)])
    t0 = time.monotonic()
    site = venv / Path(sysconfig.get_path("purelib", vars={"base": "."}))
    assert site.is_dir(), site
    deps = _dependency_closure(_requires(wheels.from_sdist), {"notebooks"})
    copied = sum(_link_distribution(dist, venv, site) for dist in deps.values())
    seconds["link the dependencies"] = time.monotonic() - t0
    _timed(seconds, "pip install --no-deps wheel",
           [sys.executable, "-m", "pip", "--python", str(venv / "bin" / "python"), "install",
            "-q", "--no-deps", "--no-index", "--no-compile", str(wheels.from_sdist)])
    box = Installed(venv, work, _clean_env(home, venv), seconds,
                    {name: d.version for name, d in deps.items()})
    yield box
    if copied:  # 1 GB of copies; pytest keeps the last three temp dirs (links cost nothing)
        shutil.rmtree(venv, ignore_errors=True)
    # The time of each step, on the terminal even when pytest captures the output.
    reporter = request.config.pluginmanager.get_plugin("terminalreporter")
    capture = request.config.pluginmanager.get_plugin("capturemanager")
    if reporter is not None and capture is not None:
        with capture.global_and_fixture_disabled():
            reporter.write_line("")
            reporter.write_line(f"wheel check: {sum(box.seconds.values()):.0f} s in all")
            for step, s in box.seconds.items():
                reporter.write_line(f"  {s:7.1f} s  {step}")


def _demo(box: Installed) -> str:
    """``ckptwatch demo`` in its own directory (and Prefect home) outside the checkout."""
    work = box.work / "demo"
    work.mkdir()
    env = {**box.env, "PREFECT_HOME": str(work / ".prefect")}
    return box.run("demo", "--lake", "L2", cwd=work, env=env).stdout


def _train_then_evaluate(box: Installed) -> str:
    """``ckptwatch train-model`` (one small seed), then ``evaluate`` of that model (JSON)."""
    model = box.work / "models" / "attribution.joblib"
    box.run("train-model", "--seeds", "1000-1000", *SMALL, "--out", model, "--quiet")
    return box.run("evaluate", "--seeds", "2000-2000", *SMALL, "--model", model,
                   "--format", "json", "--quiet").stdout


def _plan(box: Installed) -> str:
    return box.run("plan").stdout


#: The commands that need no lake, run one after the other beside the tests' own commands
#: (each command is mostly one core: on the 2-CPU CI machine the second one was idle).
_BESIDE: dict[str, Callable[[Installed], str]] = {
    "demo": _demo, "train-model then evaluate": _train_then_evaluate, "plan": _plan}


@dataclass(frozen=True)
class Beside:
    """The commands of ``_BESIDE``, under way in one background thread."""

    futures: dict[str, Future[str]]

    def result(self, name: str) -> str:
        """The command's stdout once it has ended (its own assertion errors re-raised)."""
        return self.futures[name].result(timeout=3 * COMMAND_TIMEOUT_S)


@pytest.fixture(scope="session")
def beside(installed: Installed) -> Iterator[Beside]:
    """``_BESIDE`` started now in a background thread; the tests read their outputs later.
    Requested by the first tests that run commands, so that it starts first."""
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="wheel-beside") as pool:
        yield Beside({name: pool.submit(fn, installed) for name, fn in _BESIDE.items()})
        pool.shutdown(wait=True, cancel_futures=True)


@dataclass(frozen=True)
class SmallLake:
    """A simulated raw directory ingested into a lake, and what the two commands printed."""

    raw: Path
    lake: Path
    simulate_out: str
    ingest_out: str


@pytest.fixture(scope="session")
def small_lake(installed: Installed, beside: Beside) -> SmallLake:
    """``ckptwatch simulate`` (small) then ``ckptwatch ingest`` into a lake (``beside``
    already under way)."""
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
    members = _members(wheels.from_sdist)
    with zipfile.ZipFile(wheels.from_sdist) as zf:
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
    for pattern in _package_patterns():
        assert list(PACKAGE_SRC.glob(pattern)), pattern


def test_the_sdist_builds_the_same_wheel(wheels: Wheels) -> None:
    """The sdist's wheel holds what a wheel built straight from the tree does: every module
    and package-data file of src/ckptwatch (the links followed), nothing else, byte for byte."""
    source, from_sdist = _source_files(wheels.package_src), _members(wheels.from_sdist)
    assert sorted(from_sdist) == sorted(source)
    assert [n for n in source if source[n].read_bytes() != from_sdist[n]] == []


def test_the_venv_holds_the_declared_dependencies_at_the_pins(installed: Installed) -> None:
    pins: dict[str, str] = {}
    for line in (ROOT / "constraints.txt").read_text().splitlines():
        name, sep, version = line.split("#", 1)[0].strip().partition("==")
        if sep:
            pins[canonicalize_name(name)] = version.strip()
    assert {"polars", "duckdb", "prefect", "nbclient", "ipykernel"} <= set(installed.linked)
    assert "ckptwatch" not in installed.linked
    assert {n: v for n, v in installed.linked.items() if n in pins and pins[n] != v} == {}
    assert set(installed.linked) <= set(pins), "dependencies that constraints.txt does not pin"
    # Every installed distribution's requirements are met, the wheel's included.
    installed.call([sys.executable, "-m", "pip", "--python", str(installed.python), "check"])


def test_the_installed_package_is_the_wheel_not_the_checkout(installed: Installed,
                                                             beside: Beside) -> None:
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
    # The simulated day is long past: as of today its jobs are stale and page nobody; as of
    # the day itself (--now) they are assessed.
    out = installed.run("alerts", "--lake", small_lake.lake).stdout
    assert "timeout headroom of 0 job(s)" in out and "stale: no record since" in out
    out = installed.run("alerts", "--lake", small_lake.lake, "--now",
                        "2026-11-28T03:00:00Z").stdout
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


def _seed_prefect_database(box: Installed, config: pytest.Config) -> bool:
    """The Prefect database of ``box``'s home from the migrated copy the test harness keeps
    (tests/conftest.py; the same Prefect version: the wheel's venv links the dev venv's), when
    there is one and the home has none yet. True if seeded."""
    from tests.conftest import prefect_db_template

    template = prefect_db_template(config, box.work / "no-cache")
    db = Path(box.env["PREFECT_HOME"]) / "prefect.db"
    if not template.is_file() or db.exists():
        return False
    db.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(template, db)
    return True


def test_nightly_without_sending(installed: Installed, small_lake: SmallLake,
                                 stalls: list[dict[str, Any]],
                                 request: pytest.FixtureRequest) -> None:
    # Its Prefect server starts on a database migrated before (~13 CPU s less than migrating
    # a new one); the first start in a new home, migrations and all, is `demo`'s (its own
    # home, never seeded) and tests/cli/test_quiet_prefect.py's.
    _seed_prefect_database(installed, request.config)
    lake = small_lake.lake
    out = installed.run("nightly", small_lake.raw, "--lake", lake, "--no-send").stdout
    assert f"nightly {small_lake.raw} -> {lake}" in out
    assert "0 file(s) ingested" in out and "0 failed" in out
    assert f"stalls: {len(stalls)}" in out
    assert re.search(r"^  alerts: \d+ .*dry run", out, re.M), out
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


def test_plan(beside: Beside) -> None:
    out = beside.result("plan")
    assert re.search(r"^best: \S+", out, re.M)
    for strategy in ("local", "local+replica", "pool", "tiered"):
        assert re.search(rf"^  {re.escape(strategy)}\b", out, re.M), strategy


def test_train_model_then_evaluate(installed: Installed, beside: Beside) -> None:
    model = installed.work / "models" / "attribution.joblib"
    out = beside.result("train-model then evaluate")
    assert model.is_file()
    card = json.loads(model.with_suffix(".json").read_text())
    assert card["training_seeds"] == [1000]
    report = json.loads(out)
    assert report["seeds"] == [2000]
    assert report["model"]["training_seeds"] == [1000]
    assert 0.0 <= report["detection"]["precision"] <= 1.0
    assert 0.0 <= report["detection"]["recall"] <= 1.0


def test_demo_simulates_the_sample(installed: Installed, beside: Beside) -> None:
    """Outside a checkout ``demo`` simulates the bundled sample: the same files, byte for byte."""
    work = installed.work / "demo"
    out = beside.result("demo")
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
