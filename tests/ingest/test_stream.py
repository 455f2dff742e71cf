"""A large JSON Lines table ingested a chunk at a time (``ingest.stream``, issue 47).

Every test gives a file several times ``table_chunk_bytes`` (a few KB here) and compares the
lake it makes with the lake of the same file read whole (a chunk size over the file: the
in-memory path): the same rows, rejects (line numbers, raw text, reasons), notes, manifest
counts and results; then what a crash between chunks leaves, the parse workers, and the memory
a file costs.
"""

from __future__ import annotations

import codecs
import gzip
import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tests.conftest import PROJECT_ROOT, lake_rows
from tests.ingest.test_crash_safety import enospc, faults, snapshot
from tests.sources.test_tabular import _LINES, _jsonl_file

from ckptwatch.errors import LakeError
from ckptwatch.ingest import load as load_module
from ckptwatch.ingest import stream as stream_module
from ckptwatch.ingest.discover import discover
from ckptwatch.ingest.load import ContentStream, LineChunks, load
from ckptwatch.ingest.read import content_key, large_table
from ckptwatch.ingest.run import IngestReport, ingest
from ckptwatch.lake.store import Lake
from ckptwatch.settings import INGEST, IngestSettings
from ckptwatch.sources.tabular import line_chunks

#: The chunk size of these tests: a file of a few tens of KB is many chunks.
CHUNK = 2048
FILE = "checkpoints/job-1.jsonl"


def _limits(**changes: Any) -> IngestSettings:
    return replace(INGEST, **{"table_chunk_bytes": CHUNK, "workers": 1, **changes})


def _whole(limits: IngestSettings) -> IngestSettings:
    """The same limits, the file read whole (one frame: a chunk larger than any test file)."""
    return replace(limits, table_chunk_bytes=1 << 30)


def _record(step: int, rank: int, **changes: Any) -> dict[str, Any]:
    hour = 23 if step % 2 else 0  # two days: a chunk's rows go to two partitions
    day = 28 if step % 2 else 29
    row: dict[str, Any] = {
        "job_id": "j1", "step": step, "rank": rank, "node": f"n{rank // 2}", "tier": "pool",
        "target": f"t{rank % 2}", "start_time": f"2026-11-{day}T{hour:02d}:10:{rank:02d}Z",
        "end_time": f"2026-11-{day}T{hour:02d}:10:{rank + 20:02d}.5Z",
        "bytes": 1000 * step + rank, "open_s": 0.1, "write_s": 1.5, "fsync_s": 0.2,
        "close_s": 0.05, "status": "ok"}
    row.update(changes)
    return row


def _marker(step: int, rank: int) -> dict[str, Any]:
    row = _record(step, rank)
    return {k: row[k] for k in ("job_id", "step", "rank", "node", "tier", "target",
                                "start_time")} | {"status": "started"}


def _lines(steps: int = 24, ranks: int = 6) -> list[str]:
    """A recorder's file: each step's start markers, then its records."""
    out = []
    for step in range(steps):
        out += [json.dumps(_marker(step, r)) for r in range(ranks)]
        out += [json.dumps(_record(step, r)) for r in range(ranks)]
    return out


def _hostile_lines() -> list[str]:
    """``_lines`` with what the rules are about spread over the chunks: a record sent again
    chunks later (and twice in one chunk), a malformed line, a bad value, blank lines, an
    extra column, a nested value (that chunk read line by line), a line over the record
    limit."""
    lines = _lines()
    lines[40] = json.dumps(_record(3, 4, bytes=-5))  # a bad value (negative bytes)
    lines.insert(150, json.dumps(_record(1, 2, bytes=77)))  # replaces step 1 rank 2
    lines.insert(151, json.dumps(_record(1, 2, bytes=78)))  # ... and that one, same chunk
    lines.insert(200, '{"job_id": "j1", "step": 9, "rank"')  # cut short
    lines.insert(210, "")
    lines.insert(211, "   ")
    lines.insert(230, json.dumps(_record(12, 1, extra_col="x")))  # replaces step 12 rank 1
    lines.insert(240, json.dumps(_record(13, 0, nested={"a": 1})))
    lines.insert(260, "x" * 700)  # over the record limit of these tests
    lines.append(json.dumps(_record(0, 0, bytes=5)))  # the very first record, sent last
    return lines


