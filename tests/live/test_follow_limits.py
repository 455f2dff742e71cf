"""The watcher reads the growing checkpoint files under the ingest's limits as loaded (the
settings tree's ``ingest``), passed down, not the built-in ones."""

from __future__ import annotations

import json
from dataclasses import replace

from ckptwatch.live.follow import Chunk, parse_chunk
from ckptwatch.settings import INGEST


def _line(job: str, rank: int) -> bytes:
    return json.dumps({"job_id": job, "step": 1, "rank": rank, "node": "n0", "tier": "pool",
                       "start_time": "2026-11-28T00:00:00Z",
                       "end_time": "2026-11-28T00:00:05Z", "bytes": 1}).encode() + b"\n"


def test_a_chunk_is_read_under_the_limits_given() -> None:
    chunk = Chunk("checkpoints/c.jsonl", ".jsonl",
                  _line("j1", 0) + _line("a-long-job", 1) + b"garbage\n" * 3, 1)
    default = parse_chunk(chunk)
    assert sum(f.height for f in default.frames["checkpoint_writes"]) == 2
    assert len(default.rejects) == 3
    tight = parse_chunk(chunk, replace(INGEST, max_field_chars=8, max_quarantine_rows=2))
    assert [f["job_id"].to_list() for f in tight.frames["checkpoint_writes"]] == [["j1"]]
    assert tight.capped.cap == 2 and len(tight.rejects) == 2 and tight.capped.dropped == 2
