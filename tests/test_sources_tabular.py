"""Canonical readers: JSON Lines, CSV and Parquet for every tabular input of the contract."""

from __future__ import annotations

import io
import json
from datetime import UTC, datetime

import polars as pl
import pytest

from ckptwatch.errors import RecordError
from ckptwatch.sources.tabular import canonicalise, load_csv, load_jsonl, load_parquet


def _read(loader, data: bytes, table: str):  # type: ignore[no-untyped-def]
    return canonicalise(loader(data, table), table, file_label="f")


ROW = {"job_id": "j", "step": 3, "rank": 1, "node": "n1", "tier": "pool",
       "start_time": "2026-11-28T01:00:00+01:00", "end_time": "2026-11-28T00:00:30Z",
       "bytes": 123}


def test_jsonl_times_with_offsets_become_utc_and_duration_is_derived() -> None:
    out = _read(load_jsonl, (json.dumps(ROW) + "\n").encode(), "checkpoint_writes")
    [df] = out.frames["checkpoint_writes"]
    row = df.row(0, named=True)
    assert row["start_ts"] == datetime(2026, 11, 28, 0, 0, 0, tzinfo=UTC)
    assert row["duration_s"] == 30.0
    assert row["status"] == "ok"
    assert row["open_s"] is None


@pytest.mark.parametrize(("value", "expected"), [
    (1764288000.25, datetime(2025, 11, 28, 0, 0, 0, 250000, tzinfo=UTC)),
    ("1764288000", datetime(2025, 11, 28, tzinfo=UTC)),
    (1764288000250, datetime(2025, 11, 28, 0, 0, 0, 250000, tzinfo=UTC)),  # epoch ms
    ("2026-11-28 00:00:00", datetime(2026, 11, 28, tzinfo=UTC)),  # naive is UTC
    ("2026-11-28T00:00:00.123456-05:00", datetime(2026, 11, 28, 5, 0, 0, 123456, tzinfo=UTC)),
])
def test_timestamp_encodings(value: object, expected: datetime) -> None:
    row = {**ROW, "start_time": value, "end_time": "2027-01-01T00:00:00Z"}
    out = _read(load_jsonl, (json.dumps(row) + "\n").encode(), "checkpoint_writes")
    assert out.frames["checkpoint_writes"][0]["start_ts"][0] == expected


@pytest.mark.parametrize(("field", "value", "reason"), [
    ("bytes", "12x", "bytes: '12x' is not an integer"),
    ("bytes", -5, "negative bytes"),
    ("tier", "tape", "tier must be one of local, pool"),
    ("start_time", "yesterday", "start_time: 'yesterday' is not a timestamp (ISO-8601"),
    ("start_time", 1.0, "start_time: '1' is not a timestamp (ISO-8601 or epoch seconds, "
                        "years 2000-2100)"),
    ("write_s", "NaN", "write_s: 'NaN' is not a finite number"),
    ("node", None, "missing node"),
])
def test_bad_values_are_rejected_with_the_line_and_reason(field: str, value: object,
                                                          reason: str) -> None:
    good = json.dumps(ROW)
    bad = json.dumps({**ROW, field: value, "rank": 2})
    out = _read(load_jsonl, f"{good}\n{bad}\n".encode(), "checkpoint_writes")
    assert out.rows("checkpoint_writes") == 1
    [rej] = out.rejects
    assert rej.line == 2
    assert reason in rej.reason
    assert rej.raw == bad


def test_jsonl_blank_lines_keep_true_line_numbers() -> None:
    good = json.dumps(ROW)
    data = f"{good}\n\n{json.dumps({**ROW, 'rank': 'x'})}\n".encode()
    out = _read(load_jsonl, data, "checkpoint_writes")
    assert [r.line for r in out.rejects] == [3]


def test_jsonl_array_line_is_rejected() -> None:
    out = _read(load_jsonl, f"{json.dumps(ROW)}\n[1, 2]\n".encode(), "checkpoint_writes")
    assert out.rejects[0].reason == "expected a JSON object, got list"


def test_csv_short_and_long_rows_are_rejected_and_the_rest_kept() -> None:
    data = (b"job_id,n_ranks,checkpoint_timeout_s\nj1,8,60\nj2,8\nj3,16,90.5\nj4,1,2,3\n")
    out = _read(load_csv, data, "jobs")
    assert out.frames["jobs"][0]["job_id"].to_list() == ["j1", "j3"]
    assert [(r.line, r.reason) for r in out.rejects] == [
        (3, "CSV row has 2 fields, header has 3"), (5, "CSV row has 4 fields, header has 3")]


def test_parquet_checkpoints_with_native_types() -> None:
    df = pl.DataFrame({**{k: [v] for k, v in ROW.items()},
                       "start_time": [datetime(2026, 11, 28, tzinfo=UTC)],
                       "end_time": [datetime(2026, 11, 28, 0, 0, 10, tzinfo=UTC)]})
    buf = io.BytesIO()
    df.write_parquet(buf)
    out = _read(load_parquet, buf.getvalue(), "checkpoint_writes")
    assert out.frames["checkpoint_writes"][0]["duration_s"].to_list() == [10.0]


def test_unreadable_parquet_raises_record_error() -> None:
    with pytest.raises(RecordError, match="unreadable Parquet"):
        load_parquet(b"PAR1 not really", "jobs")


def test_missing_required_column_names_it() -> None:
    with pytest.raises(RecordError, match="missing required column.*checkpoint_timeout_s"):
        _read(load_csv, b"job_id,n_ranks\nj,4\n", "jobs")


def test_fabric_long_topology_and_pool_read() -> None:
    fab = _read(load_csv, b"ts,node,device,port,counter,value\n1764288000,n,mlx5_0,1,"
                b"port_xmit_wait,4294967295\n", "fabric_counters")
    row = fab.frames["fabric_counters"][0].row(0, named=True)
    assert row["value"] == 4294967295.0 and row["source"] == "canonical" and row["port"] == "1"
    topo = _read(load_csv, b"node,leaf\nn1,leaf07\n", "topology")
    assert topo.frames["topology"][0].row(0, named=True)["leaf_switch"] == "leaf07"
    pool = _read(load_jsonl, b'{"ts":"2026-11-28T00:00:00Z","pool":"p","target":"t",'
                 b'"metric":"free_blocks_pct","value":"7.5"}\n', "pool_metrics")
    assert pool.frames["pool_metrics"][0]["value"].to_list() == [7.5]


def test_extra_columns_are_reported_not_fatal() -> None:
    out = _read(load_csv, b"job_id,n_ranks,checkpoint_timeout_s,owner\nj,4,60,alice\n", "jobs")
    assert out.rows("jobs") == 1
    assert out.notes == ["f: extra columns ignored: owner"]
