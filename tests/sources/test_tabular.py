"""Canonical readers: JSON Lines, CSV and Parquet for every tabular input of the contract."""

from __future__ import annotations

import io
import json
from datetime import UTC, datetime

import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ckptwatch.errors import RecordError
from ckptwatch.sources import coerce
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


@pytest.mark.parametrize(("loader", "encode", "bad_line"),
                         [(load_jsonl, None, 8), (load_csv, "csv", 9)])  # csv: the header
def test_status_spellings_become_the_canonical_status(loader, encode, bad_line) -> None:  # type: ignore[no-untyped-def]
    spellings = ["OK", " Error ", "TIMEOUT", "Timed_Out", "killed", "ABORTED", None, "done"]
    rows = [{**ROW, "rank": i, "status": s} for i, s in enumerate(spellings)]
    data = ("".join(json.dumps(r) + "\n" for r in rows).encode() if encode is None else
            ("job_id,step,rank,node,tier,start_time,end_time,bytes,status\n" + "".join(
                f"j,3,{i},n1,pool,{ROW['start_time']},{ROW['end_time']},123,{s or ''}\n"
                for i, s in enumerate(spellings))).encode())
    out = _read(loader, data, "checkpoint_writes")
    [df] = out.frames["checkpoint_writes"]
    assert df.sort("rank")["status"].to_list() == [
        "ok", "error", "timeout", "timeout", "timeout", "timeout", "ok"]
    [reject] = out.rejects
    assert (reject.line, reject.reason) == (bad_line, "status must be one of ok, error, "
                                                      "timeout, timed_out, killed, aborted "
                                                      "(any case; or started for a start "
                                                      "marker)")


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


# -- the coercions canonicalise runs are the expression forms, computed faster ----------------
_STAMPS = st.one_of(
    st.sampled_from([
        "2026-11-28T00:00:03Z", "2026-11-28T00:00:03.5z", " 2026-11-28 00:00:03+02:00 ",
        "2026-11-28T00:00:03.123456", "2026-11-28 00:00:03", "1795824212.677247",
        "1795824212677", "-1", "nan", "inf", "", "  ", "abc", "1999-12-31T23:59:59Z",
        "2101-01-01T00:00:00Z", "2026-02-30T00:00:00Z", "2026-11-28T24:00:00Z", "1e300", "0",
        "2026-11-28T00:00:03+0530", "2026-11-28T00:00:03.1234567891Z"]),
    st.floats(allow_nan=True, allow_infinity=True).map(str),
    st.datetimes().map(lambda d: d.isoformat()),
    st.text(max_size=12))


_NUMBERS = st.one_of(
    st.sampled_from(["12", " 12 ", "12.0", "1.2e10", "-0", "+5", "0x1f", "1,234", "nan", "inf",
                     "-inf", "9.2e18", "9.3e18", "9223372036854775807", "9223372036854775808",
                     "2147483648", "1e-300", "1_000", ""]),
    st.integers(-2 ** 70, 2 ** 70).map(str), st.floats().map(str), st.text(max_size=8))


@settings(max_examples=60, deadline=None)
@given(st.lists(st.one_of(st.none(), _STAMPS, _NUMBERS), min_size=1, max_size=40))
def test_series_coercion_is_the_expression_coercion(values: list[str | None]) -> None:
    """``canonicalise`` coerces each column with ``coerce_series``: the values and flags of
    ``coerce_expr``, the rule written as one expression."""
    s = pl.Series("t", values, dtype=pl.String)
    for dtype in (pl.Datetime("us", "UTC"), pl.Int64, pl.Int32, pl.Float64, pl.String):
        value, bad = coerce.coerce_expr("t", dtype)
        want = pl.DataFrame({"t": s}).select(value.alias("v"), bad.alias("b"))
        got_v, got_b = coerce.coerce_series(s, dtype)
        assert got_v.equals(want["v"], check_names=False), dtype
        assert got_b.equals(want["b"], check_names=False), dtype


