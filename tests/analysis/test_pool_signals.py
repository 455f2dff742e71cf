"""Attribution on the pool as it reports itself (issue 44, item 5): small literal lakes with
Lustre-named pool rows, as the lctl reader writes them (``docs/formats.md``): per OST
(``fs-OST0001``…) ``write_latency_us_total`` / ``write_ops`` counters and, where the pool has
them, ``background_active.<kind>``; the MDT (``fs-MDT0000``) carries the metadata counters
``metadata_latency_us_total`` / ``metadata_ops_total`` and nothing of the data path. The job
and its stall are those of ``tests.stall_cases`` (8 ranks, even ranks to the first OST, odd
ranks to the second; a third OST idle), with its own pool rows: no long-CSV names."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import polars as pl
from tests.stall_cases import INTERVAL_S, N_CKPT, STALL_STEP, T0, Case, _rows

from ckptwatch.analysis.findings import ATTRIBUTION_VIEWS, attribute_stalls
from ckptwatch.analysis.stalls import stall_features
from ckptwatch.lake.query import connect
from ckptwatch.lake.schema import TABLES
from ckptwatch.lake.store import Lake

OSTS = ("fs-OST0001", "fs-OST0002", "fs-OST0003")
MDT = "fs-MDT0000"


@dataclass
class Pool:
    """The Lustre pool's behaviour during the stall (30 s readings, cumulative counters)."""

    #: OST -> background kind active on it during the stall (rebuild, scrub, …)
    background: dict[str, str] | None = None
    #: write background_active.<kind> rows at all (Lustre reports none: False)
    has_background: bool = False
    #: OSTs whose mean write latency rises during the stall (ms; 2 ms otherwise)
    slow_writes: tuple[str, ...] = ()
    #: the MDT's mean metadata latency during the stall (ms; 0.6 ms otherwise)
    mdt_ms: float = 0.6
    #: OSTs whose request queue (queue_depth_total / queue_requests_total) deepens
    deep_queue: tuple[str, ...] = ()
    #: a rank's record names its targets joined by commas (even ranks: OST1 and OST3)
    striped: bool = False


