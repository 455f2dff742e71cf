"""The ``saturation`` cause: a shared pool at its ceiling over a stall's window, every rank slowed.

The rules judge it on ``stall_saturation`` (the pool's load over the window, the jobs in it);
the pauses a saturated pool's incast raises on every writer rank below it. A simulated burst
day is attributed end to end.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from ckptwatch.analysis.attribution import (
    CEILING_SHARE,
    UNKNOWN,
    attribute_one,
    judgeable,
)

#: The essay's burst: 1,536 ranks of 3 jobs writing 9.4 TB in 31 s onto a 0.4 TB/s pool.
LOAD = {"pool": "pool0", "capacity_bps": 0.4e12, "capacity_source": "configured",
        "n_seconds": 31, "utilisation_p75": 0.99, "utilisation_median": 0.97,
        "saturated_share": 0.9, "demand_bytes": 9.4e12, "peak_demand_bps": 0.41e12,
        "peak_ranks": 1536, "has_measured": True, "n_jobs": 3, "job_share": 0.61,
        "jobs": [{"job_id": "job-a", "bytes": 5.7e12, "share": 0.61},
                 {"job_id": "job-b", "bytes": 3.1e12, "share": 0.33},
                 {"job_id": "job-c", "bytes": 0.6e12, "share": 0.06}]}


def _features(**over: Any) -> dict[str, Any]:
    """A pool stall where every rank was slow in the data path and nothing else stands out."""
    f = {"job_id": "job-a", "fabric_z_slow": 0.0, "fabric_separation": 0.0,
         "fabric_log_contrast": 0.0, "fabric_base_slow": 0.0, "fabric_rate_slow": 0.0,
         "leaf_purity": 0.0, "wa_z_slow": 0.0, "gc_active_slow": 0.0, "wa_separation": 0.0,
         "free_blocks_z_slow": 0.0, "busy_z_slow": 0.0, "target_purity": 0.0,
         "gc_active_contrast": 0.0, "metadata_latency_z": 0.0, "metadata_share": 0.05,
         "has_phases": 1.0, "slow_frac": 1.0, "slow_nodes": [f"n{i}" for i in range(8)],
         "pool_load": LOAD}
    return {**f, **over}


def test_a_pool_at_its_ceiling_that_slows_every_rank_is_saturation() -> None:
    [top, *_] = attribute_one(_features())
    assert top.cause == "saturation" and top.score > 0.9
    assert top.evidence[0] == ("pool pool0 wrote at 97% of its capacity (400.0 GB/s, "
                               "configured) over the stall's window (median of its 31 s; 90% "
                               "of them saturated)")
    assert top.evidence[1] == ("1,536 ranks at once of 3 jobs wrote 9.4 TB in 31 s against "
                               "400.0 GB/s: this job 61%, job-b 33%, job-c 6%")


def test_pauses_on_every_writer_of_a_saturated_pool_are_its_consequence() -> None:
    # The incast: pause frames far out of their noise on every slow rank's node. Without the
    # pool at its ceiling that is a fabric pause; with it, saturation first and the pauses as
    # its consequence, said so on both.
    pauses = {"fabric_z_slow": 900.0, "fabric_separation": 1.0, "fabric_rate_slow": 5e4,
              "fabric_base_slow": 10.0, "fabric_hosts_elevated": [f"n{i}" for i in range(8)]}
    ranked = attribute_one(_features(**pauses))
    assert [v.cause for v in ranked[:2]] == ["saturation", "fabric_pause"]
    assert ranked[0].score > 2 * ranked[1].score
    assert "the incast of the saturated pool, its consequence" in ranked[0].evidence[-1]
    assert "the burst's incast, a consequence ranked below it" in ranked[1].evidence[-1]
    calm = {**LOAD, "utilisation_median": 0.3, "utilisation_p75": 0.35}
    ranked = attribute_one(_features(**pauses, pool_load=calm))
    assert ranked[0].cause == "fabric_pause"
    assert "saturation" not in [v.cause for v in ranked]


@pytest.mark.parametrize(("over", "top"), [
    ({"pool_load": {**LOAD, "utilisation_median": CEILING_SHARE - 0.01}}, UNKNOWN),
    ({"slow_frac": 0.2}, UNKNOWN),  # a few ranks slow: a burst slows every one
    ({"metadata_share": 0.8}, "metadata"),  # the extra time in open/close
    # the pool's metadata latency far out of its noise and open/close time behind it:
    # metadata-specific evidence
    ({"metadata_latency_z": 40.0, "metadata_latency_ms": 50.0, "metadata_latency_base_ms": 0.5,
      "metadata_share": 0.4}, "metadata"),
    # the records alone, against their own busiest seconds: no ceiling known
    ({"pool_load": {**LOAD, "has_measured": False, "capacity_source": "records"}}, UNKNOWN),
    # the pool's write latency up on a few targets, the slow ranks': GC's pattern
    ({"write_latency_n_targets": 8, "write_latency_share_up": 0.25,
      "write_latency_up": ["t1", "t2"], "write_latency_separation": 1.0}, UNKNOWN),
    ({"pool_load": None}, UNKNOWN),  # a node-local stall, or no pool demand in the window
])
def test_what_is_not_saturation(over: dict[str, Any], top: str) -> None:
    ranked = attribute_one(_features(**over))
    assert "saturation" not in [v.cause for v in ranked]
    assert ranked[0].cause == top


def test_a_burst_raising_metadata_latency_a_little_is_still_saturation() -> None:
    # ranks creating their files at once raise the metadata service's latency out of its
    # noise; with no open/close time behind it, that is the burst's
    md = {"metadata_latency_z": 8.0, "metadata_latency_ms": 1.2, "metadata_latency_base_ms": 0.6,
          "metadata_share": 0.02}
    assert attribute_one(_features(**md))[0].cause == "saturation"


def test_saturation_is_judged_where_a_pool_is_written() -> None:
    pool = {"has_fabric": True, "has_smart": True, "has_pool": False, "writes_to_pool": True}
    assert judgeable(pool)["saturation"] is False
    assert judgeable({**pool, "has_pool": True})["saturation"] is True
    # a node-local checkpoint saturates no shared pool: judged, and not it
    assert judgeable({**pool, "writes_to_pool": False})["saturation"] is True


@pytest.fixture(scope="module")
def burst_day(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    from ckptwatch.ingest.run import ingest
    from ckptwatch.simulate.evaluation import family_options
    from ckptwatch.simulate.scenario import simulate

    root = tmp_path_factory.mktemp("burst")
    simulate(root / "raw", 3103, 8, 2.0, **{**family_options("burst", 3103),
                                              "incidents_per_hour": 1.0})
    report = ingest(root / "raw", root / "lake")
    assert report.quarantined == 0
    return root / "raw", root / "lake"


def test_a_simulated_burst_is_attributed_to_saturation(burst_day: tuple[Path, Path]) -> None:
    from ckptwatch.analysis.findings import ATTRIBUTION_VIEWS, attribute_stalls
    from ckptwatch.lake.query import connect

    raw, lake = burst_day
    labels = json.loads((raw / "labels.json").read_text())
    truth = {(s["job_id"], s["step"]): s["causes"][0] for s in labels["stalls"]}
    burst = {k for k, c in truth.items() if c == "saturation"}
    assert len({j for j, _ in burst}) >= 2  # a burst stalls the checkpoints of several jobs
    con = connect(lake, views=ATTRIBUTION_VIEWS)
    try:
        found = {(s.job_id, s.step): s for s in attribute_stalls(con).stalls}
    finally:
        con.close()
    assert burst <= set(found)
    for key in burst:
        top = found[key].to_dict()["causes"][0]
        assert top["cause"] == "saturation", (key, found[key].to_dict()["causes"])
        # the pool's capacity as the lake estimated it (the most it was seen to take): near
        # the simulated pool's bandwidth (the simulator lets two jobs that meet by chance
        # write a little above it)
        cap = float(top["evidence"][0].split("(")[1].split(" GB/s")[0])
        assert cap == pytest.approx(labels["pool"]["bandwidth_gbs"], rel=0.25)
        assert top["evidence"][1].endswith("%") and " jobs wrote " in top["evidence"][1]
    # and nothing else was called saturation
    assert all(s.cause != "saturation" for k, s in found.items() if truth.get(k) != "saturation")
