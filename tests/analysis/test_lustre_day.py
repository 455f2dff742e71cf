"""A simulated Lustre-format day (``--pool-format lustre``) through the nightly's ingest and
stalls steps (``flows.run``: ``ingest_raw`` and ``detect_stalls``, without Prefect): its
metadata stall is named with the MDT's latency as evidence (the metadata lives on the
metadata service, apart from the OSTs), and its GC stall on an OST, which Lustre cannot show
(no background-work counter, no SMART behind the OSTs), falls back to ``unknown`` saying why,
never to a cause.

The day: seed 10, 4 nodes, 2 h: one metadata stall and one GC stall on a pool target
(``labels.json``), the MDS's statistics cleared mid-day."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from ckptwatch.analysis.attribution import NO_TELEMETRY, UNKNOWN
from ckptwatch.analysis.findings import ATTRIBUTION_VIEWS, StallFindings, StallRecord
from ckptwatch.flows.run import detect_stalls, ingest_raw
from ckptwatch.lake.query import connect
from ckptwatch.settings import IngestSettings
from ckptwatch.simulate.evaluation import pool_gc_stalls
from ckptwatch.simulate.scenario import simulate

SEED = 10
DAY = {"nodes": 4, "hours": 2.0}


@pytest.fixture(scope="module")
def lustre_day(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[dict[str, Any],
                                                                            StallFindings]]:
    """The day's labels and the stalls step's findings."""
    mp = pytest.MonkeyPatch()
    mp.setenv("CKPTWATCH_MODEL", "/nonexistent/attribution.joblib")  # the rules alone
    root = tmp_path_factory.mktemp("lustre-day")
    simulate(root / "raw", SEED, pool_format="lustre", **DAY)  # type: ignore[arg-type]
    report = ingest_raw(root / "raw", root / "lake", 60.0, IngestSettings())
    assert report.quarantined == 0
    con = connect(root / "lake", views=ATTRIBUTION_VIEWS)
    try:
        findings = detect_stalls(root / "lake", con)
    finally:
        con.close()
        mp.undo()
    yield json.loads((root / "raw" / "labels.json").read_text()), findings


def _stall(findings: StallFindings, key: tuple[str, int]) -> StallRecord:
    [stall] = [s for s in findings.stalls if (s.job_id, s.step) == key]
    return stall


def test_the_metadata_stall_is_named_with_the_mdts_latency(
        lustre_day: tuple[dict[str, Any], StallFindings]) -> None:
    labels, findings = lustre_day
    [key] = [(s["job_id"], s["step"]) for s in labels["stalls"] if s["causes"] == ["metadata"]]
    top = _stall(findings, key).causes[0]
    assert top.cause == "metadata" and top.supported
    mdt = labels["pool"]["metadata"]["target"]
    assert mdt == "pool0-MDT0000"
    assert top.evidence[0].startswith(
        f"pool metadata latency on {mdt} (the pool's metadata service) ")
    assert "sigma above its own noise" in top.evidence[0]


def test_the_gc_stall_on_an_ost_falls_back_honestly(
        lustre_day: tuple[dict[str, Any], StallFindings]) -> None:
    labels, findings = lustre_day
    [key] = sorted(pool_gc_stalls(labels))
    stall = _stall(findings, key)
    assert stall.causes[0].cause in (UNKNOWN, NO_TELEMETRY)
    assert not [c for c in stall.causes if c.supported and c.cause in ("gc", "metadata",
                                                                        "fabric_pause")]
    [gc] = [i for i in labels["incidents"] if i["cause"] == "gc" and i["scope"]["targets"]
            and {"job_id": key[0], "step": key[1]} in i["stalled"]]
    text = " ".join(stall.causes[0].evidence)
    assert (f"no SMART or pool GC telemetry reached the slow ranks' targets "
            f"({', '.join(gc['scope']['targets'])}): gc cannot be judged") in text
    assert stall.coverage is not None and not stall.coverage["has_pool_gc"]
    assert stall.coverage["has_pool_metadata"]  # the MDT reached it: metadata was judged
