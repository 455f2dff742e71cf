"""The training-side recorder: contract records, buffering, crash-tolerant concurrent appends."""

from __future__ import annotations

import json
import multiprocessing as mp
import os
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from ckptwatch.collect.recorder import (
    FIELDS,
    CheckpointRecorder,
    append_lines,
    default_job_id,
    default_rank,
    write_records,
)


def read(path: Path) -> list[dict[str, Any]]:
    return [json.loads(x) for x in path.read_text().splitlines()]


def ingest_file(path: Path, tmp_path: Path) -> Any:
    """Ingest one checkpoint file through the real ingest (``RAW/checkpoints/<file>``)."""
    from ckptwatch.ingest.run import ingest

    raw = tmp_path / "raw"
    (raw / "checkpoints").mkdir(parents=True)
    (raw / "checkpoints" / path.name).write_bytes(path.read_bytes())
    return ingest(raw, tmp_path / "lake")


def test_checkpoint_context_writes_one_contract_record(tmp_path: Path) -> None:
    out = tmp_path / "ck.jsonl"
    rec = CheckpointRecorder(out, job_id="j1", rank=3, node="gpu-node-07", tier="pool",
                             target="pool0-t7")
    with rec.checkpoint(1000) as ck:
        with ck.phase("open"):
            pass
        for _ in range(2):
            with ck.phase("write"):
                ck.add_bytes(4096)
        with ck.phase("fsync"):
            pass
        with ck.phase("close"):
            pass
    [r] = read(out)
    assert list(r) == list(FIELDS)
    assert (r["job_id"], r["step"], r["rank"], r["node"], r["tier"], r["target"], r["bytes"],
            r["status"]) == ("j1", 1000, 3, "gpu-node-07", "pool", "pool0-t7", 8192, "ok")
    start = datetime.fromisoformat(r["start_time"])
    end = datetime.fromisoformat(r["end_time"])
    assert start.utcoffset() is not None and r["start_time"].endswith("+00:00")
    assert end >= start
    phases = [r["open_s"], r["write_s"], r["fsync_s"], r["close_s"]]
    assert all(isinstance(p, float) and p >= 0 for p in phases)
    assert sum(phases) <= (end - start).total_seconds() + 1e-5
    assert ck.record == r


def test_body_that_raises_records_error_and_propagates(tmp_path: Path) -> None:
    out = tmp_path / "ck.jsonl"
    rec = CheckpointRecorder(out, job_id="j1", rank=0, node="n0", flush_every=50)
    with pytest.raises(OSError, match="disk full"), rec.checkpoint(7) as ck:
        with ck.phase("open"):
            pass
        with ck.phase("write"):
            raise OSError("disk full")
    [r] = read(out)  # an error record is flushed at once, whatever flush_every says
    assert r["status"] == "error" and r["open_s"] is not None and r["fsync_s"] is None
    with rec.checkpoint(8) as ck:
        ck.status = "timeout"
    assert read(out)[-1]["status"] == "timeout"


def test_buffering_flush_every_close_and_exit(tmp_path: Path) -> None:
    out = tmp_path / "ck.jsonl"
    rec = CheckpointRecorder(out, job_id="j1", rank=0, node="n0", flush_every=3)
    for step in range(2):
        with rec.checkpoint(step):
            pass
    assert not out.exists()
    with rec.checkpoint(2):
        pass
    assert [r["step"] for r in read(out)] == [0, 1, 2]
    with rec.checkpoint(3):
        pass
    rec.close()
    assert [r["step"] for r in read(out)] == [0, 1, 2, 3]
    with pytest.raises(ValueError, match="recorder is closed"):
        rec.record(step=9, start_time=0.0, end_time=1.0)
    # At interpreter exit the buffer is flushed (atexit), without close().
    script = ("from ckptwatch.collect.recorder import CheckpointRecorder\n"
              f"r = CheckpointRecorder({str(tmp_path / 'exit.jsonl')!r}, job_id='j', rank=1, "
              "node='n', flush_every=100)\n"
              "with r.checkpoint(5): pass\n")
    subprocess.run([sys.executable, "-c", script], check=True, timeout=60)
    assert [r["step"] for r in read(tmp_path / "exit.jsonl")] == [5]


