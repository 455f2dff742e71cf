"""prefect.yaml deployed and run as an operator would: the session's Prefect server on loopback
(``prefect_harness``), ``prefect work-pool create`` (process), ``prefect deploy --all`` from the
project root with no terminal to answer a prompt, a ``prefect worker`` (process), then
``prefect deployment run`` of ``nightly`` and ``ingest-on-demand``: Completed with the lake and
the report written; Failed with one line, no retry and nothing created for a raw directory that
is missing or cannot be read; the schedules (cron, UTC) read back through the API.

Root reads every directory, so the worker runs without root's read-override capabilities
(``setpriv``, as a worker under its own user would): a ``chmod 000`` folder is unreadable to it.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NoReturn
from uuid import UUID

import pytest
from tests.conftest import PROJECT_ROOT, write_raw_dir

import ckptwatch.ingest.discover as discover_module
from ckptwatch.errors import RawDirError
from ckptwatch.ingest.discover import discover
from ckptwatch.lake.store import Lake

BIN = Path(sys.executable).parent
#: Capabilities that let root read what its mode forbids (a worker under its own user has none).
READ_OVERRIDE = "-dac_override,-dac_read_search"
#: The test's bound: every flow run must have ended this long after the test began (deploy
#: ~20 s and the five runs ~50 s on a loaded 2-core machine; ~45 s in all when idle).
RUNS_TIMEOUT_S = 120


def prefect(env: dict[str, str], *args: str, timeout: float = 60) -> str:
    """Run the ``prefect`` CLI with no terminal (stdin closed: a prompt would fail it);
    returns its output, failing the test with it when it exits non-zero."""
    done = subprocess.run([str(BIN / "prefect"), *args], cwd=PROJECT_ROOT, env=env,
                          stdin=subprocess.DEVNULL, capture_output=True, text=True,
                          timeout=timeout)
    out = done.stdout + done.stderr
    assert done.returncode == 0, f"prefect {' '.join(args)} exited {done.returncode}:\n{out}"
    return out


def without_read_override() -> list[str]:
    """The prefix that runs a command without root's read-override capabilities (none when
    not root)."""
    if os.geteuid() != 0:
        return []
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        pytest.fail("running as root needs setpriv (util-linux) to drop the read override")
    return [setpriv, "--bounding-set", READ_OVERRIDE, "--inh-caps", READ_OVERRIDE, "--"]


@pytest.fixture
def operator_env(prefect_harness: None, tmp_path: Path) -> dict[str, str]:
    """The environment an operator sets: the server's URL, the deployments' variables; Prefect
    and matplotlib homes inside the test's directory."""
    from prefect.settings import PREFECT_API_URL

    home = tmp_path / "home"
    home.mkdir()
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("PREFECT_", "CKPTWATCH_", "PYTEST_"))}
    env.update({
        "PREFECT_API_URL": str(PREFECT_API_URL.value()),
        "PREFECT_HOME": str(home / "prefect"),
        "PREFECT_WORKER_QUERY_SECONDS": "1",
        "PREFECT_WORKER_PREFETCH_SECONDS": "5",
        "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
        "DO_NOT_TRACK": "1",
        "HOME": str(home), "XDG_CACHE_HOME": str(home / "cache"),
        "MPLCONFIGDIR": str(home / "mpl"),
        "CKPTWATCH_HOME": str(PROJECT_ROOT),
        "CKPTWATCH_RAW": str(tmp_path / "raw"),
        "CKPTWATCH_LAKE": str(tmp_path / "lake"),
    })
    return env


async def create_pool(name: str) -> None:
    """What ``prefect work-pool create NAME --type process`` does (deploy/README.md), through
    the API: the CLI's start-up is the slowest part of it."""
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.actions import WorkPoolCreate
    from prefect.exceptions import ObjectAlreadyExists

    async with get_client() as client:
        with contextlib.suppress(ObjectAlreadyExists):
            await client.create_work_pool(WorkPoolCreate(name=name, type="process"))


