"""sysfs InfiniBand counter snapshots: procfs and node_exporter sysfs fixture trees."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from tests.sql_seed import fabric_deltas

from ckptwatch.errors import RecordError
from ckptwatch.sources.base import ToolContext
from ckptwatch.sources.sysfs_ib import detect, ext_name, parse_sysfs_ib, read_sysfs_tree

IB = Path(__file__).parents[1] / "fixtures" / "real" / "infiniband"
PROCFS = IB / "procfs_sysfs" / "sys" / "class" / "infiniband"
NODE_EXPORTER = IB / "node_exporter_sysfs" / "sys" / "class" / "infiniband"
TS = datetime(2026, 11, 28, 12, 0, tzinfo=UTC)


def ctx(device: str | None = None, port: str | None = None, ts: datetime = TS) -> ToolContext:
    return ToolContext(node="gpu-node-07", ts=ts, source="sysfs-ib", device=device, port=port)


def counters(output: Any, **kw: Any) -> dict[tuple[str, str, str], float]:
    rows = parse_sysfs_ib(output, ctx(**kw))["fabric_counters"]
    for row in rows:
        assert set(row) == {"ts", "node", "device", "port", "counter", "value", "source"}
        assert isinstance(row["value"], float)
    return {(r["device"], r["port"], r["counter"]): r["value"] for r in rows}


def grep_text(snapshot: dict[str, str]) -> str:
    """What ``grep -H . /sys/class/infiniband/*/ports/*/counters/*`` prints for a snapshot."""
    return "".join(f"/sys/class/infiniband/{path}:{value}\n" for path, value in snapshot.items())


def test_procfs_tree_values() -> None:
    snap = read_sysfs_tree(PROCFS)
    assert detect(snap)
    c = counters(snap)
    assert {d for d, _, _ in c} == {"hfi1_0", "mlx4_0", "mlx5_0"}
    assert c[("mlx5_0", "1", "port_xmit_data")] == 2880761508848.0
    assert c[("mlx5_0", "1", "port_xmit_bytes")] == 2880761508848.0 * 4
    assert c[("mlx5_0", "1", "unicast_xmit_packets")] == 10907922116.0
    assert c[("mlx5_0", "1", "roce_slow_restart_cnps")] == 131.0  # hw_counters
    assert c[("mlx5_0", "1", "local_ack_timeout_err")] == 131.0
    assert c[("mlx5_0", "1", "req_cqe_error")] == 3481.0
    assert c[("mlx4_0", "1", "port_xmit_wait")] == 3599.0
    assert c[("mlx4_0", "2", "port_xmit_wait")] == 3846.0
    assert c[("hfi1_0", "1", "port_rcv_data")] == 345091702026.0
    assert c[("mlx4_0", "1", "VL15_dropped")] == 0.0


def test_node_exporter_tree_saturation_and_counters_ext() -> None:
    c = counters(read_sysfs_tree(NODE_EXPORTER))
    assert c[("mlx4_0", "1", "port_xmit_wait")] == 4294967295.0  # saturated legacy counter
    assert c[("mlx4_0", "1", "port_xmit_discards")] == 5.0
    # port 2: counters/port_rcv_data reads 0, counters_ext/port_rcv_data_64 4631917: 64-bit wins
    assert c[("mlx4_0", "2", "port_rcv_data")] == 4631917.0
    assert c[("mlx4_0", "2", "port_rcv_bytes")] == 4631917.0 * 4
    assert c[("mlx4_0", "1", "unicast_rcv_packets")] == 61148.0
    assert not any(d == "i40iw0" for d, _, _ in c)  # every i40iw0 counter reads N/A (no PMA)


def test_saturated_sysfs_counter_gives_null_delta(tmp_path: Path) -> None:
    snap = read_sysfs_tree(NODE_EXPORTER)
    rows = []
    for k in range(3):
        rows += parse_sysfs_ib(snap, ctx(ts=TS + timedelta(seconds=30 * k)))["fabric_counters"]
    out = fabric_deltas(tmp_path, rows)
    wait = out.filter((pl.col("counter") == "port_xmit_wait") & (pl.col("port") == "1"))
    assert wait["saturated"].to_list() == [True, True, True]
    assert wait["delta"].null_count() == 3
    discards = out.filter((pl.col("counter") == "port_xmit_discards") & (pl.col("port") == "1"))
    assert discards["delta"].to_list() == [None, 0.0, 0.0]
    assert not discards["saturated"].any()


def test_grep_text_form_equals_tree_form() -> None:
    snap = read_sysfs_tree(PROCFS)
    text = grep_text(snap)
    assert detect(text)
    assert counters(text) == counters(snap)


def test_nested_object_and_relative_paths() -> None:
    nested = {"mlx5_0": {"ports": {"1": {"counters": {"port_xmit_wait": "12"},
                                         "hw_counters": {"np_cnp_sent": "40",
                                                         "rp_cnp_handled": "41",
                                                         "np_ecn_marked_roce_packets": "42"}}}}}
    c = counters(nested)
    assert c[("mlx5_0", "1", "port_xmit_wait")] == 12.0
    assert (c[("mlx5_0", "1", "cnp_sent")], c[("mlx5_0", "1", "cnp_handled")],
            c[("mlx5_0", "1", "ecn_marked")]) == (40.0, 41.0, 42.0)
    assert c[("mlx5_0", "1", "np_cnp_sent")] == 40.0
    rel = {"counters/port_xmit_wait": "5"}
    assert counters(rel, device="mlx5_3", port="1") == {("mlx5_3", "1", "port_xmit_wait"): 5.0}
    with pytest.raises(RecordError, match="does not say which HCA/port"):
        parse_sysfs_ib(rel, ctx())


def test_all_no_pma_is_rejected() -> None:
    snap = {k: v for k, v in read_sysfs_tree(NODE_EXPORTER).items() if k.startswith("i40iw0/")}
    with pytest.raises(RecordError) as err:
        parse_sysfs_ib(snap, ctx())
    assert err.value.reason == ("sysfs snapshot has no readable counter: all 17 counter files "
                                "read 'N/A (no PMA)' (the HCA has no performance management "
                                "agent)")


def test_malformed_and_truncated_copies() -> None:
    text = grep_text(read_sysfs_tree(PROCFS))
    lines = text.splitlines()
    bad = "\n".join([*lines[:3], lines[3].split(":")[0] + ":12x", *lines[4:]])
    with pytest.raises(RecordError, match=r"^sysfs line 4 \(counters/\w+\): not an integer: "
                                          r"'12x'$"):
        parse_sysfs_ib(bad, ctx())
    cut = text[: text.index("\n", 200) + 10]  # last line cut inside the path
    with pytest.raises(RecordError, match=r"^sysfs snapshot line \d+ is not 'path:value'"):
        parse_sysfs_ib(cut, ctx())
    with pytest.raises(RecordError, match="no <hca>/ports/<n>/counters"):
        parse_sysfs_ib({"mlx5_0/fw_ver": "14.28.2006"}, ctx())


def test_ext_names() -> None:
    assert ext_name("port_xmit_data_64") == "port_xmit_data"
    assert ext_name("port_unicast_rcv_packets") == "unicast_rcv_packets"


@pytest.mark.parametrize("value", [None, 3, [], {}, "NIC statistics:\n rx: 1\n",
                                   {"mlx5_0/fw_ver": "1"}])
def test_detect_rejects_other_inputs(value: Any) -> None:
    assert detect(value) is False


def test_envelope_with_grep_output_is_ingested() -> None:
    envelope = pytest.importorskip("ckptwatch.sources.envelope")
    import json

    snap = read_sysfs_tree(PROCFS)
    good = json.dumps({"node": "n1", "collected_at": "2026-11-28T12:00:00Z",
                       "source": "sysfs-ib", "output": grep_text(snap)})
    bad = json.dumps({"node": "n1", "collected_at": "2026-11-28T12:00:10Z",
                      "output": "mlx5_0/ports/1/counters/port_xmit_wait:N/A (no PMA)\n"})
    parsed = envelope.read_envelopes(f"{good}\n{bad}\n".encode(), file_label="fabric/n1/x.jsonl")
    assert parsed.rows("fabric_counters") == len(counters(snap))
    assert [(r.line, r.reason) for r in parsed.rejects] == [
        (2, "sysfs snapshot has no readable counter: all 1 counter files read 'N/A (no PMA)' "
            "(the HCA has no performance management agent)")]
