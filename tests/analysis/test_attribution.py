"""The attribution model refuses training data it cannot learn from, with a clear error; the
evaluation's reliability table and per-family figures count what they say."""

from __future__ import annotations

import polars as pl
import pytest

from ckptwatch.analysis.attribution import FEATURES, AttributionModel
from ckptwatch.errors import ModelError


def _features(n: int) -> pl.DataFrame:
    return pl.DataFrame({f: [float(i) for i in range(n)] for f in FEATURES})


def test_training_on_one_cause_is_a_model_error() -> None:
    with pytest.raises(ModelError, match=r"3 labelled stall\(s\), of one cause \(gc\): a model "
                       r"needs stalls of at least two causes"):
        AttributionModel.train(_features(3), ["gc", "gc", "gc"])


def test_training_on_two_causes_gives_probabilities_of_every_label() -> None:
    model = AttributionModel.train(_features(4), ["gc", "metadata", "gc", "metadata"])
    [p] = model.probabilities(_features(1))
    assert set(p) == {"gc", "metadata", "fabric_pause", "saturation", "unknown"}
    assert p["gc"] + p["metadata"] == pytest.approx(1.0)


def test_calibration_maps_scores_to_how_often_they_were_right() -> None:
    from ckptwatch.simulate.evaluation import EvalReport

    report = EvalReport(seeds=[1], truth=["gc", "gc", "gc", "unknown", "metadata"],
                        predicted=["gc", "gc", "fabric_pause", "unknown", "gc"],
                        scores=[0.95, 0.9, 0.5, 0.85, 0.3], families=["base"] * 5,
                        detection_by_family={"base": [5, 0, 0]})
    rel = {r["score_bin"]: r for r in report.reliability().to_dicts()}
    assert (rel["0.8-1.0"]["n"], rel["0.8-1.0"]["accuracy"]) == (3, 1.0)
    assert (rel["0.4-0.6"]["n"], rel["0.4-0.6"]["accuracy"]) == (1, 0.0)
    assert rel["0.0-0.2"]["n"] == 0 and rel["0.0-0.2"]["accuracy"] is None
    [fam] = report.per_family().to_dicts()
    assert fam["accuracy"] == pytest.approx(0.6) and fam["wrong_cause"] == pytest.approx(0.4)


def test_a_model_with_too_few_stalls_of_a_cause_stays_uncalibrated() -> None:
    model = AttributionModel.train(_features(3), ["gc", "metadata", "gc"])
    model.fit_calibration(_features(3), ["gc", "metadata", "gc"])
    assert model.calibration is None and model.calibrate(0.42) == 0.42