def test_directory_gives_per_day_files(tmp_path: Path) -> None:
    rec = CheckpointRecorder(tmp_path, job_id="job/7", rank=0, node="n0")
    rec.record(step=1, start_time=datetime(2026, 11, 28, 23, 59, 59, tzinfo=UTC),
               end_time=datetime(2026, 11, 29, 0, 0, 30, tzinfo=UTC), bytes=10)
    rec.record(step=2, start_time=1_796_083_200.0, end_time=1_796_083_260.5)  # 2026-12-01
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "job_7-n0-2026-11-28.jsonl", "job_7-n0-2026-12-01.jsonl"]


def test_defaults_from_the_launcher_environment(monkeypatch: pytest.MonkeyPatch,
                                                tmp_path: Path) -> None:
    for name in ("RANK", "SLURM_PROCID", "OMPI_COMM_WORLD_RANK", "PMI_RANK", "LOCAL_RANK",
                 "CKPTWATCH_JOB_ID", "SLURM_JOB_ID", "PBS_JOBID", "LSB_JOBID", "FLUX_JOB_ID",
                 "TORCHELASTIC_RUN_ID"):
        monkeypatch.delenv(name, raising=False)
    assert default_rank() == 0 and default_job_id() is None
    with pytest.raises(ValueError, match="^no job_id: pass job_id= or set CKPTWATCH_JOB_ID"):
        CheckpointRecorder(tmp_path)
    monkeypatch.setenv("TORCHELASTIC_RUN_ID", "none")
    assert default_job_id() is None
    monkeypatch.setenv("SLURM_JOB_ID", "4242")
    monkeypatch.setenv("SLURM_PROCID", "17")
    monkeypatch.setenv("LOCAL_RANK", "1")
    assert default_rank() == 17
    monkeypatch.setenv("RANK", "33")
    rec = CheckpointRecorder(tmp_path / "x.jsonl")
    assert (rec.job_id, rec.rank) == ("4242", 33)
    import socket

    assert rec.node == socket.gethostname()


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"tier": "nvme"}, "tier must be one of local, pool, got 'nvme'"),
    ({"rank": -1}, "rank must be an integer >= 0, got -1"),
    ({"flush_every": 0}, "flush_every must be >= 1, got 0"),
])
def test_bad_recorder_settings(tmp_path: Path, kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=f"^{message}$"):
        CheckpointRecorder(tmp_path, **{"job_id": "j", "node": "n", **kwargs})


def test_bad_records_fail_where_they_are_made(tmp_path: Path) -> None:
    rec = CheckpointRecorder(tmp_path / "x.jsonl", job_id="j", rank=0, node="n")
    with pytest.raises(ValueError, match="^step must be an integer >= 0, got -5$"):
        rec.checkpoint(-5)
    with rec.checkpoint(1) as ck:
        with pytest.raises(ValueError, match="^unknown phase 'flush'"), ck.phase("flush"):
            pass
        with pytest.raises(ValueError, match="^bytes must be an integer >= 0"):
            ck.add_bytes(-1)
    with pytest.raises(ValueError, match="^end_time .* is before start_time"):
        rec.record(step=1, start_time=10.0, end_time=9.0)
    with pytest.raises(ValueError, match="^unknown record field\\(s\\): duration"):
        rec.record(step=1, start_time=1.0, end_time=2.0, duration=1.0)


