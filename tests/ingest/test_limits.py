"""Limits on every input, and whole-file failures reported as failures (issue 17, defects 1, 2,
3 and 5). Each test sets the limits small (``CKPTWATCH_MAX_*``), so the inputs stay small."""

from __future__ import annotations

import codecs
import gzip
import json
import subprocess
import sys
import zlib
from pathlib import Path

import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ckptwatch.cli.main import main
from ckptwatch.errors import ConfigError
from ckptwatch.ingest.run import ingest
from ckptwatch.lake.store import Lake
from ckptwatch.settings import ingest_settings

T0 = "2026-11-28T00:00:00Z"


def _ckpt(job: str = "j1", step: int = 1, rank: int = 0) -> dict[str, object]:
    return {"job_id": job, "step": step, "rank": rank, "node": "n0", "tier": "pool",
            "start_time": T0, "end_time": "2026-11-28T00:00:05Z", "bytes": 1024}


def _lines(records: list[dict[str, object]]) -> bytes:
    return b"".join(json.dumps(r).encode() + b"\n" for r in records)


def _raw(tmp_path: Path) -> Path:
    (tmp_path / "raw" / "checkpoints").mkdir(parents=True)
    return tmp_path / "raw"


def _quarantine(lake: Path) -> pl.DataFrame:
    return Lake(lake).read("quarantine").sort("source_file", "line", nulls_last=False)


# -- limits on records and fields -----------------------------------------------------------


def test_an_over_long_job_id_is_quarantined_with_the_limit_and_the_rest_goes_on(
        tmp_path: Path) -> None:
    raw = _raw(tmp_path)
    (raw / "checkpoints" / "c.jsonl").write_bytes(_lines(
        [_ckpt(rank=0), _ckpt(job="x" * 300, rank=1), _ckpt(rank=2)]))
    report = ingest(raw, tmp_path / "lake")
    assert report.count("failed") == 0 and report.rows == {"checkpoint_writes": 2}
    [(line, reason)] = _quarantine(tmp_path / "lake").select("line", "reason").rows()
    assert (line, reason) == (
        2, "job_id is 300 characters, over the limit of 256 (CKPTWATCH_MAX_FIELD_CHARS)")


