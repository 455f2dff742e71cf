"""Counter deltas once (``ckptwatch.lake.derived``): the materialised days give exactly the rows
``stg_counter_deltas`` computes, over every day and over a range of days; stale days are
rebuilt and never read."""

from __future__ import annotations

import shutil
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ckptwatch.lake import derived
from ckptwatch.lake.query import connect, run_sql
from ckptwatch.lake.schema import TABLES
from ckptwatch.lake.store import Lake

DAYS = (date(2026, 11, 27), date(2026, 11, 28), date(2026, 11, 29))
IB32_MAX = 4_294_967_295.0
ORDER = "order by source_table, host, device, port, counter, ts"


def write_part(root: Path, table: str, day: date, rows: list[dict[str, Any]],
               name: str, ingested: datetime | None = None) -> None:
    """Literal rows as one part of ``table`` in ``day``'s partition."""
    schema = TABLES[table].schema
    filled = [{"source_file": f"seed/{name}", "ingested_ts": ingested or datetime(
        2026, 12, 1, tzinfo=UTC), **row} for row in rows]
    arrow = pa.table({f.name: [r.get(f.name) for r in filled] for f in schema}, schema=schema)
    path = root / table / f"date={day.isoformat()}" / f"part-{name}.parquet"
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(arrow, path)


def sample(day: date, minute: int, value: float, counter: str = "port_xmit_wait",
           node: str = "n0", device: str = "mlx5_0") -> dict[str, Any]:
    ts = datetime(day.year, day.month, day.day, tzinfo=UTC) + timedelta(minutes=minute)
    return {"ts": ts, "node": node, "device": device, "port": "1", "counter": counter,
            "value": value, "source": "perfquery"}


def computed_and_derived(root: Path, days: tuple[date, date] | None) -> tuple[pl.DataFrame,
                                                                              pl.DataFrame]:
    """``int_signal_counter_deltas`` computed in one pass, and read materialised."""
    con = connect(root, days=days, views=("int_signal_counter_deltas",))
    try:
        con.execute("SET VARIABLE counter_deltas_derived = false").fetchall()
        computed = run_sql(con, f"select * from int_signal_counter_deltas {ORDER}")
        con.execute("SET VARIABLE counter_deltas_derived = true").fetchall()
        read = run_sql(con, f"select * from int_signal_counter_deltas {ORDER}")
    finally:
        con.close()
    return computed, read


def assert_same_rows(a: pl.DataFrame, b: pl.DataFrame) -> None:
    assert a.columns == b.columns
    assert a.height == b.height
    assert a.to_dicts() == b.to_dicts()


@pytest.fixture
def three_days(tmp_path: Path) -> Path:
    """Three days of two series: a wrap-free 32-bit counter that saturates and resets across
    midnight, a pause counter absent on the middle day, an invalid reading, a sample sent
    twice (the later ingest wins)."""
    root = tmp_path / "lake"
    Lake(root).init()
    d1, d2, d3 = DAYS
    write_part(root, "fabric_counters", d1, [
        sample(d1, 0, 10.0), sample(d1, 10, 50.0), sample(d1, 1430, IB32_MAX),
        sample(d1, 0, 5.0, "rx_prio3_pause"), sample(d1, 20, 9.0, "rx_prio3_pause"),
    ], "a")
    write_part(root, "fabric_counters", d2, [
        sample(d2, 5, 7.0), sample(d2, 15, -1.0), sample(d2, 25, 20.0),
    ], "b")
    write_part(root, "fabric_counters", d3, [
        sample(d3, 0, 30.0), sample(d3, 0, 3.0, "rx_prio3_pause"),
        sample(d3, 10, 12.0, "rx_prio3_pause"),
    ], "c", ingested=datetime(2026, 12, 1, tzinfo=UTC))
    write_part(root, "fabric_counters", d3, [sample(d3, 10, 40.0, "rx_prio3_pause")], "d",
               ingested=datetime(2026, 12, 2, tzinfo=UTC))
    return root


