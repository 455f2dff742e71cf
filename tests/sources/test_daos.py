"""DAOS readers: genuine ``daos_metrics`` and ``dmg pool query`` outputs from the DAOS
telemetry guide (tests/fixtures/real/pool_telemetry/daos, provenance in its PROVENANCE.md),
values checked by hand against the files."""

from __future__ import annotations

import contextlib
import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from ckptwatch.errors import RecordError
from ckptwatch.ingest.run import ingest
from ckptwatch.lake.store import Lake
from ckptwatch.sources import load_all
from ckptwatch.sources.base import ToolContext, detect_tool
from ckptwatch.sources.daos import parse_daos_metrics, parse_pool_query
from ckptwatch.sources.envelope import LINE_REJECTS

REAL = Path(__file__).parents[1] / "fixtures" / "real" / "pool_telemetry" / "daos"
TS = datetime(2026, 11, 28, 12, 0, tzinfo=UTC)
CTX = ToolContext(node="daos-s1", ts=TS, source="daos-metrics")


def _by(rows: list[dict[str, Any]]) -> dict[tuple[str, str, str], float]:
    out = {}
    for r in rows:
        key = (r["pool"], r["target"], r["metric"])
        assert key not in out, f"two rows for {key}"
        assert r["ts"] == TS
        out[key] = r["value"]
    return out


def _read(name: str) -> str:
    return (REAL / name).read_text()


def test_update_latency_per_target_is_the_cumulative_sum_count_and_peak() -> None:
    got = parse_daos_metrics(_read("telemetry_guide_io_latency_update_fetch_4MB_per_target.txt"),
                             CTX)
    rows = _by(got["pool_metrics"])
    slow = ("daos", "daos-s1/engine0/tgt_8", )
    # ID: 0/io/latency/update/4MB/tgt_8,15264368,857936,19645847,9109087.453125,64,582981597,…
    assert rows[(*slow, "write_latency_us_total")] == 582981597
    assert rows[(*slow, "write_ops")] == 64
    assert rows[(*slow, "write_latency_peak_ms")] == 19645.847
    # the mean since the start the file prints (9109087.453125 µs) is the pair's ratio
    assert rows[(*slow, "write_latency_us_total")] / rows[(*slow, "write_ops")] == 9109087.453125
    tgt2 = ("daos", "daos-s1/engine0/tgt_2")  # 1252,1122,2275,1452.000000,62,90024
    assert (rows[(*tgt2, "write_latency_us_total")], rows[(*tgt2, "write_ops")],
            rows[(*tgt2, "write_latency_peak_ms")]) == (90024, 62, 2.275)
    # 16 targets x 3 metrics; the io/latency/fetch rows (reads) are not read
    assert len(rows) == 48
    assert {m for _, _, m in rows} == {"write_latency_peak_ms", "write_latency_us_total",
                                       "write_ops"}
    assert LINE_REJECTS not in got


def test_the_tree_form_of_a_latency_gauge_reads_as_the_csv_does() -> None:
    # latency/update/256B/tgt_0: 118 us [min: 15, max: 3703, avg: 100, sum: 200968, …,
    #   samples: 2010]
    rows = _by(parse_daos_metrics(_read("telemetry_guide_latency_unit_format.txt"),
                                  CTX)["pool_metrics"])
    target = ("daos", "daos-s1/engine0/tgt_0")
    assert rows == {(*target, "write_latency_us_total"): 200968, (*target, "write_ops"): 2010,
                    (*target, "write_latency_peak_ms"): 3.703}


#: A whole-tree ``daos_metrics`` output in the form of the guide's samples (values ours): two
#: I/O sizes of one target, a timestamp leaf, and a read leaf whose value is not a number.
TREE = """\
ID: 2
  started_at: Tue Nov 28 10:00:00 2023
  events
    dead_ranks: 0 events
  io
    latency
      update
        1MB
          tgt_0: 900 us [min: 100, max: 5000, avg: 800, sum: 8000, stddev: 10, samples: 10]
        4MB
          tgt_0: 2000 us [min: 1000, max: 9000, avg: 2000, sum: 40000, stddev: 9, samples: 20]
  sched
    cycle_duration
      xs_2: 7 ms [min: 0, max: 9, avg: 1, sum: 12, stddev: 1, samples: 57]
    cycle_size
      xs_2: junk
"""


