"""The Prefect ingest flow under Prefect's test harness (one per session). (The nightly flow on
the small raw directory: test_local_prefect.py's older-day test, whose first run it is.)"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from tests.conftest import lake_rows

from ckptwatch.errors import MissingExtraError
from ckptwatch.flows.ingest import dask_runner, ingest_flow
from ckptwatch.ingest.run import ingest
from ckptwatch.lake.store import Lake

pytestmark = pytest.mark.prefect


def test_flow_lake_equals_library_lake(prefect_harness: None, bad_raw_dir: Path,
                                       tmp_path: Path) -> None:
    report = ingest_flow(bad_raw_dir, tmp_path / "flow")
    assert report.quarantined == 4
    assert report.rows["checkpoint_writes"] == 6
    ingest(bad_raw_dir, tmp_path / "lib")
    assert lake_rows(tmp_path / "flow") == lake_rows(tmp_path / "lib")
    again = ingest_flow(bad_raw_dir, tmp_path / "flow")
    assert again.rows == {}
    assert Lake(tmp_path / "flow").read("checkpoint_writes").height == 6


def test_dask_without_prefect_dask_says_which_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "prefect_dask", None)  # import fails: not installed
    with pytest.raises(MissingExtraError, match=r"needs prefect-dask.*\[dask\]"):
        dask_runner("local")