@pytest.fixture
def worker(operator_env: dict[str, str], tmp_path: Path) -> Iterator[Path]:
    """A process work pool (``default``, prefect.yaml's) and a worker on it; yields its log."""
    asyncio.run(create_pool("default"))
    log = tmp_path / "worker.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [*without_read_override(), str(BIN / "prefect"), "worker", "start", "--pool",
             "default", "--type", "process", "--name", "test-worker"],
            cwd=tmp_path, env=operator_env, stdin=subprocess.DEVNULL, stdout=out,
            stderr=subprocess.STDOUT)
    try:
        yield log
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def run_deployments(env: dict[str, str], runs: dict[str, tuple[str, dict[str, Path]]]
                    ) -> dict[str, UUID]:
    """``prefect deployment run NAME --param k=v ...`` for each of ``runs`` (all at once);
    returns each flow run's id."""
    procs = {}
    for case, (name, params) in runs.items():
        args = [a for k, v in params.items() for a in ("--param", f"{k}={v}")]
        procs[case] = subprocess.Popen(
            [str(BIN / "prefect"), "deployment", "run", name, *args], cwd=PROJECT_ROOT,
            env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT, text=True)
    ids = {}
    for case, proc in procs.items():
        out, _ = proc.communicate(timeout=60)
        found = re.search(r"UUID:\s*([0-9a-f-]{36})", out)
        assert proc.returncode == 0 and found, (case, out)
        ids[case] = UUID(found.group(1))
    return ids


async def run_more(runs: dict[str, tuple[str, dict[str, Path]]]) -> dict[str, UUID]:
    """What ``prefect deployment run`` does for each of ``runs``, through the API."""
    from prefect.client.orchestration import get_client

    async with get_client() as client:
        ids = {}
        for case, (name, params) in runs.items():
            dep = await client.read_deployment_by_name(name)
            run = await client.create_flow_run_from_deployment(
                dep.id, parameters={k: str(v) for k, v in params.items()})
            ids[case] = run.id
        return ids


async def wait_for(ids: list[UUID], timeout: float) -> dict[UUID, Any]:
    """Each flow run once it is final, with its task runs."""
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterId

    limit = time.monotonic() + timeout
    async with get_client() as client:
        while True:
            runs = {i: await client.read_flow_run(i) for i in ids}
            if all(r.state and r.state.is_final() for r in runs.values()):
                break
            if time.monotonic() > limit:
                break
            await asyncio.sleep(1)
        tasks = {i: await client.read_task_runs(flow_run_filter=FlowRunFilter(
            id=FlowRunFilterId(any_=[i]))) for i in ids}
    return {i: (runs[i], tasks[i]) for i in ids}


async def deployments() -> dict[str, Any]:
    from prefect.client.orchestration import get_client

    async with get_client() as client:
        return {name: await client.read_deployment_by_name(name)
                for name in ("nightly/nightly", "ingest/ingest-on-demand", "watch/watch")}


@pytest.mark.prefect
def test_prefect_yaml_deploys_and_runs_on_a_process_worker(
        operator_env: dict[str, str], worker: Path, tmp_path: Path) -> None:
    t0 = time.monotonic()
    env = operator_env
    raw = write_raw_dir(tmp_path / "raw")
    missing = tmp_path / "no-such-raw"
    locked = tmp_path / "locked-raw"
    locked.mkdir(mode=0)
    locked.chmod(0)
    partly = write_raw_dir(tmp_path / "partly-raw")
    (partly / "checkpoints" / "secret").mkdir(mode=0)
    (partly / "checkpoints" / "secret").chmod(0)

    out = prefect(env, "--no-prompt", "deploy", "--all", timeout=90)
    assert out.count("Deployment ") >= 3 and "EOFError" not in out, out
    deps = asyncio.run(deployments())
    nightly, ingest, watch = (deps[n] for n in ("nightly/nightly", "ingest/ingest-on-demand",
                                                "watch/watch"))
    assert [(s.schedule.cron, s.schedule.timezone, s.active) for s in nightly.schedules] \
        == [("30 2 * * *", "UTC", True)]
    assert [(s.schedule.cron, s.schedule.timezone) for s in watch.schedules] \
        == [("0 * * * *", "UTC")]
    assert ingest.schedules == []
    # the variables set where `prefect deploy` ran are the deployments' parameters
    assert nightly.parameters["raw_dir"] == str(raw)
    assert ingest.parameters["lake_root"] == str(tmp_path / "lake")

    lakes = {case: tmp_path / f"lake-{case}" for case in
             ("nightly", "ingest", "missing", "locked", "partly")}
    ids = run_deployments(env, {
        "nightly": ("nightly/nightly", {"lake_root": lakes["nightly"]}),
        "ingest": ("ingest/ingest-on-demand", {"raw_dir": raw, "lake_root": lakes["ingest"]}),
    })
    ids |= asyncio.run(run_more({
        "missing": ("nightly/nightly", {"raw_dir": missing, "lake_root": lakes["missing"]}),
        "locked": ("nightly/nightly", {"raw_dir": locked, "lake_root": lakes["locked"]}),
        "partly": ("ingest/ingest-on-demand", {"raw_dir": partly,
                                               "lake_root": lakes["partly"]}),
    }))
    runs = asyncio.run(wait_for(list(ids.values()), RUNS_TIMEOUT_S - (time.monotonic() - t0)))
    states = {case: runs[i][0].state for case, i in ids.items()}
    assert all(s.is_final() for s in states.values()), (
        {c: s.name for c, s in states.items()}, worker.read_text(errors="replace")[-3000:])

    for case in ("nightly", "ingest"):
        assert states[case].is_completed(), (case, states[case].message)
        assert (lakes[case] / "_manifest").is_dir()
        assert list((lakes[case] / "checkpoint_writes").rglob("*.parquet")), case
    day = lakes["nightly"] / "reports" / "2026-11-28"  # the checkpoints' day (conftest)
    assert (day / "report.html").is_file() and (day / "report.json").is_file()

    failures = {
        "missing": f"raw directory {missing} does not exist",
        "locked": f"raw directory {locked} cannot be read: Permission denied",
        "partly": (f"checkpoints/secret/ under raw directory {partly} cannot be read: "
                   "Permission denied"),
    }
    for case, line in failures.items():
        state, tasks = states[case], runs[ids[case]][1]
        assert state.is_failed(), (case, state.name, state.message)
        assert state.message is not None and line in state.message, (case, state.message)
        assert "\n" not in state.message and "Traceback" not in state.message
        # an error that cannot change is not retried: no task ran more than once
        assert [t.run_count for t in tasks if t.run_count > 1] == [], case
    # nothing is created for a raw directory that does not exist or cannot be read
    assert not lakes["missing"].exists() and not lakes["locked"].exists()
    # the partly readable one: discovery failed once, nothing was ingested
    assert [t.name.split(" ")[0] for t in runs[ids["partly"]][1]] == ["discover"]
    assert Lake(lakes["partly"]).manifest_keys() == set()


