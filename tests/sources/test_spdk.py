"""SPDK readers: the genuine JSON-RPC example responses of SPDK's doc/jsonrpc.md
(tests/fixtures/real/pool_telemetry/spdk, provenance in its PROVENANCE.md). The example
``bdev_get_iostat`` has reads only (its write counters are 0): the conversion of write ticks to
µs is checked on a literal too. SPDK has no metadata or GC signal."""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from ckptwatch.errors import RecordError
from ckptwatch.ingest.run import ingest
from ckptwatch.lake.store import Lake
from ckptwatch.sources import load_all
from ckptwatch.sources.base import ToolContext, detect_tool
from ckptwatch.sources.spdk import parse_iostat, parse_nvmf_stats

REAL = Path(__file__).parents[1] / "fixtures" / "real" / "pool_telemetry" / "spdk"
IOSTAT = REAL / "bdev_get_iostat_example_response.json"
NVMF = REAL / "nvmf_get_stats_example_response.json"
TS = datetime(2026, 11, 28, 12, 0, tzinfo=UTC)
CTX = ToolContext(node="nvmf-t1", ts=TS, source="spdk-iostat")


def _by(rows: list[dict[str, Any]]) -> dict[tuple[str, str], float]:
    out = {}
    for r in rows:
        assert r["pool"] == "spdk" and r["ts"] == TS
        assert (r["target"], r["metric"]) not in out
        out[(r["target"], r["metric"])] = r["value"]
    return out


def test_genuine_iostat_gives_write_counters_and_sampled_queue_depth() -> None:
    rows = _by(parse_iostat(json.loads(IOSTAT.read_text()), CTX)["pool_metrics"])
    for bdev in ("nvmf-t1/Nvme0n1", "nvmf-t1/Nvme0n2"):
        assert rows[(bdev, "write_latency_us_total")] == 0.0  # write_latency_ticks 0
        assert rows[(bdev, "write_ops")] == 0.0
        assert rows[(bdev, "write_bytes")] == 0.0
        assert rows[(bdev, "queue_depth.disk")] == 0.0  # queue_depth_polling_period 2: sampled
    assert len(rows) == 8  # no max latency field in this SPDK version's output


def test_write_ticks_become_microseconds_and_unsampled_queue_depth_is_no_reading() -> None:
    # rpc.py prints the bare result; ticks / tick_rate x 1e6 = µs
    result = {"tick_rate": 2200000000, "bdevs": [{
        "name": "Nvme1n1", "bytes_written": 4194304, "num_write_ops": 4,
        "write_latency_ticks": 4400000, "max_write_latency_ticks": 2200000,
        "queue_depth_polling_period": 0, "queue_depth": 0, "io_time": 0,
        "weighted_io_time": 0}]}
    rows = _by(parse_iostat(result, CTX)["pool_metrics"])
    assert rows == {("nvmf-t1/Nvme1n1", "write_bytes"): 4194304.0,
                    ("nvmf-t1/Nvme1n1", "write_ops"): 4.0,
                    ("nvmf-t1/Nvme1n1", "write_latency_us_total"): 2000.0,
                    ("nvmf-t1/Nvme1n1", "write_latency_peak_ms"): 1.0}


def test_bad_iostat_outputs_are_quarantined_with_the_reason() -> None:
    with pytest.raises(RecordError, match="the RPC failed: 'Method not found'"):
        parse_iostat({"jsonrpc": "2.0", "id": 1,
                      "error": {"code": -32601, "message": "Method not found"}}, CTX)
    with pytest.raises(RecordError, match="tick_rate is not a positive number"):
        parse_iostat({"tick_rate": 0, "bdevs": []}, CTX)
    with pytest.raises(RecordError, match="bdev 'Nvme0n1': num_write_ops is not a non-negative"):
        parse_iostat({"tick_rate": 1, "bdevs": [{
            "name": "Nvme0n1", "bytes_written": 0, "num_write_ops": "x",
            "write_latency_ticks": 0}]}, CTX)
    with pytest.raises(RecordError, match="per-channel output"):
        parse_iostat({"tick_rate": 1, "name": "Nvme0n1", "channels": []}, CTX)


def test_nvmf_get_stats_is_recognised_and_quarantined_its_counts_are_not_queue_depths() -> None:
    doc = json.loads(NVMF.read_text())
    # pending_bdev_io 1721 and pending_rdma_read 337602 are counts of waits since start
    with pytest.raises(RecordError, match="count the times a request had to wait"):
        parse_nvmf_stats(doc, ToolContext(node="nvmf-t1", ts=TS, source="spdk-nvmf-stats"))


def test_each_genuine_response_is_recognised_as_its_format() -> None:
    load_all()
    assert detect_tool(json.loads(IOSTAT.read_text())) == "spdk-iostat"
    assert detect_tool(json.loads(NVMF.read_text())) == "spdk-nvmf-stats"
    assert detect_tool(json.loads(IOSTAT.read_text())["result"]) == "spdk-iostat"


def test_a_raw_response_under_pool_host_takes_its_time_from_the_file(tmp_path: Path) -> None:
    raw = tmp_path / "raw"
    host = raw / "pool" / "nvmf-t1"
    host.mkdir(parents=True)
    (host / "bdev_get_iostat.json").write_text(IOSTAT.read_text())
    mtime = datetime(2026, 11, 28, 12, 5, tzinfo=UTC).timestamp()
    os.utime(host / "bdev_get_iostat.json", (mtime, mtime))
    (raw / "pool" / "spdk.jsonl").write_text(json.dumps({
        "node": "nvmf-t2", "collected_at": "2026-11-28T12:06:00Z", "source": "spdk-iostat",
        "output": json.loads(IOSTAT.read_text())}) + "\n")
    report = ingest(raw, tmp_path / "lake")
    assert report.quarantined == 0, [f for f in report.files if f.quarantined]
    df = Lake(tmp_path / "lake").read("pool_metrics").filter(
        metric="queue_depth.disk", target="nvmf-t1/Nvme0n1")
    assert df.select("pool", "value").rows() == [("spdk", 0.0)]
    assert df["ts"].to_list() == [datetime(2026, 11, 28, 12, 5, tzinfo=UTC)]  # the mtime
    env = Lake(tmp_path / "lake").read("pool_metrics").filter(target="nvmf-t2/Nvme0n2")
    assert set(env["ts"].to_list()) == {datetime(2026, 11, 28, 12, 6, tzinfo=UTC)}
