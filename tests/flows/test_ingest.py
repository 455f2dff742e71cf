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


def test_a_deriving_ingest_leaves_the_nightly_nothing_to_derive(prefect_harness: None,
                                                                  raw_dir: Path,
                                                                  tmp_path: Path) -> None:
    """``derive=True`` (the ingest-on-demand deployment): the stale days' counter deltas and
    signal statistics are stored by the ingest run, so the nightly's deltas step has none."""
    from ckptwatch.lake import derived, freshness, signalstats

    lake = tmp_path / "lake"
    plain = ingest_flow(raw_dir, lake)
    assert not any("derived:" in n for n in plain.notes)
    assert not freshness.is_fresh(lake)  # a plain ingest leaves the deltas to the nightly
    report = ingest_flow(raw_dir, lake, derive=True)
    assert "derived: counter deltas of 1 day(s), signal statistics of 1 day(s) stored" in \
        report.notes
    (day,) = freshness.raw_days(Lake(lake))
    assert freshness.is_fresh(lake) and signalstats.is_stored(Lake(lake), day)
    assert derived.refresh(lake) == derived.Refresh((), (day,), ())  # nothing left to do
    again = ingest_flow(raw_dir, lake, derive=True)
    assert "derived: counter deltas of 0 day(s), signal statistics of 0 day(s) stored" in \
        again.notes
