"""Incident effects and the labelled truth: which checkpoints are stalls, and why."""

from __future__ import annotations

import numpy as np

from ckptwatch.simulate.cluster import Effect, Incident, Job
from ckptwatch.simulate.effects import STALL_RATIO, labelled_stalls


def _job(barriers: list[float], effects: list[Effect]) -> Job:
    """A one-rank job whose checkpoints spend ``barriers`` seconds in write (1 s healthy)."""
    k = len(barriers)
    zero = np.zeros((k, 1))
    healthy = (zero, np.ones((k, 1)), zero, zero)
    return Job(
        job_id="job-1", tier="pool", nodes=np.array([0]), encoding="iso",
        rank_node=np.array([0]), rank_drive=np.array([0]), rank_target=np.array([0]),
        nbytes=np.array([1e9]), files=10, interval_s=600.0, step_time_s=1.0,
        steps=np.arange(1, k + 1) * 100, starts=np.arange(k) * 600.0, nominal_s=1.0,
        traffic_bps=1e9, healthy=healthy,
        final=(zero, np.array(barriers)[:, None], zero, zero), gap=zero,
        status=np.zeros((k, 1), dtype=np.int8), effects=effects, b0=np.ones(k),
        baseline_s=1.0, timeout_s=30.0,
    )


def _effect(incident: int, row: int, extra: float) -> Effect:
    z = np.zeros((1, 1))
    return Effect(incident, np.array([row]), z, np.full((1, 1), extra), z, z)


def test_a_slow_checkpoint_is_a_stall_with_its_incidents_ranked() -> None:
    incidents = [
        Incident(id="inc-001", cause="metadata", kind="stall", variant="degraded",
                 job_id="job-1", start=1790.0, end=1810.0),
        Incident(id="inc-002", cause="gc", kind="stall", variant="pool_target",
                 job_id="job-1", start=1790.0, end=1810.0),
    ]
    job = _job([1.0, 1.0, 1.0, 4.0, 1.0], [_effect(0, 3, 0.8), _effect(1, 3, 2.2)])
    stalls = labelled_stalls(job, incidents)
    assert STALL_RATIO == 2.0
    assert [(s["step"], s["causes"], s["incidents"]) for s in stalls] == [
        (400, ["gc", "metadata"], ["inc-002", "inc-001"])]
    assert stalls[0]["ratio"] == 4.0
    assert stalls[0]["timed_out"] is False


def test_a_slow_checkpoint_without_an_incident_is_unplanned() -> None:
    stalls = labelled_stalls(_job([1.0, 1.0, 3.0], []), [])
    assert [(s["step"], s["causes"], s.get("unplanned")) for s in stalls] == [
        (300, ["unknown"], True)]