def test_the_field_limit_applies_to_envelope_names_too(tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CKPTWATCH_MAX_FIELD_CHARS", "8")
    (tmp_path / "raw" / "fabric").mkdir(parents=True)
    out = "NIC statistics:\n     rx_bytes: 5\n"
    env = [{"node": node, "collected_at": T0, "source": "ethtool", "device": "eth0",
            "output": out} for node in ("n0", "node-with-a-long-name")]
    (tmp_path / "raw" / "fabric" / "env.jsonl").write_bytes(_lines(env))  # type: ignore[arg-type]
    report = ingest(tmp_path / "raw", tmp_path / "lake")
    assert report.rows.get("fabric_counters", 0) >= 1
    q = _quarantine(tmp_path / "lake")
    assert q.height >= 1 and set(q["line"]) == {2}
    assert ("node is 21 characters, over the limit of 8 (CKPTWATCH_MAX_FIELD_CHARS)"
            in q["reason"][0])
    assert set(Lake(tmp_path / "lake").read("fabric_counters")["node"]) == {"n0"}


def test_an_over_long_line_is_quarantined_unread_with_its_number(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CKPTWATCH_MAX_RECORD_BYTES", "500")
    raw = _raw(tmp_path)
    huge = json.dumps(_ckpt(job="y" * 5000, rank=1)).encode()
    (raw / "checkpoints" / "c.jsonl").write_bytes(
        _lines([_ckpt(rank=0)]) + huge + b"\n" + _lines([_ckpt(rank=2)]))
    report = ingest(raw, tmp_path / "lake")
    assert report.count("failed") == 0 and report.rows == {"checkpoint_writes": 2}
    [(line, reason, kept)] = _quarantine(tmp_path / "lake").select("line", "reason",
                                                                    "raw").rows()
    assert (line, reason) == (2, f"line is {len(huge):,} bytes, over the limit of 500 "
                                 "(CKPTWATCH_MAX_RECORD_BYTES): not read")
    assert kept.startswith('{"job_id": "yyy') and len(kept) <= 4096


def test_a_bare_tool_file_over_the_record_limit_is_one_reject(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CKPTWATCH_MAX_RECORD_BYTES", "100")
    (tmp_path / "raw" / "smart" / "n0").mkdir(parents=True)
    (tmp_path / "raw" / "smart" / "n0" / "nvme0.json").write_text(json.dumps(
        {"smartctl": {"version": [7, 3]}, "pad": "z" * 300}))
    report = ingest(tmp_path / "raw", tmp_path / "lake")
    [reason] = _quarantine(tmp_path / "lake")["reason"]
    assert reason.startswith("the file is one record of ") and reason.endswith(
        "bytes, over the limit of 100 (CKPTWATCH_MAX_RECORD_BYTES): not read")
    assert report.count("failed") == 0


# -- decompressed size --------------------------------------------------------------------


def test_a_gzip_bomb_is_cut_at_the_ratio_failed_and_its_records_kept_in_quarantine(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CKPTWATCH_MAX_DECOMPRESSED_RATIO", "4")
    raw = _raw(tmp_path)
    data = _lines([_ckpt(step=s) for s in range(2000)])
    packed = gzip.compress(data, mtime=0)
    (raw / "checkpoints" / "bomb.jsonl.gz").write_bytes(packed)
    report = ingest(raw, tmp_path / "lake")
    [f] = report.files
    assert f.status == "failed" and f.rows == {}
    assert f.error is not None and f.error.startswith(
        f"decompresses to more than {4 * len(packed):,} bytes (4 times its {len(packed):,} "
        "bytes; CKPTWATCH_MAX_DECOMPRESSED_RATIO)")
    q = _quarantine(tmp_path / "lake")
    assert q.height == f.quarantined
    kept = q.filter(pl.col("reason").str.starts_with("read from a file that failed"))
    # every whole record before the cut, as JSON (the last, cut line is a reject of its own)
    assert kept.height == data[: 4 * len(packed)].count(b"\n")
    assert json.loads(kept["raw"][0])["job_id"] == "j1"
    assert Lake(tmp_path / "lake").manifest_keys() == set()
    assert main(["ingest", str(raw), "--lake", str(tmp_path / "lake"), "--quiet"]) == 1
    # raising the limit reads it whole: nothing was recorded, so nothing is "already" there
    monkeypatch.setenv("CKPTWATCH_MAX_DECOMPRESSED_RATIO", "1000")
    again = ingest(raw, tmp_path / "lake")
    assert again.count("ingested") == 1 and again.rows == {"checkpoint_writes": 2000}


def test_the_absolute_cap_and_the_cli_flag(tmp_path: Path,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    raw = _raw(tmp_path)
    (raw / "checkpoints" / "c.jsonl").write_bytes(_lines([_ckpt(step=s) for s in range(50)]))
    code = main(["ingest", str(raw), "--lake", str(tmp_path / "lake"), "--quiet",
                 "--max-file-bytes", "1000"])
    out = capsys.readouterr().out
    assert code == 1
    assert ("FAILED checkpoints/c.jsonl: more than 1,000 bytes (CKPTWATCH_MAX_FILE_BYTES): "
            "read up to there only") in out


def test_a_zero_bomb_stays_within_memory(tmp_path: Path) -> None:
    """1 GiB of zeros in a 1 MB ``.gz`` (``head -c 1G /dev/zero | gzip``), read under a 64 MiB
    cap in a fresh process: peak RSS stays far below what reading it whole would take."""
    raw = _raw(tmp_path)
    comp = zlib.compressobj(1, zlib.DEFLATED, 31)
    zeros = bytes(1 << 20)
    with open(raw / "checkpoints" / "bomb.jsonl.gz", "wb") as fh:
        for _ in range(1024):
            fh.write(comp.compress(zeros))
        fh.write(comp.flush())
    code = (
        "import resource, sys\n"
        "from pathlib import Path\n"
        "from ckptwatch.ingest.run import ingest\n"
        f"r = ingest(Path({str(raw)!r}), Path({str(tmp_path / 'lake')!r}))\n"
        "print(r.files[0].status, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True, timeout=300,
                          env={"CKPTWATCH_MAX_FILE_BYTES": str(64 << 20), "PATH": "/usr/bin"})
    status, rss_kib = done.stdout.split()
    assert status == "failed"
    # Bounded by the 64 MiB limit, not by the 1 GiB the file decompresses to: a read that held
    # the input would peak above 1 GiB (the figures themselves are RELIABILITY.md's, by hand).
    assert int(rss_kib) < 1024 * 1024, f"peak RSS {int(rss_kib) // 1024} MiB"


# -- quarantine rows per file -----------------------------------------------------------


def test_a_flood_of_bad_lines_keeps_the_limit_counts_the_rest_and_fails(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CKPTWATCH_MAX_QUARANTINE_ROWS", "5")
    raw = _raw(tmp_path)
    (raw / "checkpoints" / "flood.jsonl").write_bytes(
        _lines([_ckpt()]) + b"garbage\n" * 5000)
    report = ingest(raw, tmp_path / "lake")
    [f] = report.files
    assert f.status == "failed"
    assert f.error is not None and f.error.startswith(
        "5,000 records rejected, more than the 5 quarantine rows kept per file "
        "(CKPTWATCH_MAX_QUARANTINE_ROWS)")
    q = _quarantine(tmp_path / "lake")
    assert q.filter(pl.col("line").is_not_null())["line"].to_list() == [2, 3, 4, 5, 6]
    assert ("4,995 more rejected record(s) of this file not kept: over the limit of 5 "
            "quarantine rows per file (CKPTWATCH_MAX_QUARANTINE_ROWS)") in q["reason"]
    assert q.height == f.quarantined == 7  # 5 rejects, the count, the one good record


# -- whole-file failures ----------------------------------------------------------------


def test_a_truncated_gzip_is_failed_keeps_what_was_read_and_is_retried_once_fixed(
        tmp_path: Path) -> None:
    raw = _raw(tmp_path)
    data = _lines([_ckpt(step=s) for s in range(400)])
    whole = gzip.compress(data, mtime=0)
    path = raw / "checkpoints" / "c.jsonl.gz"
    path.write_bytes(whole[: len(whole) // 2])
    report = ingest(raw, tmp_path / "lake")
    [f] = report.files
    assert f.status == "failed" and f.error is not None
    assert f.error.startswith("corrupt gzip file (")
    q = _quarantine(tmp_path / "lake")
    assert q["reason"].str.starts_with("cannot read file: corrupt gzip file (truncated").any()
    assert q.filter(pl.col("reason").str.starts_with("read from a file that failed")).height > 0
    assert Lake(tmp_path / "lake").read("checkpoint_writes").height == 0
    path.write_bytes(whole)
    again = ingest(raw, tmp_path / "lake")
    assert again.count("ingested") == 1 and again.rows == {"checkpoint_writes": 400}


def test_a_text_file_named_gz_is_failed(tmp_path: Path) -> None:
    raw = _raw(tmp_path)
    (raw / "checkpoints" / "c.jsonl.gz").write_bytes(_lines([_ckpt()]))
    [f] = ingest(raw, tmp_path / "lake").files
    assert f.status == "failed" and f.error is not None
    assert f.error.startswith("not a gzip file (") and "rename it without .gz" in f.error


def test_a_json_array_is_failed_with_what_to_do(tmp_path: Path) -> None:
    raw = _raw(tmp_path)
    (raw / "checkpoints" / "c.json").write_text(json.dumps([_ckpt(), _ckpt(rank=1)], indent=1))
    [f] = ingest(raw, tmp_path / "lake").files
    assert f.status == "failed"
    assert f.error is not None and f.error.startswith(
        "the file is one JSON array, not JSON Lines (one object a line): convert it, e.g. "
        "jq -c '.[]' FILE")
    assert Lake(tmp_path / "lake").manifest_keys() == set()


def test_a_file_missing_its_columns_is_failed(tmp_path: Path) -> None:
    raw = _raw(tmp_path)
    (raw / "checkpoints" / "c.csv").write_text("job_id,step\nj1,1\n")
    [f] = ingest(raw, tmp_path / "lake").files
    assert f.status == "failed" and f.error is not None
    assert f.error.startswith("missing required column(s)")


@pytest.mark.parametrize("bom,codec", [(codecs.BOM_UTF16_LE, "utf-16-le"),
                                       (codecs.BOM_UTF16_BE, "utf-16-be"),
                                       (codecs.BOM_UTF8, "utf-8")])
def test_text_with_a_byte_order_mark_is_decoded(tmp_path: Path, bom: bytes, codec: str) -> None:
    raw = _raw(tmp_path)
    text = ("job_id,step,rank,node,tier,start_time,end_time,bytes\n"
            + "".join(f"jé,{s},0,n0,pool,{T0},2026-11-28T00:00:05Z,1\n" for s in range(5)))
    (raw / "checkpoints" / "c.csv").write_bytes(bom + text.encode(codec))
    report = ingest(raw, tmp_path / "lake")
    assert report.count("failed") == 0 and report.quarantined == 0
    assert set(Lake(tmp_path / "lake").read("checkpoint_writes")["job_id"]) == {"jé"}


@pytest.mark.parametrize("codec", ["utf-16-le", "utf-16-be"])
def test_utf16_without_a_byte_order_mark_is_detected(tmp_path: Path, codec: str) -> None:
    raw = _raw(tmp_path)
    text = ("job_id,step,rank,node,tier,start_time,end_time,bytes,status\n"
            f"jé,1,0,n0,pool,{T0},,,started\n"
            + "".join(f"jé,{s},0,n0,pool,{T0},2026-11-28T00:00:05Z,1,ok\n" for s in range(3)))
    (raw / "checkpoints" / "c.csv").write_bytes(text.encode(codec))
    report = ingest(raw, tmp_path / "lake")
    assert report.count("failed") == 0 and report.quarantined == 0
    assert report.rows == {"checkpoint_writes": 3, "checkpoint_starts": 1}
    assert set(Lake(tmp_path / "lake").read("checkpoint_starts")["job_id"]) == {"jé"}


@pytest.mark.parametrize("name", ["c.csv", "c.jsonl"])
def test_a_table_that_is_not_utf8_is_failed_whole(tmp_path: Path, name: str) -> None:
    raw = _raw(tmp_path)
    good = (_lines([_ckpt(), _ckpt(rank=1)]) if name.endswith(".jsonl") else
            f"job_id,step,rank,node,tier,start_time,end_time,bytes\nj1,1,0,n0,pool,{T0},"
            f"{T0},1\n".encode())
    bad = (_lines([_ckpt(job="j\u00e9", rank=2)]).replace(b"j\\u00e9", b"j\xe9")
           if name.endswith(".jsonl") else f"j\xe9,1,2,n0,pool,{T0},{T0},1\n".encode("latin-1"))
    (raw / "checkpoints" / name).write_bytes(good + bad)
    at = (good + bad).index(b"\xe9")  # the offset of the bad byte, counted from 0
    [f] = ingest(raw, tmp_path / "lake").files
    assert f.status == "failed" and f.error is not None
    assert f.error.startswith(f"not UTF-8 text at byte {at:,} (invalid continuation byte): "
                              "save it as UTF-8 (e.g. iconv -f latin1 -t utf-8)")
    assert Lake(tmp_path / "lake").manifest_keys() == set()  # read again once fixed


def test_markers_and_records_of_one_file_land_in_their_tables(tmp_path: Path) -> None:
    raw = _raw(tmp_path)
    marker = {k: v for k, v in _ckpt(rank=1).items() if k not in ("end_time", "bytes")}
    (raw / "checkpoints" / "c.jsonl").write_bytes(_lines([
        {**_ckpt(), "status": "started", "end_time": None, "bytes": None},
        {**marker, "status": "started"}, _ckpt()]))
    report = ingest(raw, tmp_path / "lake")
    assert report.rows == {"checkpoint_starts": 2, "checkpoint_writes": 1}
    assert report.quarantined == 0
    again = ingest(raw, tmp_path / "lake")  # the file is in the manifest: nothing twice
    assert again.rows == {} and [f.status for f in again.files] == ["skipped"]


@pytest.mark.parametrize("sep", [";", "\t"])
def test_a_semicolon_or_tab_csv_is_read(tmp_path: Path, sep: str) -> None:
    raw = _raw(tmp_path)
    rows = [["job_id", "step", "rank", "node", "tier", "start_time", "end_time", "bytes"],
            *[["j1", str(s), "0", "n0", "pool", T0, "2026-11-28T00:00:05Z", "1536"]
              for s in range(3)]]
    (raw / "checkpoints" / "c.csv").write_text("".join(sep.join(r) + "\n" for r in rows))
    report = ingest(raw, tmp_path / "lake")
    assert report.rows == {"checkpoint_writes": 3} and report.quarantined == 0


# -- the lake is never inside what it reads -----------------------------------------------


def test_a_lake_inside_the_raw_directory_is_never_read(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    raw = _raw(tmp_path)
    (raw / "checkpoints" / "c.jsonl").write_bytes(_lines([_ckpt()]))
    first = ingest(raw, raw / "lake")
    assert first.rows == {"checkpoint_writes": 1}
    second = ingest(raw, raw / "lake")
    assert second.rows == {} and second.quarantined == 0
    assert [f.status for f in second.files] == ["skipped"]
    assert second.notes == ["skipped 1 ckptwatch lake(s) under the raw directory: lake/ (a "
                            "lake is never read as raw input; keep --lake outside RAW_DIR)"]
    assert main(["ingest", str(raw), "--lake", str(raw / "lake"), "--quiet"]) == 0
    assert "note: skipped 1 ckptwatch lake(s) under the raw directory: lake/" in \
        capsys.readouterr().out
    # another ckptwatch lake under the raw directory is skipped too
    Lake(raw / "old" / "lake2").init()
    third = ingest(raw, raw / "lake")
    assert third.quarantined == 0 and len(third.notes) == 1 and "old/lake2/" in third.notes[0]


# -- the settings -------------------------------------------------------------------------


def test_limit_settings_come_from_the_environment_and_flags() -> None:
    s = ingest_settings({"CKPTWATCH_MAX_FIELD_CHARS": "64"}, max_quarantine_rows=9)
    assert (s.max_field_chars, s.max_quarantine_rows, s.max_record_bytes) == (64, 9, 1 << 20)
    assert s.decompressed_limit(10) == 640
    assert ingest_settings({}).decompressed_limit(1 << 40) == 4 << 30
    with pytest.raises(ConfigError, match=r"\$CKPTWATCH_MAX_RECORD_BYTES must be a positive "
                                          r"integer \(got 'lots'\)"):
        ingest_settings({"CKPTWATCH_MAX_RECORD_BYTES": "lots"})
    with pytest.raises(ConfigError, match=r"--max-field-chars must be a positive integer"):
        ingest_settings({}, max_field_chars=0)


_PIECES = [b"a", b"\n", "é".encode(), "€".encode(), "𝄞".encode(), b"\xff", b"\xc3",
           b"\xe2\x82", b"\xed\xa0\x80"]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(_PIECES), max_size=16), st.integers(1, 9))
def test_the_utf8_check_a_piece_at_a_time_finds_what_decoding_whole_finds(
        pieces: list[bytes], scan: int) -> None:
    """The text check decodes ``SCAN_BYTES`` at a time (no copy of the file as text): the
    first bad byte and the reason are those of decoding the whole file, characters cut by a
    piece's end included."""
    from unittest import mock

    from ckptwatch.ingest import load

    data = b"".join(pieces)
    try:
        data.decode("utf-8")
        want = None
    except UnicodeDecodeError as exc:
        want = (exc.start, exc.reason)
    with mock.patch.object(load, "SCAN_BYTES", scan):
        assert load._not_utf8(data) == want


@pytest.mark.parametrize(("stat_size", "cap"), [(10, 1000), (10, 50), (0, 1000), (300, 50)])
def test_a_file_growing_as_it_is_read_is_read_to_the_cap(tmp_path: Path, stat_size: int,
                                                         cap: int) -> None:
    """A file read in one call when its size (``fstat``) is within the cap: one that grew
    since (a size smaller than its bytes, or a pipe's 0) is read on to its end, never past the
    cap; one over the cap is cut there."""
    from dataclasses import replace
    from types import SimpleNamespace
    from unittest import mock

    from ckptwatch.ingest import load
    from ckptwatch.settings import INGEST

    path = tmp_path / "c.jsonl"
    body = b"".join(b'{"n": %d}\n' % i for i in range(30))  # 289 bytes
    path.write_bytes(body)
    with mock.patch.object(load.os, "fstat", return_value=SimpleNamespace(
            st_size=stat_size)):
        got = load.load(path, limits=replace(INGEST, max_file_bytes=cap))
    assert got.data == body[:cap]
    assert (got.failure is None) == (len(body) <= cap)
