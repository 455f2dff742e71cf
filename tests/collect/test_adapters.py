"""Adapters: PyTorch DCP log events and Megatron-LM log lines -> checkpoint records.

torch is not installed (and must not be needed): the DCP events are produced by a replica of
``_dcp_method_logger`` that builds, mutates and logs its dict exactly as pytorch/pytorch
``torch/distributed/checkpoint/logger.py`` does (``_dcp_method_logger.wrapper``, lines 76-106
at commit 01c9f4fcc3ff: ``msg_dict["event"] = "start"``, ``msg_dict["time"] = time.time_ns()``,
``_dcp_logger.debug(msg_dict)``; on error ``event = "exception"``, ``error``, ``time`` and
``_dcp_logger.error``; at the end ``event = "end"``, ``time``, ``times_spent = t1 - t0``) with
the keys of ``_msg_dict_from_dcp_method_args`` (``checkpoint_id``, ``uuid``, ``storage_writer``)
and ``c10d_logger._get_msg_dict`` (``func_name``, ``pg_name``, ``backend``, ``world_size``,
``group_size``, ``global_rank``, ``local_rank`` as strings), on a logger configured as
``c10d_logger._get_or_create_logger("dcp_logger")`` configures it.
"""

from __future__ import annotations

import functools
import json
import logging
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from uuid import uuid4

import pytest

from ckptwatch.collect.adapters import (
    DCP_LOGGER_NAME,
    DCPCheckpointHandler,
    dcp_rank_bytes,
    parse_megatron_log,
    step_from_checkpoint_id,
)
from ckptwatch.collect.recorder import CheckpointRecorder, write_records

EXCERPTS = Path(__file__).parents[1] / "fixtures" / "real" / "checkpoint_timing" / "log_excerpts"
HYPERPOD = EXCERPTS / "megatron_hyperpod_slurm_resiliency_doc.log"
DGXC = EXCERPTS / "megatron_nemo_dgxc_llama3.1_readme.log"


def read_lines(path: Path) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(start markers, finished records) of a recorder's file, in file order."""
    rows = [json.loads(x) for x in path.read_text().splitlines()]
    return ([r for r in rows if r["status"] == "started"],
            [r for r in rows if r["status"] != "started"])


# --------------------------------------------------------------------------- DCP replica


@pytest.fixture
def dcp_logger() -> Iterator[logging.Logger]:
    """The logger as ``c10d_logger._get_or_create_logger(DCP_LOGGER_NAME)`` leaves it."""
    logger = logging.getLogger(DCP_LOGGER_NAME)
    saved = (logger.level, logger.propagate, list(logger.handlers))
    logger.setLevel(logging.DEBUG)
    logger.propagate = False
    null = logging.NullHandler()
    logger.addHandler(null)
    yield logger
    logger.setLevel(saved[0])
    logger.propagate = saved[1]
    logger.handlers[:] = saved[2]


