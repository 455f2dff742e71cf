"""The alert state file: fingerprints, the round trip, and a corrupt file."""

from __future__ import annotations

from pathlib import Path

import pytest
from tests.alerts.alert_cases import JOBS, T0, checkpoints

from ckptwatch.alerts.evaluate import evaluate
from ckptwatch.alerts.state import fingerprint, load_state, save_state, state_path
from ckptwatch.errors import LakeError
from ckptwatch.settings import AlertSettings


def test_fingerprint_depends_on_the_labels_not_their_order() -> None:
    labels = {"alertname": "a", "job_id": "j1", "tier": "pool", "severity": "warning"}
    assert fingerprint(labels) == fingerprint(dict(reversed(labels.items())))
    assert fingerprint(labels) != fingerprint({**labels, "severity": "critical"})
    assert len(fingerprint(labels)) == 16


def test_state_round_trip_and_corrupt_state(alert_lake: Path) -> None:
    ev = evaluate(checkpoints([100.0] * 3), JOBS, AlertSettings(), now=T0)
    save_state(alert_lake, ev.state)
    assert load_state(alert_lake).to_json() == ev.state.to_json()
    state_path(alert_lake).write_text("{not json")
    with pytest.raises(LakeError, match=r"corrupt alert state .*_state/alerts.json: .*move it "
                       r"aside to start afresh \(alerts still firing will be sent again\)"):
        load_state(alert_lake)
