"""DLIO / MLPerf Storage ``<rank>_per_epoch_stats.json`` -> ``checkpoint_writes`` rows."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
from tests.in_place import IN_PLACE, IN_PLACE_REASON

from ckptwatch.errors import RecordError
from ckptwatch.lake.schema import CHECKPOINT_WRITES, PROVENANCE
from ckptwatch.sources.mlperf import (
    GIB,
    detect_dlio_per_epoch_stats,
    n_ranks_from_summary,
    parse_dlio_per_epoch_stats,
    rank_from_filename,
)

DLIO_TESTS = (Path(__file__).parents[1] / "fixtures" / "real" / "checkpoint_timing"
              / "dlio_benchmark_tests")
NEBIUS = (IN_PLACE / "checkpoint_timing"
          / "mlperf_storage_v3.0_nebius_llama3-70b_64rank")
COLUMNS = {f.name for f in CHECKPOINT_WRITES.schema} - {f.name for f in PROVENANCE}

#: A checkpoint-mode per_epoch_stats.json in DLIO's layout (values ours): two saves, one load.
STATS: dict[str, Any] = {
    "1": {
        "start": "2026-11-28T10:00:00.000000",
        "save_ckpt1": {"start": "2026-11-28T10:00:05.000000", "end": "2026-11-28T10:00:26.500000",
                       "duration": 21.5, "throughput": 8.0},
        "save_ckpt2": {"start": "2026-11-28T10:10:05.000000", "end": "2026-11-28T10:10:49.000000",
                       "duration": 44.0, "throughput": 3.909090909090909},
        "load_ckpt1": {"start": "2026-11-28T10:20:00.000000", "end": "2026-11-28T10:20:10.000000",
                       "duration": 10.0, "throughput": 17.2},
        "end": "2026-11-28T10:20:10.500000",
    }
}


def test_rows_from_dlio_layout() -> None:
    rows = parse_dlio_per_epoch_stats(json.dumps(STATS), rank=5, job_id="llama-70b-ckpt",
                                      node="gpu-node-03", n_ranks=8)
    assert [set(r) for r in rows] == [COLUMNS, COLUMNS]
    first, second = rows
    assert (first["step"], first["rank"], first["node"], first["tier"], first["status"]) == (
        1, 5, "gpu-node-03", "pool", "ok")
    assert first["start_ts"] == datetime(2026, 11, 28, 10, 0, 5, tzinfo=UTC)
    assert first["duration_s"] == 21.5
    assert first["bytes"] == round(8.0 * 21.5 * GIB / 8)  # total 172 GiB over 8 ranks
    assert second["step"] == 2 and second["duration_s"] == 44.0
    assert {r["open_s"] for r in rows} == {None} and {r["target"] for r in rows} == {None}


def test_node_target_tier_timezone_and_explicit_bytes() -> None:
    rows = parse_dlio_per_epoch_stats(STATS, rank=0, job_id="j", node=None, bytes_per_rank=123,
                                      tier="local", target="gpu-node-03:nvme0",
                                      tz=timezone(timedelta(hours=2)))
    assert rows[0]["node"] == "unknown"
    assert rows[0]["bytes"] == 123 and rows[0]["tier"] == "local"
    assert rows[0]["target"] == "gpu-node-03:nvme0"
    assert rows[0]["start_ts"] == datetime(2026, 11, 28, 8, 0, 5, tzinfo=UTC)
    with pytest.raises(ValueError, match="tier must be one of local, pool"):
        parse_dlio_per_epoch_stats(STATS, rank=0, job_id="j", node="n", n_ranks=1, tier="nfs")


def test_bytes_need_rank_count() -> None:
    with pytest.raises(RecordError, match=r"^DLIO reports only the whole checkpoint's size"):
        parse_dlio_per_epoch_stats(STATS, rank=0, job_id="j", node="n")


def test_training_mode_file_is_detected_but_has_no_checkpoints() -> None:
    doc = json.loads((DLIO_TESTS / "per_epoch_stats.json").read_text())
    assert detect_dlio_per_epoch_stats(doc)
    with pytest.raises(RecordError) as err:
        parse_dlio_per_epoch_stats(doc, rank=0, job_id="j", node="n", n_ranks=2)
    assert err.value.reason == ("DLIO per_epoch_stats has no save_ckptN entries (a training-mode "
                                "run: epoch/block timings only, no checkpoints)")
    assert n_ranks_from_summary(json.loads((DLIO_TESTS / "summary.json").read_text())) == 2


@pytest.mark.parametrize(("text", "reason"), [
    ("9" * 5000, "a number has more than 4300 digits"),  # Python's int limit: a ValueError
    ("[" * 100_000, "nested too deeply to read"),
])
def test_json_that_python_refuses_is_a_record_error(text: str, reason: str) -> None:
    """Found by the fuzz test: a 5,000-digit number crashed the reader with json's ValueError."""
    with pytest.raises(RecordError, match=rf"^DLIO per_epoch_stats is not valid JSON \({reason}; "
                                          r"truncated\?\)$"):
        parse_dlio_per_epoch_stats(text, rank=0, job_id="j", node="n", n_ranks=1)


