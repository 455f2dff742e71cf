"""Shared fixtures: small raw directories built from literal rows, one Prefect harness; and the
order in which `make test` hands the files to its workers (``SLOW_FIRST``)."""

from __future__ import annotations

import json
import os
import re
import shutil
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import polars as pl
import pytest

from ckptwatch.cli.main import main
from ckptwatch.lake.store import Lake

PROJECT_ROOT = Path(__file__).resolve().parent.parent

#: A progress line a long command writes to stderr in a log (``cli/_progress.py``):
#: "ckptwatch nightly: [3 s] views…".
PROGRESS_LINE = re.compile(r"^ckptwatch [\w-]+: \[\d+ s\] ")


def without_progress(err: str) -> list[str]:
    """``err``'s lines other than progress lines: what a command said besides how far it got."""
    return [line for line in err.splitlines() if not PROGRESS_LINE.match(line)]

CHECKPOINT_JSONL = [
    {"job_id": "j1", "step": 100, "rank": r, "node": f"n{r // 2}", "tier": "pool",
     "target": f"t{r % 2}", "start_time": f"2026-11-28T00:00:0{r}Z",
     "end_time": f"2026-11-28T00:00:{20 + r}.5+00:00", "bytes": 1_000_000_000,
     "open_s": 0.1, "write_s": 18.0, "fsync_s": 2.0, "close_s": 0.4}
    for r in range(4)
]
CHECKPOINT_CSV = """\
job_id,step,rank,node,tier,start_time,end_time,bytes,open_s,write_s,fsync_s,close_s,status
j2,7,0,n9,local,1764288000.0,1764288005.0,5000,0.01,4.5,0.4,0.09,ok
j2,7,1,n9,local,1764288000.0,1764288006.0,5000,0.01,5.5,0.4,0.09,ok
"""
JOBS_CSV = "job_id,n_ranks,checkpoint_timeout_s,checkpoint_interval_s\nj1,4,120,600\nj2,2,60,300\n"
TOPOLOGY_CSV = "node,leaf_switch,nic,port\nn0,leaf01,mlx5_0,1\nn1,leaf01,mlx5_0,1\n"
POOL_CSV = ("ts,pool,target,metric,value\n2026-11-28T00:00:00Z,pool0,t0,gc_active,0\n"
            "2026-11-28T00:00:10Z,pool0,t0,gc_active,1\n")
FABRIC_CSV = ("ts,node,device,port,counter,value\n"
              "2026-11-28T00:00:00Z,n0,mlx5_0,1,rx_prio3_pause,10\n"
              "2026-11-28T00:00:10Z,n0,mlx5_0,1,rx_prio3_pause,25\n")


def write_raw_dir(root: Path, *, bad: bool = False) -> Path:
    """A small raw directory in the canonical formats; with ``bad``, the issue's four bad inputs."""
    (root / "checkpoints").mkdir(parents=True)
    (root / "jobs").mkdir()
    (root / "pool").mkdir()
    (root / "fabric").mkdir()
    lines = [json.dumps(r) for r in CHECKPOINT_JSONL]
    csv_text = CHECKPOINT_CSV
    if bad:
        lines.append('{"job_id": "j1", "step": 100, "rank": 9, "node": "n4", "tier": "po')
        lines.append(json.dumps({**CHECKPOINT_JSONL[0], "rank": 10,
                                 "end_time": "2026-11-27T23:59:00Z"}))
        csv_text += "j2,7,2,n9,local,1764288000.0,1764288006.0,lots,0.01,5.5,0.4,0.09,ok\n"
        (root / "notes.bin").write_bytes(b"\x00\x01binary blob")
    (root / "checkpoints" / "j1.jsonl").write_text("\n".join(lines) + "\n")
    (root / "checkpoints" / "j2.csv").write_text(csv_text)
    (root / "jobs" / "jobs.csv").write_text(JOBS_CSV)
    (root / "topology.csv").write_text(TOPOLOGY_CSV)
    (root / "pool" / "pool.csv").write_text(POOL_CSV)
    (root / "fabric" / "counters.csv").write_text(FABRIC_CSV)
    return root


