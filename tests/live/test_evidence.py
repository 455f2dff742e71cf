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
                            None if r in open_ranks else 9.5) for r in range(8))
    return EvidenceRequest("j", "pool", sc.STALL_STEP, start, start + age_s, ranks, 9.6)


@pytest.mark.parametrize(("stall", "open_ranks", "cause", "number"), [
    ("gc", (0, 2), "gc", "gc_active on the slow ranks' targets (t1)"),
    ("fabric_pause", (0, 1), "fabric_pause", "20.0 k/s vs 2.00 /s baseline"),
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


def test_the_open_checkpoint_is_a_row_of_the_stalls_mart_as_its_contract_says() -> None:
    """The evidence hands attribution the open checkpoint in place of the stalls mart: every
    column of the mart's contract, of its type (a column the mart gains is missed here)."""
    import yaml
    from tests.conftest import PROJECT_ROOT

    from ckptwatch.live.evidence import _stall_frame

    contract = yaml.safe_load(
        (PROJECT_ROOT / "sql" / "marts" / "stalls.contract.yml").read_text())["columns"]
    frame = _stall_frame(request((0, 2)))
    assert frame.columns == list(contract)
    sql_types = {pl.String: "VARCHAR", pl.Int64: "BIGINT", pl.Float64: "DOUBLE",
                 pl.Boolean: "BOOLEAN", pl.Datetime("us", "UTC"): "TIMESTAMP WITH TIME ZONE"}
    assert {c: sql_types[t] for c, t in frame.schema.items()} == {
        c: spec["type"] for c, spec in contract.items()}