def test_truncated_and_malformed_copies() -> None:
    text = json.dumps(STATS, indent=4)
    with pytest.raises(RecordError, match=r"^DLIO per_epoch_stats is not valid JSON \(.*; "
                                          r"truncated\?\)$"):
        parse_dlio_per_epoch_stats(text[: len(text) // 2], rank=0, job_id="j", node="n",
                                   n_ranks=1)
    broken = json.loads(text)
    del broken["1"]["save_ckpt2"]["end"]
    with pytest.raises(RecordError) as err:
        parse_dlio_per_epoch_stats(broken, rank=0, job_id="j", node="n", n_ranks=1)
    assert err.value.reason == "epoch 1 save_ckpt2 has no 'end' (run interrupted or truncated?)"
    broken = json.loads(text)
    broken["1"]["save_ckpt1"]["start"] = "yesterday"
    with pytest.raises(RecordError, match=r"^epoch 1 save_ckpt1\.start is not an ISO-8601 time: "
                                          r"'yesterday'$"):
        parse_dlio_per_epoch_stats(broken, rank=0, job_id="j", node="n", n_ranks=1)


def test_file_names_and_detection() -> None:
    assert rank_from_filename("results/63_per_epoch_stats.json") == 63
    assert rank_from_filename("per_epoch_stats.json") is None
    assert detect_dlio_per_epoch_stats(json.dumps(STATS))
    others: list[Any] = [None, 3, [], {}, "not json", {"1": {"start": "x"}},
                         json.loads((DLIO_TESTS / "summary.json").read_text())]
    for other in others:
        assert detect_dlio_per_epoch_stats(other) is False


# MLPerf Storage v3.0 results (licence not determined): checked in place, never copied.
@pytest.mark.skipif(not NEBIUS.exists(), reason=IN_PLACE_REASON)
def test_mlperf_storage_nebius_ranks_checked_in_place() -> None:
    n_ranks = n_ranks_from_summary(json.loads((NEBIUS / "summary.json").read_text()))
    assert n_ranks == 64
    rank0 = parse_dlio_per_epoch_stats((NEBIUS / "0_per_epoch_stats.json").read_text(),
                                       rank=0, job_id="nebius-llama3-70b", node=None,
                                       n_ranks=n_ranks)
    assert [r["step"] for r in rank0] == list(range(1, 11))
    assert rank0[0]["start_ts"] == datetime(2026, 7, 14, 12, 15, 31, 198999, tzinfo=UTC)
    assert rank0[0]["duration_s"] == pytest.approx(46.540652)
    assert rank0[0]["bytes"] == round(911.2121276855469 * GIB / 64)
    rank63 = parse_dlio_per_epoch_stats((NEBIUS / "63_per_epoch_stats.json").read_text(),
                                        rank=rank_from_filename("63_per_epoch_stats.json") or -1,
                                        job_id="nebius-llama3-70b", node=None, n_ranks=64)
    assert rank63[0]["rank"] == 63
    assert rank63[0]["duration_s"] == pytest.approx(47.525608)
    assert sum(r["duration_s"] for r in rank0) / 10 == pytest.approx(46.85, abs=0.01)
