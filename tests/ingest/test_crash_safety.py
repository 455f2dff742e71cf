"""Crash safety: SIGKILL at any step, disk full, permission denied; nothing lost, nothing doubled.

Every I/O step of the lake (partition ``mkdir``, Parquet write, ``fsync``, ``rename``,
``unlink``) is counted. The kill loop SIGKILLs an ingest at randomly chosen steps, many times in
a row on the same lake (so that recovery itself gets killed too), checking after each kill that
queries see only whole Parquet files, then reruns and compares with a clean run. A Parquet
write is killed half-written (the temp file truncated) to prove it is never visible.

Disk full (ENOSPC) and permission denied (EACCES, EROFS) are injected at every step of a run in
process, and also produced for real with a small tmpfs and a read-only bind mount where the
machine allows mounts (root): one clear error, and the lake byte for byte as it was.

Budget: ``CKPTWATCH_KILL_ROUNDS`` kills per chain (default 6, two chains); with
``CKPTWATCH_KILL_REPORT=path`` the kills survived are appended to ``path``.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import os
import random
import re
import shutil
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path

import duckdb
import pyarrow.parquet as pq
import pytest
from tests.conftest import PROJECT_ROOT, lake_rows, write_raw_dir

from ckptwatch.cli.main import main
from ckptwatch.errors import LakeError
from ckptwatch.ingest.run import ingest
from ckptwatch.lake import store as lake_module
from ckptwatch.lake.query import connect, run_sql
from ckptwatch.lake.store import Lake
from ckptwatch.settings import INGEST, sql_dir

KILL_ROUNDS = int(os.environ.get("CKPTWATCH_KILL_ROUNDS", "6"))

#: Wraps the lake's I/O steps in a child process and SIGKILLs it at step ``KILL_AT`` (0: count
#: the steps and print the count). A Parquet write killed mid-way leaves a truncated temp file.
CHILD = r"""
import os, signal, sys
from pathlib import Path
import pyarrow.parquet as pq
from ckptwatch.lake import store as L
from ckptwatch.ingest.run import ingest
from ckptwatch.lake.store import Lake

kill_at, steps = int(sys.argv[3]), [0]

