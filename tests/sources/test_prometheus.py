"""Prometheus text exposition: node_exporter infiniband/ethtool and smartctl_exporter scrapes."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from ckptwatch.errors import RecordError
from ckptwatch.sources.base import ToolContext
from ckptwatch.sources.prometheus import (
    detect,
    ethtool_driver_name,
    parse_labels,
    parse_prometheus,
)

PROM = Path(__file__).parents[1] / "fixtures" / "real" / "prometheus_exposition"
IB_PROM = PROM / "node_exporter_e2e_infiniband_excerpt.prom"
SMART_PROM = PROM / "smartctl_exporter_EXAMPLE.prom"
TS = datetime(2026, 11, 28, 12, 0, tzinfo=UTC)

#: node_exporter ``--collector.ethtool`` samples for an mlx5 port (names as node_exporter
#: renders them; values ours), with an explicit sample timestamp on one line.
ETHTOOL_SCRAPE = """\
# HELP node_ethtool_info A metric with a constant '1' value labeled by bus_info, device, driver
# TYPE node_ethtool_info gauge
node_ethtool_info{bus_info="0000:3b:00.0",device="eth2",driver="mlx5_core"} 1
# TYPE node_ethtool_received_prio3_pause untyped
node_ethtool_received_prio3_pause{device="eth2"} 1200
node_ethtool_received_prio3_pause_duration{device="eth2"} 86000
node_ethtool_transmitted_pause_ctrl_phy{device="eth2"} 17
node_ethtool_received_bytes_total{device="eth2"} 1.5e+12 1764331200000
node_ethtool_port_received_dropped{device="eth3"} 4
"""


def ctx() -> ToolContext:
    return ToolContext(node="gpu-node-07", ts=TS, source="prometheus")


def fabric(text: str) -> dict[tuple[str, str, str], float]:
    rows = parse_prometheus(text, ctx())["fabric_counters"]
    for row in rows:
        assert set(row) == {"ts", "node", "device", "port", "counter", "value", "source"}
        assert row["source"] == "prometheus"
    return {(r["device"], r["port"], r["counter"]): r["value"] for r in rows}


def test_node_exporter_infiniband_scrape() -> None:
    text = IB_PROM.read_text()
    assert detect(text)
    c = fabric(text)
    assert c[("mlx4_0", "1", "port_xmit_wait")] == 4294967295.0
    assert c[("mlx4_0", "1", "port_xmit_bytes")] == 14933760.0
    assert c[("mlx4_0", "1", "port_xmit_data")] == 14933760.0 / 4
    assert c[("mlx4_0", "1", "port_xmit_discards")] == 5.0
    # counters/port_rcv_packets reads 6825908347, counters_ext/port_rcv_packets_64 reads 0 in
    # the upstream fixture; the 64-bit series wins, as in sysfs_ib
    assert c[("mlx4_0", "1", "port_rcv_packets")] == 0.0
    # port 2: node_exporter's legacy_* series (read from counters_ext) win over the plain 0
    assert c[("mlx4_0", "2", "port_rcv_bytes")] == 18527668.0
    assert c[("mlx4_0", "2", "port_rcv_data")] == 4631917.0
    assert c[("mlx4_0", "1", "link_downed")] == 0.0
    assert not any(name in {"state_id", "rate_bytes_per_second", "info", "physical_state_id"}
                   for _, _, name in c)
    assert {d for d, _, _ in c} == {"mlx4_0"}  # i40iw0 has only gauges


def test_smartctl_exporter_scrape_keeps_nvme_only() -> None:
    rows = parse_prometheus(SMART_PROM.read_text(), ctx())["nvme_smart"]
    assert {r["device"] for r in rows} == {"nvme0"}
    assert {(r["model"], r["serial"], r["firmware"]) for r in rows} == {
        ("PLEXTOR PX-256M9PY +", "P02050305257", "1.03")}
    m = {r["metric"]: r["value"] for r in rows}
    assert m["temperature_c"] == 37.0
    assert m["percent_used_pct"] == 161.0
    assert m["critical_warning"] == 4.0
    assert m["smartctl_exit_status"] == 8.0
    assert m["power_on_hours"] == 51332400 / 3600
    assert m["host_written_bytes"] == 19632806690816.0
    assert m["available_spare_pct"] == 100.0


def test_node_exporter_ethtool_names_are_restored() -> None:
    rows = parse_prometheus(ETHTOOL_SCRAPE, ctx())["fabric_counters"]
    c = {(r["device"], r["counter"]): r["value"] for r in rows}
    assert c[("eth2", "rx_prio3_pause")] == 1200.0
    assert c[("eth2", "pfc_rx_pause_frames_prio3")] == 1200.0
    assert c[("eth2", "pfc_rx_pause_duration_us_prio3")] == 86000.0
    assert c[("eth2", "pause_ctrl_tx_frames")] == 17.0
    assert c[("eth3", "rx_discards")] == 4.0
    stamped = [r for r in rows if r["counter"] == "rx_bytes"]
    assert [(r["value"], r["ts"]) for r in stamped] == [
        (1.5e12, datetime(2025, 11, 28, 12, 0, tzinfo=UTC))]
    assert ethtool_driver_name("port_received_dropped") == "port_rx_dropped"
    assert ethtool_driver_name("received_bytes_total") == "rx_bytes"


def test_labels_with_escapes() -> None:
    assert parse_labels(r'a="x\"y",b="c\\d",c="e,f"', "here") == {
        "a": 'x"y', "b": "c\\d", "c": "e,f"}


def test_truncated_copy_is_rejected_with_line() -> None:
    text = IB_PROM.read_text()
    cut = text[: text.index('node_infiniband_port_transmit_wait_total{device="mlx4_0",po') + 55]
    with pytest.raises(RecordError) as err:
        parse_prometheus(cut, ctx())
    assert err.value.reason.startswith("prometheus exposition line 89: not a sample")


def test_malformed_samples() -> None:
    with pytest.raises(RecordError, match=r"^prometheus exposition line 2: sample value is not a "
                                          r"number: 'lots'$"):
        parse_prometheus('# TYPE x counter\nnode_infiniband_link_downed_total{device="a",'
                         'port="1"} lots\n', ctx())
    with pytest.raises(RecordError, match="line 1: malformed label set"):
        parse_prometheus('node_infiniband_link_downed_total{device=a} 1\n', ctx())
    with pytest.raises(RecordError, match="line 1: node_infiniband_link_downed_total has no "
                                          "device label"):
        parse_prometheus('node_infiniband_link_downed_total{port="1"} 1\n', ctx())


def test_scrape_without_relevant_families() -> None:
    with pytest.raises(RecordError, match=r"^prometheus scrape \(2 samples\) has no "
                                          r"node_infiniband_\*"):
        parse_prometheus("# TYPE up gauge\nup 1\nnode_load1 0.5\n", ctx())


@pytest.mark.parametrize("value", [None, 1, {}, [], "NIC statistics:\n rx_bytes: 1\n",
                                   "# Port counters: Lid 1 port 1\nPortXmitWait:......1\n"])
def test_detect_rejects_other_inputs(value: Any) -> None:
    assert detect(value) is False


def test_truncated_scrape_quarantined_through_ingest() -> None:
    envelope = pytest.importorskip("ckptwatch.sources.envelope")
    data = SMART_PROM.read_bytes()
    cut = data[: data.index(b'smartctl_device_temperature{device="/dev/nvme0"') + 30]
    parsed = envelope.read_tool_file(cut, file_label="smart/n1/scrape.prom", node="n1", ts=TS)
    assert not parsed.frames
    assert len(parsed.rejects) == 1
    assert parsed.rejects[0].reason.startswith("prometheus exposition line ")
    assert "not a sample" in parsed.rejects[0].reason
