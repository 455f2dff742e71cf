"""The stall step's per-series statistics stored once a day (``ckptwatch.lake.signalstats``):
the stored rows are the computed rows, attribution reads them and finds the same, and a
connection that reads other rows than they were computed from computes them again."""

from __future__ import annotations

import shutil
from datetime import date
from pathlib import Path

import polars as pl
import pytest

from ckptwatch.analysis.findings import ATTRIBUTION_VIEWS, find_stalls
from ckptwatch.errors import LakeError
from ckptwatch.lake import derived, signalstats
from ckptwatch.lake.freshness import raw_days
from ckptwatch.lake.query import connect, run_sql
from ckptwatch.lake.store import Lake


@pytest.fixture
def lake(sample_lake: Path, tmp_path: Path) -> Path:
    """The bundled sample's lake, copied (the session's is shared and read-only)."""
    root = tmp_path / "lake"
    shutil.copytree(sample_lake, root)
    return root


def only_day(root: Path) -> date:
    days = raw_days(Lake(root))
    assert len(days) == 1
    return days[0]


def computed(con: object, name: str) -> pl.DataFrame:
    is_view = con.execute(  # type: ignore[attr-defined]
        "select count(*) from duckdb_views() where view_name = ?", [name]).fetchall()[0][0]
    source = name if is_view else f"{name}()"
    return run_sql(con, f"select * from {source}")  # type: ignore[arg-type]


def same_rows(a: pl.DataFrame, b: pl.DataFrame) -> bool:
    """The same rows in any order; floats equal up to the order of parallel sums (a sum over
    threads is not associative to the last bit: the same SQL run twice may differ there)."""
    if a.columns != b.columns or a.height != b.height:
        return False
    keys = [c for c, t in a.schema.items() if t != pl.Float64]
    utc = pl.col(pl.Datetime).dt.convert_time_zone("UTC")  # "Etc/UTC" and "UTC": one zone
    x = a.with_columns(utc).sort(a.columns, nulls_last=True)
    y = b.with_columns(utc).sort(b.columns, nulls_last=True)
    if not x.select(keys).equals(y.select(keys), null_equal=True):
        return False
    return all(
        v == pytest.approx(w, rel=1e-9, nan_ok=True) if v is not None else w is None
        for c, t in a.schema.items() if t == pl.Float64
        for v, w in zip(x[c].to_list(), y[c].to_list(), strict=True))


def test_stored_statistics_are_the_rows_a_connection_computes(lake: Path) -> None:
    day = only_day(lake)
    done = derived.refresh(lake)
    assert done.stats == (day,)
    assert derived.refresh(lake).stats == ()  # stored for this key already
    con = connect(lake, days=(day, day), views=ATTRIBUTION_VIEWS)
    try:
        files = signalstats.stored(con)
        assert set(files) == set(signalstats.STORED)
        for name in signalstats.STORED:
            stored = pl.read_parquet(files[name], hive_partitioning=False)
            rows = computed(con, name)
            assert rows.height > 0, name  # the sample has pool, SMART and fabric telemetry
            assert same_rows(rows, stored.select(rows.columns)), name
            assert stored.columns == rows.columns, name
    finally:
        con.close()


def test_attribution_reads_them_and_finds_the_same_stalls(lake: Path) -> None:
    before = find_stalls(lake)  # nothing stored: computed
    derived.refresh(lake)
    con = connect(lake, views=ATTRIBUTION_VIEWS)  # every day of a one-day lake: that day
    try:
        assert signalstats.stored(con)
        after = find_stalls(lake, con=con)
    finally:
        con.close()
    assert len(before.stalls) == 8
    # the same causes and evidence; features equal up to the order of parallel float sums
    assert [(s.job_id, s.step, [(c.cause, c.supported, c.evidence) for c in s.causes])
            for s in before.stalls] == \
        [(s.job_id, s.step, [(c.cause, c.supported, c.evidence) for c in s.causes])
         for s in after.stalls]
    for b, a in zip(before.stalls, after.stalls, strict=True):
        assert b.features.keys() == a.features.keys()
        for k, v in b.features.items():
            if isinstance(v, float):
                assert a.features[k] == pytest.approx(v, rel=1e-9, nan_ok=True), k
            else:
                assert a.features[k] == v, k


