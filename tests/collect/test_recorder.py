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
    MARKER_FIELDS,
    CheckpointRecorder,
    append_lines,
    default_job_id,
    default_rank,
    write_records,
)


def read(path: Path) -> list[dict[str, Any]]:
    return [json.loads(x) for x in path.read_text().splitlines()]


def finished(path: Path) -> list[dict[str, Any]]:
    """The finished records of a recorder's file (its start markers left out)."""
    return [r for r in read(path) if r["status"] != "started"]


def markers(path: Path) -> list[dict[str, Any]]:
    """The start markers of a recorder's file."""
    return [r for r in read(path) if r["status"] == "started"]


def ingest_file(path: Path, tmp_path: Path) -> Any:
    """Ingest one checkpoint file through the real ingest (``RAW/checkpoints/<file>``)."""
    from ckptwatch.ingest.run import ingest

    raw = tmp_path / "raw"
    (raw / "checkpoints").mkdir(parents=True)
    (raw / "checkpoints" / path.name).write_bytes(path.read_bytes())
    return ingest(raw, tmp_path / "lake")


def test_checkpoint_context_writes_a_marker_then_one_contract_record(tmp_path: Path) -> None:
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
        # inside the block the marker is already on disk (the rank may never come back)
        [m] = read(out)
    r = ck.record
    assert r is not None and read(out) == [m, r]
    assert list(m) == list(MARKER_FIELDS) and m == ck.marker
    assert m == {"job_id": "j1", "step": 1000, "rank": 3, "node": "gpu-node-07", "tier": "pool",
                 "start_time": r["start_time"], "target": "pool0-t7", "status": "started"}
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


def test_body_that_raises_records_error_and_propagates(tmp_path: Path) -> None:
    out = tmp_path / "ck.jsonl"
    rec = CheckpointRecorder(out, job_id="j1", rank=0, node="n0", flush_every=50)
    with pytest.raises(OSError, match="disk full"), rec.checkpoint(7) as ck:
        with ck.phase("open"):
            pass
        with ck.phase("write"):
            raise OSError("disk full")
    # the marker and the error record are flushed at once, whatever flush_every says
    [m, r] = read(out)
    assert (m["step"], m["status"], r["step"]) == (7, "started", 7)
    assert r["status"] == "error" and r["open_s"] is not None and r["fsync_s"] is None
    with rec.checkpoint(8) as ck:
        ck.status = "timeout"
    assert read(out)[-1]["status"] == "timeout"


def test_buffering_flush_every_close_and_exit(tmp_path: Path) -> None:
    out = tmp_path / "ck.jsonl"
    rec = CheckpointRecorder(out, job_id="j1", rank=0, node="n0", flush_every=3)
    for step in range(2):
        rec.record(step=step, start_time=float(step), end_time=step + 0.5)
    assert not out.exists()
    rec.record(step=2, start_time=2.0, end_time=2.5)
    assert [r["step"] for r in read(out)] == [0, 1, 2]
    rec.record(step=3, start_time=3.0, end_time=3.5)
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
    assert [(r["step"], r["status"]) for r in read(tmp_path / "exit.jsonl")] == [
        (5, "started"), (5, "ok")]