@pytest.mark.parametrize("source", [pl.Int64, pl.Int32, pl.UInt64, pl.Float64])
@pytest.mark.parametrize("target", [pl.Int64, pl.Int32, pl.Float64])
def test_typed_coercion_is_the_text_coercion(source: pl.DataType, target: pl.DataType) -> None:
    values: list[object] = [0, 1, 7, 2 ** 31 - 1, 2 ** 31, 2 ** 53 + 1, 2 ** 63 - 1, None]
    if source == pl.Float64:
        values += [-0.0, 1.5, 12.0, 1e15, 1e20, 9.3e18, float("nan"), float("inf"), 1 / 3]
    elif source != pl.UInt64:
        values += [-1, -(2 ** 31) - 1, -(2 ** 63)]
    if source == pl.Int32:
        values = [v for v in values if not isinstance(v, int) or -(2 ** 31) <= v < 2 ** 31]
    df = pl.DataFrame({"x": pl.Series(values, dtype=source, strict=False)})
    value, bad = coerce.coerce_expr("x", target)
    want = df.select(value.alias("v"), bad.alias("b"))
    value, bad = coerce.typed_coerce_expr("x", target, source)
    assert df.select(value.alias("v"), bad.alias("b")).equals(want)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.one_of(st.none(), st.floats(allow_nan=True, allow_infinity=True),
                          st.integers(min_value=-(2**62), max_value=2**62)), max_size=12))
def test_epoch_numbers_read_as_their_text_would(values: list[float | int | None]) -> None:
    """A column the reader typed as numbers skips the text round trip, with the same result."""
    floats = pl.Series("t", [None if v is None else float(v) for v in values], dtype=pl.Float64)
    for s in (floats, floats.cast(pl.Int64, strict=False)):
        value, bad = coerce.timestamp_series(s)
        text_value, text_bad = coerce.timestamp_series(s.cast(pl.String))
        assert value.equals(text_value) and bad.equals(text_bad)


# -- start markers: status "started" goes to checkpoint_starts ---------------------------------

MARKER = {"job_id": "j", "step": 3, "rank": 0, "node": "n1", "tier": "pool",
          "start_time": "2026-11-28T00:00:00Z", "target": "pool0-tgt07", "status": "started"}
STARTS_COLUMNS = ["job_id", "step", "rank", "node", "tier", "target", "start_ts"]


def _as_csv(rows: list[dict[str, object]]) -> bytes:
    cols = list(dict.fromkeys(k for r in rows for k in r))
    lines = [",".join(cols)] + [",".join("" if r.get(c) is None else str(r[c]) for c in cols)
                                for r in rows]
    return ("\n".join(lines) + "\n").encode()


def _as_parquet(rows: list[dict[str, object]]) -> bytes:
    cols = list(dict.fromkeys(k for r in rows for k in r))
    buf = io.BytesIO()
    pl.DataFrame({c: [None if r.get(c) is None else str(r[c]) for r in rows] for c in cols}
                 ).write_parquet(buf)
    return buf.getvalue()


def _as_jsonl(rows: list[dict[str, object]]) -> bytes:
    return "".join(json.dumps(r) + "\n" for r in rows).encode()


@pytest.mark.parametrize(("loader", "encode"), [(load_jsonl, _as_jsonl), (load_csv, _as_csv),
                                                (load_parquet, _as_parquet)])
def test_start_markers_go_to_checkpoint_starts(loader, encode) -> None:  # type: ignore[no-untyped-def]
    rows = [MARKER, {**MARKER, "rank": 1, "status": " Started "},
            {**ROW, "step": 3, "rank": 0, "target": "pool0-tgt07"}]
    out = _read(loader, encode(rows), "checkpoint_writes")
    assert out.rejects == []
    [starts] = out.frames["checkpoint_starts"]
    assert starts.columns == STARTS_COLUMNS
    assert starts.rows() == [
        ("j", 3, 0, "n1", "pool", "pool0-tgt07", datetime(2026, 11, 28, tzinfo=UTC)),
        ("j", 3, 1, "n1", "pool", "pool0-tgt07", datetime(2026, 11, 28, tzinfo=UTC))]
    [writes] = out.frames["checkpoint_writes"]
    assert writes.select("rank", "status", "duration_s").rows() == [(0, "ok", 30.0)]


