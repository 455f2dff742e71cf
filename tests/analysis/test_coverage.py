"""Coverage before causes: which telemetry reached a stall's slow ranks (``stall_coverage``),
``no_telemetry`` when no feed did, ``unknown`` only when telemetry was there and nothing stood
out; coverage judged on the window widened by a tolerance, never on equal timestamps."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest
from tests.stall_cases import Case, build

from ckptwatch.analysis.attribution import NO_TELEMETRY, UNKNOWN, attribute_one
from ckptwatch.analysis.findings import ATTRIBUTION_VIEWS, attribute_stalls, find_stalls
from ckptwatch.lake.query import connect, run_sql

SAMPLE = Path(__file__).resolve().parents[2] / "data" / "sample"
#: Every feed and inventory family left out: checkpoint records (no phases) and jobs only.
NOTHING = ("topology", "pool", "fabric", "smart", "phases")


def _only_stall(lake: Path) -> dict[str, Any]:
    con = connect(lake, views=ATTRIBUTION_VIEWS)  # what find_stalls builds
    try:
        [stall] = [s.to_dict() for s in attribute_stalls(con).stalls]
    finally:
        con.close()
    return stall


def _coverage(lake: Path) -> dict[str, Any]:
    con = connect(lake, views=("stall_coverage",))
    try:
        [row] = run_sql(con, "select * from stall_coverage").to_dicts()
    finally:
        con.close()
    return row


def test_a_stall_with_no_telemetry_is_no_telemetry_not_a_certain_unknown(tmp_path: Path) -> None:
    stall = _only_stall(build(tmp_path / "lake", Case(stall="gc", omit=NOTHING)))
    assert stall["cause"] == NO_TELEMETRY
    assert stall["causes"][0]["score"] == 0.0
    assert stall["telemetry"] == []
    assert stall["missing_telemetry"] == ["fabric", "smart", "pool", "topology", "phases"]
    text = " | ".join(stall["causes"][0]["evidence"])
    assert "no fabric, SMART or pool telemetry reached the slow ranks' hosts" in text
    assert "no cause can be judged" in text
    assert "fabric_pause cannot be judged" in text
    assert "gc cannot be judged" in text
    assert "metadata cannot be judged" in text


def test_phases_alone_judge_metadata_only(tmp_path: Path) -> None:
    # The records carry phases; no feed: a data-side stall (gc on t1) is no_telemetry, and
    # says that only metadata could be judged; a metadata stall is still seen in the phases.
    omit = ("topology", "pool", "fabric", "smart")
    gc = _only_stall(build(tmp_path / "gc", Case(stall="gc", omit=omit)))
    assert gc["cause"] == NO_TELEMETRY
    assert gc["telemetry"] == ["phases"]
    assert "only metadata could be judged" in gc["causes"][0]["evidence"][0]
    # A metadata stall shows in the phases, but nothing confirms it: no_telemetry first, the
    # phases' metadata ranked below it and named in its evidence.
    md = _only_stall(build(tmp_path / "md", Case(stall="metadata", omit=omit)))
    assert md["cause"] == NO_TELEMETRY
    assert [c["cause"] for c in md["causes"]][:2] == [NO_TELEMETRY, "metadata"]
    assert md["causes"][1]["score"] >= 0.2
    text = " | ".join(md["causes"][0]["evidence"])
    assert "the records' phases point to metadata" in text
    assert "gc cannot be judged" in text


def test_fabric_telemetry_alone_judges_as_the_data_says(tmp_path: Path) -> None:
    omit = ("topology", "pool", "smart", "phases")
    fab = _only_stall(build(tmp_path / "fab", Case(stall="fabric_pause", omit=omit)))
    assert fab["cause"] == "fabric_pause"
    assert fab["telemetry"] == ["fabric"]
    # gc on t1: the fabric is quiet; fabric_pause was judged and nothing stood out.
    gc = _only_stall(build(tmp_path / "gc", Case(stall="gc", omit=omit)))
    assert gc["cause"] == UNKNOWN
    top = gc["causes"][0]
    assert 0.0 < top["score"] < 1.0  # one of the three causes judged: no certainty
    text = " | ".join(top["evidence"])
    assert "no SMART or pool GC telemetry reached the slow ranks' targets (t1): gc cannot be " \
           "judged" in text
    assert "fabric_pause cannot" not in text


def test_fabric_missing_names_the_leaf_whose_nodes_sent_nothing(tmp_path: Path) -> None:
    # Pool telemetry there, topology there, no fabric: the evidence names leaf01's nodes.
    stall = _only_stall(build(tmp_path / "lake", Case(stall="unknown", omit=("fabric",))))
    assert stall["cause"] == UNKNOWN
    assert stall["coverage"]["fabric_missing_leaves"] == ["leaf01"]
    assert "no fabric counters (pause / PortXmitWait) reached leaf01's nodes (n2): " \
           "fabric_pause cannot be judged" in stall["causes"][0]["evidence"]


def test_full_telemetry_covers_every_family(tmp_path: Path) -> None:
    row = _coverage(build(tmp_path / "lake", Case(stall="gc")))
    assert row["telemetry"] == ["fabric", "smart", "pool", "topology", "phases"]
    assert row["missing"] == []
    # gc on t1 slows the even ranks, on both nodes; their target is t1.
    assert (row["n_nodes"], row["n_fabric_nodes"], row["n_targets"]) == (2, 2, 1)
    assert row["has_pool_gc"] and row["has_pool_metadata"] and row["has_smart"]


@pytest.mark.parametrize("offsets", [
    {"fabric_counters": 7.0},
    {"fabric_counters": -11.0, "pool_metrics": 4.0},
    {"nvme_smart": 23.0, "pool_metrics": -3.5, "fabric_counters": 1.25},
    {"nvme_smart": -45.0},
])
def test_coverage_does_not_need_tools_clocks_to_line_up(tmp_path: Path,
                                                        offsets: dict[str, float]) -> None:
    # Each tool on its own clock, seconds apart from the checkpoint records: the same families
    # reach the stall.
    row = _coverage(build(tmp_path / "lake", Case(stall="gc", clock_offset_s=offsets)))
    assert row["telemetry"] == ["fabric", "smart", "pool", "topology", "phases"]


def test_a_feed_far_from_the_window_does_not_cover_it(tmp_path: Path) -> None:
    # The fabric tool's samples all land a day later: nothing of it is near the stall.
    row = _coverage(build(tmp_path / "lake", Case(stall="gc",
                                                  clock_offset_s={"fabric_counters": 86400.0})))
    assert "fabric" in row["missing"]
    assert row["fabric_missing_nodes"] == ["n1", "n2"]


def test_the_sample_with_checkpoints_and_jobs_only_is_no_telemetry(tmp_path: Path) -> None:
    if not (SAMPLE / "checkpoints").is_dir():
        pytest.skip("data/sample has no checkpoints")
    from ckptwatch.ingest.run import ingest

    raw = tmp_path / "raw"
    for part in ("checkpoints", "jobs"):
        shutil.copytree(SAMPLE / part, raw / part)
    ingest(raw, tmp_path / "lake")
    found = find_stalls(tmp_path / "lake")
    assert found.stalls
    for s in found.stalls:
        assert s.telemetry == ("phases",)  # the records' phases, nothing else
        assert s.cause == NO_TELEMETRY, s.cause
        assert s.top.score == 0.0
    assert found.by_cause() == {NO_TELEMETRY: len(found.stalls)}


def test_without_coverage_rows_the_rules_judge_as_before() -> None:
    # A feature row without ``coverage`` (built by hand, or by an older caller): no verdict
    # about telemetry, every cause judged.
    f = {"fabric_z_slow": 0.0, "fabric_separation": 0.0, "fabric_log_contrast": 0.0,
         "fabric_base_slow": 0.0, "fabric_rate_slow": 0.0, "leaf_purity": 0.0,
         "wa_z_slow": 0.0, "gc_active_slow": 0.0, "wa_separation": 0.0,
         "free_blocks_z_slow": 0.0, "busy_z_slow": 0.0, "target_purity": 0.0,
         "gc_active_contrast": 0.0, "metadata_latency_z": 0.0, "metadata_share": 0.5,
         "has_phases": 1.0, "slow_frac": 0.5, "slow_nodes": ["n1"]}
    [top] = attribute_one(f)
    assert (top.cause, top.score) == (UNKNOWN, 1.0)
    [top] = attribute_one({**f, "coverage": {"has_fabric": False, "has_smart": False,
                                             "has_pool": False, "telemetry": [],
                                             "missing": ["fabric"]}})
    assert top.cause == NO_TELEMETRY


def test_a_model_never_turns_no_telemetry_into_a_cause(tmp_path: Path) -> None:
    import polars as pl

    from ckptwatch.analysis.attribution import FEATURES, AttributionModel, attribute
    from ckptwatch.analysis.stalls import stall_features

    con = connect(build(tmp_path / "lake", Case(stall="gc", omit=NOTHING)),
                  views=ATTRIBUTION_VIEWS)
    try:
        features = stall_features(con)
    finally:
        con.close()
    model = AttributionModel.train(pl.DataFrame({f: [float(i % 3) for i in range(6)]
                                                 for f in FEATURES}),
                                   ["gc", "metadata", "fabric_pause"] * 2)
    [ranked] = attribute(features, model)
    assert ranked[0].cause == NO_TELEMETRY and ranked[0].score == 0.0
    assert set(model.probabilities(features)[0]) == {"gc", "metadata", "fabric_pause",
                                                     "saturation", "unknown"}


def test_evaluate_counts_no_telemetry_in_its_own_row_and_column() -> None:
    from ckptwatch.simulate.evaluation import EvalReport

    report = EvalReport(seeds=[1], truth=["gc", "gc", "fabric_pause", "metadata"],
                        predicted=["gc", NO_TELEMETRY, NO_TELEMETRY, "gc"],
                        scores=[0.9, 0.0, 0.0, 0.4], families=["checkpoints_only"] * 4,
                        detection_by_family={"checkpoints_only": [4, 0, 0]})
    confusion = {r["true \\ predicted"]: r for r in report.confusion().to_dicts()}
    assert confusion["gc"][NO_TELEMETRY] == 1 and confusion["fabric_pause"][NO_TELEMETRY] == 1
    assert confusion[NO_TELEMETRY]["gc"] == 0  # a row for it: no stall is truly no_telemetry
    [fam] = report.per_family().to_dicts()
    assert fam["no_telemetry"] == pytest.approx(0.5)
    assert fam["wrong_cause"] == pytest.approx(0.25)  # metadata -> gc; no_telemetry is no cause
    assert NO_TELEMETRY in [r["cause"] for r in report.per_cause().to_dicts()]


def test_an_evaluation_with_no_attributed_stall_reports_zeros() -> None:
    from ckptwatch.simulate.evaluation import EvalReport

    out = EvalReport(seeds=[1], detection_by_family={"no_pool": [0, 0, 0]}).to_dict()
    assert out["attribution"]["macro_f1"] == 0.0
    assert all(row[NO_TELEMETRY] == 0 for row in out["attribution"]["confusion"])


def test_the_postmortem_headline_names_the_missing_telemetry(tmp_path: Path) -> None:
    from ckptwatch.report import postmortem

    lake = build(tmp_path / "lake", Case(stall="gc", omit=("topology", "pool", "smart")))
    case = postmortem.open_stall(lake, "j")
    try:
        text = postmortem.headline(case)
    finally:
        case.con.close()
    assert "top cause: **unknown**" in text
    assert "- telemetry that reached the slow ranks: fabric, phases; missing: smart, pool, " \
           "topology" in text
