"""The ingest flow, and the nightly flow on a Dask cluster (prefect-dask): the lake, the files'
outcomes, the counter deltas, the stalls with their causes and evidence, the alerts and the
report's facts are those of a sequential run, and the nightly's ingest, deltas and stalls ran
as tasks on the cluster's workers.

One simulated raw directory, one sequential run of each and one Dask cluster serve every test
of the file (a cluster's two worker processes take ~10 s of CPU to start and import the
package): the cluster is the one ``--dask local`` would start (``dask_runner("local")``'s own
cluster arguments), reached by its address, as ``--dask ADDRESS`` reaches one.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from tests.conftest import lake_rows

import ckptwatch.flows.ingest as ingest_flow_module
from ckptwatch.analysis.findings import find_stalls
from ckptwatch.flows.ingest import dask_runner, ingest_flow
from ckptwatch.flows.nightly import nightly_flow
from ckptwatch.ingest.run import IngestReport, ingest
from ckptwatch.lake.store import Lake
from ckptwatch.simulate.scenario import simulate

pytestmark = pytest.mark.prefect

pytest.importorskip("prefect_dask")

PATHS = ("alerts_file", "report", "report_json", "latest", "steps_s",
         "steps_peak_rss_mb")  # paths, timings, memory (running maxima of the process)


@dataclass(frozen=True)
class Sequential:
    """The raw directory, its sequential ingest (library) and sequential nightly run."""

    raw: Path
    ingest: IngestReport
    ingest_lake: Path
    nightly: dict[str, Any]
    nightly_lake: Path


@pytest.fixture(scope="module")
def sequential(prefect_harness: None, tmp_path_factory: pytest.TempPathFactory) -> Sequential:
    """A simulated cluster with stalls of several causes in every raw format (tool envelopes,
    CSV, JSON Lines), plus a second copy of a file (ingested once, the copy skipped) and a file
    nothing recognises; ingested by the library and run through the nightly flow, both
    sequentially."""
    base = tmp_path_factory.mktemp("dask")
    raw = base / "raw"
    simulate(raw, 5, nodes=4, hours=1.0, fabric_interval_s=60.0)
    first = sorted((raw / "fabric").iterdir())[0]
    shutil.copyfile(first, raw / "fabric" / "zz-copy.jsonl")
    (raw / "notes.bin").write_bytes(b"\x00\x01binary blob")
    report = ingest(raw, base / "lib")
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(ingest_flow_module, "_ingest_parallel", _never)
        # not on Dask: no parallel path; alerts as of the newest checkpoint, not the clock
        seq = nightly_flow(raw, base / "seq", send=False, replay=True)
    return Sequential(raw, report, base / "lib", seq, base / "seq")


def _never(*args: Any) -> Any:
    raise AssertionError("a sequential run took the Dask path")


@pytest.fixture(scope="module")
def cluster_address() -> Iterator[str]:
    """A local Dask cluster as ``dask_runner("local")`` would start it, for the whole file."""
    from distributed import LocalCluster

    local = dask_runner("local")
    assert local.address is None  # "local": the runner starts its own cluster ...
    with LocalCluster(**local.cluster_kwargs) as cluster:  # ... with these arguments
        yield cluster.scheduler_address


def test_dask_ingest_lake_equals_sequential_lake(sequential: Sequential, cluster_address: str,
                                                 tmp_path: Path) -> None:
    seq, lake = sequential.ingest, tmp_path / "dask"
    par = ingest_flow.with_options(task_runner=dask_runner(cluster_address))(sequential.raw,
                                                                               lake)
    assert lake_rows(lake) == lake_rows(sequential.ingest_lake)
    assert [(f.rel, f.status, f.rows, f.quarantined) for f in par.files] == [
        (f.rel, f.status, f.rows, f.quarantined) for f in seq.files]
    assert {e.path for e in Lake(lake).manifest()} == {
        e.path for e in Lake(sequential.ingest_lake).manifest()}
    assert not list((lake / "_inflight").iterdir())
    again = ingest_flow.with_options(task_runner=dask_runner(cluster_address))(sequential.raw,
                                                                                 lake)
    assert again.rows == {}
    assert again.count("skipped") == seq.count("ingested") + seq.count("skipped")


def _scheduler_tasks(address: str) -> dict[str, int]:
    """Tasks the cluster's workers finished so far, by key prefix (the task's function name),
    as the scheduler counts them."""
    from distributed import Client

    def counts(dask_scheduler: Any) -> dict[str, int]:
        return {name: prefix.state_counts["memory"]
                for name, prefix in dask_scheduler.task_prefixes.items()}

    with Client(address) as client:
        return dict(client.run_on_scheduler(counts))


def _derived_rows(lake: Path) -> dict[str, list[dict[str, Any]]]:
    """The derived counter deltas, series and state: each file's rows (sorted), by path."""
    base = lake / "derived"
    return {str(f.relative_to(base)): sorted(pq.read_table(f).to_pylist(), key=repr)
            for table in ("counter_deltas", "counter_series", "counter_state")
            for f in sorted((base / table).rglob("*.parquet"))}