def test_a_whole_tree_sums_the_sizes_skips_text_leaves_and_rejects_a_bad_read_leaf() -> None:
    got = parse_daos_metrics(TREE, CTX)
    rows = _by(got["pool_metrics"])
    tgt = ("daos", "daos-s1/engine2/tgt_0")
    assert rows == {(*tgt, "write_latency_us_total"): 48000.0, (*tgt, "write_ops"): 30.0,
                    (*tgt, "write_latency_peak_ms"): 9.0,
                    ("daos", "daos-s1/engine2/xs_2", "queue_wait_ms"): 7.0}
    assert [r["reason"] for r in got[LINE_REJECTS]] == [
        "daos_metrics line 16: sched/cycle_size/xs_2: the value is not a number: 'xs_2: junk'"]


def test_a_stuck_xstream_shows_as_queue_wait_and_queue_depth() -> None:
    rows = _by(parse_daos_metrics(_read("telemetry_guide_sched_cycle_stuck_xs3.txt"),
                                  CTX)["pool_metrics"])
    xs3 = ("daos", "daos-s1/engine0/xs_3")
    assert rows[(*xs3, "queue_wait_ms")] == 87624970  # cycle_duration xs_3: 87624970 ms
    assert rows[(*xs3, "queue_depth")] == 72508  # cycle_size xs_3: 72508 ULT
    assert rows[("daos", "daos-s1/engine0/xs_2", "queue_wait_ms")] == 1000
    assert rows[("daos", "daos-s1/engine0/xs_2", "queue_depth")] == 1
    assert len(rows) == 23 * 2  # xs_0 … xs_22


def test_csv_rows_shorter_than_the_header_are_read_and_active_rpcs_are_summed() -> None:
    # header has 10 fields, the rows 9 (description and units, no std_dev)
    rows = _by(parse_daos_metrics(_read("telemetry_guide_gauges_csv.txt"), CTX)["pool_metrics"])
    assert rows == {("daos", "daos-s1/engine0", "active_requests"): 0.0}
    text = ("ID: 1/net/ofi+tcp;ofi_rxm/hg/active_rpcs/ctx_0,3,,,,,,active RPCs,rpcs\n"
            "ID: 1/net/ofi+tcp;ofi_rxm/hg/active_rpcs/ctx_1,4,,,,,,active RPCs,rpcs\n")
    rows = _by(parse_daos_metrics(text, CTX)["pool_metrics"])
    assert rows == {("daos", "daos-s1/engine1", "active_requests"): 7.0}


def test_an_output_with_nothing_read_is_quarantined_saying_what_is_read() -> None:
    with pytest.raises(RecordError, match="none of its 5 readings is one ckptwatch reads"):
        parse_daos_metrics(_read("telemetry_guide_counters_csv.txt"), CTX)
    with pytest.raises(RecordError, match="no telemetry rows"):
        parse_daos_metrics("#sudo daos_metrics -C -S 0\n\n", CTX)


def test_pool_scoped_counters_and_pool_service_operations() -> None:
    pool = "55cc96d8-5c46-41f4-af29-881d293b6f6f"
    text = "\n".join([
        f"ID: 0/pool/{pool}/ops/update/tgt_3,120",
        f"ID: 0/pool/{pool}/xferred/update/tgt_3,503316480",
        f"ID: 0/pool/{pool}/ops/cont_open,12",
        f"ID: 0/pool/{pool}/ops/pool_connect,3",
        f"ID: 0/pool/{pool}/vos_aggregation/obj_scanned/tgt_3,999",  # not read
    ])
    rows = _by(parse_daos_metrics(text, CTX)["pool_metrics"])
    assert rows == {
        (pool, "daos-s1/engine0/tgt_3", "write_ops"): 120.0,
        (pool, "daos-s1/engine0/tgt_3", "write_bytes"): 503316480.0,
        (pool, "daos-s1/engine0", "metadata_ops_total.cont_open"): 12.0,
        (pool, "daos-s1/engine0", "metadata_ops_total.pool_connect"): 3.0,
        (pool, "daos-s1/engine0", "metadata_ops_total"): 15.0,
    }


