"""The ingest flow on a local Dask cluster (prefect-dask) writes the lake a sequential run does."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from tests.conftest import lake_rows

from ckptwatch.flows.ingest import dask_runner, ingest_flow
from ckptwatch.ingest.run import ingest
from ckptwatch.lake.store import Lake
from ckptwatch.simulate.scenario import simulate

pytestmark = pytest.mark.prefect

pytest.importorskip("prefect_dask")


def test_dask_ingest_lake_equals_sequential_lake(prefect_harness: None, tmp_path: Path) -> None:
    # Every raw format of a simulated cluster (tool envelopes, CSV, JSON Lines), plus a second
    # copy of a file (ingested once, the copy skipped) and a file nothing recognises.
    raw = tmp_path / "raw"
    simulate(raw, 5, nodes=4, hours=1.0, fabric_interval_s=60.0)
    first = sorted((raw / "fabric").iterdir())[0]
    shutil.copyfile(first, raw / "fabric" / "zz-copy.jsonl")
    (raw / "notes.bin").write_bytes(b"\x00\x01binary blob")
    seq = ingest(raw, tmp_path / "seq")
    par = ingest_flow.with_options(task_runner=dask_runner(n_workers=2))(raw, tmp_path / "dask")
    assert lake_rows(tmp_path / "dask") == lake_rows(tmp_path / "seq")
    assert [(f.rel, f.status, f.rows, f.quarantined) for f in par.files] == [
        (f.rel, f.status, f.rows, f.quarantined) for f in seq.files]
    assert {e.path for e in Lake(tmp_path / "dask").manifest()} == {
        e.path for e in Lake(tmp_path / "seq").manifest()}
    assert not list((tmp_path / "dask" / "_inflight").iterdir())
    again = ingest_flow.with_options(task_runner=dask_runner(n_workers=2))(raw, tmp_path / "dask")
    assert again.rows == {}
    assert again.count("skipped") == seq.count("ingested") + seq.count("skipped")