def test_a_file_of_markers_only_needs_no_end_time_or_bytes() -> None:
    out = _read(load_csv, _as_csv([{k: v for k, v in MARKER.items() if k != "target"}]),
                "checkpoint_writes")
    assert out.rejects == [] and list(out.frames) == ["checkpoint_starts"]
    assert out.frames["checkpoint_starts"][0]["target"].to_list() == [None]
    # a file that also has a finished record still needs the columns of finished records
    with pytest.raises(RecordError, match=r"^missing required column\(s\) bytes, end_time for "
                       r"checkpoint_writes"):
        _read(load_csv, _as_csv([MARKER, {**MARKER, "status": "ok"}]), "checkpoint_writes")


def test_a_marker_is_checked_against_its_own_fields() -> None:
    rows = [
        {**MARKER, "end_time": "whenever", "bytes": "lots", "write_s": -1},  # 1 fine: ignored
        {**MARKER, "end_time": "2026-11-27T00:00:00Z"},                    # 2 fine: ignored
        {**MARKER, "node": None},                                          # 3 missing node
        {**MARKER, "tier": "tape"},                                        # 4 bad tier
        {**MARKER, "start_time": "soon"},                                  # 5 bad start
        {**MARKER, "rank": 2 ** 40},                                       # 6 out of range
        {**MARKER, "job_id": "j" * 300},                                   # 7 over the limit
        {**MARKER, "status": "done", "bytes": 1},                          # 8 not a marker
        {**MARKER, "rank": 1, "status": "started"},                        # 9 fine
        {**MARKER, "rank": 1},                                             # 10 fine: a retry
    ]
    out = _read(load_jsonl, _as_jsonl(rows), "checkpoint_writes")
    assert [(r.line, r.table, r.reason) for r in out.rejects] == [
        (3, "checkpoint_starts", "missing node"),
        (4, "checkpoint_starts", "tier must be one of local, pool"),
        (5, "checkpoint_starts", "start_time: 'soon' is not a timestamp (ISO-8601 or epoch "
                                 "seconds, years 2000-2100)"),
        (6, "checkpoint_starts", "rank: '1099511627776' is out of range (an integer from "
                                 "-2147483648 to 2147483647)"),
        (7, "checkpoint_starts", "job_id is 300 characters, over the limit of 256 "
                                 "(CKPTWATCH_MAX_FIELD_CHARS)"),
        (8, "checkpoint_writes", "missing end_ts; status must be one of ok, error, timeout, "
                                 "timed_out, killed, aborted (any case; or started for a start "
                                 "marker)"),
    ]
    assert out.frames["checkpoint_starts"][0]["rank"].to_list() == [0, 0, 1, 1]


@pytest.mark.parametrize(("field", "value", "reason"), [
    ("bytes", 1180591620717411303424, "bytes: '1180591620717411303424' is out of range (an "
                                      "integer from -9223372036854775808 to "
                                      "9223372036854775807)"),
    ("bytes", "1e30", "bytes: '1e30' is out of range"),
    ("rank", 3_000_000_000, "rank: '3000000000' is out of range (an integer from -2147483648 "
                            "to 2147483647)"),
    ("step", "12.5", "step: '12.5' is not an integer"),
    ("bytes", "lots", "bytes: 'lots' is not an integer"),
])
@pytest.mark.parametrize(("loader", "encode"), [(load_jsonl, _as_jsonl), (load_csv, _as_csv)])
def test_an_integer_out_of_range_says_so(loader, encode, field: str, value: object,  # type: ignore[no-untyped-def]
                                         reason: str) -> None:
    out = _read(loader, encode([ROW, {**ROW, field: value, "rank": 2} if field != "rank"
                                else {**ROW, field: value}]), "checkpoint_writes")
    [rej] = out.rejects
    assert rej.line == (3 if loader is load_csv else 2) and rej.reason.startswith(reason)