def test_truncated_line_from_a_crash_is_isolated(tmp_path: Path) -> None:
    out = tmp_path / "j1.jsonl"
    rec = CheckpointRecorder(out, job_id="j1", rank=0, node="n0")
    for step in range(3):
        with rec.checkpoint(step):
            pass
    whole = out.read_bytes()
    out.write_bytes(whole + whole[:40])  # a writer killed mid-line: no trailing newline
    with rec.checkpoint(3):
        pass
    text = out.read_text().splitlines()
    assert len(text) == 5 and text[3] == whole[:40].decode()
    report = ingest_file(out, tmp_path)
    assert report.rows["checkpoint_writes"] == 4 and report.quarantined == 1


def test_append_lines_adds_the_newline_only_when_needed(tmp_path: Path) -> None:
    path = tmp_path / "a" / "b.jsonl"
    append_lines(path, ["{}", "{}"])
    append_lines(path, [])
    append_lines(path, ['{"x":1}'], fsync=False)
    assert path.read_text() == '{}\n{}\n{"x":1}\n'


def _writer(path: str, rank: int, n: int, flush_every: int, go: Any) -> None:
    rec = CheckpointRecorder(path, job_id="jmp", rank=rank, node=f"n{rank}", tier="pool",
                             target=f"t{rank}", flush_every=flush_every, fsync=False)
    go.wait()
    for step in range(n):
        with rec.checkpoint(step) as ck, ck.phase("write"):
            ck.add_bytes(1 << 20)
    rec.close()


def test_processes_appending_to_one_file_produce_only_whole_lines(tmp_path: Path) -> None:
    out = tmp_path / "jmp.jsonl"
    ctx = mp.get_context("spawn")
    go = ctx.Event()
    procs = [ctx.Process(target=_writer, args=(str(out), rank, 200, flush, go))
             for rank, flush in enumerate((1, 7, 13, 200))]
    for p in procs:
        p.start()
    go.set()
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    records = read(out)  # every line is whole JSON
    assert len(records) == 800
    assert sorted((r["rank"], r["step"]) for r in records) == [
        (rank, step) for rank in range(4) for step in range(200)]
    report = ingest_file(out, tmp_path)
    assert report.rows["checkpoint_writes"] == 800
    assert report.quarantined == 0


def test_forked_child_never_writes_the_parents_buffer(tmp_path: Path) -> None:
    out = tmp_path / "f.jsonl"
    rec = CheckpointRecorder(out, job_id="j", rank=0, node="n", flush_every=10)
    with rec.checkpoint(1):
        pass
    pid = os.fork()
    if pid == 0:  # child: its own record only
        try:
            with rec.checkpoint(2):
                pass
            rec.flush()
        finally:
            os._exit(0)
    os.waitpid(pid, 0)
    assert [r["step"] for r in read(out)] == [2]
    rec.close()
    assert sorted(r["step"] for r in read(out)) == [1, 2]


def test_write_records_validates(tmp_path: Path) -> None:
    good = {"job_id": "j", "step": 1, "rank": 0, "node": "n", "tier": "local",
            "start_time": "2026-11-28T00:00:00+00:00", "end_time": "2026-11-28T00:00:05Z",
            "bytes": 0}
    assert write_records(tmp_path / "w.jsonl", [good]) == 1
    [r] = read(tmp_path / "w.jsonl")
    assert r["status"] == "ok" and r["open_s"] is None
    with pytest.raises(ValueError, match="^tier must be one of local, pool"):
        write_records(tmp_path / "w.jsonl", [{**good, "tier": "LOCAL"}])


def test_recorder_and_adapters_import_only_the_standard_library() -> None:
    code = ("import sys, ckptwatch.recorder, ckptwatch.recorder_adapters\n"  # the names
            "import ckptwatch.collect.recorder, ckptwatch.collect.adapters\n"  # training code uses
            "heavy = ('polars', 'pyarrow', 'duckdb', 'torch', 'numpy', 'prefect')\n"
            "print([m for m in heavy if m in sys.modules])")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True, timeout=60)
    assert done.stdout.strip() == "[]"
