"""The lake: atomic parts, manifest last, journal rollback, lock, Parquet round-trips."""

from __future__ import annotations

import errno
import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tests.conftest import lake_rows, write_raw_dir

from ckptwatch.errors import LakeError, LakeLockedError
from ckptwatch.ingest.run import ingest
from ckptwatch.lake.schema import POOL_METRICS
from ckptwatch.lake.store import Lake, atomic_write_bytes


def test_init_writes_a_zero_row_schema_part_per_table(tmp_path: Path) -> None:
    lake = Lake(tmp_path)
    lake.init()
    for table in ("checkpoint_writes", "quarantine", "fabric_counters"):
        df = lake.read(table)
        assert df.height == 0
        assert "source_file" in df.columns


def test_atomic_write_leaves_no_temp_and_replaces(tmp_path: Path) -> None:
    target = tmp_path / "a" / "b.json"
    atomic_write_bytes(target, b"one")
    atomic_write_bytes(target, b"two")
    assert target.read_bytes() == b"two"
    assert [p.name for p in target.parent.iterdir()] == ["b.json"]


def test_disk_full_gives_one_clear_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def full(*_a: object, **_k: object) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "fsync", full)
    with pytest.raises(LakeError, match="disk is full"):
        atomic_write_bytes(tmp_path / "x.json", b"data")
    assert not list(tmp_path.iterdir())


def test_journal_rolls_back_parts_of_an_interrupted_file(tmp_path: Path) -> None:
    lake = Lake(tmp_path)
    lake.init()
    rows = pl.DataFrame({"ts": [datetime(2026, 11, 28, tzinfo=UTC)], "pool": ["p"],
                         "target": ["t"], "metric": ["gc_active"], "value": [1.0],
                         "source_file": ["x.csv"], "ingested_ts": [datetime.now(UTC)]})
    [(rel, part)] = lake.plan_parts("k" * 64, POOL_METRICS, rows)
    lake.begin("k" * 64, [rel])
    lake.write_part(rel, POOL_METRICS, part)
    assert lake.read("pool_metrics").height == 1
    assert lake.recover() == 1  # as a new run would, before ingesting
    assert lake.read("pool_metrics").height == 0
    assert lake.recover() == 0



def _pool_rows(target: str) -> pl.DataFrame:
    return pl.DataFrame({"ts": [datetime(2026, 11, 28, tzinfo=UTC)], "pool": ["p"],
                         "target": [target], "metric": ["gc_active"], "value": [1.0],
                         "source_file": [f"{target}.csv"], "ingested_ts": [datetime.now(UTC)]})


@pytest.mark.parametrize("landed", [0, 1, 2], ids=["none", "one", "both"])
def test_a_batch_killed_between_its_manifest_entries_keeps_the_committed_files(
        tmp_path: Path, landed: int) -> None:
    """A batch of two files killed after ``landed`` of its manifest entries were renamed into
    place: ``recover`` keeps the parts of the committed files, removes the others' and the
    journal entry, and the lake then holds each committed file once."""
    lake = Lake(tmp_path)
    lake.init()
    keys = ["a" * 64, "b" * 64]
    planned = {k: lake.plan_parts(k, POOL_METRICS, _pool_rows(f"t{i}"))
               for i, k in enumerate(keys)}
    files = {k: [rel for rel, _ in parts] for k, parts in planned.items()}
    lake.begin_batch("c" * 64, files)
    lake.write_parts([(rel, POOL_METRICS, part) for parts in planned.values()
                      for rel, part in parts])
    for k in keys[:landed]:  # what commit_batch had renamed when the kill came
        atomic_write_bytes(tmp_path / "_manifest" / f"{k}.json", json.dumps(
            {"key": k, "path": f"{k[0]}.csv", "size_bytes": 1, "ingested_ts": "x",
             "rows": {"pool_metrics": 1}, "quarantined": 0, "parts": files[k]}).encode())
    assert lake.read("pool_metrics").height == 2
    assert lake.recover() == (1 if landed < 2 else 0)  # files rolled back: none when all landed
    assert sorted(lake.read("pool_metrics")["target"]) == [f"t{i}" for i in range(landed)]
    assert not list((tmp_path / "_inflight").iterdir())
    assert lake.recover() == 0