@pytest.fixture
def raw_dir(tmp_path: Path) -> Path:
    """A clean small raw directory."""
    return write_raw_dir(tmp_path / "raw")


@pytest.fixture
def bad_raw_dir(tmp_path: Path) -> Path:
    """Raw dir with a truncated JSON line, a non-numeric bytes, end < start, an unknown file."""
    return write_raw_dir(tmp_path / "raw", bad=True)


def lake_rows(lake_root: Path) -> dict[str, list[tuple[object, ...]]]:
    """Every table's rows without ``ingested_ts``, sorted: compares two lakes' content."""
    lake = Lake(lake_root)
    out = {}
    from ckptwatch.lake.schema import TABLES

    for name in TABLES:
        df = lake.read(name).drop("ingested_ts")
        out[name] = sorted(df.rows(), key=repr)
    return out


#: Test files that take the longest under ``make test``, slowest first (``--durations``).
#: ``make test`` hands whole files to its two workers in collection order (``--dist loadfile
#: --no-loadscope-reorder``; xdist's default order is by number of tests, which put one-test
#: files such as the e2e watch last): these go first, so that no long file starts last while
#: the other worker sits idle. Only the order changes; an entry that no longer exists does
#: nothing.
SLOW_FIRST = (
    "tests/test_wheel.py",
    "tests/flows/test_local_prefect.py",
    "tests/sql/test_marts.py",
    "tests/analysis/test_stalls.py",
    "tests/simulate/test_sampling_property.py",
    "tests/report/test_names.py",
    "tests/flows/test_dask.py",
    "tests/live/test_watch_e2e.py",  # real time (a 45 s timeout), little CPU
    "tests/cli/test_quiet_prefect.py",
    "tests/analysis/test_noise_evidence.py",
    "tests/pull/test_pull_prometheus.py",
    "tests/report/test_notebook.py",
    "tests/ingest/test_data_semantics.py",
    "tests/report/test_postmortem.py",
    "tests/lake/test_store.py",
    "tests/report/test_daily.py",
    "tests/sql/test_counters.py",
    "tests/live/test_evidence.py",
    "tests/report/test_plots.py",
    "tests/report/test_html.py",
    "tests/ingest/test_crash_safety.py",
    "tests/report/test_unfinished.py",
    "tests/simulate/test_format_mix.py",
    "tests/ingest/test_concurrency.py",
    "tests/sources/test_bulk_prometheus.py",
    "tests/sources/test_bulk_text.py",
)


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The files of ``SLOW_FIRST`` lead the collection, in its order; every worker sorts the
    same way, so their collections still agree, and each file keeps its own order."""
    rank = {path: i for i, path in enumerate(SLOW_FIRST)}
    items.sort(key=lambda item: rank.get(item.nodeid.split("::", 1)[0], len(rank)))


def prefect_db_template(config: pytest.Config, scratch: Path) -> Path:
    """Where a migrated Prefect database is kept between sessions (one per Prefect version);
    without pytest's cache (``-p no:cacheprovider``), ``scratch``: this session only."""
    from importlib.metadata import version

    cache = getattr(config, "cache", None)
    folder = cache.mkdir("prefect-db") if cache is not None else scratch
    return Path(folder) / f"prefect-{version('prefect')}.db"