_MARKER_ROWS = st.fixed_dictionaries(
    {"job_id": st.sampled_from(["j1", "j2"]), "step": st.integers(0, 2),
     "rank": st.one_of(st.integers(0, 3), st.just(2 ** 33), st.just("x")),
     "node": st.sampled_from(["n0", "n1", ""]), "tier": st.sampled_from(["pool", "LOCAL", "x"]),
     "start_time": st.sampled_from(["2026-11-28T00:00:00Z", 1795824000, "never"]),
     "status": st.sampled_from(["started", "STARTED", "ok", "error", None, "bogus"])},
    optional={"end_time": st.sampled_from(["2026-11-28T00:00:09Z", 1795823000, "", None, "?"]),
              "bytes": st.one_of(st.integers(-1, 10**12), st.just(2 ** 70), st.just("lots")),
              "target": st.sampled_from(["t0", None]), "write_s": st.sampled_from([1.5, -2])})


def _tables(out) -> dict[str, list[tuple[object, ...]]]:  # type: ignore[no-untyped-def]
    return {t: sorted(pl.concat(fs).rows(), key=repr) for t, fs in out.frames.items()}


@settings(max_examples=60, deadline=None)
@given(st.lists(_MARKER_ROWS, min_size=1, max_size=12), st.sampled_from(["jsonl", "csv"]))
def test_bulk_reading_routes_markers_as_the_line_by_line_reader(
        rows: list[dict[str, object]], fmt: str) -> None:
    """The fast (polars) reader and the careful one-line-at-a-time reader give the same rows
    in each table and the same rejects, markers included."""
    from unittest import mock

    data = (_as_jsonl if fmt == "jsonl" else _as_csv)(rows)
    loader = load_jsonl if fmt == "jsonl" else load_csv
    reader = "read_ndjson" if fmt == "jsonl" else "read_csv"
    try:
        fast = _read(loader, data, "checkpoint_writes")
    except RecordError as exc:
        with mock.patch.object(pl, reader, side_effect=ValueError("careful")), \
                pytest.raises(RecordError) as slow_exc:
            _read(loader, data, "checkpoint_writes")
        # the same columns missing (the readers may list the found ones in another order)
        assert slow_exc.value.reason.split(" (found")[0] == exc.reason.split(" (found")[0]
        return
    with mock.patch.object(pl, reader, side_effect=ValueError("careful")):
        slow = _read(loader, data, "checkpoint_writes")
    assert _tables(fast) == _tables(slow)
    assert [(r.line, r.table, r.reason, r.raw) for r in fast.rejects] == [
        (r.line, r.table, r.reason, r.raw) for r in slow.rejects]
    markers = sum(str(r["status"]).lower() == "started" for r in rows)
    assert (sum(f.height for f in fast.frames.get("checkpoint_starts", []))
            + sum(r.table == "checkpoint_starts" for r in fast.rejects)) == markers


#: A JSON Lines file's lines: records (markers, finished, bad values), re-sent copies of an
#: earlier record, blank and malformed lines, and a nested value (its chunk is read line by
#: line).
_VALID_ROWS = st.fixed_dictionaries(
    {"job_id": st.just("j1"), "step": st.integers(0, 1), "rank": st.integers(0, 3),
     "node": st.sampled_from(["n0", "n1"]), "tier": st.just("pool"),
     "start_time": st.just("2026-11-28T00:00:00Z"), "end_time": st.just("2026-11-28T00:00:09Z"),
     "bytes": st.integers(0, 10**6), "status": st.sampled_from(["ok", "started"])})