def _raw(root: Path, lines: list[str], *, name: str = FILE, gz: bool = False,
         prefix: bytes = b"", suffix: bytes = b"\n") -> Path:
    path = root / (name + (".gz" if gz else ""))
    path.parent.mkdir(parents=True, exist_ok=True)
    data = prefix + "\n".join(lines).encode() + suffix
    path.write_bytes(gzip.compress(data) if gz else data)
    return root


#: The columns a file lacking a required one has, listed in the order its first frame
#: has them (read in chunks, a sample's order: ``tabular._sampled_ndjson``).
_FOUND = re.compile(r"\(found: ([^)]*)\)")


def _found_sorted(text: Any) -> Any:
    if not isinstance(text, str):
        return text
    return _FOUND.sub(lambda m: "(found: " + ", ".join(sorted(m[1].split(", "))) + ")", text)


def _outcome(report: IngestReport, lake: Path) -> dict[str, Any]:
    """What an ingest gave: its results, the lake's rows, the manifest but its parts."""
    entries = sorted((e.key, e.path, e.size_bytes, e.rows, e.quarantined)
                     for e in Lake(lake).manifest())
    rows = lake_rows(lake)
    rows["quarantine"] = [tuple(_found_sorted(v) for v in r) for r in rows["quarantine"]]
    return {"results": [(f.rel, f.status, f.rows, f.quarantined, f.notes,
                         _found_sorted(f.error)) for f in report.files],
            "rows": rows, "manifest": entries}


def _clean(lake: Path) -> None:
    """No journal entry, no temp file left."""
    assert not list((lake / "_inflight").iterdir())
    assert not [p for p in lake.rglob("*") if p.name.endswith(".tmp")]


def _both(raw: Path, tmp: Path, limits: IngestSettings) -> tuple[dict[str, Any], dict[str, Any]]:
    """(streamed, read whole) outcomes of ingesting ``raw`` into fresh lakes."""
    streamed = _outcome(ingest(raw, tmp / "streamed", limits=limits), tmp / "streamed")
    _clean(tmp / "streamed")
    whole = _outcome(ingest(raw, tmp / "whole", limits=_whole(limits)), tmp / "whole")
    return streamed, whole