def test_materialised_days_give_the_rows_of_one_pass(three_days: Path) -> None:
    done = derived.refresh(three_days)
    assert done.built == DAYS and done.kept == ()
    assert derived.is_fresh(three_days)
    computed, read = computed_and_derived(three_days, None)
    assert_same_rows(computed, read)
    pause = read.filter(pl.col("counter") == "rx_prio3_pause")
    # prev crosses the missing middle day; the re-sent sample's later ingest wins (40, not 12)
    assert pause["delta"].to_list() == [None, 4.0, 3.0, 37.0]  # 9 -> 3: a reset
    assert pause["reset"].to_list() == [False, False, True, False]
    wait = read.filter(pl.col("counter") == "port_xmit_wait")
    # saturated at 2^32-1 on day 1, a reset on day 2, the invalid reading skipped
    assert wait["saturated"].to_list() == [False, False, True, False, False, False, False]
    assert wait["delta"].to_list() == [None, 40.0, None, 7.0, None, 13.0, 10.0]


@pytest.mark.parametrize("days", [(DAYS[1], DAYS[2]), (DAYS[2], DAYS[2]), (DAYS[0], DAYS[1])])
def test_a_range_of_days_reads_as_a_pass_over_those_days(three_days: Path,
                                                         days: tuple[date, date]) -> None:
    derived.refresh(three_days)
    assert derived.is_fresh(three_days, days)
    computed, read = computed_and_derived(three_days, days)
    assert read.height > 0
    assert_same_rows(computed, read)


def test_the_connection_reads_materialised_rows_only_when_fresh(three_days: Path) -> None:
    def flag(days: tuple[date, date] | None) -> Any:
        con = connect(three_days, days=days, views=("int_signal_counter_deltas",))
        try:
            return con.execute("select getvariable('counter_deltas_derived')").fetchone()
        finally:
            con.close()

    assert flag(None) == (False,)  # never refreshed
    derived.refresh(three_days)
    assert flag(None) == (True,)
    # a file ingested into the middle day: it and the day after are stale, the first is not
    write_part(three_days, "fabric_counters", DAYS[1], [sample(DAYS[1], 40, 25.0)], "e")
    assert flag(None) == (False,)
    assert flag((DAYS[1], DAYS[2])) == (False,)
    assert flag((DAYS[0], DAYS[0])) == (True,)
    done = derived.refresh(three_days)
    assert done.kept == (DAYS[0],) and done.built == DAYS[1:]
    computed, read = computed_and_derived(three_days, None)
    assert_same_rows(computed, read)
    assert 25.0 in read["value"].to_list()


def test_a_lost_part_or_manifest_makes_days_stale(three_days: Path) -> None:
    derived.refresh(three_days)
    (derived.derived_dir(Lake(three_days)) / derived.STATE / f"date={DAYS[1]}"
     / "part-state.parquet").unlink()  # as if a crash came between the two renames
    assert not derived.is_fresh(three_days)
    assert derived.is_fresh(three_days, (DAYS[0], DAYS[0]))
    assert derived.refresh(three_days).built == (DAYS[1],)  # the later days' prints still hold
    (derived.derived_dir(Lake(three_days)) / derived.MANIFEST).write_text("{not json")
    assert not derived.is_fresh(three_days)
    assert derived.refresh(three_days).built == DAYS


def test_a_view_build_without_derived_days_still_computes(tmp_path: Path) -> None:
    root = tmp_path / "lake"
    Lake(root).init()
    write_part(root, "fabric_counters", DAYS[0], [sample(DAYS[0], 0, 1.0),
                                                  sample(DAYS[0], 1, 3.0)], "a")
    computed, read = computed_and_derived(root, None)
    assert computed["delta"].to_list() == [None, 2.0]
    assert read.height == 0  # nothing materialised: the flag alone must not be trusted