_LINES = st.lists(st.one_of(
    _VALID_ROWS.map(json.dumps), _VALID_ROWS.map(json.dumps),
    _MARKER_ROWS.map(json.dumps),
    st.integers(0, 30).map(lambda k: f"again {k}"),
    st.sampled_from(["", "   ", "{bad json", '{"job_id": "j1", "nested": {"a": 1}}', "[1, 2]"]),
), min_size=1, max_size=30)


def _jsonl_file(lines: list[str]) -> bytes:
    """``lines`` as a file, each ``again K`` replaced by the K-th record line before it (a
    re-sent record: the duplicate rule's case), else by a blank line."""
    records: list[str] = []
    out = []
    for ln in lines:
        if ln.startswith("again "):
            k = int(ln.split()[1])
            ln = records[k % len(records)] if records else ""
        elif ln.startswith("{") and "nested" not in ln and not ln.startswith("{bad"):
            records.append(ln)
        out.append(ln)
    return ("\n".join(out) + "\n").encode()


def _outcome(read):  # type: ignore[no-untyped-def]
    """Everything a reader gives: rows per table in order, rejects, notes; or its error."""
    try:
        out = read()
    except RecordError as exc:
        return ("error", exc.reason.split(" (found")[0], exc.reason.rsplit(";", 1)[-1])
    return ({t: pl.concat(fs).rows() for t, fs in out.frames.items()},
            [(r.line, r.table, r.reason, r.raw) for r in out.rejects],
            out.capped.dropped, out.notes)


@settings(max_examples=80, deadline=None)
@given(_LINES, st.integers(1, 300), st.sampled_from([1000, 3]))
def test_a_file_read_in_chunks_is_the_file_read_whole(lines: list[str], chunk: int,
                                                      quarantine_rows: int) -> None:
    """``read_table`` of a JSON Lines file in chunks of about ``chunk`` bytes gives what one
    frame of the whole file gives: the same rows in the same order, the same rejects (line
    numbers, raw text, duplicates replaced by a line of another chunk), the same notes and the
    same error for a column the file lacks; with a quarantine cap too."""
    from dataclasses import replace

    from ckptwatch.settings import INGEST
    from ckptwatch.sources.tabular import read_table

    data = _jsonl_file(lines)
    table = "checkpoint_writes"
    limits = replace(INGEST, max_quarantine_rows=quarantine_rows)
    whole = _outcome(lambda: canonicalise(load_jsonl(data, table, cap=quarantine_rows), table,
                                          file_label="f", limits=limits))
    chunked = _outcome(lambda: read_table(data, table, ".jsonl", file_label="f",
                                          limits=replace(limits, table_chunk_bytes=chunk)))
    assert chunked == whole


def test_line_chunks_cut_at_newlines_and_number_the_lines() -> None:
    from ckptwatch.sources.tabular import line_chunks

    data = b"a\nbb\n\nccc\nd"
    got = list(line_chunks(data, 3))
    assert [data[s:e] for s, e, _ in got] == [b"a\nbb\n", b"\nccc\n", b"d"]
    assert [line for *_, line in got] == [1, 3, 5]
    assert b"".join(data[s:e] for s, e, _ in line_chunks(data, 1)) == data


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=8) | st.lists(st.sampled_from(
    [b" ", b"\t", b"\n", b"\r", b"\x0b", b"\x0c", b"\x85", b"[", b"{", b"a"]),
    max_size=8).map(b"".join))
def test_the_array_check_reads_the_first_byte_as_lstrip_would(data: bytes) -> None:
    """``_opens_array`` (no copy of the file) skips exactly the whitespace ``lstrip`` does."""
    from ckptwatch.sources.tabular import _opens_array

    assert _opens_array(data) == (data.lstrip()[:1] == b"[")


