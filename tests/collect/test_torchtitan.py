"""torchtitan adapter: genuine torchtitan log lines -> checkpoint records (one per rank per
save; a start marker for a save that never finished)."""

from __future__ import annotations

from pathlib import Path

import pytest

from ckptwatch.collect.recorder import validate_record
from ckptwatch.collect.torchtitan import parse_torchtitan_log

EXCERPTS = Path(__file__).resolve().parents[1] / "fixtures" / "real" / "checkpoint_timing" \
    / "log_excerpts"
#: pytorch/torchtitan PR #1287: one periodic save at step 800, 0.02 s (DCP zero-overhead
#: checkpointing: the staging only), the 2025 "(or staging if async is enabled)in" wording.
PR1287 = EXCERPTS / "torchtitan_pr1287_dcp_zoc.log"
#: pytorch/torchtitan PR #1625: four ranks starting the last-step save of step 10 (the excerpt
#: ends before they finish).
PR1625 = EXCERPTS / "torchtitan_pr1625_multirank_last_step.log"


def _parse(lines: list[str] | Path, **kw: object) -> list[dict[str, object]]:
    text = lines.read_text().splitlines() if isinstance(lines, Path) else lines
    out = parse_torchtitan_log(text, job_id="titan-1", tier="pool", **kw)  # type: ignore[arg-type]
    assert out.notes == []
    return out.records


def test_genuine_periodic_save_is_one_record_ending_at_the_finished_line() -> None:
    records = _parse(PR1287, node="gpu-07")
    assert records == [{
        "job_id": "titan-1", "node": "gpu-07", "tier": "pool", "target": None, "step": 800,
        "rank": 0, "start_time": "2025-06-25T13:20:46.459000+00:00",
        "end_time": "2025-06-25T13:20:46.479000+00:00", "bytes": 0, "open_s": None,
        "write_s": None, "fsync_s": None, "close_s": None, "status": "ok"}]
    validate_record(dict(records[0]))  # the recorder's own contract check


def test_genuine_multirank_unfinished_save_gives_one_start_marker_per_rank() -> None:
    records = _parse(PR1625)
    assert [(r["rank"], r["step"], r["start_time"], r["status"]) for r in records] == [
        (0, 10, "2025-08-22T07:53:13.007000+00:00", "started"),
        (1, 10, "2025-08-22T07:53:13.006000+00:00", "started"),
        (2, 10, "2025-08-22T07:53:13.006000+00:00", "started"),  # step from its 'step: 10'
        (3, 10, "2025-08-22T07:53:13.007000+00:00", "started"),
    ]


# The wordings of torchtitan's current and 2024 checkpointer (dcp.py's f-strings, filled in).
CURRENT = [
    "[rank1]:[titan] 2026-05-18 16:08:00,100 - root - INFO - step: 100  loss:  2.9  memory: 9GiB",
    "[rank1]:[titan] 2026-05-18 16:08:00,101 - root - INFO - Saving the checkpoint.",
    "[rank1]:[titan] 2026-05-18 16:08:12,601 - root - INFO - Finished saving the checkpoint in "
    "12.50 seconds.",
    "[rank1]:[titan] 2026-05-18 16:09:00,000 - root - INFO - Saving the checkpoint.",
    "[rank1]:[titan] 2026-05-18 16:09:00,001 - root - INFO - Saving a full checkpoint at last "
    "step, step 150.",
    "[rank1]:[titan] 2026-05-18 16:09:03,251 - root - INFO - Last step checkpoint completed in "
    "3.25s",
]
OLD_2024 = [
    "0: [titan] 2024-05-07 13:00:00,000 - root - INFO - Saving a full checkpoint at step 500",
    "0: [titan] 2024-05-07 13:00:41,000 - root - INFO - Finished saving the checkpoint in "
    "41.00 seconds",
]


def test_current_and_2024_wordings() -> None:
    current = _parse(CURRENT)
    assert [(r["rank"], r["step"], r["start_time"], r["end_time"]) for r in current] == [
        (1, 100, "2026-05-18T16:08:00.101000+00:00", "2026-05-18T16:08:12.601000+00:00"),
        (1, 150, "2026-05-18T16:09:00.001000+00:00", "2026-05-18T16:09:03.251000+00:00"),
    ]
    old = _parse(OLD_2024)
    assert [(r["rank"], r["step"], r["start_time"]) for r in old] == [
        (0, 500, "2024-05-07T13:00:00.000000+00:00")]


def test_async_staging_and_the_interval_rounding() -> None:
    lines = [
        "[titan] 2026-01-01 00:00:00,000 - root - INFO - step: 990  loss:  2.0",
        "[titan] 2026-01-01 00:00:01,000 - root - INFO - Staging the checkpoint.",
        "[titan] 2026-01-01 00:00:01,400 - root - INFO - Finished staging the checkpoint in "
        "0.40 seconds.",
    ]
    assert [r["step"] for r in _parse(lines)] == [990]  # the last logged step
    assert [r["step"] for r in _parse(lines, interval=500)] == [1000]  # the save's own
    assert [r["rank"] for r in _parse(lines, rank=5)] == [5]


def test_a_save_without_a_step_or_a_time_is_named_not_invented() -> None:
    out = parse_torchtitan_log([
        "Saving the checkpoint.",
        "Finished saving the checkpoint in 3.00 seconds.",
    ], job_id="j", tier="local")
    assert out.records == []
    assert out.notes == ["line 2: rank 0's save names no step and no 'step: N' line came "
                         "before it: left out"]


def test_bad_tier_or_interval() -> None:
    with pytest.raises(ValueError, match="tier must be one of local, pool"):
        parse_torchtitan_log([], job_id="j", tier="nvme")
    with pytest.raises(ValueError, match="interval must be >= 1"):
        parse_torchtitan_log([], job_id="j", tier="pool", interval=0)