def test_a_marker_goes_out_at_once_with_what_is_buffered(tmp_path: Path) -> None:
    out = tmp_path / "ck.jsonl"
    rec = CheckpointRecorder(out, job_id="j1", rank=2, node="n0", flush_every=100)
    with rec.checkpoint(10):
        pass
    assert [(r["step"], r["status"]) for r in read(out)] == [(10, "started")]  # 10's buffered
    with rec.checkpoint(20):
        # entering 20 wrote its marker and, in the same append, 10's finished record
        assert [(r["step"], r["status"]) for r in read(out)] == [
            (10, "started"), (10, "ok"), (20, "started")]
    m = rec.started(30, start_time=datetime(2026, 11, 28, 1, 0, tzinfo=UTC), tier="pool",
                    target="pool0-tgt07")
    last, marker = read(out)[-2:]
    assert (last["step"], last["status"], marker) == (20, "ok", m)  # 20's record, 30's marker
    assert m == {"job_id": "j1", "step": 30, "rank": 2, "node": "n0", "tier": "pool",
                 "start_time": "2026-11-28T01:00:00.000000+00:00", "target": "pool0-tgt07",
                 "status": "started"}
    with pytest.raises(ValueError, match="^step must be an integer >= 0, got -1$"):
        rec.started(-1)


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
    with pytest.raises(ValueError, match="^status must be one of ok, error, timeout \\(or "
                       "started for a start marker\\), got 'done'$"):
        rec.record(step=1, start_time=1.0, end_time=2.0, status="done")
    with pytest.raises(ValueError, match="^a start marker \\(status 'started'\\) has no "
                       "end_time, bytes: those belong to the finished record that follows it$"):
        rec.record(step=1, start_time=1.0, end_time=2.0, bytes=5, status="started")


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
    assert len(text) == 9 and text[6] == whole[:40].decode()
    report = ingest_file(out, tmp_path)
    assert report.rows == {"checkpoint_writes": 4, "checkpoint_starts": 4}
    assert report.quarantined == 1


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
    assert len(read(out)) == 1600  # every line is whole JSON
    for records in (finished(out), markers(out)):
        assert sorted((r["rank"], r["step"]) for r in records) == [
            (rank, step) for rank in range(4) for step in range(200)]
    report = ingest_file(out, tmp_path)
    assert report.rows == {"checkpoint_writes": 800, "checkpoint_starts": 800}
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
    assert [r["step"] for r in finished(out)] == [2]
    rec.close()
    assert sorted(r["step"] for r in finished(out)) == [1, 2]
    assert [r["step"] for r in markers(out)] == [1, 2]  # each written once, by its process


def test_write_records_validates(tmp_path: Path) -> None:
    good = {"job_id": "j", "step": 1, "rank": 0, "node": "n", "tier": "local",
            "start_time": "2026-11-28T00:00:00+00:00", "end_time": "2026-11-28T00:00:05Z",
            "bytes": 0}
    assert write_records(tmp_path / "w.jsonl", [good]) == 1
    [r] = read(tmp_path / "w.jsonl")
    assert r["status"] == "ok" and r["open_s"] is None
    with pytest.raises(ValueError, match="^tier must be one of local, pool"):
        write_records(tmp_path / "w.jsonl", [{**good, "tier": "LOCAL"}])
    marker = {k: v for k, v in good.items() if k not in ("end_time", "bytes")}
    assert write_records(tmp_path / "w.jsonl", [{**marker, "status": "started"}]) == 1
    assert read(tmp_path / "w.jsonl")[-1] == {**marker, "target": None, "status": "started"}


def test_a_rank_that_never_finishes_leaves_its_marker_in_the_lake(tmp_path: Path) -> None:
    """Two ranks write step 5; rank 1 hangs (its process is killed inside the block): the
    ingest keeps both markers and the one finished record."""
    out = tmp_path / "hang.jsonl"
    for rank in (0, 1):
        rec = CheckpointRecorder(out, job_id="jh", rank=rank, node=f"node{rank:03d}",
                                 tier="pool", target="pool0-tgt07")
        if rank == 0:
            with rec.checkpoint(5) as ck:
                ck.add_bytes(10)
        else:
            rec.checkpoint(5).__enter__()  # entered, never left
    report = ingest_file(out, tmp_path)
    assert report.rows == {"checkpoint_writes": 1, "checkpoint_starts": 2}
    from ckptwatch.lake.store import Lake

    starts = Lake(tmp_path / "lake").read("checkpoint_starts").sort("rank")
    assert starts.select("rank", "node", "target").rows() == [
        (0, "node000", "pool0-tgt07"), (1, "node001", "pool0-tgt07")]


def test_recorder_and_adapters_import_only_the_standard_library() -> None:
    code = ("import sys, ckptwatch.recorder, ckptwatch.recorder_adapters\n"  # the names
            "import ckptwatch.collect.recorder, ckptwatch.collect.adapters\n"  # training code uses
            "heavy = ('polars', 'pyarrow', 'duckdb', 'torch', 'numpy', 'prefect')\n"
            "print([m for m in heavy if m in sys.modules])")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True, timeout=60)
    assert done.stdout.strip() == "[]"