# -- the sampled JSON Lines read (tabular._sampled_ndjson) ----------------------------------
# What a line may hold: its keys (a few common, a few rare ones that a sample can miss), each
# value of any JSON kind, spelled compactly or not; strings with the bytes the counting
# relies on (quotes escaped, colons, braces, "null", white space).
_KEYS = st.sampled_from(["job_id", "step", "rank", "node", "start_time", "x", "X ", "late"])
#: Values the sampled read can count: numbers, booleans, nulls, text without a backslash
#: (braces and brackets in a text included).
_CLEAN = st.one_of(st.integers(-10, 10), st.floats(-1e6, 1e6), st.booleans(), st.none(),
                   st.sampled_from(["n1", "", "a:b", "{", "[1]", " x ", "é", "1", "true",
                                    "null", "nullable"]))
#: Values it must decline (or the full read refuses): integers past 64 bits, escapes, nested
#: values.
_ODD = st.one_of(st.integers(2**62, 2**65), st.sampled_from(['q"uote', "back\\slash", "\n"]),
                 st.just({"nested": 1}), st.just([1, 2]))

#: How a line separates its items and keys: compact, or with white space (before a colon too).
_SPACING = st.sampled_from([(",", ":"), (", ", ": "), (",", " : "), (" ,", ":")])


@st.composite
def _ndjson(draw: st.DrawFn) -> bytes:
    """JSON Lines of 6-40 objects: most lines share a few keys and kinds of value; any line
    may add another key, give a value of another kind (rarely one of ``_ODD``), or spell the
    line with other white space."""
    n = draw(st.integers(6, 40))
    common = draw(st.lists(_KEYS, min_size=1, max_size=4, unique=True))
    kinds = {k: draw(_CLEAN) for k in common}
    odd = draw(st.sampled_from([0, 0, 2, 10, 40]))  # a line's chance of each oddity, in 400
    out = []

    def rare(times: int = 1) -> bool:
        return draw(st.integers(0, 399)) < odd * times

    for _ in range(n):
        row = {k: (draw(_ODD) if rare() else draw(_CLEAN) if rare(3) else kinds[k])
               for k in common}
        if rare(3):
            row[draw(_KEYS)] = draw(_CLEAN)
        seps = draw(_SPACING) if rare() else (",", ":")
        line = json.dumps(row, separators=seps, ensure_ascii=rare())
        if rare():  # the first key again
            first = line[1:line.index(seps[0]) if seps[0] in line else -1]
            line = line[:-1] + seps[0] + first + "}"
        out.append(line)
    return ("\n".join(out) + draw(st.sampled_from(["", "\n"]))).encode()


def _full_ndjson(data: bytes) -> pl.DataFrame | None:
    try:
        return pl.read_ndjson(io.BytesIO(data), infer_schema_length=None)
    except Exception:  # noqa: BLE001 - the full read refuses it: the careful reader reads it
        return None


@settings(max_examples=300, deadline=None)
@given(_ndjson())
def test_the_sampled_read_is_the_full_read_or_declines(data: bytes) -> None:
    """Whatever the lines (keys the sample misses, values of another kind after it, nulls,
    escapes, white space before a colon, nested values, a repeated key), the sampled read
    gives the full read's frame (its columns in any order) or declines."""
    from ckptwatch.sources import tabular

    fast = tabular._sampled_ndjson(data, 4)  # two head lines, two spread: most lines unseen
    if fast is None:
        return
    full = _full_ndjson(data)
    assert full is not None
    assert dict(fast.schema) == dict(full.schema)
    assert fast.select(full.columns).equals(full)


