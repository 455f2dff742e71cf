"""A batch whose files share parts (``ingest.write``: a part per table and day for the batch)
is one transaction on recovery: killed before its last manifest entry, all of its files are
rolled back, the committed ones too, and a rerun reads them again; killed after, all stay."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import polars as pl
import pytest

from ckptwatch.lake.schema import TABLES
from ckptwatch.lake.store import Lake, atomic_write_bytes

POOL_METRICS = TABLES["pool_metrics"]


@pytest.mark.parametrize("landed", [0, 1, 2], ids=["none", "one", "both"])
def test_a_shared_batch_killed_between_its_manifest_entries_rolls_back_whole(
        tmp_path: Path, landed: int) -> None:
    lake = Lake(tmp_path)
    lake.init()
    keys = ["a" * 64, "b" * 64]
    rows = pl.DataFrame({"ts": [datetime(2026, 11, 28, tzinfo=UTC)] * 2, "pool": ["p"] * 2,
                         "target": ["t0", "t1"], "metric": ["gc_active"] * 2,
                         "value": [1.0, 1.0], "source_file": ["a.csv", "b.csv"],
                         "ingested_ts": [datetime.now(UTC)] * 2})
    [(rel, part)] = lake.plan_parts("c" * 64, POOL_METRICS, rows)
    files = {k: [rel] for k in keys}
    lake.begin_batch("c" * 64, files, shared=True)
    lake.write_parts([(rel, POOL_METRICS, part)])
    for k in keys[:landed]:  # what commit_batch had renamed when the kill came
        atomic_write_bytes(tmp_path / "_manifest" / f"{k}.json", json.dumps(
            {"key": k, "path": f"{k[0]}.csv", "size_bytes": 1, "ingested_ts": "x",
             "rows": {"pool_metrics": 1}, "quarantined": 0, "parts": files[k]}).encode())
    assert lake.recover() == (1 if landed < 2 else 0)
    if landed < 2:  # every file of the batch rolled back: the rerun reads them all again
        assert lake.read("pool_metrics").height == 0
        assert lake.manifest_keys() == set()
    else:
        assert sorted(lake.read("pool_metrics")["target"]) == ["t0", "t1"]
        assert lake.manifest_keys() == set(keys)
    assert not list((tmp_path / "_inflight").iterdir())
    assert lake.recover() == 0