def _report_facts(result: dict[str, Any], lake: Path) -> dict[str, Any]:
    """report.json with the run's own lake path, the time it was written and the ingest's
    elapsed seconds taken out."""
    facts = json.loads(Path(result["report_json"]).read_text().replace(str(lake), "LAKE"))
    del facts["generated_at"]
    del facts["data"]["ingest"]["elapsed_s"]
    return facts


def test_dask_nightly_equals_sequential_nightly(sequential: Sequential, cluster_address: str,
                                                tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    # The ingest subflow takes its Dask path only on a Dask task runner: count its calls.
    on_dask: list[int] = []
    parallel = ingest_flow_module._ingest_parallel

    def spy(*args: Any) -> Any:
        on_dask.append(1)
        return parallel(*args)

    monkeypatch.setattr(ingest_flow_module, "_ingest_parallel", spy)
    seq, lake = sequential.nightly, tmp_path / "dask"
    before = _scheduler_tasks(cluster_address)
    par = nightly_flow(sequential.raw, lake, send=False, replay=True, dask=cluster_address)
    ran = _scheduler_tasks(cluster_address)
    assert on_dask == [1]

    assert lake_rows(lake) == lake_rows(sequential.nightly_lake)
    # the counter deltas: the same files (a part per batch) with the same rows
    assert _derived_rows(lake) == _derived_rows(sequential.nightly_lake)
    stalls = [s.to_dict() for s in find_stalls(sequential.nightly_lake).stalls]
    assert len({s["cause"] for s in stalls}) >= 2
    # ``features`` (the model's inputs) differ in the last bit from one run to the next even on
    # one lake (DuckDB's parallel float sums); everything else is compared exactly.
    found = [s.to_dict() for s in find_stalls(lake).stalls]
    assert [{k: v for k, v in s.items() if k != "features"} for s in found] == [
        {k: v for k, v in s.items() if k != "features"} for s in stalls]
    for mine, theirs in zip(found, stalls, strict=True):
        assert mine["features"] == pytest.approx(theirs["features"], rel=1e-9, nan_ok=True)
    assert {k: v for k, v in par.items() if k not in (*PATHS, "dask")} == {
        k: v for k, v in seq.items() if k not in (*PATHS, "dask")}
    assert par["ingested"] > 0 and par["stalls"] == len(stalls)
    # the nightly's own findings, as the report holds them: every stall (job, step, its ranked
    # causes, whether each is supported, their evidence), the alerts, every other fact
    facts = _report_facts(par, lake)
    assert facts == _report_facts(seq, sequential.nightly_lake)
    assert [(s["job_id"], s["step"], s["cause"]) for s in facts["stalls"]] == [
        (s["job_id"], s["step"], s["cause"]) for s in stalls]
    assert facts["alerts"]["alerts"] and facts["stalls"]

    # The partitions ran as tasks on the cluster: each day's counter-delta batches (one part
    # each), the stalled jobs in groups (at most two per worker, every stalled job once).
    assert seq["dask"] is None
    day = stalls[0]["start_ts"][:10]
    parts = sorted((lake / "derived" / "counter_deltas" / f"date={day}").glob("*.parquet"))
    groups = par["dask"]["stall_groups"]
    assert par["dask"] == {"workers": 2, "delta_days": 1, "delta_batches": len(parts),
                           "stall_groups": groups}
    assert len(parts) >= 3  # fabric, SMART, pool
    assert sorted(j for g in groups for j in g) == sorted({s["job_id"] for s in stalls})
    assert 2 <= len(groups) <= 4
    done = {name: n - before.get(name, 0) for name, n in ran.items()}
    assert done.get("counter_deltas_batch") == len(parts)
    assert done.get("stalls_of_jobs") == len(groups)
    assert done.get("ingest_one", 0) >= par["ingested"]
