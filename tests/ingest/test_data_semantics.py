"""Data semantics: duplicates, late files, time zones and DST, clock skew, extra columns.

The rules these tests pin (RELIABILITY.md "Data semantics"):

* Duplicate checkpoint records (same job_id, step, rank): within one file the last record wins
  and each earlier one is quarantined naming the line that replaced it; across files the
  staging view ``stg_checkpoint_writes`` keeps the most recently ingested record (ties: the
  later source file name). The lake keeps every ingested record; only the view chooses.
* A record lands in the partition of its own UTC date, whenever its file arrives.
* Times with an offset are converted to UTC (any offset, with or without a colon; DST changes
  inside a record are exact); times without one are read as UTC; epoch seconds or ms.
* Extra columns and envelope keys are reported in the run's notes, never fatal.
"""

from __future__ import annotations

import io
import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import polars as pl
import pytest

from ckptwatch.ingest.run import ingest
from ckptwatch.lake.query import connect, run_sql
from ckptwatch.lake.store import Lake


def _ckpt(rank: int, start: str, end: str, **extra: object) -> dict[str, object]:
    return {"job_id": "j1", "step": 1, "rank": rank, "node": f"n{rank // 2}", "tier": "pool",
            "target": "t0", "start_time": start, "end_time": end, "bytes": 1000, **extra}


