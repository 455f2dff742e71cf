"""Following growing checkpoint files: new bytes only, whole lines, resumable, rotation-proof."""

from __future__ import annotations

import io
import os
from pathlib import Path

import polars as pl
import pyarrow.parquet as pq
from hypothesis import given, settings
from hypothesis import strategies as st

from ckptwatch.collect.recorder import dumps_record
from ckptwatch.live.follow import Cursor, Follower, parse_chunk


def rec(rank: int, *, started: bool = False, step: int = 7) -> str:
    r = {"job_id": "j", "step": step, "rank": rank, "node": f"n{rank}", "tier": "pool",
         "start_time": 1795824000.0 + rank}
    if started:
        r["status"] = "started"
    else:
        r.update(end_time=1795824010.0 + rank, bytes=100)
    return dumps_record(r)


def rows(follower: Follower) -> tuple[int, int, list[str]]:
    """(markers, finished records, notes) of one scan."""
    result = follower.scan()
    starts = writes = 0
    for chunk in result.chunks:
        parsed = parse_chunk(chunk)
        assert not parsed.rejects, parsed.rejects
        starts += parsed.rows("checkpoint_starts")
        writes += parsed.rows("checkpoint_writes")
    return starts, writes, result.notes


def test_only_new_complete_lines_are_read(tmp_path: Path) -> None:
    d = tmp_path / "checkpoints"
    d.mkdir()
    f = d / "a.jsonl"
    f.write_text(rec(0, started=True) + "\n" + rec(1, started=True) + "\n")
    fol = Follower(d)
    assert rows(fol)[:2] == (2, 0)
    assert rows(fol)[:2] == (0, 0)  # nothing new
    line = rec(0)
    with f.open("a") as fh:
        fh.write(line[:20])  # a writer mid-line: waits for its newline
    assert rows(fol)[:2] == (0, 0)
    with f.open("a") as fh:
        fh.write(line[20:] + "\n")
    assert rows(fol)[:2] == (0, 1)
    assert fol.cursors["checkpoints/a.jsonl"].lines == 3


def test_a_restart_resumes_from_the_saved_cursors(tmp_path: Path) -> None:
    d = tmp_path / "checkpoints"
    d.mkdir()
    f = d / "a.jsonl"
    f.write_text(rec(0, started=True) + "\n")
    fol = Follower(d)
    rows(fol)
    saved = {k: c.to_json() for k, c in fol.cursors.items()}
    with f.open("a") as fh:
        fh.write(rec(0) + "\n")
    again = Follower(d, {k: Cursor.from_json(v) for k, v in saved.items()})
    assert rows(again)[:2] == (0, 1)


def test_truncated_and_replaced_files_are_read_again_from_the_start(tmp_path: Path) -> None:
    d = tmp_path / "checkpoints"
    d.mkdir()
    f = d / "a.jsonl"
    f.write_text("".join(rec(r) + "\n" for r in range(3)))
    fol = Follower(d)
    assert rows(fol)[:2] == (0, 3)
    f.write_text(rec(5) + "\n")  # truncated (shorter than what was read)
    _, n, notes = rows(fol)
    assert n == 1 and any("truncated" in x for x in notes)
    tmp = d / "a.jsonl.new"
    tmp.write_text("".join(rec(r, step=8) + "\n" for r in range(4)))
    os.replace(tmp, f)  # rotated: a new inode under the same name
    _, n, notes = rows(fol)
    assert n == 4 and any("replaced" in x for x in notes)


def test_csv_chunks_carry_their_header(tmp_path: Path) -> None:
    d = tmp_path / "checkpoints"
    d.mkdir()
    f = d / "a.csv"
    head = "job_id,step,rank,node,tier,start_time,end_time,bytes,status\n"
    f.write_text(head + "j,1,0,n0,pool,1795824000,,,started\n")
    fol = Follower(d)
    assert rows(fol)[:2] == (1, 0)
    with f.open("a") as fh:
        fh.write("j,1,0,n0,pool,1795824000,1795824009,5,ok\n")
    assert rows(fol)[:2] == (0, 1)


def test_a_line_over_the_record_limit_is_skipped_and_said(tmp_path: Path) -> None:
    d = tmp_path / "checkpoints"
    d.mkdir()
    f = d / "a.jsonl"
    f.write_text("x" * 5000)
    fol = Follower(d, max_record_bytes=1000, max_bytes=2000)
    _, _, notes = rows(fol)
    assert any("over the record limit" in x for x in notes)
    with f.open("a") as fh:
        fh.write("x" * 100 + "\n" + rec(1) + "\n")
    for _ in range(4):  # the rest of the long line, then the good record
        _, n, _ = rows(fol)
        if n:
            break
    assert n == 1


def test_parquet_files_are_read_whole_once(tmp_path: Path) -> None:
    d = tmp_path / "checkpoints"
    d.mkdir()
    frame = pl.DataFrame({"job_id": ["j"], "step": [1], "rank": [0], "node": ["n"],
                          "tier": ["pool"], "start_time": [1795824000.0], "status": ["started"]})
    buf = io.BytesIO()
    pq.write_table(frame.to_arrow(), buf)
    (d / "a.parquet").write_bytes(buf.getvalue())
    fol = Follower(d)
    assert rows(fol)[:2] == (1, 0)
    assert rows(fol)[:2] == (0, 0)


@settings(max_examples=25, deadline=None)
@given(cuts=st.lists(st.integers(min_value=1, max_value=400), min_size=1, max_size=12))
def test_any_way_of_appending_gives_every_record_exactly_once(tmp_path_factory: object,
                                                               cuts: list[int]) -> None:
    """However the bytes arrive (split mid-line anywhere), the records read are the file's."""
    d = tmp_path_factory.mktemp("c") / "checkpoints"  # type: ignore[attr-defined]
    d.mkdir()
    text = "".join(rec(r, started=r % 2 == 0) + "\n" for r in range(12)).encode()
    f = d / "a.jsonl"
    f.write_bytes(b"")
    fol = Follower(d)
    pos, starts, writes = 0, 0, 0
    for cut in [*cuts, len(text)]:
        nxt = min(pos + cut, len(text))
        with f.open("ab") as fh:
            fh.write(text[pos:nxt])
        pos = nxt
        s, w, _ = rows(fol)
        starts, writes = starts + s, writes + w
        if pos == len(text):
            break
    s, w, _ = rows(fol)
    assert (starts + s, writes + w) == (6, 6)