def dcp_method_logger(logger: logging.Logger, rank: int, world: int = 8, *,
                      log_exceptions: bool = False, **wrapper_kwargs: Any,
                      ) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Replica of torch's ``_dcp_method_logger`` (see the module docstring)."""

    def decorator(func: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(func)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            kw = {**wrapper_kwargs, **kwargs}
            writer = kw.get("storage_writer")
            checkpoint_id = kw.get("checkpoint_id") or getattr(writer, "checkpoint_id", None)
            msg_dict: dict[str, Any] = {
                "checkpoint_id": str(checkpoint_id) if checkpoint_id is not None else None,
                "uuid": str(uuid4().int)}
            if writer:
                msg_dict["storage_writer"] = writer.__class__.__name__
            msg_dict.update({"func_name": func.__name__, "pg_name": "0", "backend": "nccl",
                             "world_size": str(world), "group_size": str(world),
                             "global_rank": str(rank), "local_rank": str(rank),
                             "nccl_version": "2.21.5"})
            msg_dict["event"] = "start"
            t0 = time.time_ns()
            msg_dict["time"] = t0
            msg_dict["log_exceptions"] = log_exceptions
            logger.debug(msg_dict)
            try:
                result = func(*args, **kwargs)
            except BaseException as error:
                if log_exceptions:
                    msg_dict["event"] = "exception"
                    msg_dict["error"] = f"{error}"
                    msg_dict["time"] = time.time_ns()
                    logger.error(msg_dict)
                raise
            msg_dict["event"] = "end"
            t1 = time.time_ns()
            msg_dict["time"] = time.time_ns()
            msg_dict["times_spent"] = t1 - t0
            logger.debug(msg_dict)
            return result

        return wrapper

    return decorator


class FileSystemWriter:
    """Stands in for torch's writer: ``checkpoint_id`` is the directory, files ``__<r>_<n>``."""

    def __init__(self, path: Path, rank: int, sizes: list[int], fail: bool = False) -> None:
        self.checkpoint_id = path
        self.rank = rank
        self.sizes = sizes
        self.fail = fail


def fake_dcp_save(logger: logging.Logger, writer: FileSystemWriter, rank: int, *,
                  inner_ids: bool = True) -> None:
    """``dcp.save`` as DCP structures it: save -> local_step, global_step, write_data,
    finish_checkpoint (the inner steps get ``checkpoint_id``/``process_group`` kwargs only when
    the storage writer has a ``checkpoint_id``)."""
    inner: dict[str, Any] = ({"checkpoint_id": writer.checkpoint_id, "process_group": None}
                             if inner_ids else {})

    @dcp_method_logger(logger, rank, **inner)
    def local_step() -> None:
        time.sleep(0.002)

    @dcp_method_logger(logger, rank, **inner)
    def global_step() -> None:
        pass

    @dcp_method_logger(logger, rank, **inner)
    def write_data() -> None:
        writer.checkpoint_id.mkdir(parents=True, exist_ok=True)
        for n, size in enumerate(writer.sizes):
            (writer.checkpoint_id / f"__{rank}_{n}.distcp").write_bytes(b"\0" * size)
        time.sleep(0.01)
        if writer.fail:
            raise OSError("No space left on device")

    @dcp_method_logger(logger, rank, **inner)
    def finish_checkpoint() -> None:
        (writer.checkpoint_id / ".metadata").write_bytes(b"m")

    @dcp_method_logger(logger, rank, log_exceptions=True)
    def save(state_dict: dict[str, Any], *, storage_writer: FileSystemWriter) -> None:
        local_step()
        global_step()
        write_data()
        finish_checkpoint()

    save({}, storage_writer=writer)


def test_dcp_save_events_become_a_per_rank_record(tmp_path: Path,
                                                  dcp_logger: logging.Logger) -> None:
    out = tmp_path / "ck.jsonl"
    rec = CheckpointRecorder(out, job_id="j1", rank=0, node="gpu-node-07", tier="pool")
    handler = DCPCheckpointHandler.install(rec)
    t0 = datetime.now(UTC)
    fake_dcp_save(dcp_logger, FileSystemWriter(tmp_path / "ckpt" / "step_1200", 5,
                                               [1000, 24]), rank=5)
    handler.uninstall()
    rows = [json.loads(x) for x in out.read_text().splitlines()]
    [marker], [r] = read_lines(out)
    assert rows == [marker, r]  # the marker first, written when the save began
    assert marker == {"job_id": "j1", "step": 1200, "rank": 5, "node": "gpu-node-07",
                      "tier": "pool", "start_time": r["start_time"], "target": None,
                      "status": "started"}
    assert (r["job_id"], r["step"], r["rank"], r["node"], r["tier"], r["bytes"], r["status"]) \
        == ("j1", 1200, 5, "gpu-node-07", "pool", 1024, "ok")
    start, end = datetime.fromisoformat(r["start_time"]), datetime.fromisoformat(r["end_time"])
    assert t0 - timedelta(seconds=1) < start <= end < t0 + timedelta(seconds=10)
    assert r["write_s"] >= 0.01 and r["close_s"] >= 0 and r["open_s"] is None
    assert r["write_s"] + r["close_s"] <= (end - start).total_seconds() + 1e-3


def test_dcp_save_on_an_upload_thread_without_inner_ids(tmp_path: Path,
                                                         dcp_logger: logging.Logger) -> None:
    import threading

    out = tmp_path / "ck.jsonl"
    rec = CheckpointRecorder(out, job_id="j1", rank=0, node="n0")
    DCPCheckpointHandler.install(rec)
    worker = threading.Thread(target=fake_dcp_save, args=(
        dcp_logger, FileSystemWriter(tmp_path / "step_40", 1, [8]), 1), kwargs={
        "inner_ids": False})
    worker.start()
    worker.join()
    [marker], [r] = read_lines(out)
    assert (marker["step"], marker["rank"]) == (40, 1)
    assert (r["step"], r["rank"], r["bytes"]) == (40, 1, 8) and r["write_s"] >= 0.01


def test_dcp_failed_save_is_an_error_record(tmp_path: Path, dcp_logger: logging.Logger) -> None:
    out = tmp_path / "ck.jsonl"
    rec = CheckpointRecorder(out, job_id="j1", rank=0, node="n0", flush_every=100)
    DCPCheckpointHandler.install(rec)
    with pytest.raises(OSError, match="No space left"):
        fake_dcp_save(dcp_logger, FileSystemWriter(tmp_path / "iter_0000300", 2, [10],
                                                   fail=True), rank=2)
    [marker], [r] = read_lines(out)  # both flushed at once, though flush_every=100
    assert (marker["step"], marker["rank"]) == (300, 2)
    assert (r["step"], r["rank"], r["status"], r["bytes"]) == (300, 2, "error", 10)
    assert r["write_s"] is None  # write_data raised: it logged no end event


def test_dcp_step_fallback_and_no_step(tmp_path: Path, dcp_logger: logging.Logger,
                                       capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "ck.jsonl"
    rec = CheckpointRecorder(out, job_id="j1", rank=0, node="n0")
    handler = DCPCheckpointHandler.install(rec, bytes_of=None)
    fake_dcp_save(dcp_logger, FileSystemWriter(tmp_path / "latest", 0, [1]), rank=0)
    fake_dcp_save(dcp_logger, FileSystemWriter(tmp_path / "latest", 0, [1]), rank=0)
    assert not out.exists()
    assert capsys.readouterr().err.count("names no step") == 1  # said once
    handler.step = 77
    fake_dcp_save(dcp_logger, FileSystemWriter(tmp_path / "latest", 0, [1]), rank=0)
    [marker], [r] = read_lines(out)
    assert (marker["step"], r["step"], r["bytes"]) == (77, 77, 0)


def test_dcp_handler_never_breaks_the_save(tmp_path: Path, dcp_logger: logging.Logger,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(logging, "raiseExceptions", False)
    rec = CheckpointRecorder(tmp_path / "ck.jsonl", job_id="j1", rank=0, node="n0")

    def broken(checkpoint_id: str | None, rank: int) -> int:
        raise RuntimeError("boom")

    DCPCheckpointHandler.install(rec, bytes_of=broken)
    fake_dcp_save(dcp_logger, FileSystemWriter(tmp_path / "step_1", 0, [1]), rank=0)
    dcp_logger.debug("a plain string message")  # not a DCP event dict: ignored


def test_step_and_bytes_helpers(tmp_path: Path) -> None:
    assert [step_from_checkpoint_id(x) for x in (
        "/ckpt/run3/step_200", "/ckpt/iter_0001000/", "s3://b/checkpoint-1000", "global_step9",
        "/ckpt/latest", None)] == [200, 1000, 1000, 9, None, None]
    assert dcp_rank_bytes(str(tmp_path / "missing"), 0) == 0
    (tmp_path / "__3_0.distcp").write_bytes(b"x" * 5)
    (tmp_path / "__3_1.distcp").write_bytes(b"x" * 7)
    (tmp_path / "__3_3.distcp").write_bytes(b"x" * 100)  # after a gap: not this writer's
    (tmp_path / "__13_0.distcp").write_bytes(b"x" * 100)
    assert dcp_rank_bytes(str(tmp_path), 3) == 12


# --------------------------------------------------------------------------- Megatron-LM


def test_megatron_hyperpod_excerpt_real_lines() -> None:
    end = datetime(2024, 6, 1, 10, 0, tzinfo=UTC)
    [r] = parse_megatron_log(HYPERPOD.read_text().splitlines(), job_id="hp", tier="pool",
                             default_time=end)
    assert (r["step"], r["rank"], r["node"], r["tier"], r["status"], r["bytes"]) == (
        1, 0, "unknown", "pool", "ok", 0)
    start = datetime.fromisoformat(r["start_time"])
    assert datetime.fromisoformat(r["end_time"]) == end
    assert (end - start).total_seconds() == pytest.approx(81.61182)  # the max across ranks


def test_megatron_dgxc_single_line_excerpt() -> None:
    end = datetime(2024, 6, 1, 10, 0, tzinfo=UTC)
    [r] = parse_megatron_log(DGXC.read_text().splitlines(), job_id="dgxc", tier="local",
                             node="n7", target="n7:nvme0", bytes_per_rank=10**9,
                             default_time=end)
    assert (r["step"], r["node"], r["target"], r["bytes"]) == (50, "n7", "n7:nvme0", 10**9)
    start = datetime.fromisoformat(r["start_time"])
    assert (end - start).total_seconds() == pytest.approx(24.89513)


def test_megatron_without_timestamps_says_what_to_do() -> None:
    with pytest.raises(ValueError, match=r"^Megatron log: no timestamp for the save\(s\) at "
                       r"iteration \[1\]: pass default_time="):
        parse_megatron_log(HYPERPOD.read_text().splitlines(), job_id="hp", tier="pool")


#: Lines in current Megatron-LM's format: ``print_rank_0(f"[{datetime.now().strftime('%Y-%m-%d
#: %H:%M:%S.%f')}] saving checkpoint at iteration {iteration:7d} to {save_dir} in {ckpt_format}
#: format")`` and ``"  [...] successfully saved checkpoint from iteration {int(iteration):7d} to
#: {args.save} [ t {tp}/{tp_size}, p {pp}/{pp_size} ]"`` (NVIDIA/Megatron-LM
#: megatron/training/checkpointing.py, save_checkpoint), and the timer strings of
#: megatron/core/timers.py (``_get_global_min_max_time_string``: ``'(min, max) time across ranks
#: (ms):'`` then ``'\n    {}: ({:.2f}, {:.2f})'.format((name + ' ').ljust(48, '.'), ...)``;
#: ``max_only``: ``'max time across ranks (ms):'``; ``_get_all_ranks_time_string``: ``'times
#: across ranks (ms):'``, ``'\n  {}:'``, ``'\n     rank {:2d}: {:.2f}'``). Values ours.
STAMPED = "\n".join([
    ' [2025-03-04 10:00:00] iteration      100/    1000 | consumed samples:        12800 |',
    '[2025-03-04 10:00:01.250000] saving checkpoint at iteration     100'
    ' to /lustre/ckpt in torch_dist format',
    '  [2025-03-04 10:00:31.750000] successfully saved checkpoint from iteration     100'
    ' to /lustre/ckpt [ t 1/8, p 1/4 ]',
    '(min, max) time across ranks (ms):',
    '    save-checkpoint ................................: (30101.37, 30500.00)',
    '[2025-03-04 10:10:00.000000] saving checkpoint at iteration     200'
    ' to /lustre/ckpt in torch_dist format',
    '  [2025-03-04 10:10:45.000000] successfully saved checkpoint from iteration     200'
    ' to /lustre/ckpt [ t 1/8, p 1/4 ]',
    'max time across ranks (ms):',
    '    save-checkpoint ................................: 45000.00',
    '[2025-03-04 10:20:00.000000] saving checkpoint at iteration     300'
    ' to /lustre/ckpt in torch_dist format',
    '  [2025-03-04 10:20:20.000000] successfully saved checkpoint from iteration     300'
    ' to /lustre/ckpt [ t 1/8, p 1/4 ]',
    'times across ranks (ms):',
    '  save-checkpoint:',
    '     rank  0: 19990.00',
    '     rank  1: 20000.00',
    '[2025-03-04 10:25:00.000000] saving checkpoint at iteration     350'
    ' to /nvme/ckpt in torch_dist format',
    '(min, max) time across ranks (ms):',
    '    save-checkpoint-non-persistent .................: (900.00, 1000.00)',
    '[2025-03-04 10:30:00.000000] saving checkpoint at iteration     400'
    ' to /lustre/ckpt in torch_dist format',
    '  [2025-03-04 10:30:07.000000] successfully saved checkpoint from iteration     400'
    ' to /lustre/ckpt [ t 1/8, p 1/4 ]',
    '[2025-03-04 10:35:00.000000] saving checkpoint at iteration     600'
    ' to /lustre/ckpt in torch_dist format',
    '  [2025-03-04 10:35:00.500000] scheduled an async checkpoint save at iteration     600'
    ' to /lustre/ckpt',
    'max time across ranks (ms):',
    '    save-checkpoint ................................: 2000.00',
    '[2025-03-04 10:38:00.000000] saving checkpoint at iteration     700'
    ' to /lustre/ckpt in torch_dist format',
    '  [2025-03-04 10:38:30.000000] successfully saved checkpoint from iteration     600'
    ' to /lustre/ckpt [ t 1/8, p 1/4 ]',
    'max time across ranks (ms):',
    '    save-checkpoint ................................: 3000.00',
    '[2025-03-04 10:40:00.000000] saving checkpoint at iteration     500'
    ' to /lustre/ckpt in torch_dist format',
])


def test_megatron_stamped_lines_every_timer_layout() -> None:
    records = parse_megatron_log(STAMPED.splitlines(), job_id="m1", tier="pool",
                                 non_persistent_tier="local", node="n0")
    markers = [r for r in records if r["status"] == "started"]
    got = {r["step"]: (r["start_time"], r["end_time"], r["tier"]) for r in records
           if r["status"] != "started"}
    assert got == {
        # end = the "successfully saved" stamp; duration = the max across ranks
        100: ("2025-03-04T10:00:01.250000+00:00", "2025-03-04T10:00:31.750000+00:00", "pool"),
        200: ("2025-03-04T10:10:00.000000+00:00", "2025-03-04T10:10:45.000000+00:00", "pool"),
        300: ("2025-03-04T10:20:00.000000+00:00", "2025-03-04T10:20:20.000000+00:00", "pool"),
        # no completion line: start stamp + timer
        350: ("2025-03-04T10:25:00.000000+00:00", "2025-03-04T10:25:01.000000+00:00", "local"),
        # no timer (the last rank's output missing): the stamped start and end
        400: ("2025-03-04T10:30:00.000000+00:00", "2025-03-04T10:30:07.000000+00:00", "pool"),
        # async: the timer is the blocking part, from the start; the completion of 600 printed
        # after 700 started does not take 700's timer
        600: ("2025-03-04T10:35:00.000000+00:00", "2025-03-04T10:35:02.000000+00:00", "pool"),
        700: ("2025-03-04T10:38:00.000000+00:00", "2025-03-04T10:38:03.000000+00:00", "pool"),
        # 500 never finished: no finished record, its start marker below
    }
    assert markers == [{"job_id": "m1", "step": 500, "rank": 0, "node": "n0", "tier": "pool",
                        "start_time": "2025-03-04T10:40:00.000000+00:00", "target": None,
                        "status": "started"}]
    assert {r["rank"] for r in records} == {0}


def test_megatron_records_ingest_cleanly(tmp_path: Path) -> None:
    from ckptwatch.ingest.run import ingest

    records = parse_megatron_log(STAMPED.splitlines(), job_id="m1", tier="pool", node="n0")
    end = datetime(2024, 6, 1, 10, 0, tzinfo=UTC)
    records += parse_megatron_log(HYPERPOD.read_text().splitlines(), job_id="hp",
                                  tier="pool", default_time=end)
    (tmp_path / "raw" / "checkpoints").mkdir(parents=True)
    assert write_records(tmp_path / "raw" / "checkpoints" / "megatron.jsonl", records) == 9
    report = ingest(tmp_path / "raw", tmp_path / "lake")
    assert report.rows == {"checkpoint_writes": 8, "checkpoint_starts": 1}
    assert report.quarantined == 0


def test_megatron_module_command(tmp_path: Path) -> None:
    out = tmp_path / "m.jsonl"
    done = subprocess.run(
        [sys.executable, "-m", "ckptwatch.collect.adapters", "megatron", str(HYPERPOD),
         "--job-id", "hp", "--tier", "pool", "--node", "gpu-node-01", "--out", str(out)],
        capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert "has no timestamps; saves without one end at the file's mtime" in done.stderr
    assert done.stdout.strip() == f"1 checkpoint record(s) appended to {out}"
    [r] = [json.loads(x) for x in out.read_text().splitlines()]
    assert (r["job_id"], r["step"], r["node"]) == ("hp", 1, "gpu-node-01")