def test_the_sampled_read_takes_a_checkpoint_file_that_opens_with_markers(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A recorder's file: every rank's start marker first (no end_time, bytes or phases), then
    the finished records; the sample's spread lines bring their columns. The read is the full
    one, with the columns in the full read's order, and load_jsonl's frame is the same."""
    from ckptwatch.sources import tabular

    marker = {"job_id": "j", "step": 1, "node": "n", "tier": "pool", "start_time": 1.5,
              "status": "started"}
    done = {**marker, "end_time": 4.25, "bytes": 1 << 30, "write_s": 2.0, "status": "ok"}
    rows = [{**marker, "rank": r} for r in range(64)] + [{**done, "rank": r} for r in range(64)]
    data = "".join(json.dumps(r, separators=(",", ":")) + "\n" for r in rows).encode()
    monkeypatch.setattr(tabular, "SAMPLE_LINES", 8)  # the head: markers only
    fast = tabular._sampled_ndjson(data)
    full = _full_ndjson(data)
    assert fast is not None and full is not None
    assert dict(fast.schema) == dict(full.schema)
    assert fast.select(full.columns).equals(full)
    sampled = load_jsonl(data, "checkpoint_writes")
    monkeypatch.setattr(tabular, "SAMPLE_LINES", 10_000)  # the full read
    whole = load_jsonl(data, "checkpoint_writes")
    assert sampled.df.select(whole.df.columns).equals(whole.df)


def _with_late_line(late: str) -> bytes:
    """40 records, line 8 replaced by ``late``: in neither half of a 2-line sample."""
    from ckptwatch.sources import tabular

    lines = [json.dumps({"job_id": "j", "rank": r}, separators=(",", ":")) for r in range(40)]
    lines[7] = late
    data = ("\n".join(lines) + "\n").encode()
    assert late.encode() not in tabular._sample(data, 2)
    return data


@pytest.mark.parametrize(("late", "why"), [
    ('{"job_id":"j","rank":9,"extra":1}', "a key no sampled line has"),
    ('{"job_id":"j","rank":9,"extra":null}', "a key no sampled line has, null"),
    ('{"job_id":"j\\"","rank":9}', "an escape"),
    ('{"job_id" :"j","rank":9}', "white space before a colon"),
    ('{"job_id":{"a":1},"rank":9}', "a nested value in a text column"),
    ('{"job_id":"j","rank":9.5}', "a float in an integer column"),
])
def test_the_sampled_read_declines_what_it_cannot_count(late: str, why: str) -> None:
    from ckptwatch.sources import tabular

    assert tabular._sampled_ndjson(_with_late_line(late), 2) is None, why


def test_a_column_the_sample_saw_only_null_then_filled_takes_the_full_read() -> None:
    from ckptwatch.sources import tabular

    lines = [json.dumps({"job_id": "j", "rank": r, "target": None}, separators=(",", ":"))
             for r in range(40)]
    lines[7] = '{"job_id":"j","rank":7,"target":"pool0-tgt07"}'
    data = ("\n".join(lines) + "\n").encode()
    assert lines[7].encode() not in tabular._sample(data, 2)
    assert tabular._sampled_ndjson(data, 2) is None  # polars refuses the sampled Null type
    assert tabular._jsonl_at_once(data) is not None  # the full read takes it


@pytest.mark.parametrize(("late", "why"), [
    ('{"job_id":"j","rank":null}', "a null"),
    ('{"job_id":"j"}', "a key left out"),
    ('{"job_id":"j","rank":9,"rank":10}', "a repeated key"),
    ('{"job_id": "j", "rank": 9}', "white space after a colon and a comma"),
    ('{"job_id":":null","rank":9}', "a text that opens with a colon and spells null"),
])
def test_the_sampled_read_reads_what_the_full_read_reads(late: str, why: str) -> None:
    """Nulls, absent keys, a repeated key (read as polars' full read reads it) and spacing
    that keeps a key's colon next to its quote take the sampled read, with the same frame."""
    from ckptwatch.sources import tabular

    data = _with_late_line(late)
    fast, full = tabular._sampled_ndjson(data, 2), _full_ndjson(data)
    assert fast is not None and full is not None, why
    assert dict(fast.schema) == dict(full.schema) and fast.select(full.columns).equals(full)
