"""IBM Storage Scale readers: the genuine ``mmpmon``, ``mmlsqos -Y`` and ``mmdiag --waiters
-Y`` outputs of treydock/gpfs_exporter's tests (tests/fixtures/real/pool_telemetry/
gpfs_exporter, provenance in its PROVENANCE.md). Storage Scale's tools give no metadata
latency (mmpmon counts operations) and no mean write latency (the waiters give the longest
NSD I/O wait now)."""

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
from ckptwatch.sources.envelope import LINE_REJECTS
from ckptwatch.sources.storage_scale import parse_mmlsqos, parse_mmpmon, parse_waiters

REAL = Path(__file__).parents[1] / "fixtures" / "real" / "pool_telemetry" / "gpfs_exporter"
MMPMON = REAL / "mmpmon_fs_io_s_stdout.txt"
MMLSQOS = REAL / "mmlsqos_stats_stdout.txt"
WAITERS = REAL / "mmdiag_waiters_stdout.txt"
TS = datetime(2026, 11, 28, 12, 0, tzinfo=UTC)


def _ctx(source: str, device: str | None = None) -> ToolContext:
    return ToolContext(node="nsd01", ts=TS, source=source, device=device)


def _by(rows: list[dict[str, Any]]) -> dict[tuple[str, str, str], float]:
    out = {}
    for r in rows:
        key = (r["pool"], r["target"], r["metric"])
        assert key not in out
        out[key] = r["value"]
    return out


def test_mmpmon_fs_io_s_gives_write_and_metadata_counts_per_file_system() -> None:
    got = parse_mmpmon(MMPMON.read_text(), _ctx("mmpmon"))
    rows = _by(got["pool_metrics"])
    node = "ib-pitzer-rw02.ten"
    # _fs_ scratch … _bw_ 74839282351 _oc_ 2377656 _cc_ 2201576 _wc_ 18874626 _dir_ 40971
    #   _iu_ 544768
    assert rows[("scratch", node, "write_bytes")] == 74839282351
    assert rows[("scratch", node, "write_ops")] == 18874626
    assert rows[("scratch", node, "metadata_ops_total.open")] == 2377656
    assert rows[("scratch", node, "metadata_ops_total.close")] == 2201576
    assert rows[("scratch", node, "metadata_ops_total.readdir")] == 40971
    assert rows[("scratch", node, "metadata_ops_total.inode_update")] == 544768
    assert rows[("scratch", node, "metadata_ops_total")] == 2377656 + 2201576 + 40971 + 544768
    assert rows[("project", node, "metadata_ops_total")] == 513 + 513 + 0 + 169
    assert len(rows) == 2 * 7
    # _t_ 1579358234 _tu_ 53212: the tool's own clock
    assert {r["ts"] for r in got["pool_metrics"]} == {
        datetime.fromtimestamp(1579358234.053212, tz=UTC)}


def test_an_mmpmon_line_with_an_error_code_is_rejected_alone() -> None:
    good, _ = MMPMON.read_text().strip().split("\n")[-2:]
    failed = good.replace("_rc_ 0", "_rc_ 19").replace("_fs_ scratch", "_fs_ gone")
    got = parse_mmpmon(f"{good}\n{failed}\n", _ctx("mmpmon"))
    assert {r["pool"] for r in got["pool_metrics"]} == {"scratch"}
    assert [r["reason"][:56] for r in got[LINE_REJECTS]] == [
        "mmpmon line 2: mmpmon reports an error (_rc_ 19): '_fs_i"]


def test_mmlsqos_queue_depth_and_maintenance_share_with_decimal_commas() -> None:
    got = parse_mmlsqos(MMLSQOS.read_text(), _ctx("mmlsqos", device="mmfs1"))
    rows = _by(got["pool_metrics"])
    # stats lines pool:timeEpoch:class:iops:ioql:qsdl:et:MBs, comma decimals (upstream's test
    # values, some edited by its authors: ioql 1,7781e+08)
    assert rows[("mmfs1", "nvme1", "queue_depth")] == pytest.approx(
        0.013449 + 1.0751e-05 + 0.85256 + 77349065.73251, rel=1e-15)
    assert rows[("mmfs1", "system", "queue_depth")] == pytest.approx(
        1.7781e+08 + 0.0055852 + 41.399 + 1.9398e+08 + 5.579e-05 + 0.0, rel=1e-15)
    # maintenance 0,066667 IOPS of the system pool's 24875 + 35545 + 0,066667
    assert rows[("mmfs1", "system", "background_active.restripe")] == pytest.approx(
        0.066667 / (24875 + 35545 + 0.066667), rel=1e-12)
    assert rows[("mmfs1", "nvme1", "background_active.restripe")] == 0.0
    assert len(rows) == 4 and LINE_REJECTS not in got
    # timeEpoch 1678438680 + et 30: the end of the measured interval
    assert {r["ts"] for r in got["pool_metrics"]} == {datetime.fromtimestamp(1678438710, tz=UTC)}