@pytest.fixture
def chunks_typed(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The chunks the streamed ingest typed (a count per file), to show it streamed."""
    seen: list[int] = []
    real = stream_module._FileStream._chunk

    def counting(self: Any, typed: Any) -> None:
        seen.append(len(self.chunks))
        real(self, typed)

    monkeypatch.setattr(stream_module._FileStream, "_chunk", counting)
    return seen


def test_a_streamed_file_is_the_file_read_whole(tmp_path: Path,
                                                chunks_typed: list[int]) -> None:
    limits = _limits(max_record_bytes=500)
    raw = _raw(tmp_path / "raw", _hostile_lines())
    streamed, whole = _both(raw, tmp_path, limits)
    assert max(chunks_typed) > 10  # the file went chunk by chunk
    assert streamed == whole
    # quarantine rows: table, line, reason, raw, source_file
    quarantine = {(r[1], r[2].split(":")[0]): r for r in streamed["rows"]["quarantine"]}
    # the duplicate rule across chunks: the last record wins, each earlier one quarantined
    # with its own line, raw text and the line that replaced it
    lines = _hostile_lines()
    first = lines.index(json.dumps(_record(0, 0))) + 1
    dup = next(r for (line, _), r in quarantine.items() if line == first)
    assert dup[2] == (f"duplicate record: line {len(lines)} has the same job_id, step and "
                      "rank and is kept (the last record in a file wins)")
    assert dup[3] == json.dumps(_record(0, 0))
    kept = [r for r in streamed["rows"]["checkpoint_writes"] if r[1:3] == (0, 0)]
    assert len(kept) == 1 and kept[0][9] == 5  # bytes of the last one
    twice = [r for r in streamed["rows"]["checkpoint_writes"] if r[1:3] == (1, 2)]
    assert len(twice) == 1 and twice[0][9] == 78
    # a malformed line in a later chunk: its number and raw text
    cut = next(r for (line, _), r in quarantine.items() if line == 201)
    assert cut[2].startswith("invalid JSON") and cut[3] == '{"job_id": "j1", "step": 9, "rank"'
    assert any(r[2].startswith("line is 700 bytes, over the limit of 500")
               for r in quarantine.values())
    assert streamed["results"][0][4] == [f"{FILE}: extra columns ignored: extra_col, nested"]


@pytest.mark.parametrize("variant", ["gz", "bom", "no newline at the end", "crlf"])
def test_compressed_marked_and_odd_files_stream_alike(tmp_path: Path, variant: str,
                                                      chunks_typed: list[int]) -> None:
    lines = _hostile_lines()
    if variant == "crlf":
        lines = [ln + "\r" for ln in lines]
    raw = _raw(tmp_path / "raw", lines, gz=variant == "gz",
               prefix=codecs.BOM_UTF8 if variant == "bom" else b"",
               suffix=b"" if variant == "no newline at the end" else b"\n")
    streamed, whole = _both(raw, tmp_path, _limits(max_record_bytes=500))
    assert chunks_typed
    assert streamed == whole


def _failing(tmp_path: Path, why: str) -> tuple[Path, IngestSettings]:
    """A raw directory whose file cannot be read whole, and the limits."""
    limits = _limits()
    lines = _hostile_lines()
    raw = tmp_path / "raw"
    if why == "not UTF-8 late":
        late = max(k for k, ln in enumerate(lines) if '"n1"' in ln)
        lines[late] = lines[late].replace('"n1"', '"n\udcff"')
        path = raw / FILE
        path.parent.mkdir(parents=True)
        path.write_bytes("\n".join(lines).encode("utf-8", "surrogateescape") + b"\n")
    elif why == "cut at the size limit":
        _raw(raw, lines)
        limits = replace(limits, max_file_bytes=len("\n".join(lines)) // 2)
    elif why == "too many rejects":
        lines[100:100] = ["{bad"] * 8
        _raw(raw, lines)
        limits = replace(limits, max_quarantine_rows=5)
    elif why == "a required column missing":
        _raw(raw, [json.dumps({k: v for k, v in json.loads(ln).items() if k != "bytes"})
                   if ln.startswith("{") and ln.endswith("}") else ln for ln in lines])
    elif why == "truncated gz":
        _raw(raw, lines, gz=True)
        path = raw / (FILE + ".gz")
        path.write_bytes(path.read_bytes()[:-300])
    return raw, limits


@pytest.mark.parametrize("why", ["not UTF-8 late", "cut at the size limit", "too many rejects",
                                 "a required column missing", "truncated gz"])
def test_a_file_that_fails_fails_alike(tmp_path: Path, why: str) -> None:
    """A file that cannot be read whole writes to quarantine only, as read whole: its reason,
    its rejects and its first records (after the duplicate rule); nothing in the manifest."""
    raw, limits = _failing(tmp_path, why)
    streamed, whole = _both(raw, tmp_path, limits)
    assert streamed == whole
    assert streamed["results"][0][1] == "failed" and not streamed["manifest"]
    assert streamed["rows"]["quarantine"]


def test_a_rerun_skips_the_file_and_a_copy_is_skipped(tmp_path: Path) -> None:
    raw = _raw(tmp_path / "raw", _hostile_lines())
    shutil.copy(raw / FILE, raw / "checkpoints" / "job-1-copy.jsonl")
    lake = tmp_path / "lake"
    first = ingest(raw, lake, limits=_limits())
    assert [f.status for f in first.files] == ["ingested", "skipped"]
    before = snapshot(lake)
    again = ingest(raw, lake, limits=_limits())
    assert [f.status for f in again.files] == ["skipped", "skipped"]
    assert snapshot(lake) == before


def test_content_key_of_a_large_file_is_the_key_of_the_file_read_whole(tmp_path: Path) -> None:
    raw = _raw(tmp_path / "raw", _hostile_lines(), gz=True)
    (streamed,) = discover(raw, limits=_limits())
    (whole,) = discover(raw, limits=_whole(_limits()))
    assert large_table(streamed) and not large_table(whole)
    assert content_key(streamed) == content_key(whole)


def test_records_whose_hashes_meet_are_told_apart_by_their_keys(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Only a record's 64-bit key hash is held; records whose hashes meet are typed again for
    their exact keys: with every hash the same, no record that differs is dropped."""
    import polars as pl

    monkeypatch.setattr(pl.DataFrame, "hash_rows", lambda self, seed=0: pl.Series(
        "h", [7] * self.height, dtype=pl.UInt64))
    raw = _raw(tmp_path / "raw", _hostile_lines())
    streamed, whole = _both(raw, tmp_path, _limits(max_record_bytes=500))
    assert streamed == whole


def test_a_file_that_changes_while_it_is_read_is_read_again(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A file that grows between the read for its key and the read of its rows (a recorder
    still writing it) is read again from the start: the lake holds the content read, whole,
    under that content's key, and nothing of the first attempt."""
    raw = _raw(tmp_path / "raw", _hostile_lines())
    real = stream_module._FileStream._chunk
    calls = [0]

    def chunk(self: Any, typed: Any) -> None:
        calls[0] += 1
        if calls[0] == 4:  # the recorder appends while the rows are read
            with open(raw / FILE, "a") as fh:
                fh.write(json.dumps(_record(99, 0)) + "\n")
        real(self, typed)

    monkeypatch.setattr(stream_module._FileStream, "_chunk", chunk)
    streamed = _outcome(ingest(raw, tmp_path / "streamed", limits=_limits()),
                        tmp_path / "streamed")
    _clean(tmp_path / "streamed")
    assert calls[0] > 20  # read twice
    whole = _outcome(ingest(raw, tmp_path / "whole", limits=_whole(_limits())),
                     tmp_path / "whole")
    assert streamed == whole
    assert any(r[1] == 99 for r in streamed["rows"]["checkpoint_writes"])
    on_disk = {p.relative_to(tmp_path / "streamed").as_posix()
               for p in (tmp_path / "streamed").glob("*/date=*/part-*.parquet")
               if p.name != "part-schema.parquet"}
    assert on_disk == {p for e in Lake(tmp_path / "streamed").manifest() for p in e.parts}


# -- crashes ----------------------------------------------------------------------------


def _raise_at(monkeypatch: pytest.MonkeyPatch, n: int, exc: BaseException) -> None:
    """The streamed ingest raises ``exc`` when it comes to its ``n``-th chunk."""
    real = stream_module._FileStream._chunk
    calls = [0]

    def chunk(self: Any, typed: Any) -> None:
        calls[0] += 1
        if calls[0] == n:
            raise exc
        real(self, typed)

    monkeypatch.setattr(stream_module._FileStream, "_chunk", chunk)


@pytest.mark.parametrize("exc", [KeyboardInterrupt(), RuntimeError("a bug"),
                                 LakeError("cannot write: the disk is full")],
                         ids=["ctrl-c", "a bug", "disk full"])
def test_a_failure_between_chunks_leaves_nothing_of_the_file(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, exc: BaseException) -> None:
    raw = _raw(tmp_path / "raw", _hostile_lines())
    clean = tmp_path / "clean"
    ingest(raw, clean, limits=_limits())
    lake = tmp_path / "lake"
    Lake(lake).init()
    before = snapshot(lake)
    with monkeypatch.context() as m:
        _raise_at(m, 6, exc)
        with pytest.raises(type(exc)):
            ingest(raw, lake, limits=_limits())
    assert snapshot(lake) == before
    report = ingest(raw, lake, limits=_limits())
    assert [f.status for f in report.files] == ["ingested"]
    assert lake_rows(lake) == lake_rows(clean)
    _clean(lake)


#: Ingests ``RAW`` into ``LAKE`` and SIGKILLs itself at its ``N``-th chunk (0: never).
KILLED = r"""
import os, signal, sys
from dataclasses import replace
from pathlib import Path
from ckptwatch.ingest import stream
from ckptwatch.ingest.run import ingest
from ckptwatch.settings import INGEST

real, calls, at = stream._FileStream._chunk, [0], int(sys.argv[3])

def chunk(self, typed):
    calls[0] += 1
    if calls[0] == at:
        os.kill(os.getpid(), signal.SIGKILL)
    real(self, typed)

stream._FileStream._chunk = chunk
ingest(Path(sys.argv[1]), Path(sys.argv[2]),
       limits=replace(INGEST, table_chunk_bytes=int(sys.argv[4]), workers=1))
"""


def test_sigkill_between_chunks_leaves_nothing_and_the_rerun_ingests_it_whole(
        tmp_path: Path) -> None:
    raw = _raw(tmp_path / "raw", _hostile_lines())
    clean = tmp_path / "clean"
    ingest(raw, clean, limits=_limits())
    lake = tmp_path / "lake"
    env = {**os.environ, "PYTHONPATH": str(PROJECT_ROOT / "src")}
    for at in (3, 12):  # a kill on the rerun of the first kill too
        run = subprocess.run([sys.executable, "-c", KILLED, str(raw), str(lake), str(at),
                              str(CHUNK)], env=env, capture_output=True, text=True,
                             timeout=120, check=False)
        assert run.returncode == -signal.SIGKILL, run.stderr
        assert list((lake / "_inflight").glob("*.json"))  # the journal names what was written
        assert not list(lake.glob("*/*/*.parquet")) or all(  # nothing of it is visible
            p.name == "part-schema.parquet" for p in lake.glob("*/*/*.parquet"))
    report = ingest(raw, lake, limits=_limits())
    assert report.recovered == 1 and [f.status for f in report.files] == ["ingested"]
    assert lake_rows(lake) == lake_rows(clean)
    _clean(lake)
    assert not [d for d in lake.glob("*/date=*") if not any(d.iterdir())]  # no empty partition


def test_a_write_failure_at_every_step_leaves_the_lake_as_it_was(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """ENOSPC at each I/O step of the streamed file's ingest (a partition made, a part
    encoded, fsync, rename): one ``LakeError`` naming the file, the lake byte for byte as it
    was; then a run completes it."""
    lines = _lines(steps=6)
    lines.insert(30, json.dumps(_record(0, 0, bytes=9)))  # a duplicate: a part rewritten
    lines.insert(40, "{bad")  # a quarantine part
    raw = _raw(tmp_path / "raw", lines)
    limits = _limits(table_chunk_bytes=5000)
    clean = tmp_path / "clean"
    ingest(raw, clean, limits=limits)
    lake = tmp_path / "lake"
    Lake(lake).init()
    before = snapshot(lake)
    probe = tmp_path / "probe"
    shutil.copytree(lake, probe)
    with faults(monkeypatch, None, enospc) as counted:
        ingest(raw, probe, limits=limits)
    assert counted.n > 15
    naming_the_file = 0
    for k in range(1, counted.n + 1):
        with faults(monkeypatch, k, enospc), pytest.raises(LakeError) as err:
            ingest(raw, lake, limits=limits)
        message = str(err.value)
        assert "the disk is full" in message and "\n" not in message, message
        naming_the_file += f"while writing {FILE}, which was rolled back" in message
        assert snapshot(lake) == before, f"step {k} changed the lake"
    assert naming_the_file >= counted.n - 5  # all but the run's own steps (the lock, init)
    ingest(raw, lake, limits=limits)
    assert lake_rows(lake) == lake_rows(clean)


# -- the parse workers ------------------------------------------------------------------


def test_with_parse_workers_the_large_file_streams_in_the_run_and_the_lake_is_the_same(
        tmp_path: Path, chunks_typed: list[int]) -> None:
    raw = _raw(tmp_path / "raw", _hostile_lines())
    for k in range(3):  # small files around it, parsed by the workers
        _raw(raw, _lines(steps=2)[k:], name=f"checkpoints/small-{k}.jsonl")
    limits = _limits(max_record_bytes=500)
    parallel = _outcome(ingest(raw, tmp_path / "w2", limits=replace(limits, workers=2)),
                        tmp_path / "w2")
    assert chunks_typed
    whole = _outcome(ingest(raw, tmp_path / "whole", limits=_whole(limits)),
                     tmp_path / "whole")
    assert parallel == whole


# -- the pieces: reading, cutting into chunks -------------------------------------------


@settings(max_examples=20, deadline=None)
@given(_LINES, st.integers(1, 400), st.sampled_from([1000, 3]), st.booleans())
def test_a_file_streamed_in_random_chunks_is_the_file_read_whole(
        lines: list[str], chunk: int, quarantine_rows: int, gz: bool) -> None:
    """Any file of records, re-sent records, blank and malformed lines, nested values: the
    same lake and results streamed in chunks of ``chunk`` bytes as read whole."""
    data = _jsonl_file(lines) * 3  # several chunks, duplicates across them
    limits = _limits(table_chunk_bytes=chunk, max_quarantine_rows=quarantine_rows)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        path = root / "raw" / (FILE + (".gz" if gz else ""))
        path.parent.mkdir(parents=True)
        path.write_bytes(gzip.compress(data) if gz else data)
        streamed, whole = _both(root / "raw", root, limits)
    assert streamed == whole


def _text_pieces() -> st.SearchStrategy[bytes]:
    return st.lists(st.sampled_from([b"a", b"bb", b"\n", b"\n\n", b"x" * 9, "é".encode(),
                                     b"\xff", b"\xe2\x82", b"\r\n", b"{}"]),
                    max_size=40).map(b"".join)


@settings(max_examples=300, deadline=None)
@given(_text_pieces(), st.integers(1, 30), st.integers(1, 12), st.integers(1, 5),
       st.integers(1, 7))
def test_line_chunks_cut_and_blank_as_the_whole_text_is_cut_and_blanked(
        data: bytes, size: int, limit: int, keep: int, piece: int) -> None:
    """``LineChunks`` over pieces of any size: ``line_chunks`` of the text ``load`` blanks
    (the same chunks, first lines, long lines and head)."""
    blanked, long_lines = load_module._blank_long_lines(data, limit, keep) \
        if len(data) > limit else (data, [])
    want = [(blanked[s:e], line) for s, e, line in line_chunks(blanked, size)]
    chunks = LineChunks((data[k:k + piece] for k in range(0, len(data), piece)), size, limit,
                        keep)
    assert list(chunks) == want
    assert chunks.long_lines == long_lines
    assert chunks.head == blanked[:keep]


@settings(max_examples=150, deadline=None)
@given(_text_pieces(), st.sampled_from([b"", codecs.BOM_UTF8]), st.booleans(),
       st.integers(1, 60), st.integers(1, 9))
def test_the_content_stream_reads_what_load_reads(data: bytes, bom: bytes, gz: bool, cap: int,
                                                  piece: int) -> None:
    """Decompressed, cut at the limit, a byte order mark dropped, UTF-8 checked: the text,
    hash, size and failure of ``load``, in pieces of any size."""
    limits = replace(INGEST, max_file_bytes=cap)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / ("t.jsonl.gz" if gz else "t.jsonl")
        path.write_bytes(gzip.compress(bom + data) if gz else bom + data)
        whole = load(path, lines=False, text=True, limits=limits)
        old = load_module.CHUNK_BYTES
        load_module.CHUNK_BYTES = piece
        try:
            stream = ContentStream(path, limits)
            text = b"".join(stream.pieces())
        finally:
            load_module.CHUNK_BYTES = old
    assert not stream.utf16
    assert (text, stream.sha.hexdigest(), stream.size, stream.failure) == (
        whole.data, whole.digest, whole.size, whole.failure)
    assert stream.text_bytes == len(text)


def test_gzip_members_padding_and_damage_read_alike(tmp_path: Path) -> None:
    """Pieces of a gzip stream (members, zero padding, a big member of zeros, damage):
    ``load``'s bytes and failure, which ``_gunzip_pieces`` gives a megabyte at a time."""
    rng = random.Random(5)
    payload = bytes(rng.randrange(256) for _ in range(3000)) + bytes(3 << 20)
    cases = {"members": gzip.compress(b"a\n" * 10) + gzip.compress(payload),
             "padding": gzip.compress(b"b\n") + b"\0" * 64,
             "damage": gzip.compress(payload)[:-8] + b"\x00" * 4 + b"\xff" * 4,
             "cut": gzip.compress(payload)[:2000],
             "not gzip": b"plain text\n"}
    for name, blob in cases.items():
        path = tmp_path / f"{name}.jsonl.gz"
        path.write_bytes(blob)
        whole = load(path, lines=False, limits=INGEST)
        stream = ContentStream(path, INGEST)
        pieces = list(stream.pieces())
        assert max((len(p) for p in pieces), default=0) <= load_module.CHUNK_BYTES
        assert (b"".join(pieces), stream.failure) == (whole.data, whole.failure), name


# -- memory ---------------------------------------------------------------------------

#: Writes a checkpoint file of ``MB`` megabytes and ingests it, in a process of its own; prints
#: the process's peak RSS (MB) after the file is written, and at the end.
MEASURE = r"""
import json, resource, sys
from dataclasses import replace
from pathlib import Path
from ckptwatch.ingest.run import ingest
from ckptwatch.settings import INGEST

raw, lake, mb = Path(sys.argv[1]), Path(sys.argv[2]), int(sys.argv[3])
path = raw / "checkpoints" / "job-9.jsonl"
path.parent.mkdir(parents=True)
rec = ('{"job_id": "j9", "step": %d, "rank": %d, "node": "n%d", "tier": "pool", '
       '"target": "t0", "start_time": %.3f, "end_time": %.3f, "bytes": %d, "open_s": 0.1, '
       '"write_s": 1.5, "fsync_s": 0.2, "close_s": 0.05, "status": "ok"}\n')
with open(path, "w") as fh:
    step = 0
    while fh.tell() < mb << 20:
        at = 1764291600 + 60 * step
        fh.write("".join(rec % (step, r, r // 8, at + r / 1000, at + 5 + r / 100,
                                step * 1000 + r) for r in range(512)))
        step += 1
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
report = ingest(raw, lake, limits=replace(INGEST, table_chunk_bytes=4 << 20, workers=1))
assert [f.status for f in report.files] == ["ingested"], report.files
print(before / 1024, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)
"""


def test_peak_memory_grows_far_less_than_the_file(tmp_path: Path) -> None:
    """A 60 MB checkpoint file costs about what a 15 MB one costs (4 MiB chunks): the peak
    RSS of its ingest grows by less than 40 MB for 45 MB more of file (read whole, it grew by
    about three times the file)."""
    env = {**os.environ, "PYTHONPATH": str(PROJECT_ROOT / "src")}
    peaks = {}
    for mb in (15, 60):
        run = subprocess.run([sys.executable, "-c", MEASURE, str(tmp_path / f"raw{mb}"),
                              str(tmp_path / f"lake{mb}"), str(mb)], env=env,
                             capture_output=True, text=True, timeout=300, check=False)
        assert run.returncode == 0, run.stderr
        _written, peaks[mb] = map(float, run.stdout.split())
    assert peaks[60] - peaks[15] < 40, peaks
