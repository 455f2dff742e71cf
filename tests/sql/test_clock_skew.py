"""Clock skew (sql/session.sql ``clock_skew_s``, docs/attribution.md): hosts' clocks a few
seconds apart change no stall's signals. A series whose samples miss the stall's window on the
checkpoint records' clock by at most the skew still reaches it; one the window reaches itself
counts as it did."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from tests.stall_cases import INTERVAL_S, STALL_STEP, T0, Case, build

from ckptwatch.analysis.detection import DetectionSettings
from ckptwatch.analysis.findings import ATTRIBUTION_VIEWS, attribute_stalls
from ckptwatch.errors import QueryError
from ckptwatch.lake.query import connect, run_sql

#: The stalled checkpoint's first rank start: its window opens here (stall_cases).
STALL_START = T0 + timedelta(seconds=60 + STALL_STEP * INTERVAL_S)

#: A stall's signals: levels against baselines; the range for gauges (a counter's min and max
#: are cumulative readings, which any shift of its sample instants moves: no signal).
_SIGNALS_SQL = """
    select
        host, family, signal, kind, level, baseline_level,
        case when kind = 'gauge' then level_min end as level_min,
        case when kind = 'gauge' then level_max end as level_max,
    from stall_signals
    order by all
"""


def _rounded(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{k: float(f"{v:.9g}") if isinstance(v, float) else v for k, v in r.items()}
            for r in rows]


def _signals(lake: Path, skew_s: float | None = None) -> list[dict[str, Any]]:
    con = connect(lake, views=("stall_signals",))
    try:
        if skew_s is not None:
            DetectionSettings(clock_skew_s=skew_s).apply(con)
        return _rounded(run_sql(con, _SIGNALS_SQL).to_dicts())
    finally:
        con.close()


def _top(lake: Path) -> tuple[str, float]:
    con = connect(lake, views=ATTRIBUTION_VIEWS)
    try:
        [stall] = attribute_stalls(con).stalls
    finally:
        con.close()
    return stall.cause, round(stall.top.score, 9)


@pytest.fixture(scope="module")
def aligned(tmp_path_factory: pytest.TempPathFactory) -> tuple[list[dict[str, Any]], Any]:
    """The GC stall's signals and top cause with every clock on the records' clock."""
    lake = build(tmp_path_factory.mktemp("aligned") / "lake", Case(stall="gc"))
    return _signals(lake), _top(lake)


def _close(got: list[dict[str, Any]], want: list[dict[str, Any]]) -> None:
    """The same rows, numbers within 0.1 % of theirs: a shift of 2 s moves 2 s of an interval's
    weight across the window's edge (an interval spanning the edge weighs by its seconds
    inside: 2 of ~36 s), and the rates either side of an edge differ by the drives' own wobble
    (write amplification 1.05 +- 0.4 %): ~1e-4 of a level."""
    def split(rows: list[dict[str, Any]], numbers: bool) -> list[dict[str, Any]]:
        return [{k: v for k, v in r.items() if isinstance(v, float) == numbers} for r in rows]

    assert split(got, numbers=False) == split(want, numbers=False)
    for g, w in zip(split(got, numbers=True), split(want, numbers=True), strict=True):
        assert g == pytest.approx(w, rel=1e-3)


@pytest.mark.parametrize("clocks", [
    {"nvme_smart": 2.0}, {"nvme_smart": -2.0},
    {"pool_metrics": 2.0, "fabric_counters": -2.0}, {"pool_metrics": -2.0, "fabric_counters": 2.0},
])
def test_a_host_clock_off_by_seconds_changes_no_signal(
        tmp_path: Path, aligned: tuple[list[dict[str, Any]], Any],
        clocks: dict[str, float]) -> None:
    # Telemetry every 30 s (SMART every 60 s), the stall's window opening on a sample instant:
    # the one place a shift moves a sample across the window's edge.
    lake = build(tmp_path / "lake", Case(stall="gc", clock_offset_s=clocks))
    signals, (cause, score) = aligned
    _close(_signals(lake), signals)
    got_cause, got_score = _top(lake)
    assert got_cause == cause
    assert got_score == pytest.approx(score, rel=1e-3)


def _feed_ends_at_the_stall(lake: Path, shift_s: float) -> None:
    """t1's pool exporter stops at the stall's first instant (its last sample: the window's
    start on the records' clock) and its clock is ``shift_s`` off."""
    for path in sorted((lake / "pool_metrics").rglob("*.parquet")):
        table = pq.read_table(path)
        t1 = pc.equal(table.column("target"), "t1")
        keep = pc.or_(pc.invert(t1), pc.less_equal(table.column("ts"), pa.scalar(STALL_START)))
        table = table.filter(keep)
        t1 = pc.equal(table.column("target"), "t1")
        moved = pc.add(table.column("ts"), pa.scalar(timedelta(seconds=shift_s)))
        at = table.schema.get_field_index("ts")
        table = table.set_column(at, table.schema.field(at),
                                 pc.if_else(t1, moved, table.column("ts")))
        pq.write_table(table, path)


@pytest.mark.parametrize("shift_s", [-2.0, -1.0, 2.0])
def test_a_feed_that_stops_at_the_stall_reaches_it_on_any_clock_within_the_skew(
        tmp_path: Path, shift_s: float) -> None:
    lake = build(tmp_path / "lake", Case(stall="gc"))
    _feed_ends_at_the_stall(lake, shift_s)
    pool = {r["signal"]: r for r in _signals(lake)
            if r["host"] == "t1" and r["signal"] in ("gc_active", "free_blocks_pct")}
    assert pool["gc_active"]["level"] == 1.0  # the GC seen in its last sample
    assert pool["free_blocks_pct"]["level"] == 8.0


def test_without_the_skew_a_clock_two_seconds_behind_hides_the_feed(tmp_path: Path) -> None:
    # The same feed, its clock 2 s behind: on the records' clock its last interval closes
    # before the window opens, and only the skew's reach finds it.
    lake = build(tmp_path / "lake", Case(stall="gc"))
    _feed_ends_at_the_stall(lake, -2.0)
    t1_pool = {r["signal"] for r in _signals(lake, skew_s=0.0)
               if r["host"] == "t1" and r["signal"] in ("gc_active", "free_blocks_pct")}
    assert t1_pool == set()
    t1_pool = {r["signal"] for r in _signals(lake, skew_s=2.0)
               if r["host"] == "t1" and r["signal"] in ("gc_active", "free_blocks_pct")}
    assert t1_pool == {"gc_active", "free_blocks_pct"}


def test_the_skew_is_a_setting_with_bounds() -> None:
    assert DetectionSettings().clock_skew_s == 5.0  # sql/session.sql
    for bad in (-1.0, 301.0, float("nan")):
        with pytest.raises(QueryError, match="clock_skew_s must be between 0 and 300 s"):
            DetectionSettings(clock_skew_s=bad)


def test_the_window_itself_starts_on_a_sample_instant() -> None:
    # What the shift test relies on to mean anything: the window opens on a telemetry instant.
    assert (STALL_START - T0).total_seconds() % 30 == 0