def test_a_malformed_row_is_rejected_alone() -> None:
    text = ("ID: 0/io/latency/update/4MB/tgt_1,1260,1147,2191,1463.423077,52,76098,273.64\n"
            "ID: 0/io/latency/update/4MB/tgt_2,abc,1122,2275,1452.0,62,90024,272.89\n")
    got = parse_daos_metrics(text, CTX)
    assert {r["target"] for r in got["pool_metrics"]} == {"daos-s1/engine0/tgt_1"}
    assert [r["reason"] for r in got[LINE_REJECTS]] == [
        "daos_metrics line 2: value 'abc' is not a number: "
        "'ID: 0/io/latency/update/4MB/tgt_2,abc,1122,2275,1452.0,62,90024,272.89'"]


def test_dmg_pool_query_rebuild_state_is_background_activity_of_the_pool() -> None:
    ctx = ToolContext(node="daos-s1", ts=TS, source="dmg-pool-query")
    pool = "55cc96d8-5c46-41f4-af29-881d293b6f6f"
    rows = _by(parse_pool_query(_read("telemetry_guide_dmg_pool_query.txt"), ctx)["pool_metrics"])
    assert rows == {(pool, pool, "background_active.rebuild"): 0.0}  # "Rebuild idle, 0 objs"
    busy = ("Pool cdf27ec1-ed97-4aa6-a766-39a2ed2136a1, ntarget=64, disabled=8, leader=6, "
            "version=77, state=TargetsExcluded\nPool health info:\n- Disabled ranks: 3\n"
            "- Rebuild busy, 1 objs, 0 recs\n")
    got = parse_pool_query(busy, ctx)["pool_metrics"]
    assert [(r["metric"], r["value"]) for r in got] == [("background_active.rebuild", 1.0)]
    with pytest.raises(RecordError, match="unknown rebuild state 'paused'"):
        parse_pool_query(busy.replace("busy", "paused"), ctx)
    with pytest.raises(RecordError, match="has no 'Rebuild <state>' line"):
        parse_pool_query(busy.split("Pool health")[0], ctx)


def test_each_genuine_output_is_recognised_as_its_format() -> None:
    load_all()
    want = {"telemetry_guide_dmg_pool_query.txt": "dmg-pool-query"}
    for path in sorted(REAL.glob("*.txt")):
        assert detect_tool(path.read_text()) == want.get(path.name, "daos-metrics"), path.name


def test_raw_files_under_pool_host_and_envelopes_reach_the_lake(tmp_path: Path) -> None:
    raw = tmp_path / "raw"
    host = raw / "pool" / "daos-s1"
    host.mkdir(parents=True)
    (host / "latency_2026-11-28T12:00:00Z.txt").write_text(
        _read("telemetry_guide_io_latency_update_fetch_4MB_per_target.txt"))
    (raw / "pool" / "daos.jsonl").write_text(json.dumps({
        "node": "daos-s2", "collected_at": "2026-11-28T12:01:00Z", "source": "daos-metrics",
        "output": _read("telemetry_guide_sched_cycle_stuck_xs3.txt")}) + "\n")
    report = ingest(raw, tmp_path / "lake")
    assert report.quarantined == 0, [f for f in report.files if f.quarantined]
    assert report.rows == {"pool_metrics": 48 + 46}
    df = Lake(tmp_path / "lake").read("pool_metrics")
    tgt8 = df.filter(target="daos-s1/engine0/tgt_8", metric="write_latency_peak_ms")
    assert tgt8.select("pool", "value").rows() == [("daos", 19645.847)]
    assert tgt8["ts"].to_list() == [datetime(2026, 11, 28, 12, 0, tzinfo=UTC)]  # from the name
    xs3 = df.filter(target="daos-s2/engine0/xs_3", metric="queue_depth")
    assert xs3["value"].to_list() == [72508.0]
    assert xs3["ts"].to_list() == [datetime(2026, 11, 28, 12, 1, tzinfo=UTC)]  # collected_at