def test_other_rows_or_settings_compute_them_again(lake: Path) -> None:
    day = only_day(lake)
    derived.refresh(lake)
    con = connect(lake, days=(day, day), views=ATTRIBUTION_VIEWS)
    try:
        assert signalstats.stored(con)
        # another signal catalog than the one they were computed with
        con.execute("SET VARIABLE int_signal_gauges = ['free_blocks_pct']").fetchall()
        assert signalstats.stored(con) == {}
    finally:
        con.close()
    # rows added to a table (the live watcher's raw telemetry not yet ingested)
    extra = pl.DataFrame({"job_id": ["x"]})
    con = connect(lake, views=ATTRIBUTION_VIEWS, extra_rows={"jobs": extra})
    try:
        assert signalstats.stored(con) == {}
    finally:
        con.close()


def test_a_connection_over_two_days_computes_them(lake: Path) -> None:
    day = only_day(lake)
    later = date.fromordinal(day.toordinal() + 1)
    for table in ("fabric_counters", "nvme_smart", "pool_metrics"):
        shutil.copytree(lake / table / f"date={day.isoformat()}",
                        lake / table / f"date={later.isoformat()}")
    assert derived.refresh(lake).stats == (day, later)
    for days, expected in (((day, day), True), ((later, later), True), ((day, later), False),
                           (None, False)):
        con = connect(lake, days=days, views=ATTRIBUTION_VIEWS)
        try:  # a median over two days is not the median of the daily medians
            assert bool(signalstats.stored(con)) is expected, days
        finally:
            con.close()


def test_a_part_ingested_into_the_day_makes_them_stale(lake: Path) -> None:
    day = only_day(lake)
    derived.refresh(lake)
    part = next((lake / "pool_metrics" / f"date={day.isoformat()}").glob("*.parquet"))
    shutil.copy(part, part.with_name("part-again.parquet"))  # the same rows sent twice
    assert not signalstats.is_stored(Lake(lake), day)
    con = connect(lake, days=(day, day), views=ATTRIBUTION_VIEWS)
    try:
        assert signalstats.stored(con) == {}  # the deltas are stale too: computed
    finally:
        con.close()
    assert derived.refresh(lake).stats == (day,)
    assert signalstats.is_stored(Lake(lake), day)


def test_a_crash_while_storing_leaves_the_day_without_statistics(
        lake: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    day = only_day(lake)
    writes = []

    def crash(path: Path) -> None:
        writes.append(path)
        if len(writes) == 3:
            raise OSError("disk gone")

    monkeypatch.setattr(signalstats, "_fsync", crash)
    with pytest.raises(OSError, match="disk gone"):
        derived.refresh(lake)
    assert not signalstats.day_dir(Lake(lake), day).exists()
    assert not (signalstats.day_dir(Lake(lake), day).parent.parent
                / f"{signalstats.STATS}.tmp").exists()
    monkeypatch.undo()
    assert derived.refresh(lake).stats == (day,)
    assert signalstats.is_stored(Lake(lake), day)


def test_a_day_whose_raw_parts_are_gone_loses_them(lake: Path) -> None:
    day = only_day(lake)
    derived.refresh(lake)
    for table in ("fabric_counters", "nvme_smart", "pool_metrics"):
        shutil.rmtree(lake / table / f"date={day.isoformat()}")
    derived.refresh(lake)
    assert not signalstats.day_dir(Lake(lake), day).exists()


def test_a_failure_names_the_day(lake: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import duckdb

    def fail(*_: object) -> bool:
        raise duckdb.OutOfMemoryException("out of memory")

    monkeypatch.setattr(signalstats, "store", fail)
    with pytest.raises(LakeError, match=r"signal statistics of \d{4}-\d\d-\d\d .*out of memory"):
        derived.refresh(lake)
