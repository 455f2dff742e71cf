"""Evidence measured against each series' own noise, on small hand-built cases: a cause needs a
signal that stands out of its noise *and* singles out the slow ranks; each missing telemetry
family degrades to ``unknown`` (or keeps the true cause), never to a wrong one."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from tests.stall_cases import INTERVAL_S, STALL_STEP, Case, build

from ckptwatch.analysis.findings import ATTRIBUTION_VIEWS, attribute_stalls
from ckptwatch.lake.query import connect, run_sql

STALL_T = 60 + STALL_STEP * INTERVAL_S
#: t1's drive writes 1.3x its host bytes to NAND during the stall, SMART every 120 s.
WA_GC = Case(stall="gc", wa_only=1.3, smart_every_s=120)


def _stall(tmp_path: Path, case: Case) -> dict[str, Any]:
    return _only_stall(build(tmp_path / "lake", case))


def _only_stall(lake: Path) -> dict[str, Any]:
    con = connect(lake, views=ATTRIBUTION_VIEWS)  # what find_stalls builds
    [stall] = [s.to_dict() for s in attribute_stalls(con).stalls]
    con.close()
    return stall


@pytest.fixture(scope="module")
def wa_gc_lake(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The lake of ``WA_GC`` (two tests read it)."""
    return build(tmp_path_factory.mktemp("wa-gc") / "lake", WA_GC)


def _supported(stall: dict[str, Any]) -> list[str]:
    return [c["cause"] for c in stall["causes"] if c["supported"]]  # type: ignore[union-attr]


def test_a_weak_write_amplification_rise_far_outside_its_noise_is_gc(wa_gc_lake: Path) -> None:
    # t1's drive writes 1.3x its host bytes to NAND during the stall (1.05 +- 0.004 otherwise),
    # sampled every 120 s: one interval spans the checkpoint. No gc_active, no free-block dip.
    # x1.24 is modest against any fixed ratio; it is ~40 robust sigma outside the series.
    stall = _only_stall(wa_gc_lake)
    assert stall["cause"] == "gc"
    assert stall["features"]["wa_z_slow"] > 20  # type: ignore[index]
    assert stall["features"]["gc_active_slow"] == 0.0  # type: ignore[index]
    text = " | ".join(stall["causes"][0]["evidence"])  # type: ignore[index]
    assert "write amplification on t1: 1.30 vs 1.05 median" in text
    assert "one sample per 120 s" in text


def test_the_same_rise_within_the_series_noise_is_no_gc(tmp_path: Path) -> None:
    # 1.054 is inside the drive's own +-0.004 wobble: nothing stands out.
    stall = _stall(tmp_path, Case(stall="gc", wa_only=1.054, smart_every_s=120))
    assert stall["cause"] == "unknown"
    assert "gc" not in _supported(stall)


def test_a_pause_burst_on_hosts_that_are_not_slow_is_no_fabric_pause(tmp_path: Path) -> None:
    # n2's ranks are the slow ones (unknown cause); n1 receives a pause storm during the
    # checkpoint, but its ranks are as fast as ever: the storm singles out no slow rank.
    stall = _stall(tmp_path, Case(stall="unknown", pause_burst_at_s=STALL_T))
    assert stall["cause"] == "unknown"
    assert "fabric_pause" not in _supported(stall)
    assert stall["features"]["fabric_separation"] <= 0  # type: ignore[index]


def test_a_pause_burst_as_high_on_fast_ranks_hosts_supports_nothing(tmp_path: Path) -> None:
    # gc on t1 slows the even ranks, on both nodes; n2 also has a pause storm. Half the slow
    # and half the fast ranks sit on n2: the storm does not tell them apart.
    stall = _stall(tmp_path, Case(stall="gc", pause_on_n2_at_stall=True))
    assert stall["cause"] == "gc"
    assert "fabric_pause" not in _supported(stall)
    assert stall["features"]["fabric_z_slow"] > 1000  # type: ignore[index]
    assert stall["features"]["fabric_separation"] == 0.0  # type: ignore[index]


@pytest.mark.parametrize(("cause", "omit", "expected"), [
    ("gc", ("ocp",), "gc"),  # gc_active still says it
    ("gc", ("pool",), "gc"),  # write amplification still says it
    ("gc", ("ocp", "pool"), "unknown"),  # nothing left that could
    ("metadata", ("pool",), "metadata"),  # open/close time on every rank
    ("metadata", ("pool", "phases"), "unknown"),
    ("fabric_pause", ("topology",), "fabric_pause"),  # per node, without the leaf
    ("fabric_pause", ("fabric",), "unknown"),
])
def test_a_missing_telemetry_family_gives_unknown_never_a_wrong_cause(
        tmp_path: Path, cause: str, omit: tuple[str, ...], expected: str) -> None:
    stall = _stall(tmp_path, Case(stall=cause, omit=omit))
    assert stall["cause"] == expected
    assert set(_supported(stall)) <= {cause, "unknown"}


def test_noise_is_each_series_own_median_and_mad(wa_gc_lake: Path) -> None:
    con = connect(wa_gc_lake, views=("int_signal_noise",))
    rows = run_sql(con, """
        select host, signal, median_level, mad_level, median_interval_s
        from int_signal_noise where signal in ('write_amplification', 'pause')
        order by host, signal
    """).rows(named=True)
    by = {(r["host"], r["signal"]): r for r in rows}
    assert by[("n1", "pause")]["median_level"] == pytest.approx(2.0)
    assert by[("n1", "pause")]["mad_level"] == pytest.approx(0.0)
    wa = by[("t1", "write_amplification")]
    assert wa["median_level"] == pytest.approx(1.05, abs=0.002)
    assert 0.0 < wa["mad_level"] < 0.005
    assert wa["median_interval_s"] == 120.0
    assert ("t3", "write_amplification") not in by  # t3 is never written to: no ratio