def _write_jsonl(path: Path, rows: list[dict[str, object]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")


def _staged(lake: Path) -> pl.DataFrame:
    con = connect(lake, views=("stg_checkpoint_writes",))
    out = run_sql(con, "select rank, duration_s, source_file from stg_checkpoint_writes "
                       "order by rank")
    con.close()
    return out


# ----------------------------------------------------------------------------- duplicates


def test_duplicate_inside_a_file_last_line_wins_earlier_quarantined(tmp_path: Path) -> None:
    raw = tmp_path / "raw" / "checkpoints"
    _write_jsonl(raw / "c.jsonl", [
        _ckpt(0, "2026-11-28T10:00:00Z", "2026-11-28T10:00:05Z"),
        _ckpt(1, "2026-11-28T10:00:00Z", "2026-11-28T10:00:06Z"),
        _ckpt(0, "2026-11-28T10:00:00Z", "2026-11-28T10:00:09Z"),  # re-sent: this one counts
    ])
    report = ingest(tmp_path / "raw", tmp_path / "lake")
    assert report.rows == {"checkpoint_writes": 2} and report.quarantined == 1
    q = Lake(tmp_path / "lake").read("quarantine")
    assert q.select("line", "reason").rows() == [
        (1, "duplicate record: line 3 has the same job_id, step and rank and is kept "
            "(the last record in a file wins)")]
    assert _staged(tmp_path / "lake")["duration_s"].to_list() == [9.0, 6.0]


def test_duplicates_across_files_most_recently_ingested_wins(tmp_path: Path) -> None:
    raw = tmp_path / "raw" / "checkpoints"
    _write_jsonl(raw / "b_first.jsonl", [_ckpt(0, "2026-11-28T10:00:00Z",
                                               "2026-11-28T10:00:05Z")])
    ingest(tmp_path / "raw", tmp_path / "lake")
    # the next night: a re-sent record in a file whose name sorts first
    _write_jsonl(raw / "a_resent.jsonl", [_ckpt(0, "2026-11-28T10:00:00Z",
                                                "2026-11-28T10:00:07Z")])
    ingest(tmp_path / "raw", tmp_path / "lake")
    assert Lake(tmp_path / "lake").read("checkpoint_writes").height == 2  # both kept in the lake
    staged = _staged(tmp_path / "lake")
    assert staged.rows() == [(0, 7.0, "checkpoints/a_resent.jsonl")]


def test_duplicates_in_one_run_tie_goes_to_the_later_file_name(tmp_path: Path) -> None:
    raw = tmp_path / "raw" / "checkpoints"
    _write_jsonl(raw / "a.jsonl", [_ckpt(0, "2026-11-28T10:00:00Z", "2026-11-28T10:00:05Z")])
    _write_jsonl(raw / "b.jsonl", [_ckpt(0, "2026-11-28T10:00:00Z", "2026-11-28T10:00:08Z")])
    ingest(tmp_path / "raw", tmp_path / "lake")
    assert _staged(tmp_path / "lake").rows() == [(0, 8.0, "checkpoints/b.jsonl")]


def test_grown_file_is_read_again_and_counts_once(tmp_path: Path) -> None:
    """A file that grew since the last run is new content: read whole again; the view keeps
    one record per rank (the newer read), and the mart counts each rank once."""
    path = tmp_path / "raw" / "checkpoints" / "j1.jsonl"
    rows = [_ckpt(r, "2026-11-28T10:00:00Z", "2026-11-28T10:00:05Z") for r in range(2)]
    _write_jsonl(path, rows)
    ingest(tmp_path / "raw", tmp_path / "lake")
    _write_jsonl(path, rows + [_ckpt(r, "2026-11-28T10:00:00Z", "2026-11-28T10:00:05Z")
                               for r in (2, 3)])
    ingest(tmp_path / "raw", tmp_path / "lake")
    assert Lake(tmp_path / "lake").read("checkpoint_writes").height == 6
    assert _staged(tmp_path / "lake")["rank"].to_list() == [0, 1, 2, 3]
    con = connect(tmp_path / "lake", views=("checkpoint_latency",))
    assert run_sql(con, "select n_ranks from checkpoint_latency")["n_ranks"].to_list() == [4]
    con.close()


# ----------------------------------------------------------------------------- late files


def test_late_file_lands_in_its_own_dates_partition(tmp_path: Path) -> None:
    raw = tmp_path / "raw"
    _write_jsonl(raw / "checkpoints" / "today.jsonl",
                 [_ckpt(0, "2026-11-28T10:00:00Z", "2026-11-28T10:00:05Z")])
    ingest(raw, tmp_path / "lake")
    _write_jsonl(raw / "checkpoints" / "late.jsonl", [  # a week late, and spanning midnight
        _ckpt(1, "2026-11-20T23:59:58Z", "2026-11-21T00:00:03Z"),
        _ckpt(2, "2026-11-21T00:00:01Z", "2026-11-21T00:00:04Z")])
    (raw / "pool").mkdir()
    (raw / "pool" / "late.csv").write_text("ts,pool,target,metric,value\n"
                                           "2026-11-19T12:00:00Z,p,t0,gc_active,1\n")
    ingest(raw, tmp_path / "lake")
    lake = Lake(tmp_path / "lake")
    where = {(r["rank"], r["start_ts"].date().isoformat()) for r in
             lake.read("checkpoint_writes").iter_rows(named=True)}
    assert where == {(0, "2026-11-28"), (1, "2026-11-20"), (2, "2026-11-21")}
    parts = {p.parent.name for p in (tmp_path / "lake" / "checkpoint_writes").glob("*/part-*")
             if p.name != "part-schema.parquet"}
    assert parts == {"date=2026-11-28", "date=2026-11-20", "date=2026-11-21"}
    for part in (tmp_path / "lake" / "checkpoint_writes").glob("date=2026-*/part-*.parquet"):
        dates = pl.read_parquet(part)["start_ts"].dt.date().cast(pl.String).unique().to_list()
        assert dates == [part.parent.name.removeprefix("date=")]  # partition = start date
    assert {p.parent.name for p in (tmp_path / "lake" / "pool_metrics").glob("*/part-*-*")} \
        == {"date=2026-11-19"}


# ----------------------------------------------------------------------------- time zones


@pytest.mark.parametrize(("start", "end", "utc_start", "duration_s"), [
    # Europe spring forward (01:59:30 CET -> 03:00:30 CEST is one minute)
    ("2026-03-29T01:59:30+01:00", "2026-03-29T03:00:30+02:00", "2026-03-29T00:59:30", 60.0),
    # US fall back: the wall clock goes back, time does not (01:30 EDT -> 01:10 EST = 40 min)
    ("2026-11-01T01:30:00-04:00", "2026-11-01T01:10:00-05:00", "2026-11-01T05:30:00", 2400.0),
    # offsets without a colon, and fractional-hour zones
    ("2026-11-28T10:00:00+0530", "2026-11-28T04:30:05Z", "2026-11-28T04:30:00", 5.0),
    ("2026-11-28T10:00:00.250+05:45", "2026-11-28T04:15:00.750z", "2026-11-28T04:15:00.250",
     0.5),
    # no offset: read as UTC; epoch seconds and milliseconds
    ("2026-11-28 04:30:00", "1795840205", "2026-11-28T04:30:00", 5.0),
    ("1795840200000", "1795840205.5", "2026-11-28T04:30:00", 5.5),
])
def test_offsets_and_dst_become_exact_utc(tmp_path: Path, start: str, end: str,
                                          utc_start: str, duration_s: float) -> None:
    raw = tmp_path / "raw" / "checkpoints"
    raw.mkdir(parents=True)
    (raw / "c.csv").write_text("job_id,step,rank,node,tier,start_time,end_time,bytes\n"
                               f"j1,1,0,n0,pool,{start},{end},100\n")
    report = ingest(tmp_path / "raw", tmp_path / "lake")
    assert report.quarantined == 0
    row = Lake(tmp_path / "lake").read("checkpoint_writes").row(0, named=True)
    assert row["start_ts"] == datetime.fromisoformat(utc_start).replace(tzinfo=UTC)
    assert row["duration_s"] == pytest.approx(duration_s)


def test_utc_date_decides_the_partition(tmp_path: Path) -> None:
    """23:30 in New York on the 28th is the 29th in UTC: that is its partition."""
    raw = tmp_path / "raw" / "checkpoints"
    _write_jsonl(raw / "c.jsonl", [_ckpt(0, "2026-11-28T23:30:00-05:00",
                                         "2026-11-28T23:30:09-05:00")])
    ingest(tmp_path / "raw", tmp_path / "lake")
    [part] = (tmp_path / "lake" / "checkpoint_writes").glob("date=2026-*/*.parquet")
    assert part.parent.name == "date=2026-11-29"


def test_zoned_parquet_and_envelope_times_are_utc(tmp_path: Path) -> None:
    raw = tmp_path / "raw"
    (raw / "pool").mkdir(parents=True)
    local = datetime(2026, 3, 29, 3, 0, 30)  # CEST, just after the change
    pl.DataFrame({"ts": [local], "pool": ["p"], "target": ["t"], "metric": ["gc_active"],
                  "value": [1.0]}).with_columns(
        pl.col("ts").dt.replace_time_zone("Europe/Berlin")).write_parquet(
            raw / "pool" / "p.parquet")
    (raw / "fabric" / "n0").mkdir(parents=True)
    (raw / "fabric" / "n0" / "e.jsonl").write_text(json.dumps(
        {"node": "n0", "device": "eth0", "collected_at": "2026-03-29T03:00:30+02:00",
         "output": "NIC statistics:\n     rx_prio3_pause: 1\n"}) + "\n")
    ingest(raw, tmp_path / "lake")
    lake = Lake(tmp_path / "lake")
    want = datetime(2026, 3, 29, 1, 0, 30, tzinfo=UTC)
    assert lake.read("pool_metrics")["ts"].to_list() == [want]
    assert set(lake.read("fabric_counters")["ts"]) == {want}


# ----------------------------------------------------------------------------- extra columns


def test_extra_columns_and_envelope_keys_are_reported_not_fatal(tmp_path: Path) -> None:
    raw = tmp_path / "raw"
    (raw / "pool").mkdir(parents=True)
    (raw / "pool" / "p.csv").write_text("ts,pool,target,metric,value,rack,Comment\n"
                                        "2026-11-28T00:00:00Z,p,t,gc_active,1,r7,hello\n")
    _write_jsonl(raw / "checkpoints" / "c.jsonl", [
        _ckpt(0, "2026-11-28T10:00:00Z", "2026-11-28T10:00:05Z", gpu="H100",
              tags={"a": [1, 2]})])
    buf = io.BytesIO()
    pl.DataFrame({"job_id": ["j9"], "n_ranks": [8], "checkpoint_timeout_s": [60.0],
                  "owner": ["alice"], "knobs": [[1, 2]]}).write_parquet(buf)
    (raw / "jobs").mkdir()
    (raw / "jobs" / "j.parquet").write_bytes(buf.getvalue())
    (raw / "smart" / "n0").mkdir(parents=True)
    (raw / "smart" / "n0" / "e.jsonl").write_text(json.dumps(
        {"node": "n0", "device": "eth0", "collected_at": "2026-11-28T10:00:00Z", "rack": "r7",
         "output": "NIC statistics:\n     rx_bytes: 1\n"}) + "\n")
    report = ingest(raw, tmp_path / "lake")
    assert report.quarantined == 0 and report.count("failed") == 0
    assert report.rows == {"checkpoint_writes": 1, "jobs": 1, "pool_metrics": 1,
                           "fabric_counters": 1}
    notes = sorted(n for f in report.files for n in f.notes)
    assert notes == [
        "checkpoints/c.jsonl: extra columns ignored: gpu, tags",
        "jobs/j.parquet: extra columns ignored: knobs, owner",
        "pool/p.csv: extra columns ignored: Comment, rack",
        "smart/n0/e.jsonl: envelope keys not read: 'rack' (first on line 1)",
    ]


# ----------------------------------------------------------------------------- clock skew


def _skew_lake(root: Path, skew_s: float, *, skew_checkpoints: bool) -> Path:
    """Job j1 step 1: ranks 0-1 on n0, 2-3 on n1, writing 10:00:05-10:00:25. PFC pause
    counters on both nodes every 10 s; node n1's clock runs ``skew_s`` ahead (its counter
    samples, and with ``skew_checkpoints`` its ranks' timings too)."""
    raw = root / "raw"
    t0 = datetime(2026, 11, 28, 10, 0, 5, tzinfo=UTC)

    def at(node: str, t: datetime, move: bool = True) -> str:
        shift = timedelta(seconds=skew_s if node == "n1" and move else 0)
        return (t + shift).isoformat()

    ends = {0: 19, 1: 18, 2: 20, 3: 17}  # n1's rank 2 ends last: the window is 10:00:05-25
    rows = [_ckpt(r, at(f"n{r // 2}", t0, skew_checkpoints),
                  at(f"n{r // 2}", t0 + timedelta(seconds=ends[r]), skew_checkpoints))
            for r in range(4)]
    _write_jsonl(raw / "checkpoints" / "c.jsonl", rows)
    (raw / "jobs").mkdir()
    (raw / "jobs" / "j.csv").write_text("job_id,n_ranks,checkpoint_timeout_s\nj1,4,600\n")
    lines = ["ts,node,device,port,counter,value"]
    base = datetime(2026, 11, 28, 9, 59, 0, tzinfo=UTC)
    for node in ("n0", "n1"):
        total = 0
        for i in range(13):  # 09:59:00 .. 10:01:00
            total += 10 * i * i  # uneven increments, so that weights matter
            lines.append(f"{at(node, base + timedelta(seconds=10 * i))},{node},mlx5_0,1,"
                         f"rx_prio3_pause,{total}")
    (raw / "fabric").mkdir()
    (raw / "fabric" / "counters.csv").write_text("\n".join(lines) + "\n")
    ingest(raw, root / "lake")
    return root / "lake"


def _windows(lake: Path) -> pl.DataFrame:
    con = connect(lake, views=("counter_windows",))
    out = run_sql(con, "select * from counter_windows where signal = 'rx_prio3_pause' "
                       "order by host")
    con.close()
    return out


@pytest.mark.parametrize("skew_s", [-3.0, 2.0, 4.0])
def test_clock_skew_moves_only_what_the_skew_implies(tmp_path: Path, skew_s: float) -> None:
    """Counter samples of one node taken by a clock a few seconds off: the other node's
    alignment is untouched; the skewed node's window keeps the same sampling intervals
    (none of its sample times lies within the skew of a window edge), its coverage, and
    an increase that differs by at most the edge intervals' share of the skew."""
    if not (Path(__file__).parents[2] / "sql" / "marts" / "counter_windows.sql").exists():
        pytest.skip("counter_windows mart not built yet")
    ref = _windows(_skew_lake(tmp_path / "ref", 0.0, skew_checkpoints=False))
    off = _windows(_skew_lake(tmp_path / "off", skew_s, skew_checkpoints=False))
    assert ref["host"].to_list() == off["host"].to_list() == ["n0", "n1"]
    keep = [c for c in ref.columns if c not in ("baseline_level", "level_vs_baseline")]
    assert ref.filter(pl.col("host") == "n0").select(keep).rows() == \
        off.filter(pl.col("host") == "n0").select(keep).rows()
    r, o = (df.filter(pl.col("host") == "n1").row(0, named=True) for df in (ref, off))
    assert (o["window_start_ts"], o["window_end_ts"]) == (r["window_start_ts"],
                                                          r["window_end_ts"])
    assert o["n_samples"] == r["n_samples"] == 3  # (10:00, 10:10], (10:10, 10:20], (10:20, 10:30]
    assert o["covered_s"] == pytest.approx(r["covered_s"]) and r["coverage"] == pytest.approx(1)
    # increments of the two edge intervals: 10*i*i for i = 7 and 9 (the 3rd and 5th samples)
    bound = abs(skew_s) / 10 * (490 + 810)
    assert abs(o["increase"] - r["increase"]) <= bound + 1e-9
    assert abs(o["increase"] - r["increase"]) > 0  # the skew is seen, not hidden


def test_skewed_rank_timings_widen_the_window_by_the_skew_only(tmp_path: Path) -> None:
    if not (Path(__file__).parents[2] / "sql" / "marts" / "counter_windows.sql").exists():
        pytest.skip("counter_windows mart not built yet")
    ref = _windows(_skew_lake(tmp_path / "ref", 0.0, skew_checkpoints=True))
    off = _windows(_skew_lake(tmp_path / "off", 3.0, skew_checkpoints=True))
    r, o = ref.row(0, named=True), off.row(0, named=True)
    assert o["window_start_ts"] == r["window_start_ts"]
    assert (o["window_end_ts"] - r["window_end_ts"]).total_seconds() == pytest.approx(3.0)
    assert o["window_s"] - r["window_s"] == pytest.approx(3.0)
    assert off["n_samples"].to_list() == ref["n_samples"].to_list()
