"""Files parsed together (``read.parse_loaded``: the envelope files of a group through each bulk
parser at once) give the lake exactly the rows and quarantine of parsing them one by one."""

from __future__ import annotations

import gzip
import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tests.conftest import lake_rows, write_raw_dir
from tests.sources.test_bulk_json import BASES, _mixed_lines, envelope
from tests.sources.test_envelope import _text_envelope

from ckptwatch.ingest import read as read_module
from ckptwatch.ingest.run import IngestReport, ingest
from ckptwatch.settings import INGEST

ETH = "NIC statistics:\n     rx_prio3_pause: 7\n     rx_bytes: 9\n"


def _write(root: Path, files: dict[str, list[str]]) -> Path:
    """A raw directory: the canonical small one with its bad records, plus envelope files."""
    write_raw_dir(root, bad=True)
    for rel, lines in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("\n".join(lines) + "\n")
    return root


def _ingest_both(raw: Path, tmp: Path, monkeypatch: pytest.MonkeyPatch,
                 ) -> tuple[IngestReport, IngestReport, list[int]]:
    """``raw`` ingested with files parsed together and one by one (``batch_files`` 1): the two
    reports, and the size of each group ``read_envelope_files`` was given together."""
    groups: list[int] = []
    together = read_module.read_envelope_files

    def counted(files: Any, **kw: Any) -> Any:
        groups.append(len(files))
        return together(files, **kw)

    with monkeypatch.context() as m:
        m.setattr(read_module, "read_envelope_files", counted)
        batched = ingest(raw, tmp / "together")
    alone = ingest(raw, tmp / "alone", limits=replace(INGEST, batch_files=1))
    assert lake_rows(tmp / "together") == lake_rows(tmp / "alone")
    assert [(f.rel, f.status, f.rows, f.quarantined, f.notes, f.error)
            for f in batched.files] == [(f.rel, f.status, f.rows, f.quarantined, f.notes,
                                         f.error) for f in alone.files]
    return batched, alone, groups


def test_a_batch_of_mixed_files_with_bad_records_writes_what_one_by_one_does(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    mixed = _mixed_lines()
    files = {
        "smart/node001.jsonl": mixed,
        "smart/node002.jsonl": mixed[::-1] + ["{not json"],
        "smart/node009.jsonl": mixed,                               # node001 again: skipped
        "fabric/node003.jsonl": [envelope("ethtool", ETH, device="mlx5_0", extra=1)],
        "fabric/node004/eth.jsonl": [json.dumps({                  # node from its place
            "collected_at": "2026-11-28T00:00:00Z", "source": "ethtool", "output": ETH,
            "device": "eth0"})],
        "smart/node005.jsonl": [envelope(*base, device="nvme0") for base in BASES],
        "fabric/empty.jsonl": [],
    }
    raw = _write(tmp_path / "raw", files)
    broken = gzip.compress(("\n".join(mixed) + "\n").encode())
    (raw / "smart" / "node006.jsonl.gz").write_bytes(broken[: len(broken) // 2])  # cut off
    batched, _, groups = _ingest_both(raw, tmp_path, monkeypatch)
    assert sum(groups) >= 5 and max(groups) >= 2  # parsed together (a copy ends a group)
    status = {f.rel: f.status for f in batched.files}
    assert status["smart/node009.jsonl"] == "skipped"
    assert status["smart/node006.jsonl.gz"] == "failed"
    assert batched.quarantined > 10


@settings(max_examples=8, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.lists(st.lists(st.one_of(
    _text_envelope(),
    st.sampled_from(BASES).map(lambda base: envelope(*base, device="nvme0")),
    st.sampled_from(_mixed_lines())), max_size=5), min_size=2, max_size=5))
def test_generated_batches_write_what_one_by_one_does(
        tmp_path_factory: pytest.TempPathFactory, files: list[list[str]]) -> None:
    tmp = tmp_path_factory.mktemp("batch")
    raw = _write(tmp / "raw", {f"{('smart', 'fabric')[k % 2]}/node{k:03}.jsonl": lines
                               for k, lines in enumerate(files)})
    with pytest.MonkeyPatch.context() as monkeypatch:
        _ingest_both(raw, tmp, monkeypatch)
