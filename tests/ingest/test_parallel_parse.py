"""The parse step in worker processes (``ingest.parallel``) writes exactly the lake of a run in
one process: the same rows, quarantine and file results, copies skipped once, a dead worker's
groups parsed again here, and a calling script without a ``__main__`` guard run only once."""

from __future__ import annotations

import gzip
import os
import signal
import subprocess
import sys
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

import pytest
from tests.conftest import lake_rows, write_raw_dir
from tests.sources.test_bulk_json import BASES, _mixed_lines, envelope
from tests.sources.test_envelope_batch import REAL_FILES

from ckptwatch.errors import ConfigError
from ckptwatch.ingest import parallel
from ckptwatch.ingest import run as run_module
from ckptwatch.ingest.discover import discover
from ckptwatch.ingest.read import load_file, parse_loaded
from ckptwatch.ingest.run import ingest
from ckptwatch.ingest.write import write_files
from ckptwatch.lake.store import Lake
from ckptwatch.settings import INGEST, WORKERS_ENV, ingest_settings, parse_workers

ETH = "NIC statistics:\n     rx_prio3_pause: 7\n     rx_bytes: 9\n"
PERFQUERY = ("# Port extended counters: Lid 7 port 1 (CapMask: 0x5A00)\n"
             "PortXmitData:....................1000\nPortXmitWait:....................5\n")