def test_write_parts_failing_half_way_leaves_no_temp_file(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A disk that fills while a batch's parts are fsynced: one ``LakeError``, no temp file;
    ``rollback_batch`` then leaves the lake as ``init`` made it."""
    lake = Lake(tmp_path)
    lake.init()
    before = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*"))
    planned = {k: lake.plan_parts(k, POOL_METRICS, _pool_rows(k[:2]))
               for k in ("a" * 64, "b" * 64)}
    files = {k: [rel for rel, _ in parts] for k, parts in planned.items()}
    lake.begin_batch("c" * 64, files)

    def full(*_a: object, **_k: object) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "fsync", full)
    with pytest.raises(LakeError, match="disk is full"):
        lake.write_parts([(rel, POOL_METRICS, part) for parts in planned.values()
                          for rel, part in parts])
    monkeypatch.undo()
    assert not [p for p in tmp_path.rglob("*") if p.name.endswith(".tmp")]
    lake.rollback_batch("c" * 64, files)
    assert sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*")) == before

def test_lock_times_out_with_a_clear_message(tmp_path: Path) -> None:
    lake = Lake(tmp_path)
    code = ("import sys,time; sys.path.insert(0, 'src');"
            "from ckptwatch.lake.store import Lake; l = Lake(sys.argv[1]);"
            "cm = l.lock(); cm.__enter__(); print('held', flush=True); time.sleep(30)")
    holder = subprocess.Popen([sys.executable, "-c", code, str(tmp_path)],
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        with pytest.raises(LakeLockedError, match="is locked by another run"), lake.lock(
                wait_s=0.3):
            pass
    finally:
        holder.kill()
        holder.wait()
    with lake.lock(wait_s=5):  # the killed holder's lock is gone
        pass


@settings(max_examples=25, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(values=st.lists(st.floats(allow_nan=False, allow_infinity=False, width=64), min_size=1,
                       max_size=30),
       offsets=st.lists(st.integers(min_value=0, max_value=3 * 86400), min_size=1, max_size=30))
def test_pool_rows_round_trip_through_csv_and_parquet(tmp_path_factory: pytest.TempPathFactory,
                                                      values: list[float],
                                                      offsets: list[int]) -> None:
    n = min(len(values), len(offsets))
    base = datetime(2026, 11, 28, tzinfo=UTC)
    ts = [base + timedelta(seconds=o) for o in offsets[:n]]
    raw = tmp_path_factory.mktemp("raw")
    (raw / "pool").mkdir()
    lines = ["ts,pool,target,metric,value"] + [
        f"{t.isoformat()},pool0,t{i},m,{v!r}"
        for i, (t, v) in enumerate(zip(ts, values, strict=False))]
    (raw / "pool" / "p.csv").write_text("\n".join(lines) + "\n")
    lake_dir = tmp_path_factory.mktemp("lake")
    ingest(raw, lake_dir)
    got = Lake(lake_dir).read("pool_metrics").sort("target")
    want = sorted(zip([f"t{i}" for i in range(n)], ts, values[:n], strict=True))
    assert got.select("target", "ts", "value").rows() == want
    ingest(raw, lake_dir)
    assert Lake(lake_dir).read("pool_metrics").height == n


def _many_files_raw(root: Path, n: int = 30) -> Path:
    write_raw_dir(root)
    for i in range(n):
        rows = "\n".join(f"2026-11-{28 + i % 2}T00:{i:02d}:{s:02d}Z,pool0,t{i},gc_active,{s % 2}"
                         for s in range(60))
        (root / "pool" / f"p{i:03d}.csv").write_text("ts,pool,target,metric,value\n" + rows + "\n")
    return root


def _kill_after_commits(cmd: list[str], lake: Path, commits: int) -> bool:
    """Run ``cmd``; SIGKILL it once the lake holds ``commits`` manifest entries. True if killed."""
    env = {**os.environ, "PYTHONPATH": "src"}
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    manifest = lake / "_manifest"
    deadline = time.monotonic() + 60
    while proc.poll() is None and time.monotonic() < deadline:
        if manifest.is_dir() and sum(1 for _ in manifest.iterdir()) >= commits:
            proc.send_signal(signal.SIGKILL)
            proc.wait()
            return True
        time.sleep(0.002)
    proc.wait()
    return False


@dataclass(frozen=True)
class CleanRun:
    """A raw directory of many small files and what one uninterrupted ingest of it holds."""

    raw: Path
    rows: dict[str, list[tuple[object, ...]]]
    n_files: int


@pytest.fixture(scope="module")
def clean_run(tmp_path_factory: pytest.TempPathFactory) -> CleanRun:
    """150 pool files and the small raw directory, ingested once without a kill (the
    reference of both kill loops: they only read the raw directory)."""
    base = tmp_path_factory.mktemp("kills")
    raw = _many_files_raw(base / "raw", n=150)
    ingest(raw, base / "clean")
    return CleanRun(raw, lake_rows(base / "clean"),
                    len(list((base / "clean" / "_manifest").iterdir())))


def killed_runs_then_rerun(clean: CleanRun, lake: Path, rounds: int, seed: int) -> int:
    """Kill an ingest at random points ``rounds`` times, rerun, compare with a clean run."""
    import random

    rng = random.Random(seed)
    raw, n_files = clean.raw, clean.n_files
    cmd = [sys.executable, "-m", "ckptwatch.cli.main", "ingest", str(raw), "--lake", str(lake),
           "--quiet"]
    kills = 0
    committed = 0
    for _ in range(rounds):
        committed = min(n_files - 1, committed + rng.randint(1, max(1, n_files // rounds)))
        kills += _kill_after_commits(cmd, lake, committed)
    ingest(raw, lake)
    assert lake_rows(lake) == clean.rows
    assert not list(lake.glob("*/*/.*.tmp"))
    assert not list((lake / "_inflight").iterdir())
    return kills


def test_killed_ingest_reruns_to_exactly_one_clean_run(clean_run: CleanRun,
                                                       tmp_path: Path) -> None:
    kills = killed_runs_then_rerun(clean_run, tmp_path / "lake", rounds=3, seed=1)
    assert kills >= 1, "every ingest finished before its kill: make the input larger"


@pytest.mark.slow
def test_many_kills_lose_and_duplicate_nothing(clean_run: CleanRun, tmp_path: Path) -> None:
    kills = killed_runs_then_rerun(clean_run, tmp_path / "lake", rounds=12, seed=7)
    assert kills >= 6


def test_a_lake_path_that_is_a_file_is_one_clear_error(tmp_path: Path) -> None:
    from ckptwatch.errors import LakeError
    from ckptwatch.lake.store import Lake

    path = tmp_path / "lake"
    path.write_text("not a lake")
    with pytest.raises(LakeError, match=r"is a file, not a directory: name a directory"):
        Lake(path).init()
    with pytest.raises(LakeError, match=r"is a file, not a directory"), Lake(path).lock(0.1):
        pass
