"""Concurrent runs on one lake: serialised by the lock, no corruption, stale locks recovered.

Writers (``ingest``, the Prefect ingest flow and so the nightly flow, ``alerts``) take an
``flock`` on ``LAKE/.lock`` for the whole run. The kernel drops it when its holder dies, so a
killed run's lock blocks nothing; the file's text (who held it) is only for messages.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import duckdb
import pytest
from tests.conftest import PROJECT_ROOT, lake_rows, write_raw_dir

from ckptwatch.errors import LakeLockedError
from ckptwatch.ingest.run import ingest
from ckptwatch.lake.query import connect, run_sql
from ckptwatch.lake.store import Lake
from ckptwatch.settings import sql_dir

#: One ingest in a child process; prints the CLOCK_MONOTONIC interval it held the lock for.
RUN = r"""
import json, sys, time
from pathlib import Path
from ckptwatch.ingest.run import ingest
first = []
def progress(i, n, rel):
    if not first:
        first.append(time.monotonic())
report = ingest(Path(sys.argv[1]), Path(sys.argv[2]), lock_wait_s=120, progress=progress)
print(json.dumps({"start": first[0] if first else None, "end": time.monotonic(),
                  "ingested": report.count("ingested"), "rows": report.rows}))
"""


def lake_layer(lake: Path) -> duckdb.DuckDBPyConnection:
    """DuckDB with the lake layer's views (``sql/lake``: what every query reads the lake
    through), not the marts above it, which this test is not about."""
    con = connect(lake, build=False)
    for view in sorted((sql_dir() / "lake").glob("*.sql")):
        con.execute(view.read_text())
    return con


def _spawn(raw: Path, lake: Path) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": str(PROJECT_ROOT / "src")}
    return subprocess.Popen([sys.executable, "-c", RUN, str(raw), str(lake)], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _many_files(root: Path, tag: str, n: int) -> Path:
    write_raw_dir(root)
    for i in range(n):
        rows = "\n".join(f"2026-11-28T0{i % 10}:00:{s:02d}Z,pool-{tag},t{i},gc_active,{s}"
                         for s in range(30))
        (root / "pool" / f"{tag}{i:03d}.csv").write_text("ts,pool,target,metric,value\n"
                                                         + rows + "\n")
    return root


def test_simultaneous_ingests_are_serialised_and_add_up(tmp_path: Path) -> None:
    """Three runs started together, over two raw dirs that share files: their lock intervals
    never overlap, and the lake ends equal to one clean ingest of both dirs."""
    a = _many_files(tmp_path / "a", "a", 10)
    b = _many_files(tmp_path / "b", "b", 10)  # b shares the conftest files with a
    lake = tmp_path / "lake"
    procs = [_spawn(a, lake), _spawn(b, lake), _spawn(a, lake)]
    outs = []
    for p in procs:
        out, err = p.communicate(timeout=120)
        assert p.returncode == 0, err
        outs.append(json.loads(out))
    spans = sorted((o["start"], o["end"]) for o in outs if o["start"] is not None)
    assert len(spans) == 3
    for (_, end), (start, _) in zip(spans, spans[1:], strict=False):
        assert end <= start, "two runs held the lake at once"
    clean = tmp_path / "clean"
    ingest(a, clean)
    ingest(b, clean)
    assert lake_rows(lake) == lake_rows(clean)
    assert sum(o["ingested"] for o in outs) == len(Lake(lake).manifest_keys())


def test_a_run_killed_while_holding_the_lock_blocks_no_one(tmp_path: Path) -> None:
    """SIGKILL the run holding the lock: the waiting run takes over, rolls back what the
    killed one left half-written, and the lake ends exact."""
    raw = _many_files(tmp_path / "raw", "k", 160)  # long enough to outlast the 0.2 s below
    lake = tmp_path / "lake"
    holder = _spawn(raw, lake)
    manifest = lake / "_manifest"
    deadline = time.monotonic() + 60
    while not (manifest.is_dir() and len(list(manifest.iterdir())) >= 3):
        assert time.monotonic() < deadline and holder.poll() is None, "holder never started"
        time.sleep(0.005)
    waiter = _spawn(raw, lake)
    time.sleep(0.2)
    holder.send_signal(signal.SIGKILL)
    assert holder.wait() == -signal.SIGKILL, "the holder finished before it could be killed"
    out, err = waiter.communicate(timeout=120)
    assert waiter.returncode == 0, err
    clean = tmp_path / "clean"
    ingest(raw, clean)
    assert lake_rows(lake) == lake_rows(clean)
    assert not list((lake / "_inflight").iterdir())


def test_stale_lock_file_from_a_dead_run_is_no_obstacle(tmp_path: Path,
                                                        raw_dir: Path) -> None:
    lake = tmp_path / "lake"
    lake.mkdir()
    (lake / ".lock").write_text("pid 999999 since 2026-11-27T03:00:00Z")  # its holder is gone
    t0 = time.monotonic()
    report = ingest(raw_dir, lake, lock_wait_s=0)
    assert report.count("ingested") == 6 and time.monotonic() - t0 < 10
    assert (lake / ".lock").read_text().startswith(f"pid {os.getpid()} since ")


def test_live_holder_makes_the_second_run_fail_with_its_pid(tmp_path: Path,
                                                            raw_dir: Path) -> None:
    lake = tmp_path / "lake"
    code = ("import sys, time; from ckptwatch.lake.store import Lake; "
            "cm = Lake(sys.argv[1]).lock(); cm.__enter__(); print('held', flush=True); "
            "time.sleep(60)")
    env = {**os.environ, "PYTHONPATH": str(PROJECT_ROOT / "src")}
    holder = subprocess.Popen([sys.executable, "-c", code, str(lake)], env=env,
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        with pytest.raises(LakeLockedError) as err:
            ingest(raw_dir, lake, lock_wait_s=0.3)
        assert f"is locked by another run (pid {holder.pid} since " in str(err.value)
        assert not (lake / "_manifest").exists() or not list((lake / "_manifest").iterdir())
    finally:
        holder.kill()
        holder.wait()
    assert ingest(raw_dir, lake, lock_wait_s=5).count("ingested") == 6


def test_readers_see_whole_files_while_a_writer_runs(tmp_path: Path) -> None:
    """Queries during an ingest never meet a partial Parquet file or a broken view."""
    raw = _many_files(tmp_path / "raw", "r", 40)
    lake = tmp_path / "lake"
    ingest(raw / "jobs", lake)  # the lake exists, so that views can be built
    writer = _spawn(raw, lake)
    queries = 0
    while writer.poll() is None:
        con = lake_layer(lake)
        n = run_sql(con, "select count(*) as n from pool_metrics")["n"][0]
        assert n % 30 == 0 or n % 30 == 2, n  # whole files only: 30 rows each (+2 conftest)
        con.close()
        queries += 1
    assert writer.returncode == 0
    assert queries >= 3


@pytest.mark.prefect
def test_the_flow_takes_the_same_lock(prefect_harness: None, tmp_path: Path,
                                      raw_dir: Path) -> None:
    """The Prefect ingest flow (and so the nightly flow, which runs it) waits for the lock."""
    from ckptwatch.flows.ingest import ingest_flow

    lake = tmp_path / "lake"
    code = ("import sys, time; from ckptwatch.lake.store import Lake; "
            "cm = Lake(sys.argv[1]).lock(); cm.__enter__(); print('held', flush=True); "
            "time.sleep(60)")
    env = {**os.environ, "PYTHONPATH": str(PROJECT_ROOT / "src")}
    holder = subprocess.Popen([sys.executable, "-c", code, str(lake)], env=env,
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        with pytest.raises(LakeLockedError):
            ingest_flow(raw_dir, lake, lock_wait_s=0.3)
    finally:
        holder.kill()
        holder.wait()
    report = ingest_flow(raw_dir, lake, lock_wait_s=5)
    assert report.count("ingested") == 6