def step(torn=None):
    steps[0] += 1
    if steps[0] == kill_at:
        if torn is not None and os.path.exists(torn):
            with open(torn, "r+b") as fh:
                fh.truncate(max(1, os.path.getsize(torn) // 2))
        os.kill(os.getpid(), signal.SIGKILL)

def wrap(owner, name, torn=False):
    real = getattr(owner, name)
    def inner(*a, **k):
        if torn:  # write first, then (maybe) die with the temp file half written
            out = real(*a, **k)
            step(str(a[1]))
            return out
        step()
        return real(*a, **k)
    setattr(owner, name, inner)

wrap(os, "fsync"); wrap(os, "replace"); wrap(os, "unlink"); wrap(os, "rmdir")
wrap(Path, "mkdir"); wrap(pq, "write_table", torn=True)
ingest(Path(sys.argv[1]), Path(sys.argv[2]), lock_wait_s=30)
print(steps[0])
"""


def _child(raw: Path, lake: Path, kill_at: int) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(PROJECT_ROOT / "src")}
    return subprocess.run([sys.executable, "-c", CHILD, str(raw), str(lake), str(kill_at)],
                          env=env, capture_output=True, text=True, timeout=120, check=False)


def _raw(root: Path, n_pool: int = 6) -> Path:
    """The conftest raw dir plus pool files that span two dates (two partitions per file)."""
    write_raw_dir(root, bad=True)
    for i in range(n_pool):
        rows = "\n".join(f"2026-11-{28 + s % 2}T0{i}:00:{s:02d}Z,pool0,t{i},gc_active,{s % 2}"
                         for s in range(20))
        (root / "pool" / f"p{i}.csv").write_text("ts,pool,target,metric,value\n" + rows + "\n")
    return root


def lake_layer(lake: Path) -> duckdb.DuckDBPyConnection:
    """DuckDB with the lake layer's views (``sql/lake``: what every query reads the lake
    through), not the marts above it, which this test is not about."""
    con = connect(lake, build=False)
    for view in sorted((sql_dir() / "lake").glob("*.sql")):
        con.execute(view.read_text())
    return con


def _visible_parts_are_whole(lake: Path) -> None:
    """What a query can see right after a crash: whole Parquet files only, and SQL works."""
    for part in lake.glob("*/*/*.parquet"):  # the glob the lake views read
        pq.read_table(part)
    assert not [p for p in lake.glob("*/*/*") if p.name.endswith(".tmp")
                and p.name.endswith(".parquet")]
    con = lake_layer(lake)
    run_sql(con, "select count(*) from checkpoint_writes")
    run_sql(con, "select count(*) from quarantine")
    con.close()


@dataclass(frozen=True)
class CleanRun:
    """The kill loops' raw directory and what one uninterrupted child's ingest of it holds."""

    raw: Path
    rows: dict[str, list[tuple[object, ...]]]
    n_steps: int


@pytest.fixture(scope="module")
def clean_run(tmp_path_factory: pytest.TempPathFactory) -> CleanRun:
    """One clean run in a child that counts the I/O steps (the reference of both chains: they
    only read the raw directory)."""
    base = tmp_path_factory.mktemp("kill-chain")
    raw = _raw(base / "raw")
    count = _child(raw, base / "clean", 0)
    assert count.returncode == 0, count.stderr
    return CleanRun(raw, lake_rows(base / "clean"), int(count.stdout.split()[-1]))


def kill_chain(clean: CleanRun, lake: Path, rounds: int, seed: int) -> int:
    """SIGKILL ``rounds`` ingests of one lake at random steps, then rerun and compare with a
    clean run. Returns the kills."""
    rng = random.Random(seed)
    raw, n_steps = clean.raw, clean.n_steps
    kills = 0
    span = max(2, 2 * n_steps // rounds)  # a run makes ~span/2 steps of progress per kill
    while kills < rounds:
        run = _child(raw, lake, rng.randint(1, span))
        if run.returncode != -signal.SIGKILL:
            assert run.returncode == 0, run.stderr
            break  # this run finished: the lake is complete
        kills += 1
        if (lake / "_manifest").is_dir():
            _visible_parts_are_whole(lake)
    report = ingest(raw, lake)
    assert lake_rows(lake) == clean.rows  # no lost rows, no duplicates
    assert not list((lake / "_inflight").iterdir())
    assert not [p for p in lake.rglob("*") if p.name.endswith(".tmp")]
    assert report.count("failed") == 0
    return kills


@pytest.mark.slow
@pytest.mark.parametrize("seed", [11, 29])
def test_sigkill_at_random_steps_then_rerun_equals_a_clean_run(clean_run: CleanRun,
                                                               tmp_path: Path,
                                                               seed: int) -> None:
    kills = kill_chain(clean_run, tmp_path / "lake", KILL_ROUNDS, seed)
    n_steps = clean_run.n_steps
    report = os.environ.get("CKPTWATCH_KILL_REPORT")
    if report:  # figures for RELIABILITY.md
        with open(report, "a") as fh:
            fh.write(f"seed {seed}: {kills} kills survived, {n_steps} steps per clean run\n")
    assert n_steps > 50
    assert kills >= KILL_ROUNDS // 2, "most kill points should land inside the run"


# --------------------------------------------------------------------------- faults in process

Fault = Callable[[str], BaseException]


class Steps:
    """Counts the lake's I/O steps in this process and raises ``fault`` at step ``fail_at``."""

    def __init__(self, fail_at: int | None, fault: Fault) -> None:
        self.n = 0
        self.fail_at = fail_at
        self.fault = fault

    def step(self, what: str) -> None:
        self.n += 1
        if self.n == self.fail_at:
            raise self.fault(what)


@contextlib.contextmanager
def faults(monkeypatch: pytest.MonkeyPatch, fail_at: int | None, fault: Fault) -> Iterator[Steps]:
    """Inject ``fault`` at the ``fail_at``-th lake I/O step (None: only count)."""
    steps = Steps(fail_at, fault)
    with monkeypatch.context() as m:
        for owner, name in ((os, "fsync"), (os, "replace"), (Path, "mkdir")):
            real = getattr(owner, name)

            def inner(*a: object, _real: Callable[..., object] = real, _name: str = name,
                      **k: object) -> object:
                steps.step(_name)
                return _real(*a, **k)

            m.setattr(owner, name, inner)
        real_write = pq.write_table

        def write_table(table: object, where: object, *a: object, **k: object) -> None:
            real_write(table, where, *a, **k)  # the bytes land, then the disk "fills"
            steps.step("write_table")

        m.setattr(lake_module.pq, "write_table", write_table)
        yield steps


def enospc(what: str) -> OSError:
    """The error a full disk raises."""
    return OSError(errno.ENOSPC, "No space left on device", what)


def eacces(what: str) -> OSError:
    """The error a directory the user cannot write raises."""
    return OSError(errno.EACCES, "Permission denied", what)


def snapshot(lake: Path) -> dict[str, str]:
    """Every file's content hash and every directory, except the lock file (who holds it)."""
    out = {}
    for p in sorted(lake.rglob("*")):
        rel = p.relative_to(lake).as_posix()
        if rel == ".lock":
            continue
        out[rel] = "dir" if p.is_dir() else hashlib.sha256(p.read_bytes()).hexdigest()
    return out


@pytest.fixture
def grown_raw(tmp_path: Path) -> tuple[Path, Path, dict[str, list[tuple[object, ...]]]]:
    """(raw dir, lake holding its first batch, rows of a clean lake of both batches): the
    second batch is one new file of three tables' worth of records over two dates."""
    raw = write_raw_dir(tmp_path / "raw")
    lake = tmp_path / "lake"
    ingest(raw, lake)
    (raw / "smart" / "n0").mkdir(parents=True)
    lines = [
        '{"node": "n0", "device": "eth0", "collected_at": "2026-11-28T23:59:59Z", '
        '"output": "NIC statistics:\\n     rx_prio3_pause: 5\\n"}',
        '{"node": "n0", "device": "eth0", "collected_at": "2026-11-29T00:00:01Z", '
        '"output": "NIC statistics:\\n     rx_prio3_pause: 9\\n"}',
        '{"node": "n0", "output": "garbage"}',
    ]
    (raw / "smart" / "n0" / "late.jsonl").write_text("\n".join(lines) + "\n")
    clean = tmp_path / "clean"
    ingest(raw, clean)
    return raw, lake, lake_rows(clean)


@pytest.mark.parametrize("fault", [enospc, eacces], ids=["disk-full", "permission-denied"])
def test_write_failure_at_every_step_leaves_the_lake_as_it_was(
        grown_raw: tuple[Path, Path, dict[str, list[tuple[object, ...]]]],
        monkeypatch: pytest.MonkeyPatch, fault: Fault) -> None:
    raw, lake, want = grown_raw
    before = snapshot(lake)
    probe = lake.parent / "probe"
    shutil.copytree(lake, probe)
    with faults(monkeypatch, None, fault) as counted:
        ingest(raw, probe)  # count the steps of the same run on a copy of the lake
    n_steps = counted.n
    assert n_steps >= 8
    hint = "the disk is full" if fault is enospc else "permission denied"
    naming_the_file = 0
    for k in range(1, n_steps + 1):
        with faults(monkeypatch, k, fault), pytest.raises(LakeError) as err:
            ingest(raw, lake)
        message = str(err.value)
        assert hint in message and "\n" not in message, message
        naming_the_file += "while writing smart/n0/late.jsonl, which was rolled back" in message
        assert snapshot(lake) == before, f"step {k} changed the lake"
    assert naming_the_file >= n_steps // 2  # failures inside the file's write name it
    ingest(raw, lake)
    assert lake_rows(lake) == want


def test_ctrl_c_mid_file_rolls_the_file_back(
        grown_raw: tuple[Path, Path, dict[str, list[tuple[object, ...]]]],
        monkeypatch: pytest.MonkeyPatch) -> None:
    raw, lake, want = grown_raw
    before = snapshot(lake)
    for k in (3, 6, 9):
        with faults(monkeypatch, k, lambda _w: KeyboardInterrupt()), pytest.raises(
                KeyboardInterrupt):
            ingest(raw, lake)
        assert snapshot(lake) == before
    ingest(raw, lake)
    assert lake_rows(lake) == want


def test_disk_full_is_one_line_from_the_cli(
        grown_raw: tuple[Path, Path, dict[str, list[tuple[object, ...]]]],
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    raw, lake, _ = grown_raw
    shutil.copytree(lake, lake.parent / "probe")
    with faults(monkeypatch, None, enospc) as counted:
        ingest(raw, lake.parent / "probe")
    with faults(monkeypatch, counted.n - 3, enospc):  # inside the new file's write
        code = main(["ingest", str(raw), "--lake", str(lake), "--quiet"])
    out, err = capsys.readouterr()
    assert code == 2 and out == ""
    assert err.count("\n") == 1
    assert err.startswith("ckptwatch ingest: error: cannot write ")
    assert "the disk is full; free space and rerun (while writing smart/n0/late.jsonl, which " \
           "was rolled back; 0 file(s) committed earlier in this run are kept; rerun to " \
           "finish)" in err


def test_failure_after_some_files_keeps_those_files(tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """A run that fails half way keeps the files it committed, whole, and says how many; a
    rerun adds the rest and ends with exactly the clean run's rows. Files are written in
    batches (``IngestSettings.batch_files``): two a batch here, so that half way through the
    seven new files some batches are committed."""
    limits = replace(INGEST, batch_files=2)
    raw = _raw(tmp_path / "raw")
    (raw / "pool").rename(tmp_path / "pool-later")
    lake = tmp_path / "lake"
    ingest(raw, lake, limits=limits)
    (tmp_path / "pool-later").rename(raw / "pool")
    before = Lake(lake).manifest_keys()
    shutil.copytree(lake, tmp_path / "probe")
    with faults(monkeypatch, None, enospc) as counted:
        ingest(raw, tmp_path / "probe", limits=limits)
    with faults(monkeypatch, counted.n // 2, enospc), pytest.raises(LakeError) as err:
        ingest(raw, lake, limits=limits)
    m = re.search(r"(\d+) file\(s\) committed earlier in this run are kept", str(err.value))
    assert m and int(m.group(1)) >= 1, str(err.value)
    new = [e for e in Lake(lake).manifest() if e.key not in before]
    assert len(new) == int(m.group(1))
    assert not list((lake / "_inflight").iterdir())
    _visible_parts_are_whole(lake)
    assert Lake(lake).read("pool_metrics").height == sum(e.rows["pool_metrics"] for e in new)
    ingest(raw, lake, limits=limits)
    assert lake_rows(lake) == lake_rows(_clean(raw, tmp_path / "clean"))


# --------------------------------------------------------------------------- real file systems


@contextlib.contextmanager
def mounted(args: list[str], target: Path) -> Iterator[None]:
    """``mount ARGS TARGET`` for the block; skips the test where mounting is not allowed."""
    target.mkdir(parents=True, exist_ok=True)
    try:
        done = subprocess.run(["mount", *args, str(target)], capture_output=True, text=True,
                              timeout=30, check=False)
    except (OSError, subprocess.SubprocessError) as exc:
        pytest.skip(f"cannot mount here: {exc}")
    if done.returncode != 0:
        pytest.skip(f"cannot mount here: {done.stderr.strip()}")
    try:
        yield
    finally:
        subprocess.run(["umount", "-l", str(target)], capture_output=True, timeout=30,
                       check=False)



def test_failure_inside_a_batch_rolls_the_whole_batch_back(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A failure in the middle of a batch's write (its second part: its files share a part
    per table and day) rolls back every file of the batch, says how many were written with
    the one it names, and a rerun ends with exactly the clean run's rows."""
    raw = _raw(tmp_path / "raw")
    (raw / "pool").rename(tmp_path / "pool-later")
    lake = tmp_path / "lake"
    ingest(raw, lake)
    (tmp_path / "pool-later").rename(raw / "pool")
    before = snapshot(lake)
    real = lake_module.pq.write_table
    calls = [0]

    def second_part_fails(table: object, where: object, *a: object, **k: object) -> None:
        calls[0] += 1
        if calls[0] == 2:
            raise enospc(str(where))
        real(table, where, *a, **k)

    monkeypatch.setattr(lake_module.pq, "write_table", second_part_fails)
    with pytest.raises(LakeError) as err:
        ingest(raw, lake)
    message = str(err.value)
    assert "while writing pool/p0.csv and 6 other file(s) written with it, which were rolled " \
           "back; 0 file(s) committed earlier in this run are kept" in message, message
    assert snapshot(lake) == before
    monkeypatch.setattr(lake_module.pq, "write_table", real)
    ingest(raw, lake)
    assert lake_rows(lake) == lake_rows(_clean(raw, tmp_path / "clean"))

def test_real_full_disk(tmp_path: Path) -> None:
    """A tmpfs filled to the brim: one clear error, the lake unchanged, a rerun after freeing
    space completes it."""
    disk = tmp_path / "disk"
    with mounted(["-t", "tmpfs", "-o", "size=2m", "tmpfs"], disk):
        raw = write_raw_dir(tmp_path / "raw")
        lake = disk / "lake"
        ingest(raw, lake)
        rows = "\n".join(f"2026-11-{1 + i % 28:02d}T00:00:00Z,pool0,t{i},gc_active,{i}"
                         for i in range(40_000))
        (raw / "pool" / "big.csv").write_text("ts,pool,target,metric,value\n" + rows + "\n")
        filler = disk / "filler"
        with open(filler, "wb") as fh:  # leave ~150 kB: enough for some parts, not all
            free = os.statvfs(disk).f_bavail * os.statvfs(disk).f_frsize
            fh.write(b"\0" * max(0, free - 150_000))
        before = snapshot(lake)
        with pytest.raises(LakeError, match="the disk is full; free space and rerun"):
            ingest(raw, lake)
        assert snapshot(lake) == before
        filler.unlink()
        ingest(raw, lake)
        assert lake_rows(lake) == lake_rows(_clean(raw, tmp_path / "clean"))


def test_real_read_only_lake_and_table(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A lake on a read-only mount, then one read-only table directory: one line each, the
    lake unchanged."""
    raw, lake = _first_batch_without_pool(tmp_path)
    before = snapshot(lake)
    with mounted(["--bind", "-o", "ro", str(lake)], lake):
        if not _really_read_only(lake):
            pytest.skip("bind mount did not become read-only")
        code = main(["ingest", str(raw), "--lake", str(lake), "--quiet"])
        _, err = capsys.readouterr()
        assert code == 2 and err.count("\n") == 1
        assert "the file system is read-only; remount it read-write or use another --lake" in err
    assert snapshot(lake) == before
    table = lake / "pool_metrics"
    with mounted(["--bind", "-o", "ro", str(table)], table):
        if not _really_read_only(table):
            pytest.skip("bind mount did not become read-only")
        with pytest.raises(LakeError, match="read-only") as failure:
            ingest(raw, lake)
        assert "pool/pool.csv, which was rolled back" in str(failure.value)
    assert snapshot(lake) == before
    ingest(raw, lake)
    assert lake_rows(lake) == lake_rows(_clean(raw, tmp_path / "clean"))


def _first_batch_without_pool(tmp_path: Path) -> tuple[Path, Path]:
    """(raw dir, lake): the lake holds the raw dir's files except ``pool/``, added since."""
    raw = write_raw_dir(tmp_path / "raw")
    (raw / "pool").rename(tmp_path / "pool-later")
    lake = tmp_path / "lake"
    ingest(raw, lake)
    (tmp_path / "pool-later").rename(raw / "pool")
    return raw, lake


def _really_read_only(path: Path) -> bool:
    try:
        (path / ".probe").touch()
    except OSError as exc:
        return exc.errno == errno.EROFS
    (path / ".probe").unlink()
    return False


def _clean(raw: Path, lake: Path) -> Path:
    ingest(raw, lake)
    return lake