POOL_SOURCES = {"daos-metrics", "dmg-pool-query", "spdk-iostat", "spdk-nvmf-stats", "mmpmon",
                "mmlsqos", "mmdiag-waiters"}
OURS = {REAL, REAL.parent / "spdk", REAL.parent / "gpfs_exporter"}


def test_no_other_genuine_output_is_taken_for_a_daos_spdk_or_storage_scale_one() -> None:
    load_all()
    taken = {}
    for path in sorted((REAL.parents[1]).rglob("*")):
        if not path.is_file() or path.parent in OURS or path.suffix in {".gz", ".parquet"}:
            continue
        try:
            text = path.read_text()
        except UnicodeDecodeError:
            continue
        output: Any = text
        if text.lstrip().startswith("{"):
            with contextlib.suppress(ValueError):
                output = json.loads(text)
        source = detect_tool(output)
        if source in POOL_SOURCES:
            taken[str(path.relative_to(REAL.parents[1]))] = source
    assert taken == {}


#: ``daos_metrics -C`` rows of the per-opcode object RPC latency (``io/ops/<op>/latency/
#: tgt_<n>``, a stats gauge in µs, as DAOS's object module registers it): written in the
#: genuine outputs' CSV form, since the guide's samples hold none.
OP_LATENCY = """name,value,min,max,mean,sample_size,sum,std_dev
ID: 0/io/ops/key_query/latency/tgt_0,310,95,8400,250.000000,40,10000,120.5
ID: 0/io/ops/obj_punch/latency/tgt_0,180,120,600,200.000000,10,2000,50.1
ID: 0/io/ops/dkey_enum/latency/tgt_1,90,60,150,100.000000,4,400,
ID: 0/io/ops/tgt_update/latency/tgt_0,50,40,60,50.000000,5,250,
ID: 0/io/ops/migrate/latency/tgt_0,50,40,60,50.000000,5,250,
"""


def test_object_metadata_rpcs_give_each_target_a_metadata_latency() -> None:
    got = _by(parse_daos_metrics(OP_LATENCY, CTX)["pool_metrics"])
    t0, t1 = "daos-s1/engine0/tgt_0", "daos-s1/engine0/tgt_1"
    assert got[("daos", t0, "metadata_latency_us_total.key_query")] == 10_000
    assert got[("daos", t0, "metadata_ops_total.key_query")] == 40
    assert got[("daos", t0, "metadata_latency_us_total.obj_punch")] == 2_000
    # the sums over the operations: a mean of 12,000 µs / 50 = 240 µs over the counters' life
    assert got[("daos", t0, "metadata_latency_us_total")] == 12_000
    assert got[("daos", t0, "metadata_ops_total")] == 50
    assert got[("daos", t0, "metadata_latency_peak_ms")] == 8.4
    assert got[("daos", t1, "metadata_ops_total")] == 4
    # the data path's halves and the rebuild's migrations are not metadata
    assert not [k for k in got if "tgt_update" in k[2] or "migrate" in k[2]]


def test_metadata_rpc_latency_reaches_the_lake_as_interval_means(tmp_path: Path) -> None:
    # Two readings a minute apart: 200 more key queries costing 100,000 µs more -> 0.5 ms.
    second = OP_LATENCY.replace(",40,10000,", ",240,110000,")
    raw = tmp_path / "raw" / "pool"
    raw.mkdir(parents=True)
    (raw / "daos.jsonl").write_text("".join(json.dumps(
        {"node": "daos-s1", "device": "engine0", "collected_at": ts, "output": text}) + "\n"
        for ts, text in (("2026-11-28T12:00:00Z", OP_LATENCY),
                         ("2026-11-28T12:01:00Z", second))))
    report = ingest(tmp_path / "raw", tmp_path / "lake")
    assert report.quarantined == 0
    from ckptwatch.lake.query import connect, run_sql

    con = connect(tmp_path / "lake", views=("int_pool_interval_means",))
    try:
        rows = run_sql(con, "select target, value, samples from int_pool_interval_means "
                            "where signal = 'metadata_latency_ms' and qualifier is null "
                            "and value is not null").to_dicts()
    finally:
        con.close()
    assert rows == [{"target": "daos-s1/engine0/tgt_0", "value": 0.5, "samples": 200.0}]
