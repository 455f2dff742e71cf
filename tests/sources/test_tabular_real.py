"""The table readers' fast paths on genuine records, against the plain readers.

No genuine fixture is a canonical JSON Lines table, so the records come from genuine sources
through ckptwatch's own writers, as a cluster's files would: the Megatron-LM log excerpts
(``tests/fixtures/real``) through ``parse_megatron_log`` and the recorder's ``dumps_record``;
and, where the non-redistributable MLPerf Storage runs are at hand
(``CKPTWATCH_IN_PLACE_FIXTURES``: 180 saves), their ranks' saves as the lake stores them,
written back as records. Each file is read by the fast reader (``pl.read_ndjson``, times by
Arrow's ISO cast), the careful one (line by line, times by the chrono formats) and in chunks
of lines (``read_table``): the same rows, rejects and notes. Start markers, a re-sent record
(the in-file duplicate rule across chunks) and one malformed line ride along.
"""

from __future__ import annotations

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
from ckptwatch.settings import INGEST, using_ingest
from ckptwatch.sources import coerce
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


@pytest.mark.parametrize("broken", [False, True])
def test_genuine_records_read_alike_fast_careful_and_in_chunks(
        records: list[dict[str, Any]], broken: bool) -> None:
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
        with using_ingest(replace(INGEST, table_chunk_bytes=chunk)):
            assert _outcome(lambda: read_table(data, TABLE, ".jsonl", file_label="f")) \
                == fast, chunk


def test_the_genuine_times_take_the_iso_cast(records: list[dict[str, Any]]) -> None:
    """The fast path the property tests hold to the chrono formats is the one genuine
    records take: Arrow's cast reads every time of both columns."""
    for col in ("start_time", "end_time"):
        values = pl.Series([r[col] for r in records], dtype=pl.String)
        assert coerce._iso_at_once(values) is not None, col