def test_mmlsqos_without_a_file_system_name_uses_gpfs_and_rejects_bad_numbers() -> None:
    text = MMLSQOS.read_text().replace(":0,85256:", ":n/a:")
    got = parse_mmlsqos(text, _ctx("mmlsqos", device="mmlsqos"))
    assert {r["pool"] for r in got["pool_metrics"]} == {"gpfs"}
    assert [r["reason"][:46] for r in got[LINE_REJECTS]] == [
        "mmlsqos line 10: unreadable ioql 'n/a': 'mmlsq"]


def test_mmdiag_waiters_rebuild_nsd_io_and_the_malformed_lines() -> None:
    got = parse_waiters(WAITERS.read_text(), _ctx("mmdiag-waiters"))
    rows = _by(got["pool_metrics"])
    assert rows[("gpfs", "nsd01", "background_active.rebuild")] == 1.0  # RebuildWorkThread
    # NSDThread "for I/O completion": 0.0244, 0.0134 and 0.0037 s
    assert rows[("gpfs", "nsd01", "queue_depth.disk")] == 3
    assert rows[("gpfs", "nsd01", "write_latency_max_ms")] == pytest.approx(24.4, rel=1e-12)
    assert len(rows) == 3
    assert [r["reason"].split(": '")[0] for r in got[LINE_REJECTS]] == [
        "mmdiag --waiters line 30: no threadName; waitTime 'foo' is not a number of seconds",
        "mmdiag --waiters line 31: not a 'mmdiag:<section>:…' line",
        "mmdiag --waiters line 32: 2 fields: too few for a 'mmdiag -Y' line",
        "mmdiag --waiters line 33: section 'foobar' has no HEADER line before it",
    ]


def test_no_waiters_is_no_rebuild_and_an_empty_queue_and_garbage_is_rejected() -> None:
    header = WAITERS.read_text().strip().split("\n")[0]
    rows = _by(parse_waiters(header + "\n", _ctx("mmdiag-waiters"))["pool_metrics"])
    assert rows == {("gpfs", "nsd01", "background_active.rebuild"): 0.0,
                    ("gpfs", "nsd01", "queue_depth.disk"): 0.0}
    with pytest.raises(RecordError, match="no readable waiter line"):
        parse_waiters("foobar\n", _ctx("mmdiag-waiters"))
    with pytest.raises(RecordError, match="empty"):
        parse_waiters("", _ctx("mmdiag-waiters"))


def test_each_genuine_output_is_recognised_as_its_format() -> None:
    load_all()
    assert detect_tool(MMPMON.read_text()) == "mmpmon"
    assert detect_tool(MMLSQOS.read_text()) == "mmlsqos"
    assert detect_tool(WAITERS.read_text()) == "mmdiag-waiters"


def test_ingest_quarantines_the_four_bad_waiter_lines_and_keeps_the_rest(tmp_path: Path) -> None:
    raw = tmp_path / "raw"
    host = raw / "pool" / "nsd01"
    host.mkdir(parents=True)
    (host / "waiters.txt").write_text(WAITERS.read_text())
    mtime = datetime(2026, 11, 28, 12, 5, tzinfo=UTC).timestamp()
    os.utime(host / "waiters.txt", (mtime, mtime))
    (raw / "pool" / "gpfs.jsonl").write_text("".join(json.dumps(e) + "\n" for e in [
        {"node": "nsd02", "device": "mmfs1", "collected_at": "2026-11-28T12:06:00Z",
         "source": "mmlsqos", "output": MMLSQOS.read_text()},
        {"node": "nsd02", "collected_at": "2026-11-28T12:06:00Z", "source": "mmpmon",
         "output": MMPMON.read_text()},
        {"node": "nsd02", "collected_at": "2026-11-28T12:06:00Z", "source": "mmdiag-waiters",
         "output": WAITERS.read_text()},
    ]))
    report = ingest(raw, tmp_path / "lake")
    assert report.rows == {"pool_metrics": 3 + 4 + 14 + 3}
    assert report.quarantined == 8
    lake = Lake(tmp_path / "lake")
    q = lake.read("quarantine").sort("source_file", "reason")
    assert q.select("source_file", "line").rows() == (
        [("pool/gpfs.jsonl", 3)] * 4 + [("pool/nsd01/waiters.txt", None)] * 4)
    assert q["reason"][4].startswith("mmdiag --waiters line 30: no threadName")
    df = lake.read("pool_metrics")
    waits = df.filter(target="nsd01", metric="queue_depth.disk")
    assert waits.select("value", "ts").rows() == [(3.0, datetime(2026, 11, 28, 12, 5, tzinfo=UTC))]
    assert df.filter(pool="mmfs1", target="system", metric="queue_depth").height == 1
