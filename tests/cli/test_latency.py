"""`ckptwatch latency`: the marts as a table, JSON or CSV; filters; errors a person can act on."""

from __future__ import annotations

import csv
import io
import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from ckptwatch.cli.main import main
from ckptwatch.lake.schema import TABLES
from ckptwatch.lake.store import Lake

T0 = datetime(2026, 11, 28, tzinfo=UTC)


def seed(root: Path, table: str, rows: list[dict[str, Any]]) -> None:
    """Write literal rows as one lake part of ``table`` (missing optional columns are null)."""
    schema = TABLES[table].schema
    filled = [{"source_file": "seed", "ingested_ts": T0 + timedelta(days=1), **r} for r in rows]
    arrow = pa.table({f.name: [r.get(f.name) for r in filled] for f in schema}, schema=schema)
    path = root / table / f"date={T0:%Y-%m-%d}" / "part-x.parquet"
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(arrow, path)


@pytest.fixture
def lake(tmp_path: Path) -> Path:
    """Job j1 (pool, 2 checkpoints: barriers 10 s and 30 s) and j2 (local, 1 checkpoint: 4 s)."""
    root = tmp_path / "lake"
    Lake(root).init()
    rows = []
    for job, step, tier, durations in [("j1", 100, "pool", (5.0, 10.0)),
                                       ("j1", 200, "pool", (6.0, 30.0)),
                                       ("j2", 7, "local", (3.0, 4.0))]:
        start = T0 + timedelta(seconds=step)
        rows += [{"job_id": job, "step": step, "rank": r, "node": f"n{r}", "tier": tier,
                  "start_ts": start, "end_ts": start + timedelta(seconds=d), "duration_s": d,
                  "bytes": 2_000_000_000, "status": "ok"} for r, d in enumerate(durations)]
    seed(root, "checkpoint_writes", rows)
    seed(root, "jobs", [{"job_id": "j1", "n_ranks": 2, "checkpoint_timeout_s": 60.0},
                        {"job_id": "j2", "n_ranks": 2, "checkpoint_timeout_s": 20.0}])
    return root


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    """Run ``ckptwatch latency …``; exit code, stdout, stderr."""
    code = main(["latency", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_by_checkpoint_json_carries_every_column(lake: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "--lake", str(lake), "--format", "json")
    assert code == 0
    rows = json.loads(out)
    assert [(r["job_id"], r["step"]) for r in rows] == [("j1", 100), ("j1", 200), ("j2", 7)]
    first = rows[0]
    assert (first["p50_s"], first["barrier_s"], first["n_ranks"]) == (7.5, 10.0, 2)
    assert first["p99_s"] == pytest.approx(5.0 + 0.99 * 5.0)
    assert first["effective_bandwidth_bytes_per_s"] == pytest.approx(4e8)
    assert "fsync_p50_s" in first and "p999_s" in first


def test_by_job_table(lake: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "--lake", str(lake), "--by", "job")
    assert code == 0
    lines = out.splitlines()
    assert lines[0].split("|")[1].strip() == "job_id"
    assert "headroom_s" in lines[0] and "barrier_p99_s" in lines[0]
    j1 = next(line for line in lines if "| j1 " in line)
    # Barriers 10 and 30: p50 20, max 30, timeout 60 -> headroom 30.
    cells = [c.strip() for c in j1.strip("|").split("|")]
    assert cells[:3] == ["j1", "pool", "2"]
    assert "20.00" in cells and "30.00" in cells and "60.00" in cells
    assert lines[-1].startswith("(2 rows; seconds; p50/p99 over checkpoints")


def test_by_tier_csv_and_filters(lake: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "--lake", str(lake), "--by", "tier", "--format", "csv")
    assert code == 0
    rows = list(csv.DictReader(io.StringIO(out)))
    assert [(r["tier"], r["n_checkpoints"]) for r in rows] == [("local", "1"), ("pool", "2")]
    code, out, _ = run(capsys, "--lake", str(lake), "--job", "j2", "--format", "csv")
    assert [r["job_id"] for r in csv.DictReader(io.StringIO(out))] == ["j2"]
    code, out, _ = run(capsys, "--lake", str(lake), "--tier", "pool", "--limit", "1",
                       "--format", "json")
    assert [(r["job_id"], r["step"]) for r in json.loads(out)] == [("j1", 100)]


def test_unknown_job_exits_1_and_says_so(lake: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "--lake", str(lake), "--job", "nope")
    assert code == 1
    assert "(0 rows" in out
    assert err == f"ckptwatch latency: no checkpoints for job nope in {lake}\n"


def test_missing_lake_is_one_line_and_exit_2(tmp_path: Path,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    missing = tmp_path / "nowhere"
    code, out, err = run(capsys, "--lake", str(missing))
    assert code == 2 and out == ""
    assert err == (f"ckptwatch latency: error: no lake at {missing} (run `ckptwatch ingest "
                   f"RAW_DIR --lake {missing}` first)\n")


def test_help_names_the_groupings(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["latency", "--help"])
    assert exc.value.code == 0
    out = capsys.readouterr().out
    assert "--by {checkpoint,job,tier}" in out and "--format {table,json,csv}" in out


def test_json_counts_started_and_unfinished_ranks(lake: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    # j1 step 300: rank 0 finishes in 8 s, rank 1 never does. j1's timeout is 60 s and the data
    # reaches T0 + 308 (rank 0's end) only: open 8 s, not timed out; the barrier is >= 8 s.
    start = T0 + timedelta(seconds=300)
    seed(lake, "checkpoint_starts", [
        {"job_id": "j1", "step": step, "rank": r, "node": f"n{r}", "tier": "pool",
         "start_ts": T0 + timedelta(seconds=step),
         "ingested_ts": T0 + timedelta(seconds=step)}  # ingested live, not a day later
        for step in (100, 300) for r in (0, 1)])
    extra = lake / "checkpoint_writes" / f"date={T0:%Y-%m-%d}" / "part-y.parquet"
    pq.write_table(pa.Table.from_pylist([{
        "job_id": "j1", "step": 300, "rank": 0, "node": "n0", "tier": "pool", "start_ts": start,
        "end_ts": start + timedelta(seconds=8), "duration_s": 8.0, "bytes": 1, "status": "ok",
        "source_file": "seed", "ingested_ts": T0}], schema=TABLES["checkpoint_writes"].schema),
        extra)
    code, out, _ = run(capsys, "--lake", str(lake), "--job", "j1", "--format", "json")
    assert code == 0
    got = {r["step"]: r for r in json.loads(out)}
    keys = ("n_started", "n_unfinished", "timed_out", "barrier_is_lower_bound", "barrier_s")
    assert {k: got[100][k] for k in keys} == {
        "n_started": 2, "n_unfinished": 0, "timed_out": False, "barrier_is_lower_bound": False,
        "barrier_s": 10.0}
    assert {k: got[200][k] for k in keys} == {
        "n_started": 0, "n_unfinished": 0, "timed_out": False, "barrier_is_lower_bound": False,
        "barrier_s": 30.0}
    assert {k: got[300][k] for k in keys} == {
        "n_started": 2, "n_unfinished": 1, "timed_out": False, "barrier_is_lower_bound": True,
        "barrier_s": 8.0}
    code, out, _ = run(capsys, "--lake", str(lake), "--job", "j1")
    header = [c.strip() for c in out.splitlines()[0].strip("|").split("|")]
    assert "n_unfinished" in header and "timed_out" in header
