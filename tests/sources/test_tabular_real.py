"""The table readers' fast paths on genuine records, against the plain readers.

No genuine fixture is a canonical JSON Lines table, so the records come from genuine sources
through ckptwatch's own writers, as a cluster's files would: the Megatron-LM log excerpts
(``tests/fixtures/real``) through ``parse_megatron_log`` and the recorder's ``dumps_record``;
and, where the non-redistributable MLPerf Storage runs are at hand
(``CKPTWATCH_IN_PLACE_FIXTURES``: 180 saves), their ranks' saves as the lake stores them,
written back as records. Each file is read by the fast reader (``pl.read_ndjson``, times by
Arrow's ISO cast), the careful one (line by line, times by the chrono formats) and in chunks
of lines (``read_table``): the same rows, rejects and notes. Start markers, a re-sent record
(the in-file duplicate rule across chunks) and one malformed line ride along. The fast reader
runs twice: with the types of every line, and with those of a sample
(``tabular._sampled_ndjson``, which the recorder's files, nulls and all, take).

The rows the genuine tool fixtures parse into (smartctl JSON, OCP / vendor logs, ethtool -S,
node_exporter scrapes) are written as canonical ``nvme_smart`` / ``fabric_counters`` tables in
four spellings and read the same three ways.
"""

from __future__ import annotations

import functools
import io
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from unittest import mock

import polars as pl
import pytest
from tests.in_place import IN_PLACE
from tests.sources.test_tabular import _outcome, _read

from ckptwatch.collect.adapters import parse_megatron_log
from ckptwatch.collect.recorder import dumps_record, validate_record
from ckptwatch.ingest.run import ingest
from ckptwatch.lake.store import Lake
from ckptwatch.settings import INGEST
from ckptwatch.sources import coerce, tabular
from ckptwatch.sources.tabular import _jsonl_at_once, load_jsonl, read_table

EXCERPTS = Path(__file__).parents[1] / "fixtures" / "real" / "checkpoint_timing" / "log_excerpts"
MLPERF = sorted((IN_PLACE / "checkpoint_timing").glob("mlperf_storage_*"))
TABLE = "checkpoint_writes"


def _megatron_records() -> list[dict[str, Any]]:
    out = []
    for k, path in enumerate(sorted(EXCERPTS.glob("megatron_*.log"))):
        out += parse_megatron_log(path.read_text().splitlines(), job_id=f"megatron-{k}",
                                  tier="pool", node=f"n{k}", bytes_per_rank=10**9,
                                  default_time=datetime(2024, 6, 1, 10, k, tzinfo=UTC))
    return out


def _mlperf_records(tmp: Path) -> list[dict[str, Any]]:
    """The MLPerf runs' saves, ingested from where they lie, as records (ISO times, UTC)."""
    lake = tmp / "lake"
    out: list[dict[str, Any]] = []
    for run in MLPERF:
        ingest(run, lake)
    parts = sorted(Lake(lake).table_dir(TABLE).glob("date=2*/*.parquet"))
    if not parts:
        return out
    rows = pl.read_parquet(parts).sort("job_id", "step", "rank")
    for r in rows.iter_rows(named=True):
        out.append({"job_id": r["job_id"], "step": r["step"], "rank": r["rank"],
                    "node": r["node"], "tier": r["tier"], "target": r["target"],
                    "start_time": r["start_ts"].isoformat(), "end_time": r["end_ts"].isoformat(),
                    "bytes": r["bytes"], "status": r["status"]})
    return out