def test_a_lake_of_the_previous_layout_reads_then_rebuilds(three_days: Path) -> None:
    """A lake whose derived days an older version stored (prev_ts, interval_s and rate_per_s
    per sample): its schema part is rewritten when a connection opens the lake, its days are
    stale (computed, never read) until a refresh stores them again."""
    derived.refresh(three_days)
    lake = Lake(three_days)
    old = pa.schema([f for f in derived.SCHEMA if f.name not in (
        "source_table", "host", "device", "port", "pool", "counter")])
    stub = derived.derived_dir(lake) / derived.DELTAS / "date=1970-01-01" / "part-schema.parquet"
    pq.write_table(old.empty_table(), stub)
    manifest = derived.derived_dir(lake) / derived.MANIFEST
    manifest.write_text('{"2026-11-27": "layout 2", "2026-11-28": "x", "2026-11-29": "y"}')
    computed, read = computed_and_derived(three_days, None)  # binds: the stub is rewritten
    assert pq.read_schema(stub).names == derived.DELTAS_SCHEMA.names
    assert not derived.is_fresh(three_days)
    assert derived.refresh(three_days).built == DAYS
    again, read = computed_and_derived(three_days, None)
    assert_same_rows(computed, again)
    assert_same_rows(computed, read)


def test_stored_intervals_give_the_computed_times_and_rates(tmp_path: Path) -> None:
    """prev_ts, interval_s and rate_per_s are computed from the stored interval_us: the same
    values to the microsecond and the last bit, over sub-second and multi-day intervals, in a
    lake whose path has a quote (the parts are written by a COPY with the path as a literal)."""
    root = tmp_path / "ops' lake"
    Lake(root).init()
    t0 = datetime(2026, 11, 27, 0, 0, 0, 123_457, tzinfo=UTC)
    rows = [{**sample(DAYS[0], 0, v), "ts": t0 + dt} for v, dt in (
        (1.0, timedelta(0)), (4.5, timedelta(microseconds=333_333)),
        (9.0, timedelta(seconds=7, microseconds=1)), (20.0, timedelta(days=2, seconds=3.5)))]
    by_day: dict[date, list[dict[str, Any]]] = {}
    for row in rows:
        by_day.setdefault(row["ts"].date(), []).append(row)
    for day, day_rows in by_day.items():
        write_part(root, "fabric_counters", day, day_rows, f"p{day.day}")
    assert derived.refresh(root).built
    computed, read = computed_and_derived(root, None)
    assert_same_rows(computed, read)
    steps = [(b["ts"] - a["ts"]).total_seconds() for a, b in zip(rows, rows[1:], strict=False)]
    assert read["interval_s"].to_list()[1:] == pytest.approx(steps, rel=1e-15)
    assert read["rate_per_s"].to_list()[1:] == pytest.approx(
        [(b["value"] - a["value"]) / dt for a, b, dt in zip(rows, rows[1:], steps,
                                                            strict=False)], rel=1e-12)
    assert read["prev_ts"].to_list()[1:] == [r["ts"] for r in rows[:-1]]


values = st.one_of(st.floats(0, 1e6).map(round), st.just(IB32_MAX), st.just(-1.0))
day_series = st.lists(st.lists(values, max_size=4), min_size=3, max_size=3)