def _raw(root: Path) -> Path:
    """Envelope files of every kind (the genuine fixtures of tests/fixtures/real, bad lines, a
    copy of a file, a cut-off .gz) beside the canonical small raw directory with its bad
    records."""
    write_raw_dir(root, bad=True)
    mixed = _mixed_lines()
    files = {
        "smart/node001.jsonl": mixed,
        "smart/node002.jsonl": mixed[::-1] + ["{not json"],
        "smart/node009.jsonl": mixed,  # node001's content again: skipped
        "smart/node005.jsonl": [envelope(*base, device="nvme0") for base in BASES],
        **{f"fabric/node{k:03d}.jsonl": [
            envelope("ethtool", ETH.replace("7", str(k)), device="eth0", node=f"node{k}",
                     collected_at=f"2026-11-28T00:0{j}:00Z") for j in range(3)]
            + [envelope("perfquery", PERFQUERY, device="mlx5_0", node=f"node{k}")]
            for k in range(10, 22)},
        "fabric/node013b.jsonl": [],  # filled below: node013's bytes
    }
    for rel, lines in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("\n".join(lines) + "\n")
    (root / "fabric" / "node013b.jsonl").write_bytes(
        (root / "fabric" / "node013.jsonl").read_bytes())
    for k, data in enumerate(REAL_FILES):  # every genuine fixture, as an envelope file
        (root / "smart" / f"real{k:02d}.jsonl").write_bytes(data)
    broken = gzip.compress(("\n".join(mixed) + "\n").encode())
    (root / "smart" / "node006.jsonl.gz").write_bytes(broken[: len(broken) // 2])
    return root


def _parts(lake: Path) -> dict[str, bytes]:
    """The lake's Parquet parts by path (names are the file key's, table's and day's)."""
    return {str(p.relative_to(lake)): p.read_bytes() for p in sorted(lake.rglob("*.parquet"))
            if "date=1970-01-01" not in str(p)}


def _results(report: run_module.IngestReport) -> list[tuple[object, ...]]:
    return [(f.rel, f.status, f.rows, f.quarantined, f.notes, f.error) for f in report.files]


def _segments() -> set[str]:
    """The shared-memory segments of this machine (Linux: ``/dev/shm``).

    Only ``SharedMemory``'s own (``psm_*``): a broken pool's queue semaphores (``sem.mp-*``)
    are the executor's, unlinked when the garbage collector gets to them.
    """
    shm = Path("/dev/shm")
    return {p.name for p in shm.iterdir() if p.name.startswith("psm_")} if shm.is_dir() else set()


def _no_room(fd: int, offset: int, length: int) -> None:
    raise OSError(28, "No space left on device")


@pytest.mark.parametrize("transport", ["pipe", "shared", "shared, no room"])
def test_workers_write_the_lake_of_one_process(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                               transport: str) -> None:
    """Whichever way the groups' bytes reach the workers (the pool's pipe; shared-memory
    segments; a full ``/dev/shm``, where they fall back to the pipe), the lake is the one
    process's, and no segment is left behind."""
    raw = _raw(tmp_path / "raw")
    small = replace(INGEST, parse_bytes=600)  # many small groups, several in flight
    monkeypatch.setattr(parallel, "SHARE_MIN_BYTES", 0 if "shared" in transport else 1 << 40)
    monkeypatch.setattr(parallel, "KEEP_SEGMENT_BYTES", parallel._MIB)  # kept and reused
    if "no room" in transport:
        monkeypatch.setattr(parallel.os, "posix_fallocate", _no_room)
    made: list[str] = []
    put = parallel._Segments.put

    def put_and_note(self: parallel._Segments, group: list[object]) -> object:
        sent, shared = put(self, group)  # type: ignore[arg-type]
        if shared is not None:
            made.append(shared[0])
        return sent, shared

    monkeypatch.setattr(parallel._Segments, "put", put_and_note)
    before = _segments()
    alone = ingest(raw, tmp_path / "alone", limits=small, workers=1)
    spread = ingest(raw, tmp_path / "spread", limits=replace(small, workers=2))
    assert bool(made) == (transport == "shared")  # groups sent in segments, or none
    assert _segments() <= before  # every segment unlinked
    assert lake_rows(tmp_path / "spread") == lake_rows(tmp_path / "alone")
    assert sorted(_parts(tmp_path / "spread")) == sorted(_parts(tmp_path / "alone"))
    assert _results(spread) == _results(alone)
    status = {f.rel: f.status for f in spread.files}
    assert status["smart/node009.jsonl"] == "skipped"
    assert [status["fabric/node013.jsonl"], status["fabric/node013b.jsonl"]] \
        == ["ingested", "skipped"]  # the copy's first was still being parsed when it came
    assert status["smart/node006.jsonl.gz"] == "failed"
    assert spread.quarantined == alone.quarantined > 0
    assert sum(status[f"smart/real{k:02d}.jsonl"] == "ingested"
               for k in range(len(REAL_FILES))) > 10
    assert spread.notes == alone.notes
    # a rerun over the same lake writes nothing twice
    again = ingest(raw, tmp_path / "spread", limits=small, workers=2)
    assert {f.status for f in again.files} <= {"skipped", "ignored", "failed"}
    assert lake_rows(tmp_path / "spread") == lake_rows(tmp_path / "alone")


@pytest.mark.parametrize("shared", [False, True])
def test_a_dead_worker_s_groups_are_parsed_here(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                shared: bool) -> None:
    monkeypatch.setattr(parallel, "SHARE_MIN_BYTES", 0 if shared else 1 << 40)
    monkeypatch.setattr(parallel, "KEEP_SEGMENT_BYTES", 0)  # each segment freed after use
    before = _segments()
    raw = _raw(tmp_path / "raw")
    files = discover(raw)
    items = list({x.key: x for x in map(load_file, files)}.values())  # one of each copy
    expected = parse_loaded(items)
    lake, now = Lake(tmp_path / "lake"), datetime.now(UTC)
    with parallel.Parsing(2) as parsing:
        got = parsing.submit(items[:3], lake, now)  # starts the workers
        pool = parsing._pool
        assert pool is not None
        for proc in list(pool._processes.values()):  # killed as the OOM killer would
            assert proc.pid is not None
            os.kill(proc.pid, signal.SIGKILL)
        got += parsing.submit(items[3:], lake, now)
        got += parsing.drain()
        assert parsing.workers == 1 and len(parsing.notes) == 1
        assert "parse worker stopped" in parsing.notes[0]
    assert _segments() <= before
    assert [(p.raw.rel, p.key, p.failure, p.parsed.rejects, p.n_rows) for p in got] \
        == [(p.raw.rel, p.key, p.failure, p.parsed.rejects, p.n_rows) for p in expected]
    # what the lake gets of them: the same parts, with the same rows
    written = {name: Lake(tmp_path / name) for name in ("got", "expected")}
    for name, pfs in (("got", got), ("expected", expected)):
        written[name].init()
        write_files(written[name], pfs, now)
    assert lake_rows(tmp_path / "got") == lake_rows(tmp_path / "expected")
    assert _parts(tmp_path / "got") == _parts(tmp_path / "expected")


def test_a_script_without_a_main_guard_runs_once(tmp_path: Path) -> None:
    raw = _raw(tmp_path / "raw")
    marker = tmp_path / "ran.txt"
    script = tmp_path / "unguarded.py"
    script.write_text(
        "import sys\n"
        "from pathlib import Path\n"
        "from ckptwatch.ingest.run import ingest\n"
        f"with open({str(marker)!r}, 'a') as fh:\n"
        "    fh.write('ran\\n')\n"
        f"report = ingest(Path({str(raw)!r}), Path({str(tmp_path / 'lake')!r}), workers=2)\n"
        "print(report.count('ingested'))\n")
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                          timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr
    assert marker.read_text() == "ran\n"  # the workers did not run the script again
    assert proc.stderr == ""
    assert int(proc.stdout.strip()) > 10


def test_how_many_workers(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert ingest_settings(environ={}).workers is None
    assert parse_workers("auto") is None and parse_workers(" AUTO ") is None
    assert parse_workers("3") == 3 and parse_workers(1) == 1
    assert ingest_settings(environ={WORKERS_ENV: "2"}).workers == 2
    assert ingest_settings(environ={WORKERS_ENV: "2"}, workers="auto").workers is None
    for bad in ("0", "-1", "two", "1.5"):
        with pytest.raises(ConfigError, match="positive integer"):
            parse_workers(bad)
        with pytest.raises(ConfigError, match=f"{WORKERS_ENV}.*positive integer"):
            ingest_settings(environ={WORKERS_ENV: bad})
    raw = _raw(tmp_path / "raw")
    files = discover(raw)
    assert parallel.workers_for(files, 3) == 3
    assert parallel.workers_for(files, None) == 1  # a small run: no workers to start
    monkeypatch.setattr(parallel, "PARALLEL_BYTES", 1000)
    monkeypatch.setattr(parallel, "usable_cpus", lambda: 8)
    assert parallel.workers_for(files, None) == parallel.MAX_AUTO_WORKERS
    monkeypatch.setattr(parallel, "usable_cpus", lambda: 1)
    assert parallel.workers_for(files, None) == 1
    # Only what lies beside the largest file can be parsed beside it: one big file and small
    # ones parse in this process, however big the one.
    monkeypatch.setattr(parallel, "usable_cpus", lambda: 8)
    sizes = sorted((f.path.stat().st_size, f.rel) for f in files if f.kind != "ignored")
    rest = sum(size for size, _ in sizes[:-1])
    monkeypatch.setattr(parallel, "PARALLEL_BYTES", rest + 1)
    assert sizes[-1][0] + rest >= rest + 1  # the run as a whole holds PARALLEL_BYTES
    assert parallel.workers_for(files, None) == 1
    monkeypatch.setattr(parallel, "PARALLEL_BYTES", rest)
    assert parallel.workers_for(files, None) == parallel.MAX_AUTO_WORKERS


def test_ingest_workers_flag(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                             monkeypatch: pytest.MonkeyPatch) -> None:
    from ckptwatch.cli.main import main

    monkeypatch.delenv(WORKERS_ENV, raising=False)
    raw = write_raw_dir(tmp_path / "raw")
    assert main(["ingest", str(raw), "--lake", str(tmp_path / "lake"), "--workers", "none",
                 "--quiet"]) == 2
    err = capsys.readouterr().err
    assert "ingest workers (--workers, CKPTWATCH_INGEST_WORKERS) must be 'auto' or a " \
        "positive integer (got 'none')" in err
    assert "Traceback" not in err and not (tmp_path / "lake").exists()
    assert main(["ingest", str(raw), "--lake", str(tmp_path / "lake"), "--workers", "1",
                 "--quiet"]) == 0
    assert WORKERS_ENV not in os.environ  # the value is passed down, not through the environment


def test_workers_end_with_a_killed_run(tmp_path: Path) -> None:
    """A run killed (SIGKILL) mid-parse leaves no worker behind holding its output open."""
    raw = _raw(tmp_path / "raw")
    code = (
        "import os, signal, sys\n"
        "from pathlib import Path\n"
        "from ckptwatch.ingest import parallel\n"
        "from ckptwatch.ingest.discover import discover\n"
        "from ckptwatch.ingest.read import load_file\n"
        "from ckptwatch.lake.store import Lake\n"
        "from datetime import UTC, datetime\n"
        "items = [load_file(f) for f in discover(Path(sys.argv[1]))]\n"
        "p = parallel.Parsing(2)\n"
        "lake, now = Lake(sys.argv[1] + '-lake'), datetime.now(UTC)\n"
        "p.submit(items[:2], lake, now); p.submit(items[2:4], lake, now)\n"
        "print(' '.join(str(q.pid) for q in p._pool._processes.values()), flush=True)\n"
        "os.kill(os.getpid(), signal.SIGKILL)\n")
    proc = subprocess.run([sys.executable, "-c", code, str(raw)], capture_output=True,
                          text=True, timeout=60, check=False)  # returns once the pipes close
    assert proc.returncode == -signal.SIGKILL
    pids = [int(p) for p in proc.stdout.split()]
    assert len(pids) == 2
    for pid in pids:  # gone, or a zombie its new parent has not reaped
        stat = Path(f"/proc/{pid}/stat")
        state = stat.read_text().rsplit(")", 1)[1].split()[0] if stat.exists() else "gone"
        assert state in ("gone", "Z", "X"), (pid, state)


def _allocator_setting() -> str | None:
    return os.environ.get(parallel.ALLOCATOR_ENV)


@pytest.mark.parametrize("users", [None, "dirty_decay_ms:0"])
def test_workers_keep_freed_pages_unless_the_user_tunes_the_allocator(
        users: str | None, monkeypatch: pytest.MonkeyPatch) -> None:
    """A worker's polars allocator keeps freed pages (``WORKER_ALLOCATOR``, after polars' own
    choice: the later option wins); a value the user set is what the workers get; this
    process's environment is as it was."""
    if users is None:  # as polars leaves it on import
        monkeypatch.setenv(parallel.ALLOCATOR_ENV, parallel.POLARS_ALLOCATOR)
    else:
        monkeypatch.setenv(parallel.ALLOCATOR_ENV, users)
    before = os.environ[parallel.ALLOCATOR_ENV]
    with parallel.Parsing(2) as parsing:
        pool = parsing._executor()
        assert pool is not None
        seen = {pool.submit(_allocator_setting).result() for _ in range(4)}
        assert os.environ[parallel.ALLOCATOR_ENV] == before
    # polars, imported in the worker, puts its own choice first: the last options win
    want = parallel.WORKER_ALLOCATOR if users is None else users
    assert len(seen) == 1 and seen.pop().endswith("," + want)


def test_segments_carry_each_file_s_bytes_and_stay_few(tmp_path: Path) -> None:
    """A group's files copied into one segment come out as they went in (``_from_shared``,
    as a worker reads them); segments are reused, at most ``KEEP_SEGMENTS`` kept free as the
    groups grow, and ``close`` unlinks them all."""
    from dataclasses import replace

    raw = _raw(tmp_path / "raw")
    item = next(x for x in map(load_file, discover(raw)) if isinstance(x, parallel.LoadedFile))
    before = _segments()
    segments = parallel._Segments()
    try:
        names = set()
        for k in range(1, 9):  # groups of growing size: 1..8 MiB and a bit
            datas = [os.urandom(1000) * (k * 700), b"", b"x" * k]
            group = [replace(item, content=replace(item.content, data=d)) for d in datas]
            sent, shared = segments.put(group)
            assert shared is not None
            assert all(x.content.data == b"" and x.content.sha is None for x in sent)
            back = parallel._from_shared(sent, *shared)
            assert [x.content.data for x in back] == datas
            names.add(shared[0])
            segments.release(shared)
            assert len(segments.free) <= parallel.KEEP_SEGMENTS and not segments.used
        assert len(names) > parallel.KEEP_SEGMENTS  # new ones made as groups grew
        small = [replace(item, content=replace(item.content, data=b"tiny"))]
        assert segments.put(small)[1] is None  # under SHARE_MIN_BYTES: in the group itself
        sent, shared = segments.put([replace(item, content=replace(
            item.content, data=b"y" * (2 << 20)))])
        assert shared is not None and shared[0] in names  # a free one that fits, reused
    finally:
        segments.close()
    assert _segments() <= before
