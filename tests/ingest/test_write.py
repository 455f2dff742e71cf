"""Writing one parsed file: what each outcome writes, and what the result says."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import polars as pl

from ckptwatch.ingest.discover import RawFile
from ckptwatch.ingest.read import ParsedFile
from ckptwatch.ingest.write import prepare_lake, write_file
from ckptwatch.lake.store import Lake
from ckptwatch.sources.base import Parsed, Reject

NOW = datetime(2026, 11, 29, tzinfo=UTC)


def _files(lake: Path) -> list[str]:
    return sorted(p.relative_to(lake).as_posix() for p in lake.rglob("*") if p.is_file())


def test_failed_ignored_and_skipped_files_write_nothing(tmp_path: Path) -> None:
    lake, recovered = prepare_lake(tmp_path / "lake")
    assert recovered == 0
    before = _files(tmp_path / "lake")
    raw = RawFile(tmp_path / "a.csv", "pool/a.csv", "tabular", table="pool_metrics")
    readme = RawFile(tmp_path / "README.md", "README.md", "ignored", reason="documentation")
    failed = write_file(lake, ParsedFile(raw, "", 0, Parsed(), error="cannot read it"), NOW)
    ignored = write_file(lake, ParsedFile(readme, "k1", 3, Parsed()), NOW)
    skipped = write_file(lake, ParsedFile(raw, "k2", 3, Parsed(), already=True), NOW)
    assert (failed.status, failed.error) == ("failed", "cannot read it")
    assert (ignored.status, ignored.notes) == ("ignored", ["README.md: documentation"])
    assert (skipped.rel, skipped.status, skipped.rows) == ("pool/a.csv", "skipped", {})
    assert _files(tmp_path / "lake") == before


def test_an_ingested_file_is_committed_with_its_rows_and_rejects(tmp_path: Path) -> None:
    lake, _ = prepare_lake(tmp_path / "lake")
    raw = RawFile(tmp_path / "p.csv", "pool/p.csv", "tabular", table="pool_metrics")
    parsed = Parsed(rejects=[Reject("bad value", 3, "x,y")], notes=["pool/p.csv: a note"])
    parsed.add("pool_metrics", pl.DataFrame({
        "ts": [NOW], "pool": ["p"], "target": ["t"], "metric": ["m"], "value": [1.0]}))
    result = write_file(lake, ParsedFile(raw, "k", 10, parsed), NOW)
    assert (result.status, result.rows, result.quarantined) == (
        "ingested", {"pool_metrics": 1}, 1)
    assert result.notes == ["pool/p.csv: a note"]
    assert "k" in Lake(tmp_path / "lake").manifest_keys()
    q = Lake(tmp_path / "lake").read("quarantine")
    assert q.select("table", "line", "reason", "raw", "source_file").rows() == [
        ("pool_metrics", 3, "bad value", "x,y", "pool/p.csv")]


def test_a_file_with_no_records_says_so(tmp_path: Path) -> None:
    lake, _ = prepare_lake(tmp_path / "lake")
    raw = RawFile(tmp_path / "e.csv", "pool/e.csv", "tabular", table="pool_metrics")
    result = write_file(lake, ParsedFile(raw, "k", 0, Parsed()), NOW)
    assert (result.status, result.notes) == ("ingested", ["pool/e.csv: no records in this file"])
