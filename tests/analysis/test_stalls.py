"""Stall detection and attribution on small hand-built cases of each cause and confounder."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import duckdb
import pytest
from tests.stall_cases import STALL_STEP, Case, build

from ckptwatch.analysis.detection import DetectionSettings
from ckptwatch.analysis.findings import attribute_stalls
from ckptwatch.lake.query import connect
from ckptwatch.lake.seam import (
    PINNED_SAMPLES,
    PINNED_SERIES,
    PINNED_VIEWS,
    one_thread,
    pinned_views,
)


def stall_reports(con: duckdb.DuckDBPyConnection,
                  settings: DetectionSettings | None = None) -> list[dict[str, Any]]:
    """The stalls in their JSON form (``ckptwatch stalls --format json``)."""
    return [s.to_dict() for s in attribute_stalls(con, settings=settings).stalls]


#: The stalls of each case attributed so far in this session (by ``repr``: the case's fields),
#: so that a case read by several tests (gc, fabric_pause) is built and attributed once; the
#: tests that change settings or pin views on a connection build their own.
_REPORTS: dict[str, list[dict[str, Any]]] = {}


def _reports(tmp_path: Path, case: Case) -> list[dict[str, Any]]:
    key = repr(case)
    if key not in _REPORTS:
        _REPORTS[key] = stall_reports(connect(build(tmp_path / "lake", case)))
    return copy.deepcopy(_REPORTS[key])


@pytest.mark.parametrize("cause", ["gc", "metadata", "fabric_pause"])
def test_each_cause_is_detected_and_attributed_with_evidence(tmp_path: Path, cause: str) -> None:
    [stall] = _reports(tmp_path, Case(stall=cause))
    assert stall["step"] == STALL_STEP
    assert stall["cause"] == cause
    top = stall["causes"][0]  # type: ignore[index]
    assert top["supported"] and top["score"] >= 0.5 and top["evidence"]


def test_evidence_names_the_signal_the_scope_and_the_baseline(tmp_path: Path) -> None:
    [stall] = _reports(tmp_path, Case(stall="fabric_pause"))
    ev = stall["causes"][0]["evidence"][0]  # type: ignore[index]
    assert ev.startswith("pause / PortXmitWait on 1/1 slow nodes of leaf01 (n1): ")
    assert "k/s vs 2.00 /s baseline" in ev
    [gc] = _reports(tmp_path / "gc", Case(stall="gc"))
    text = " | ".join(gc["causes"][0]["evidence"])  # type: ignore[index]
    assert "gc_active on the slow ranks' targets (t1): 1.00" in text
    assert "slow ranks cluster on target t1" in text


def test_a_stall_with_no_signal_is_unknown(tmp_path: Path) -> None:
    [stall] = _reports(tmp_path, Case(stall="unknown"))
    assert stall["cause"] == "unknown"
    assert [c["cause"] for c in stall["causes"]] == ["unknown"]  # type: ignore[union-attr]


def test_pause_burst_between_checkpoints_stalls_nothing(tmp_path: Path) -> None:
    assert _reports(tmp_path, Case(pause_burst_at_s=60 + 5 * 300 + 120)) == []


def test_mild_metadata_bump_stalls_nothing(tmp_path: Path) -> None:
    assert _reports(tmp_path, Case(mild_metadata_step=5)) == []


def test_gc_on_an_idle_target_is_not_blamed(tmp_path: Path) -> None:
    [stall] = _reports(tmp_path, Case(stall="metadata", idle_gc_target="t3"))
    assert stall["cause"] == "metadata"
    assert "gc" not in [c["cause"] for c in stall["causes"]]  # type: ignore[union-attr]


def test_pause_burst_elsewhere_in_time_does_not_make_an_unknown_stall_fabric(
        tmp_path: Path) -> None:
    case = Case(stall="unknown", pause_burst_at_s=60 + 3 * 300 + 120)
    [stall] = _reports(tmp_path, case)
    assert stall["cause"] == "unknown"


def test_detection_thresholds_are_configurable(tmp_path: Path) -> None:

    con = connect(build(tmp_path / "lake", Case(stall="gc")))
    assert len(stall_reports(con, settings=DetectionSettings(stall_factor=10.0))) == 0
    assert len(stall_reports(con, settings=DetectionSettings(stall_factor=2.0))) == 1


def test_a_timed_out_checkpoint_is_a_stall_naming_where_its_ranks_hung(tmp_path: Path) -> None:
    # Ranks 0 and 2 (node n1, leaf01, target t1) hang during the fabric pause on n1: the
    # checkpoint timed out (120 s), its barrier is at least the timeout, and it is a stall.
    [stall] = _reports(tmp_path, Case(stall="fabric_pause", unfinished=(0, 2), markers=True))
    assert (stall["step"], stall["cause"]) == (STALL_STEP, "fabric_pause")
    assert (stall["n_started"], stall["n_unfinished"], stall["n_ranks"]) == (8, 2, 6)
    assert stall["timed_out"] is True and stall["barrier_is_lower_bound"] is True
    assert stall["barrier_s"] == 120.0
    assert (stall["unfinished_nodes"], stall["unfinished_leaves"],
            stall["unfinished_targets"]) == (["n1"], ["leaf01"], ["t1"])
    assert stall["never_finished"] == (
        "2 of 8 ranks never finished step 8; last seen on n1, leaf01, target t1 (still open "
        "at the job's checkpoint timeout)")


def test_attribution_looks_at_the_unfinished_ranks_hosts(tmp_path: Path) -> None:
    # Every finished rank of step 8 is normal; ranks 0 and 1 (node n1) hang while n1's NIC
    # receives a pause storm. Only the hung ranks point at n1: the stall is a fabric pause.
    stall_t = 60 + STALL_STEP * 300
    [stall] = _reports(tmp_path, Case(unfinished=(0, 1), pause_burst_at_s=stall_t))
    assert (stall["step"], stall["n_unfinished"], stall["n_slow"]) == (STALL_STEP, 2, 2)
    assert stall["cause"] == "fabric_pause"
    assert stall["causes"][0]["evidence"][0].startswith(  # type: ignore[index]
        "pause / PortXmitWait on 1/1 slow nodes of leaf01 (n1): ")


def test_a_case_without_unfinished_ranks_says_nothing_of_them(tmp_path: Path) -> None:
    [stall] = _reports(tmp_path, Case(stall="gc", markers=True))
    assert (stall["n_started"], stall["n_unfinished"], stall["timed_out"]) == (8, 0, False)
    assert stall["never_finished"] == "" and stall["barrier_is_lower_bound"] is False


def _view_sql(con: duckdb.DuckDBPyConnection) -> dict[str, str]:
    return dict(con.execute("select view_name, sql from duckdb_views() "
                            "where not internal").fetchall())


def test_pinned_views_read_their_rows_once_and_are_restored(tmp_path: Path) -> None:
    con = connect(build(tmp_path / "lake", Case(stall="gc")))
    DetectionSettings().apply(con)
    views = _view_sql(con)
    rows = con.execute("select * from stalls order by job_id, step").fetchall()
    with pinned_views(con, ("checkpoint_latency", "stalls", "no_such_view")):
        pinned = _view_sql(con)
        assert "pinned_stalls" in pinned["stalls"] and "pinned_" not in views["stalls"]
        assert con.execute("select * from stalls order by job_id, step").fetchall() == rows
        # Pinned: a detection setting changed inside the block does not move the stalls.
        DetectionSettings(stall_factor=10.0).apply(con)
        assert con.execute("select * from stalls order by job_id, step").fetchall() == rows
    assert _view_sql(con) == views
    assert con.execute("select count(*) from duckdb_tables() where temporary").fetchone() == (0,)
    # Restored: the view computes again, with the setting now in force.
    assert con.execute("select count(*) from stalls where is_stall").fetchone() == (0,)


def test_pinned_views_are_restored_when_the_block_fails(tmp_path: Path) -> None:
    con = connect(build(tmp_path / "lake", Case(stall="gc")))
    views = _view_sql(con)
    with pytest.raises(duckdb.Error), pinned_views(con, PINNED_VIEWS):
        con.execute("select no_such_column from stall_ranks").fetchall()
    assert _view_sql(con) == views
    assert con.execute("select count(*) from duckdb_tables() where temporary").fetchone() == (0,)


def _macro_sql(con: duckdb.DuckDBPyConnection) -> dict[str, str]:
    return dict(con.execute("select function_name, macro_definition from duckdb_functions() "
                            "where function_type = 'table_macro' and not internal").fetchall())


def test_pinned_series_are_computed_once_for_both_readers_and_restored(tmp_path: Path) -> None:
    con = connect(build(tmp_path / "lake", Case(stall="gc")))
    DetectionSettings().apply(con)
    macros, views = _macro_sql(con), _view_sql(con)
    order = "order by all"
    series = con.execute(f"select * from int_signal_series() {order}").fetchall()
    signals = con.execute(f"select * from stall_signals {order}").fetchall()
    noise = con.execute(f"select * from int_signal_noise {order}").fetchall()
    assert series and signals and noise
    with pinned_views(con, PINNED_SERIES, one_thread_if_short=True):
        assert "pinned_int_signal_series" in _macro_sql(con)["int_signal_series"]
        assert con.execute("select current_setting('threads')").fetchone() != (1,)
        assert con.execute(f"select * from stall_signals {order}").fetchall() == signals
        # Both readers read the one table: its rows changed, both see it.
        con.execute("update temp.pinned_int_signal_series set median_x = null")
        # (write amplification's baseline is int_signal_noise's ratio median: not a series')
        assert con.execute("select count(*) from stall_signals where baseline_level is not null "
                           "and kind <> 'ratio'").fetchone() == (0,)
        assert con.execute("select count(*) from int_signal_noise where median_level is not null "
                           "and signal <> 'write_amplification'").fetchone() == (0,)
    assert _macro_sql(con) == macros and _view_sql(con) == views
    assert con.execute("select count(*) from duckdb_tables() where temporary").fetchone() == (0,)
    assert con.execute(f"select * from int_signal_series() {order}").fetchall() == series


def test_pinned_samples_are_computed_once_for_every_sample_reader_and_restored(
        tmp_path: Path) -> None:
    con = connect(build(tmp_path / "lake", Case(stall="gc")))
    DetectionSettings().apply(con)
    macros, views = _macro_sql(con), _view_sql(con)
    order = "order by all"
    queries = {name: f"select * from {name} {order}" for name in
               ("int_signal_samples", "stall_signals", "counter_windows")}
    queries["int_signal_series"] = f"select * from int_signal_series() {order}"
    queries["int_signal_noise"] = f"select * from int_signal_noise {order}"
    before = {name: con.execute(sql).fetchall() for name, sql in queries.items()}
    assert all(before.values())
    gauge = "kind = 'gauge' and value is not null"
    with pinned_views(con, PINNED_SAMPLES), pinned_views(con, PINNED_SERIES):
        pinned = _macro_sql(con)
        assert "pinned_int_signal_gauge_samples" in pinned["int_signal_gauge_samples"]
        assert "pinned_int_signal_write_amplification" in pinned[
            "int_signal_write_amplification"]
        assert "pinned" not in pinned["int_signal_families"]  # a constant list: no pin
        assert {name: con.execute(sql).fetchall() for name, sql in queries.items()} == before
    assert _macro_sql(con) == macros and _view_sql(con) == views
    assert con.execute("select count(*) from duckdb_tables() where temporary").fetchone() == (0,)
    with pinned_views(con, PINNED_SAMPLES):
        # Every reader of the samples reads the one table: its rows changed, all of them see it.
        con.execute("update temp.pinned_int_signal_gauge_samples set value = -1")
        assert con.execute(f"select count(*) from int_signal_samples where {gauge} "
                           "and value <> -1").fetchone() == (0,)
        assert con.execute("select count(*) from int_signal_series() where kind = 'gauge' "
                           "and median_x <> -1").fetchone() == (0,)
        assert con.execute("select count(*) from counter_windows where kind = 'gauge' "
                           "and value_avg <> -1").fetchone() == (0,)
        assert con.execute("select count(*) from stall_signals where kind = 'gauge' "
                           "and level <> -1").fetchone() == (0,)
        for mart in ("stall_signals", "counter_windows"):
            assert con.execute(f"select count(*) from {mart} where kind = 'gauge'"
                               ).fetchone() != (0,)
    assert con.execute(queries["int_signal_samples"]).fetchall() == before["int_signal_samples"]


def test_one_thread_runs_the_block_on_one_thread_and_restores_the_setting() -> None:
    con = duckdb.connect()
    con.execute("set threads = 3")
    with pytest.raises(duckdb.Error), one_thread(con):
        assert con.execute("select current_setting('threads')").fetchone() == (1,)
        con.execute("select no_such_column").fetchall()
    assert con.execute("select current_setting('threads')").fetchone() == (3,)


class _ShortOnThreads:
    """A connection whose pins run out of memory on more than one thread (as a big day's
    series statistics can under the cap): the rest is the real connection's."""

    def __init__(self, con: duckdb.DuckDBPyConnection) -> None:
        self.con = con
        self.threads_of_pins: list[int] = []

    def execute(self, sql: str, *args: object) -> duckdb.DuckDBPyConnection:
        if sql.startswith("create or replace temp table"):
            row = self.con.execute("select current_setting('threads')").fetchone()
            self.threads_of_pins.append(int(row[0]) if row else 0)
            if self.threads_of_pins[-1] > 1:
                raise duckdb.OutOfMemoryException("could not allocate block (test)")
        return self.con.execute(sql, *args)


def test_series_short_of_memory_on_every_thread_are_pinned_on_one(tmp_path: Path) -> None:
    con = connect(build(tmp_path / "lake", Case(stall="gc")))
    DetectionSettings().apply(con)
    con.execute("set threads = 2")
    series = con.execute("select * from int_signal_series() order by all").fetchall()
    short = _ShortOnThreads(con)
    with pinned_views(short, PINNED_SERIES, one_thread_if_short=True):  # type: ignore[arg-type]
        assert short.threads_of_pins == [2, 1]
        assert con.execute("select current_setting('threads')").fetchone() == (2,)
        assert con.execute("select * from int_signal_series() order by all").fetchall() == series
    short = _ShortOnThreads(con)
    with pytest.raises(duckdb.OutOfMemoryException), \
            pinned_views(short, PINNED_SERIES):  # type: ignore[arg-type]
        pass  # without the fallback, the error is the caller's