def _pool_rows(pool: Pool) -> list[dict[str, object]]:
    rows: list[dict[str, object]] = []
    horizon = 60 + N_CKPT * INTERVAL_S
    stall_t = 60 + STALL_STEP * INTERVAL_S
    sums: dict[tuple[str, str], float] = {}

    def add(ts: datetime, target: str, metric: str, inc: float) -> None:
        sums[target, metric] = sums.get((target, metric), 0.0) + inc
        rows.append({"ts": ts, "pool": "fs", "target": target, "metric": metric,
                     "value": sums[target, metric]})

    for s in range(0, horizon + 30, 30):
        ts = T0 + timedelta(seconds=s)
        in_stall = stall_t - 30 <= s <= stall_t + 90
        wobble = 1.0 + 0.02 * ((s // 30) % 3 - 1)  # each series' own small noise
        for ost in OSTS:
            ops = 3000.0
            ms = 40.0 if in_stall and ost in pool.slow_writes else 2.0 * wobble
            add(ts, ost, "write_ops", ops)
            add(ts, ost, "write_latency_us_total", ops * ms * 1000.0)
            depth = 30.0 if in_stall and ost in pool.deep_queue else 2.0 * wobble
            add(ts, ost, "queue_requests_total", ops)
            add(ts, ost, "queue_depth_total", ops * depth)
            if pool.has_background:
                kind = (pool.background or {}).get(ost)
                for k in sorted({"scrub", *(pool.background or {}).values()}):
                    rows.append({"ts": ts, "pool": "fs", "target": ost,
                                 "metric": f"background_active.{k}",
                                 "value": 0.9 if in_stall and k == kind else 0.0})
        md_ops = 500.0
        md_ms = pool.mdt_ms if in_stall else 0.6 * wobble
        add(ts, MDT, "metadata_ops_total", md_ops)
        add(ts, MDT, "metadata_latency_us_total", md_ops * md_ms * 1000.0)
    return rows


def _lake(root: Path, case: Case, pool: Pool) -> Path:
    tables = _rows(Case(**{**case.__dict__, "omit": (*case.omit, "pool", "smart")}))
    for table in ("checkpoint_writes", "checkpoint_starts"):
        for row in tables.get(table, []):
            first = "fs-OST0001,fs-OST0003" if pool.striped else "fs-OST0001"
            row["target"] = first if row["target"] == "t1" else "fs-OST0002"
    tables["pool_metrics"] = _pool_rows(pool)
    lake = Lake(root)
    lake.init()
    now = datetime(2026, 11, 29, tzinfo=UTC)
    for table, rows in tables.items():
        t = TABLES[table]
        df = pl.DataFrame(rows, infer_schema_length=None).with_columns(
            pl.lit("case").alias("source_file"),
            pl.lit(now).cast(pl.Datetime("us", "UTC")).alias("ingested_ts"))
        empty = pl.from_arrow(t.schema.empty_table())
        assert isinstance(empty, pl.DataFrame)
        df = df.select([pl.col(c).cast(d) if c in df.columns else pl.lit(None, d).alias(c)
                        for c, d in empty.schema.items()])
        for rel, part in lake.plan_parts(f"case-{table}".ljust(16, "0"), t, df):
            lake.write_part(rel, t, part)
    return root


def _stall(lake: Path) -> dict[str, Any]:
    """The one stall's verdict, its ``features`` the whole feature row (context included)."""
    con = connect(lake, views=ATTRIBUTION_VIEWS)
    try:
        [stall] = [s.to_dict() for s in attribute_stalls(con).stalls]
        [row] = stall_features(con).to_dicts()
    finally:
        con.close()
    return {**stall, "features": row}


def _text(stall: dict[str, Any]) -> str:
    return " | ".join(line for c in stall["causes"] for line in c["evidence"])


def _supported(stall: dict[str, Any]) -> list[str]:
    return [c["cause"] for c in stall["causes"] if c["supported"]]


def test_a_rebuild_on_the_slow_ranks_ost_is_gc_named_by_its_kind(tmp_path: Path) -> None:
    stall = _stall(_lake(tmp_path / "lake", Case(stall="gc"),
                         Pool(has_background=True, background={"fs-OST0001": "rebuild"},
                              slow_writes=("fs-OST0001",), deep_queue=("fs-OST0001",))))
    assert stall["cause"] == "gc"
    f = stall["features"]
    assert f["slow_targets"] == ["fs-OST0001"]
    assert [(b["kind"], b["host"]) for b in f["background_slow"]] == [("rebuild", "fs-OST0001")]
    assert f["wa_separation"] == 1.0
    gc = stall["causes"][0]["evidence"]
    assert any(line.startswith("rebuild on fs-OST0001: 0.90 of the window (others 0.00)")
               for line in gc), gc
    # the slow OST's write latency and queue back it up, each against its own noise
    assert f["write_latency_slow_up"] == ["fs-OST0001"]
    assert f["write_latency_share_up"] == 0.5  # OST3 is none of the job's
    assert any(line.startswith("pool write latency on fs-OST0001: 40.0 ms") for line in gc)
    assert any(line.startswith("queue depth on fs-OST0001") for line in gc)


def test_a_scrub_on_an_ost_nobody_slow_writes_to_supports_no_gc(tmp_path: Path) -> None:
    # The same stall (OST1's ranks slow), background work on OST2 only: not the slow ranks'.
    stall = _stall(_lake(tmp_path / "lake", Case(stall="gc"),
                         Pool(has_background=True, background={"fs-OST0002": "scrub"})))
    assert "gc" not in _supported(stall)
    assert stall["features"]["background_slow"] == []


def test_mdt_latency_up_is_metadata_evidence_from_the_metadata_service(tmp_path: Path) -> None:
    # No phase seconds in the records: only the MDT can tell.
    case = Case(stall="metadata", omit=("phases",))
    stall = _stall(_lake(tmp_path / "lake", case, Pool(mdt_ms=150.0)))
    assert stall["cause"] == "metadata"
    f = stall["features"]
    assert f["metadata_host"] == MDT and f["metadata_on_service"]
    assert f["metadata_latency_ms"] > 100 and f["metadata_latency_base_ms"] < 1
    assert "pool metadata latency on fs-MDT0000 (the pool's metadata service)" in _text(stall)
    assert f["coverage"]["has_pool_metadata"]


def test_without_the_mdt_rising_the_same_stall_is_not_metadata(tmp_path: Path) -> None:
    stall = _stall(_lake(tmp_path / "lake", Case(stall="metadata", omit=("phases",)), Pool()))
    assert "metadata" not in _supported(stall)
    assert stall["features"]["metadata_latency_z"] < 5


def test_write_latency_up_on_every_target_is_not_gc(tmp_path: Path) -> None:
    stall = _stall(_lake(tmp_path / "lake", Case(stall="gc"),
                         Pool(has_background=True, slow_writes=OSTS)))
    assert stall["cause"] != "gc" and "gc" not in _supported(stall)
    f = stall["features"]
    assert f["write_latency_share_up"] == 1.0
    assert "pool write latency up on 2/2 of the job's targets" in _text(stall)
    assert "the pool as a whole is slow" in _text(stall)


def test_a_lustre_day_without_background_telemetry_never_says_gc(tmp_path: Path) -> None:
    # Lustre reports no GC: the slow OST's write latency rises, nothing says why.
    stall = _stall(_lake(tmp_path / "lake", Case(stall="gc"),
                         Pool(slow_writes=("fs-OST0001",))))
    assert stall["cause"] in ("unknown", "no_telemetry")
    assert "gc" not in _supported(stall)
    text = _text(stall)
    assert "the pool reports no background work there (no GC telemetry): gc cannot be " \
           "confirmed" in text
    assert "gc cannot be judged" in text
    assert not stall["features"]["coverage"]["has_pool_gc"]


def test_a_striped_record_names_each_of_its_targets(tmp_path: Path) -> None:
    # Even ranks stripe over OST1 and OST3; the rebuild on OST3 slows them.
    stall = _stall(_lake(tmp_path / "lake", Case(stall="gc"),
                         Pool(has_background=True, background={"fs-OST0003": "rebuild"},
                              striped=True)))
    assert stall["cause"] == "gc"
    f = stall["features"]
    assert f["slow_targets"] == ["fs-OST0001", "fs-OST0003"]
    assert f["wa_separation"] == 1.0
    assert "rebuild on fs-OST0003" in _text(stall)