@settings(max_examples=6, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(by_day=st.lists(day_series, min_size=1, max_size=3))
def test_any_series_across_days_gives_the_same_rows(tmp_path_factory: pytest.TempPathFactory,
                                                    by_day: list[list[list[float]]]) -> None:
    root = tmp_path_factory.mktemp("lake")
    Lake(root).init()
    for s, days_values in enumerate(by_day):
        for d, day_values in zip(DAYS, days_values, strict=True):
            if day_values:
                write_part(root, "fabric_counters", d, [
                    sample(d, 7 * i, v, node=f"n{s}") for i, v in enumerate(day_values)],
                    f"s{s}")
    if not any(v for days_values in by_day for v in days_values):
        return
    derived.refresh(root)
    for days in (None, (DAYS[1], DAYS[2]), (DAYS[2], DAYS[2])):
        computed, read = computed_and_derived(root, days)
        assert_same_rows(computed, read)


def test_a_day_whose_raw_parts_are_gone_is_not_read(three_days: Path) -> None:
    derived.refresh(three_days)
    for part in (three_days / "fabric_counters" / f"date={DAYS[2]}").glob("*.parquet"):
        part.unlink()  # retention removed the last day
    assert not derived.is_fresh(three_days)
    assert derived.refresh(three_days).built == ()
    assert derived.is_fresh(three_days)
    computed, read = computed_and_derived(three_days, None)
    assert_same_rows(computed, read)
    assert DAYS[2] not in {ts.date() for ts in read["ts"].to_list()}


def test_parts_batch_by_host_range_and_never_split_a_series(tmp_path: Path) -> None:
    root = tmp_path / "lake"
    Lake(root).init()
    d = DAYS[0]
    for name, nodes in (("a", ["n0"]), ("b", ["n1"]), ("c", ["n2", "n4"]), ("d", ["n3"]),
                        ("e", ["n5"])):
        write_part(root, "fabric_counters", d, [sample(d, 1, 1.0, node=n) for n in nodes], name)
    parts = sorted((root / "fabric_counters" / f"date={d}").glob("*.parquet"))
    by_name = {p.stem.removeprefix("part-"): p for p in parts}

    def names(batches: list[list[Path]]) -> list[list[str]]:
        return [sorted(p.stem.removeprefix("part-") for p in b) for b in batches]

    # n2..n4 spans n3: c and d are one group; each group its own batch at one row a batch
    assert names(derived._batches(parts, "node", 1)) == [["a"], ["b"], ["c", "d"], ["e"]]
    # groups packed in host order up to the budget (a group is never split)
    assert names(derived._batches(parts, "node", 3)) == [["a", "b"], ["c", "d"], ["e"]]
    assert names(derived._batches(parts, "node", 100)) == [["a", "b", "c", "d", "e"]]
    # a part the footer cannot bound (no such column) shares one batch with every other part
    assert names(derived._batches(parts, "target", 1)) == [sorted(by_name)]


def test_ingested_parts_bound_their_host_range(tmp_path: Path) -> None:
    """The lake writes statistics of every host column (``store.STAT_STRINGS``), so an
    ingested part is batched by its host range, not with every part of its table."""
    from ckptwatch.lake.store import STAT_STRINGS

    assert set(derived.HOST_COLUMNS.values()) <= STAT_STRINGS
    lake = Lake(tmp_path / "lake")
    lake.init()
    d = DAYS[0]
    for name, node in (("a", "n0"), ("b", "n1")):
        rows = pl.DataFrame([{"source_file": f"seed/{name}", "ingested_ts": datetime(
            2026, 12, 1, tzinfo=UTC), **sample(d, 1, 1.0, node=node)}])
        lake.write_part(f"fabric_counters/date={d}/part-{name}.parquet",
                        TABLES["fabric_counters"], rows)
    parts = sorted((lake.root / "fabric_counters" / f"date={d}").glob("*.parquet"))
    assert [derived._host_range(p, "node")[1] for p in parts] == [("n0", "n0"), ("n1", "n1")]
    assert len(derived._batches(parts, "node", 1)) == 2


def many_batches(root: Path) -> None:
    """Parts that make many batches at one sample a batch: SMART and pool series, a re-sent
    sample in another part of the same node, a part of two nodes."""
    d1, d2, _ = DAYS
    write_part(root, "fabric_counters", d1, [
        sample(d1, 30, 1.0, node="n1"), sample(d1, 40, 5.0, node="n1"),
        sample(d1, 30, 2.0, node="n2"), sample(d1, 50, 1.0, node="n2")], "n1n2")
    write_part(root, "fabric_counters", d1, [sample(d1, 40, 9.0, node="n1")], "n1again",
               ingested=datetime(2026, 12, 3, tzinfo=UTC))
    write_part(root, "fabric_counters", d2, [sample(d2, 1, 3.0, node="n2")], "n2d2")

    def smart(day: date, minute: int, value: float, node: str) -> dict[str, Any]:
        ts = datetime(day.year, day.month, day.day, tzinfo=UTC) + timedelta(minutes=minute)
        return {"ts": ts, "node": node, "device": "nvme0", "source": "smartctl",
                "metric": "host_written_bytes", "value": value}

    def pool(day: date, minute: int, value: float, target: str) -> dict[str, Any]:
        ts = datetime(day.year, day.month, day.day, tzinfo=UTC) + timedelta(minutes=minute)
        return {"ts": ts, "pool": "p0", "target": target, "metric": "write_bytes",
                "value": value}

    write_part(root, "nvme_smart", d1, [smart(d1, 0, 10.0, "n0"), smart(d1, 5, 4.0, "n0")],
               "s0")
    write_part(root, "nvme_smart", d2, [smart(d2, 0, 8.0, "n0")], "s1")
    write_part(root, "pool_metrics", d1, [pool(d1, 0, 1.0, "t0"), pool(d1, 9, 6.0, "t1")],
               "p0")
    write_part(root, "pool_metrics", d2, [pool(d2, 0, 9.0, "t0")], "p1")


def test_a_day_in_many_batches_gives_the_rows_of_one_pass(
        three_days: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every part its own batch (one sample a batch, ``many_batches``); the same rows as one
    pass."""
    monkeypatch.setattr(derived, "BATCH_ROWS", 1)
    d1, d2, _ = DAYS
    many_batches(three_days)
    derived.refresh(three_days)
    day_dir = derived.derived_dir(Lake(three_days)) / derived.DELTAS / f"date={d1}"
    # fabric: a (n0), n1n2 with n1again (their hosts overlap); SMART s0; pool p0
    assert len(list(day_dir.glob("*.parquet"))) == 4
    for days in (None, (d2, DAYS[2])):
        computed, read = computed_and_derived(three_days, days)
        assert_same_rows(computed, read)
    computed, read = computed_and_derived(three_days, None)
    n1 = read.filter(pl.col("host") == "n1")
    assert n1["value"].to_list() == [1.0, 9.0]  # the later ingest wins across parts
    assert read.filter(pl.col("host") == "n0", pl.col("source_table") == "nvme_smart")[
        "delta"].to_list() == [None, 4.0, 4.0]  # 10 -> 4: a reset; 4 -> 8 across days
    assert read.filter(pl.col("host") == "t0")["delta"].to_list() == [None, 8.0]


def _derived_rows(root: Path) -> dict[str, list[dict[str, Any]]]:
    """Each derived file's rows (sorted), by its path under ``derived/``."""
    base = derived.derived_dir(Lake(root))
    return {str(f.relative_to(base)): sorted(pq.read_table(f).to_pylist(), key=repr)
            for f in sorted(base.rglob("*.parquet"))
            if f.parts[-3] in (derived.DELTAS, derived.SERIES, derived.STATE)}


def test_batches_mapped_elsewhere_give_the_files_of_batches_run_here(
        three_days: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``refresh(map_batches=...)``: each batch on a connection of its own (two threads here;
    the nightly flow's Dask tasks in tests/flows/test_dask.py), this process gathering each
    day's state from their last samples: the same files with the same rows, the same state
    and manifest as the batches run one after another on one connection."""
    monkeypatch.setattr(derived, "BATCH_ROWS", 1)
    many_batches(three_days)
    mapped = tmp_path / "mapped"
    shutil.copytree(three_days, mapped)
    seen: list[list[int]] = []

    def in_threads(batches: Sequence[derived.DayBatch]) -> list[pa.Table]:
        seen.append([b.index for b in batches])
        with ThreadPoolExecutor(2) as pool:
            return list(pool.map(derived.compute_batch, batches))

    here = derived.refresh(three_days)
    there = derived.refresh(mapped, map_batches=in_threads)
    assert there.built == here.built == DAYS
    assert seen == [[0, 1, 2, 3], [0, 1, 2, 3], [0]]  # day by day, oldest first
    rows = _derived_rows(three_days)
    assert len(rows) == 2 * 9 + 3 + 3  # deltas and series: one part a batch; state; schemas
    assert sum(map(len, rows.values())) >= 30 and _derived_rows(mapped) == rows
    manifest = derived.derived_dir(Lake(three_days)) / derived.MANIFEST
    assert (derived.derived_dir(Lake(mapped)) / derived.MANIFEST).read_text() == \
        manifest.read_text()
    assert_same_rows(*computed_and_derived(mapped, None))
