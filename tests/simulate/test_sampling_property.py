"""Property: a stall's top cause does not hang on when the tools happened to sample, nor on a
host's clock (issue 43, item 4).

One small simulated day is attributed as it is, then again with one tool's sample instants all
moved by up to half its interval (its values read at the moved instants: the same day sampled
at another phase; ``SimulationConfig.sample_shift``), or with one host's clock off by up to 2 s
(``host_clock``: the values of the true instants, stamped off). No stall may change its top
cause. Hypothesis draws the case and its size; every case's extreme is always tried.

Write amplification pairs the OCP log with the health log on common instants
(int_signal_write_amplification): an equal-timestamp pairing fails this on the OCP log moved
apart from the health log (the three node-local GC stalls become ``unknown``).
"""

from __future__ import annotations

import json
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, example, given, settings
from hypothesis import strategies as st

from ckptwatch.analysis.attribution import UNKNOWN, attribute
from ckptwatch.simulate.config import SHIFTABLE_TOOLS
from ckptwatch.simulate.evaluation import run_scenario

SEED = 23
#: A 4-node, 2-hour day; SMART every 5 minutes (24 samples a drive: enough for each series'
#: own noise); eight stalls of every cause, three of them GC on node-local drives (whose only
#: GC signal is write amplification: the OCP log's media bytes over the health log's host bytes).
DAY: dict[str, Any] = {"nodes": 4, "hours": 2.0, "smart_interval_s": 300.0,
                       "incidents_per_hour": 3.0}
#: Each tool's sample interval in DAY, s (SMART: each drive draws 0.67-1.33x it). ``smart``
#: moves a drive's health and OCP logs together, ``ocp`` the OCP log alone (apart from the
#: health log it is divided by).
INTERVALS = {"smart": 300.0, "ocp": 300.0, "fabric": 90.0, "pool": 30.0}
assert set(INTERVALS) == set(SHIFTABLE_TOOLS)
#: What one example perturbs: a tool's sample instants, or a host's clock.
CASES = (*SHIFTABLE_TOOLS, "host")
#: A host's clock error, s, at frac = ±1.
SKEW_S = 2.0

#: Each example is a whole simulate -> ingest -> attribute run (~5 s of CPU): the extremes of
#: every case, and one drawn at random (a new one each run; a failure prints it); no shrinking.
FEW = settings(max_examples=1, deadline=None, database=None,
               phases=[Phase.explicit, Phase.generate],
               suppress_health_check=[HealthCheck.too_slow])


@dataclass(frozen=True)
class Day:
    verdicts: dict[tuple[str, int], str]
    truth: dict[tuple[str, int], list[str]]
    hosts: tuple[str, ...]


def _verdicts(**opts: Any) -> tuple[dict[tuple[str, int], str], dict[str, Any]]:
    """Top cause per detected stall, and the labels, of the day with ``opts``."""
    with tempfile.TemporaryDirectory(prefix="ckptwatch-prop-") as tmp:
        res = run_scenario(SEED, Path(tmp), **{**DAY, **opts})
        labels = json.loads((Path(tmp) / f"raw-{SEED}" / "labels.json").read_text())
    top = {(job, int(step)): (vs[0].cause if vs else UNKNOWN)
           for job, step, vs in zip(res.features["job_id"], res.features["step"],
                                    attribute(res.features), strict=True)}
    return top, labels


@pytest.fixture(scope="module")
def day() -> Day:
    verdicts, labels = _verdicts()
    truth = {(s["job_id"], int(s["step"])): list(s["causes"]) for s in labels["stalls"]}
    hosts = tuple(n for j in labels["jobs"] for n in j["nodes"]) + tuple(
        labels["pool"]["targets"])
    return Day(verdicts, truth, hosts)


def test_the_day_has_stalls_of_every_cause_attributed_right(day: Day) -> None:
    assert set(day.verdicts) == set(day.truth)
    assert {c[0] for c in day.truth.values()} == {"gc", "fabric_pause", "metadata", UNKNOWN}
    assert {k: c[0] for k, c in day.truth.items()} == day.verdicts


@FEW
@example(case="smart", frac=1.0, which=0)
@example(case="ocp", frac=-1.0, which=0)
@example(case="fabric", frac=-1.0, which=0)
@example(case="pool", frac=1.0, which=0)
@example(case="host", frac=1.0, which=0)  # a compute node (the draws reach the targets too)
@given(case=st.sampled_from(CASES), frac=st.floats(-1.0, 1.0), which=st.integers(-6, 5))
def test_sampling_phase_or_a_hosts_clock_changes_no_top_cause(day: Day, case: str, frac: float,
                                                              which: int) -> None:
    """``frac`` ±1: a tool's instants moved by half its interval, or ``which`` host's clock
    off by ``SKEW_S``."""
    if case == "host":
        host, offset = day.hosts[which % len(day.hosts)], round(frac * SKEW_S, 2)
        what, opts = f"{host}'s clock off by {offset:+} s", {"host_clock": ((host, offset),)}
    else:
        shift = round(frac * INTERVALS[case] / 2, 1)
        what, opts = f"{case} sampled {shift:+} s later", {"sample_shift": ((case, shift),)}
    verdicts, _ = _verdicts(**opts)
    changed = {k: (v, verdicts.get(k)) for k, v in day.verdicts.items() if verdicts.get(k) != v}
    assert not changed, f"{what}: (before, after) top cause {changed}"