def _file(records: list[dict[str, Any]], *, broken: bool) -> bytes:
    """Each record preceded by its rank's start marker, the first record sent again at the
    end (the later copy wins); ``broken``: one malformed line in the middle (the fast reader
    declines the file, or the chunk, that holds it)."""
    lines = []
    for r in records:
        lines.append(dumps_record({k: r[k] for k in ("job_id", "step", "rank", "node", "tier",
                                                     "start_time")} | {"status": "started"}))
        lines.append(dumps_record(validate_record(dict(r))))
    if broken:
        lines.insert(len(lines) // 2, '{"job_id": "cut off')
    lines.append(dumps_record(validate_record(dict(records[0]))))
    return ("\n".join(lines) + "\n").encode()


@pytest.fixture(scope="module")
def records(tmp_path_factory: pytest.TempPathFactory) -> list[dict[str, Any]]:
    found = _megatron_records() + _mlperf_records(tmp_path_factory.mktemp("mlperf"))
    assert found, "no genuine records"
    return found


@pytest.mark.parametrize("sample_lines", [10**9, 4], ids=["full types", "sampled types"])
@pytest.mark.parametrize("broken", [False, True])
def test_genuine_records_read_alike_fast_careful_and_in_chunks(
        records: list[dict[str, Any]], broken: bool, sample_lines: int,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """``sampled types``: the fast reader may take the column types from four lines
    (``tabular._sampled_ndjson``)."""
    monkeypatch.setattr(tabular, "SAMPLE_LINES", sample_lines)
    data = _file(records, broken=broken)
    assert (_jsonl_at_once(data) is None) == broken  # the fast reader reads a clean file
    fast = _outcome(lambda: _read(load_jsonl, data, TABLE))
    rows, rejects, dropped, _notes = fast
    assert len(rows[TABLE]) == len(records) and len(rows["checkpoint_starts"]) == len(records)
    assert [r[2].split(" (")[0].split(":")[0] for r in rejects] == ["invalid JSON"] * broken + [
        "duplicate record"] and not dropped
    with mock.patch.object(pl, "read_ndjson", side_effect=ValueError("careful")):
        assert _outcome(lambda: _read(load_jsonl, data, TABLE)) == fast
    for chunk in (1, 97, 4096):
        read = functools.partial(read_table, data, TABLE, ".jsonl", file_label="f",
                                 limits=replace(INGEST, table_chunk_bytes=chunk))
        assert _outcome(read) == fast, chunk


def test_the_recorders_files_take_the_sampled_types() -> None:
    """The recorder's own lines (a start marker, then the record with its nulls: no target,
    no phases) take the types of a sample: the full read's frame."""
    data = _file(_megatron_records(), broken=False)
    assert b'"target":null' in data
    full = pl.read_ndjson(io.BytesIO(data), infer_schema_length=None)
    fast = tabular._sampled_ndjson(data, 4)
    assert fast is not None and fast.select(full.columns).equals(full)


def test_the_genuine_times_take_the_iso_cast(records: list[dict[str, Any]]) -> None:
    """The fast path the property tests hold to the chrono formats is the one genuine
    records take: Arrow's cast reads every time of both columns."""
    for col in ("start_time", "end_time"):
        values = pl.Series([r[col] for r in records], dtype=pl.String)
        assert coerce._iso_at_once(values) is not None, col


def _tool_rows() -> dict[str, list[dict[str, Any]]]:
    """The rows the genuine tool fixtures parse into (smartctl JSON, OCP / vendor logs,
    ethtool -S, node_exporter scrapes: ``test_envelope_batch.REAL_FILES``), per table, as
    records of that table's JSON Lines (times as ISO text): drive models, serials and
    firmware, NIC and port names, counters past 2**53, as the tools print them."""
    from tests.sources.test_envelope_batch import REAL_FILES

    from ckptwatch.sources.envelope import read_envelopes

    out: dict[str, list[dict[str, Any]]] = {}
    for k, data in enumerate(REAL_FILES):
        parsed = read_envelopes(data, file_label=f"f{k}", default_node=f"n{k}")
        for table, frames in parsed.frames.items():
            for row in pl.concat(frames).iter_rows(named=True):
                out.setdefault(table, []).append(
                    {c: v.isoformat() if isinstance(v, datetime) else v
                     for c, v in row.items() if c in tabular._canonical_dtypes(table)})
    return out


TOOL_ROWS = _tool_rows()


def _spelled(rows: list[dict[str, Any]], spelling: str) -> bytes:
    """``rows`` as JSON Lines: as the recorder writes (compact, non-ASCII escaped), as
    ``json.dumps`` writes by default, with non-ASCII as it is, or with each line's keys in
    another order; the last line adds a key no other line has (ignored, and noted)."""
    import json
    import random

    lines = []
    shuffle = random.Random(7).shuffle
    for r in rows:
        if spelling == "keys shuffled":
            keys = list(r)
            shuffle(keys)
            r = {k: r[k] for k in keys}
        lines.append(json.dumps(r, separators=(",", ":") if spelling != "json.dumps" else None,
                                ensure_ascii=spelling == "recorder"))
    lines[-1] = lines[-1][:-1] + ',"vendor_extra":1}'
    return ("\n".join(lines) + "\n").encode()


@pytest.mark.parametrize("spelling", ["recorder", "json.dumps", "utf-8", "keys shuffled"])
@pytest.mark.parametrize("table", sorted(TOOL_ROWS))
def test_genuine_tool_rows_as_tables_read_alike_sampled_full_and_careful(
        table: str, spelling: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A canonical table of genuine values, read with the column types of a 4-line sample:
    the frame of the full read when the sampled read takes it; and through ``read_table`` the
    rows, rejects and notes of the full read and of the careful line-by-line reader."""
    rows = TOOL_ROWS[table]
    assert len(rows) > 20
    data = _spelled(rows, spelling)
    full = pl.read_ndjson(io.BytesIO(data), infer_schema_length=None)
    fast = tabular._sampled_ndjson(data, 4)
    if fast is not None:
        assert dict(fast.schema) == dict(full.schema)
        assert fast.select(full.columns).equals(full)
    assert fast is None  # the late key: left out by the sampled types, and seen
    assert tabular._sampled_ndjson(data.replace(b',"vendor_extra":1}', b"}"), 4) is not None
    monkeypatch.setattr(tabular, "SAMPLE_LINES", 4)
    sampled = _outcome(lambda: read_table(data, table, ".jsonl", file_label="f"))
    monkeypatch.setattr(tabular, "SAMPLE_LINES", 10**9)
    assert _outcome(lambda: read_table(data, table, ".jsonl", file_label="f")) == sampled
    with mock.patch.object(pl, "read_ndjson", side_effect=ValueError("careful")):
        assert _outcome(lambda: read_table(data, table, ".jsonl", file_label="f")) == sampled