@pytest.fixture(scope="session")
def prefect_harness(request: pytest.FixtureRequest,
                    tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """One Prefect API server on a temporary database for the whole session, as Prefect's
    ``prefect_test_harness`` runs one, at about a quarter of its CPU (~11 s instead of ~45 s
    on this machine): the server is the one the commands start (``LocalServer``: the parent
    never imports ``prefect.server``, no background services), and its database starts from
    a copy of one migrated before (pytest's cache; the first session migrates a fresh one and
    keeps a snapshot of it as it is when the server first answers; tests/test_wheel.py seeds
    its nightly's Prefect home from that snapshot too)."""
    import sqlite3

    from prefect.settings import PREFECT_API_URL, temporary_settings

    from ckptwatch.flows.local_prefect import LocalServer

    home = tmp_path_factory.mktemp("prefect-server")
    db = home / "prefect-test.db"
    template = prefect_db_template(request.config, home)
    if template.is_file():
        shutil.copyfile(template, db)
    server = LocalServer(home)
    saved = {k: os.environ.get(k)
             for k in ("PREFECT_HOME", "PREFECT_SERVER_DATABASE_CONNECTION_URL")}
    os.environ["PREFECT_HOME"] = str(home)
    os.environ["PREFECT_SERVER_DATABASE_CONNECTION_URL"] = f"sqlite+aiosqlite:///{db}"
    try:
        server.launch()  # the child reads the two variables now
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
    try:
        server.start(timeout=120)
        if not template.is_file():  # a consistent copy, made under another name, then renamed
            partial = template.with_name(f"{template.name}.{os.getpid()}.part")
            with sqlite3.connect(db) as src, sqlite3.connect(partial) as dest:
                src.backup(dest)
            os.replace(partial, template)
        with temporary_settings(updates={PREFECT_API_URL: server.api_url}):
            yield
            _drain_prefect_workers()
    finally:
        server.stop()


def _drain_prefect_workers() -> None:
    """Send what Prefect's log and event workers still hold before the server stops (as
    ``prefect_test_harness`` does), so that none of them fails against a stopped server."""
    import inspect

    from prefect.events.worker import EventsWorker
    from prefect.logging.handlers import APILogWorker
    from prefect.utilities.asyncutils import run_coro_as_sync

    async def drain() -> None:
        try:
            result = APILogWorker.instance().drain()
            if inspect.isawaitable(result):
                await result
        except RuntimeError:  # never started
            pass
        result = EventsWorker.drain_all()
        if inspect.isawaitable(result):
            await result

    run_coro_as_sync(drain())


@pytest.fixture(scope="session")
def sample_lake(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """data/sample ingested into a fresh lake, once a session (what `make demo` ingests; the
    docs' examples and their outputs are checked against it)."""
    from ckptwatch.ingest.run import ingest

    lake = tmp_path_factory.mktemp("sample") / "lake"
    ingest(PROJECT_ROOT / "data" / "sample", lake)
    return lake


ALERT_T0 = datetime(2026, 11, 28, tzinfo=UTC)


def write_hot_job(raw: Path, seconds: float, *, name: str = "c") -> Path:
    """Job ``hot`` in ``raw``: 8 one-rank checkpoints of ``seconds`` each, 10 minutes apart
    from ``ALERT_T0``, a 120 s timeout (``checkpoints/<name>.jsonl``, ``jobs/<name>.csv``)."""
    (raw / "checkpoints").mkdir(parents=True, exist_ok=True)
    (raw / "jobs").mkdir(exist_ok=True)
    rows = [{"job_id": "hot", "step": s, "rank": 0, "node": "n0", "tier": "pool",
             "start_time": (ALERT_T0 + timedelta(minutes=10 * s)).isoformat(),
             "end_time": (ALERT_T0 + timedelta(minutes=10 * s, seconds=seconds)).isoformat(),
             "bytes": 1}
            for s in range(8)]
    (raw / "checkpoints" / f"{name}.jsonl").write_text("".join(json.dumps(r) + "\n"
                                                               for r in rows))
    (raw / "jobs" / f"{name}.csv").write_text("job_id,n_ranks,checkpoint_timeout_s\nhot,1,120\n")
    return raw


def hot_lake(tmp_path: Path) -> Path:
    """A lake with one job whose tail (100 s) is at 83% of its 120 s timeout."""
    raw = write_hot_job(tmp_path / "raw", 100)
    assert main(["ingest", str(raw), "--lake", str(tmp_path / "lake"), "--quiet"]) == 0
    return tmp_path / "lake"


__all__ = ["hot_lake", "lake_rows", "prefect_db_template", "write_raw_dir", "pl"]
