"""The attribution model refuses training data it cannot learn from, with a clear error."""

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
    assert set(p) == {"gc", "metadata", "fabric_pause", "unknown"}
    assert p["gc"] + p["metadata"] == pytest.approx(1.0)