@pytest.mark.prefect
def test_an_empty_path_parameter_is_refused_with_one_line(
        operator_env: dict[str, str], tmp_path: Path) -> None:
    """What ``prefect deploy`` stores when CKPTWATCH_RAW was unset: the server refuses a run
    of it, and a run that reaches the flow anyway (a schedule) fails on its first line."""
    from prefect.exceptions import ParameterTypeError

    from ckptwatch.flows.ingest import ingest_flow

    env = {**operator_env, "CKPTWATCH_RAW": ""}
    done = subprocess.run([str(BIN / "prefect"), "deployment", "run", "nightly/nightly",
                           "--param", "raw_dir="], cwd=PROJECT_ROOT, env=env,
                          stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60)
    out = done.stdout + done.stderr
    if "could not be found" not in out:  # deployed by the test above in this session
        assert done.returncode != 0 and "raw_dir" in out, out
    with pytest.raises(ParameterTypeError, match="raw_dir is empty: set CKPTWATCH_RAW"):
        ingest_flow.validate_parameters({"raw_dir": "", "lake_root": str(tmp_path / "lake")})
    assert not (tmp_path / "lake").exists()


def test_a_folder_that_cannot_be_listed_is_named_not_skipped(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``os.walk`` drops a folder it cannot list unless told: discovery names it instead (root
    lists any mode, so the refusal is the system call's here; the worker above gets the real
    one)."""
    raw = write_raw_dir(tmp_path / "raw")
    secret = raw / "checkpoints" / "secret"
    secret.mkdir()
    (secret / "j9.jsonl").write_text("{}\n")
    real = os.scandir

    def scandir(path: Any = ".") -> Any:
        if Path(path) == secret:
            raise PermissionError(13, "Permission denied", str(path))
        return real(path)

    assert any(f.rel == "checkpoints/secret/j9.jsonl" for f in discover(raw))
    monkeypatch.setattr(discover_module.os, "scandir", scandir)
    with pytest.raises(RawDirError) as err:
        discover(raw)
    assert str(err.value).startswith(
        f"checkpoints/secret/ under raw directory {raw} cannot be read: Permission denied;")

    def denied(path: Any = ".") -> NoReturn:
        raise PermissionError(13, "Permission denied", str(path))

    monkeypatch.setattr(discover_module.os, "scandir", denied)
    with pytest.raises(RawDirError, match=f"^raw directory {raw} cannot be read: Permission"):
        discover(raw)
