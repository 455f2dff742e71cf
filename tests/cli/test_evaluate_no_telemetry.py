"""`ckptwatch evaluate` on day one's case (checkpoint records and jobs, no telemetry feed):
the stalls are counted as no_telemetry, in its own confusion column and per family."""

from __future__ import annotations

import json

import pytest

from ckptwatch.cli.main import main


def test_evaluate_counts_no_telemetry_on_a_checkpoints_only_scenario(
        capsys: pytest.CaptureFixture[str]) -> None:
    rc = main(["evaluate", "--seeds", "2000", "--families", "checkpoints_only", "--nodes", "8",
               "--hours", "2", "--rules-only", "--quiet", "--format", "json"])
    assert rc == 0
    out = json.loads(capsys.readouterr().out)
    confusion = out["attribution"]["confusion"]
    assert all("no_telemetry" in row for row in confusion)
    n_no_telemetry = sum(row["no_telemetry"] for row in confusion)
    [fam] = out["per_family"]
    assert fam["family"] == "checkpoints_only" and fam["stalls"] > 0
    assert n_no_telemetry > 0 and fam["no_telemetry"] > 0
    assert fam["wrong_cause"] == 0.0 and fam["unknown"] == 0.0  # never a certain unknown
