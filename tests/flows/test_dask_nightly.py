"""The nightly flow with its ingest on a local Dask cluster (prefect-dask) writes the lake and
finds the stalls a sequential nightly run does."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from tests.conftest import lake_rows

import ckptwatch.flows.ingest as ingest_flow_module
from ckptwatch.analysis.findings import find_stalls
from ckptwatch.flows.nightly import nightly_flow
from ckptwatch.simulate.scenario import simulate

pytestmark = pytest.mark.prefect

pytest.importorskip("prefect_dask")

PATHS = ("alerts_file", "report", "report_json", "latest", "steps_s")  # paths, timings


def test_dask_nightly_lake_and_stalls_equal_sequential(prefect_harness: None, tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    # A simulated cluster with stalls of several causes, in every raw format.
    raw = tmp_path / "raw"
    simulate(raw, 5, nodes=4, hours=1.0, fabric_interval_s=60.0)
    # The ingest subflow takes its Dask path only on a Dask task runner: count its calls.
    on_dask: list[int] = []
    parallel = ingest_flow_module._ingest_parallel

    def spy(*args: Any) -> Any:
        on_dask.append(1)
        return parallel(*args)

    monkeypatch.setattr(ingest_flow_module, "_ingest_parallel", spy)
    seq = nightly_flow(raw, tmp_path / "seq", send=False)
    assert not on_dask
    par = nightly_flow(raw, tmp_path / "dask", send=False, dask="local")
    assert on_dask == [1]

    assert lake_rows(tmp_path / "dask") == lake_rows(tmp_path / "seq")
    stalls = [s.to_dict() for s in find_stalls(tmp_path / "seq").stalls]
    assert len({s["cause"] for s in stalls}) >= 2
    # ``features`` (the model's inputs) differ in the last bit from one run to the next even on
    # one lake (DuckDB's parallel float sums); everything else is compared exactly.
    found = [s.to_dict() for s in find_stalls(tmp_path / "dask").stalls]
    assert [{k: v for k, v in s.items() if k != "features"} for s in found] == [
        {k: v for k, v in s.items() if k != "features"} for s in stalls]
    for mine, theirs in zip(found, stalls, strict=True):
        assert mine["features"] == pytest.approx(theirs["features"], rel=1e-9, nan_ok=True)
    assert {k: v for k, v in par.items() if k not in PATHS} == {
        k: v for k, v in seq.items() if k not in PATHS}
    assert par["ingested"] > 0 and par["stalls"] == len(stalls)
