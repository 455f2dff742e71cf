"""GC evidence as clusters sample it (issue 43): write amplification from two SMART tools run at
their own moments and cadences, and controller busy time, which counts only where it singles out
the slow ranks' drives. Small literal lakes (``tests.stall_cases``), node-local drives: GC on
n1's drive slows n1's ranks; n2's drive is written to as much."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tests.stall_cases import Case, build

from ckptwatch.analysis.attribution import SEPARATION_SUPPORT
from ckptwatch.analysis.findings import ATTRIBUTION_VIEWS, attribute_stalls
from ckptwatch.analysis.stalls import Z_ELEVATED, _standing_out, stall_features
from ckptwatch.lake.query import connect


def _features(lake: Path) -> dict[str, Any]:
    """The one stall's feature row, context included."""
    con = connect(lake, views=ATTRIBUTION_VIEWS)
    try:
        [row] = stall_features(con).to_dicts()
    finally:
        con.close()
    return row


def _stall(lake: Path) -> dict[str, Any]:
    con = connect(lake, views=ATTRIBUTION_VIEWS)
    try:
        [stall] = [s.to_dict() for s in attribute_stalls(con).stalls]
    finally:
        con.close()
    return stall


def _supported(stall: dict[str, Any]) -> list[str]:
    return [c["cause"] for c in stall["causes"] if c["supported"]]


def test_a_local_drive_gc_with_the_ocp_log_seconds_after_smartctl_and_denser_is_gc(
        tmp_path: Path) -> None:
    # smartctl every 300 s, the OCP log every 30 s from 1.2 s after it: no equal timestamp.
    # An equal-timestamp pairing finds no interval here: no noise, wa_z 0, separation 0.
    stall = _stall(build(tmp_path / "lake", Case(stall="gc", local=True, busy=True,
                                                 smart_every_s=300, ocp_every_s=30,
                                                 ocp_offset_s=1.2)))
    assert stall["cause"] == "gc"
    f = stall["features"]
    assert f["node_purity"] == 1.0
    assert f["wa_z_slow"] >= Z_ELEVATED and f["wa_separation"] == 1.0
    text = " | ".join(stall["causes"][0]["evidence"])
    assert "write amplification on n1:" in text and "one sample per 300 s" in text


def test_a_local_write_amplification_rise_with_smartctl_ten_times_denser_is_gc(
        tmp_path: Path) -> None:
    # Only what the drive writes to NAND shows it (2x for two minutes, no busy time): smartctl
    # every 60 s, the OCP log every 600 s from 7.5 s later. The 10-minute interval holds the
    # rise diluted to a fifth (1.05 -> ~1.24), still far out of the drive's noise and above n2.
    f = _features(build(tmp_path / "lake", Case(stall="gc", local=True, wa_only=2.0,
                                                smart_every_s=60, ocp_every_s=600,
                                                ocp_offset_s=7.5)))
    assert f["wa_z_slow"] >= Z_ELEVATED and f["wa_separation"] >= SEPARATION_SUPPORT
    assert f["wa_detail"]["interval_s"] == 600.0  # the sparser tool's intervals


@pytest.fixture(scope="module")
def busy_gc_lake(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """GC on n1's drive seen by busy time alone: no OCP log, no pool; SMART every 300 s."""
    return build(tmp_path_factory.mktemp("busy-gc") / "lake",
                 Case(stall="gc", local=True, busy=True, smart_every_s=300, omit=("ocp",)))


@pytest.fixture(scope="module")
def busy_everywhere_lake(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """n2's ranks slow for no drive reason, every drive busy during the stall."""
    return build(tmp_path_factory.mktemp("busy-all") / "lake",
                 Case(stall="unknown", local=True, busy=True, busy_everywhere_at_stall=True,
                      smart_every_s=300, ocp_offset_s=1.2))


def test_busy_time_on_the_slow_ranks_drive_only_is_gc_evidence(busy_gc_lake: Path) -> None:
    # No OCP log (no write amplification), no pool: the controller busy time of n1's drive,
    # far above n2's in the same window, is what says GC.
    lake = busy_gc_lake
    f = _features(lake)
    assert f["has_wa"] == 0.0 and f["wa_z_slow"] == 0.0
    assert f["busy_targets_elevated"] == ["n1"] and f["busy_others_elevated"] == []
    assert f["busy_z_slow"] >= Z_ELEVATED and f["wa_separation"] == 1.0
    stall = _stall(lake)
    assert stall["cause"] == "gc"
    assert any(e.startswith("controller busy time on n1:") for e in stall["causes"][0]["evidence"])


def test_busy_time_on_every_drive_is_no_gc(busy_everywhere_lake: Path) -> None:
    # n2's ranks are slow for no drive reason; every drive of the checkpoint is busy during it
    # (every rank writing). Busy time stands far out of its own noise on n2's drive, and as far
    # on n1's: it does not single out the slow ranks.
    lake = busy_everywhere_lake
    f = _features(lake)
    assert f["busy_z_slow"] >= Z_ELEVATED
    assert f["busy_targets_elevated"] == [] and f["wa_separation"] <= 0.0
    stall = _stall(lake)
    assert stall["cause"] == "unknown"
    assert "gc" not in _supported(stall)


def test_busy_time_with_no_other_drive_to_compare_with_says_nothing() -> None:
    # Every rank slow: no fast drive to hold busy time against, and a drive is busy whenever it
    # is written to. Write amplification, with its own noise, still decides alone.
    rows = pl.DataFrame({"host": ["n1", "n2", "n1"],
                         "signal": ["controller_busy_time_min"] * 2 + ["write_amplification"],
                         "level": [0.015, 0.014, 1.9], "z": [150.0, 140.0, 80.0]})
    assert _standing_out(rows, {"n1", "n2"}) == {"n1": True}
    # With a fast drive in the same window, busy time far above it stands out; as busy, not.
    busy = rows.head(2)
    assert _standing_out(busy.with_columns(level=pl.Series([0.015, 0.002])), {"n1"}) == {
        "n1": True, "n2": False}
    assert _standing_out(busy, {"n1"}) == {"n1": False, "n2": False}


@settings(max_examples=4, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(shift=st.floats(-60.0, 60.0))
def test_shifting_the_ocp_log_by_up_to_half_its_interval_keeps_the_wa_verdict(
        tmp_path_factory: pytest.TempPathFactory, shift: float) -> None:
    # The WA-only pool GC of test_noise_evidence (1.3x on t1, SMART every 120 s), the OCP log
    # moved by up to half its interval: still out of its noise, still singling out t1.
    offset = shift % 120.0  # a shift by -s is one by 120 - s, a sample fewer at the start
    f = _features(build(tmp_path_factory.mktemp("shift") / "lake",
                        Case(stall="gc", wa_only=1.3, smart_every_s=120,
                             ocp_offset_s=offset)))
    assert f["wa_z_slow"] >= Z_ELEVATED
    assert f["wa_separation"] >= SEPARATION_SUPPORT
