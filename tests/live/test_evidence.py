"""Live evidence: an open checkpoint attributed by the same rules as a finished stall.

The lakes are tests/stall_cases.py's: job j, ranks 0-3 on n1, 4-7 on n2, pool targets t1 (even
ranks) and t2 (odd), one cause injected at the stalled step. Here that step is still open: the
request says which ranks finished and which are still writing, and "now" is 40 s into it.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import polars as pl
import pytest
from tests import stall_cases as sc

from ckptwatch.lake.store import Lake
from ckptwatch.live.evidence import (
    EvidenceRequest,
    RankState,
    hosts_to_read,
    live_evidence,
    raw_telemetry_files,
    telemetry_exists,
)


def request(open_ranks: tuple[int, ...], *, age_s: float = 40.0) -> EvidenceRequest:
    start = sc._ckpt_start(sc.STALL_STEP).timestamp()
    ranks = tuple(RankState(r, "n1" if r < 4 else "n2", "t1" if r % 2 == 0 else "t2", start,
                            None if r in open_ranks else 9.5,
                            None if r in open_ranks else start + 9.5) for r in range(8))
    return EvidenceRequest("j", "pool", sc.STALL_STEP, start, start + age_s, ranks)


# The lake holds the data of the later checkpoints too: the views see the open checkpoint
# timed out (the job's timeout is 120 s), its window its first 120 s.
@pytest.mark.parametrize(("stall", "open_ranks", "cause", "number"), [
    ("gc", (0, 2), "gc", "gc_active on the slow ranks' targets (t1)"),
    ("fabric_pause", (0, 1), "fabric_pause", "k/s vs 2.00 /s baseline"),
])
def test_the_open_ranks_telemetry_names_the_cause_with_its_numbers(
        tmp_path: Path, stall: str, open_ranks: tuple[int, ...], cause: str,
        number: str) -> None:
    lake = sc.build(tmp_path / "lake", sc.Case(stall=stall, unfinished=open_ranks))
    text = live_evidence(str(lake), None, request(open_ranks))
    assert text is not None and text.startswith(f"{cause} (score ")
    assert number in text


def _without(lake: Path, *tables: str) -> None:
    for table in tables:
        for part in (lake / table).rglob("*.parquet"):
            part.unlink()


def test_raw_telemetry_not_yet_ingested_is_read(tmp_path: Path) -> None:
    """The pool's telemetry is only in the raw directory (the nightly ingest has not run):
    the evidence reads it there, and without the raw directory there is none."""
    lake = sc.build(tmp_path / "lake", sc.Case(stall="gc", unfinished=(0, 2)))
    pool = pl.read_parquet(lake / "pool_metrics" / "*" / "*.parquet").select(
        "ts", "pool", "target", "metric", "value")
    _without(lake, "pool_metrics", "nvme_smart")
    raw = tmp_path / "raw"
    (raw / "pool").mkdir(parents=True)
    pool.with_columns(pl.col("ts").dt.strftime("%Y-%m-%dT%H:%M:%SZ")).write_csv(
        raw / "pool" / "pool-p.csv")
    # now = the checkpoint's window: the file must be newer than the baseline's start
    assert "gc_active" in (live_evidence(str(lake), str(raw), request((0, 2))) or "")
    assert (live_evidence(str(lake), None, request((0, 2))) or "").startswith(
        "no cause stands out yet")


def test_only_the_checkpoints_hosts_recent_files_are_read_within_the_budget(
        tmp_path: Path) -> None:
    req = request((0, 2))
    assert hosts_to_read(req) == {"n1", "n2", "t1", "t2"}
    raw = tmp_path / "raw"
    files = {"fabric/n1-2026-11-28.jsonl": 100, "fabric/n9-2026-11-28.jsonl": 100,
             "smart/n2/nvme0.json": 100, "smart/n9/nvme0.json": 100,
             "fabric/n1-2026-11-01.jsonl": 100, "pool/pool.csv": 100, "fabric/n2.jsonl": 5000}
    for rel, size in files.items():
        (raw / rel).parent.mkdir(parents=True, exist_ok=True)
        (raw / rel).write_text("x" * size)
    old = time.time() - 10 * 86400
    os.utime(raw / "fabric/n1-2026-11-01.jsonl", (old, old))
    picked, notes = raw_telemetry_files(raw, req, time.time() - 86400, max_bytes=1 << 20)
    names = sorted(p.relative_to(raw).as_posix() for p in picked)
    assert names == ["fabric/n1-2026-11-28.jsonl", "fabric/n2.jsonl", "pool/pool.csv",
                     "smart/n2/nvme0.json"]
    assert notes == []
    picked, notes = raw_telemetry_files(raw, req, time.time() - 86400, max_bytes=1000)
    assert len(picked) < 4 and "not read for the live evidence" in notes[0]


def test_without_any_telemetry_no_attribution_is_started(tmp_path: Path) -> None:
    lake, raw = tmp_path / "lake", tmp_path / "raw"
    Lake(lake).init()
    (raw / "checkpoints").mkdir(parents=True)
    since = time.time() - 3600
    assert not telemetry_exists(lake, raw, since)
    (raw / "fabric").mkdir()
    (raw / "fabric" / "n1.jsonl").write_text("{}\n")
    assert telemetry_exists(lake, raw, since)
    old = since - 86400
    os.utime(raw / "fabric" / "n1.jsonl", (old, old))
    assert not telemetry_exists(lake, raw, since)  # a file of another day is no evidence
    cases = sc.build(tmp_path / "cases", sc.Case(stall="gc"))
    assert telemetry_exists(cases, raw, sc.T0.timestamp() - 86400)  # the lake's own days


def young_checkpoint(tmp_path: Path, age_s: float) -> tuple[Path, EvidenceRequest]:
    """A lake of five checkpoints of job y (barriers 10-14 s, timeout 600 s) and step 5 open
    for ``age_s``: ranks 0 and 1 finished in 9 s, ranks 2 and 3 still writing (the data ends
    now)."""
    from tests.sql_seed import at, seed

    Lake(tmp_path).init()
    seed(tmp_path, "checkpoint_writes", [
        {"job_id": "y", "step": step, "rank": rank, "node": f"n{rank}", "tier": "pool",
         "target": "t0", "start_ts": at(600.0 * step), "end_ts": at(600.0 * step + d),
         "duration_s": d, "bytes": 1, "status": "ok"}
        for step in range(5) for rank, d in enumerate((8.0, 9.0, 9.5, 10.0 + step))])
    seed(tmp_path, "jobs", [{"job_id": "y", "n_ranks": 4, "checkpoint_timeout_s": 600.0}])
    start = at(3000.0).timestamp()
    ranks = tuple(RankState(r, f"n{r}", "t0", start, 9.0 if r < 2 else None,
                            start + 9.0 if r < 2 else None) for r in range(4))
    return tmp_path, EvidenceRequest("y", "pool", 5, start, start + age_s, ranks)


def test_the_open_checkpoint_is_judged_by_the_stalls_view(tmp_path: Path) -> None:
    from ckptwatch.lake.query import connect
    from ckptwatch.live.evidence import checkpoint_rows, open_stall_row

    lake, req = young_checkpoint(tmp_path, 40.0)
    con = connect(lake, views=("stalls",), extra_rows=checkpoint_rows(req))
    try:
        row = open_stall_row(con, req)
    finally:
        con.close()
    assert row is not None
    # baseline: the median of the 5 barriers before (10..14 s); the barrier: open 40 s so far
    assert (row["baseline_s"], row["barrier_s"], row["barrier_is_lower_bound"]) == (
        12.0, 40.0, True)
    assert (row["n_ranks"], row["n_started"], row["n_unfinished"]) == (2, 4, 2)
    assert (row["p50_s"], row["p99_s"], row["timed_out"], row["is_stall"]) == (
        9.0, 9.0, False, True)


def test_an_open_checkpoint_that_is_no_stall_yet_says_how_far_it_is(tmp_path: Path) -> None:
    lake, req = young_checkpoint(tmp_path, 18.0)  # x1.5 the baseline: no stall (x2)
    assert live_evidence(str(lake), None, req) == (
        "not a stall yet: open 18.0 s, x1.5 the job's baseline 12.0 s (stall_factor and "
        "stall_min_excess_s of sql/session.sql)")
