"""``ethtool -S`` parser: real mlx5_core, bnxt_en, ice, i40e, e1000e outputs."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from tests.in_place import IN_PLACE, IN_PLACE_REASON

from ckptwatch.errors import RecordError
from ckptwatch.sources.base import ToolContext
from ckptwatch.sources.ethtool import (
    canonical_alias,
    detect,
    mlx5_name,
    parse_ethtool,
    render_ethtool_s,
)

ETH = Path(__file__).parents[1] / "fixtures" / "real" / "ethtool"
SHARED = IN_PLACE / "ethtool"
TS = datetime(2026, 11, 28, 12, 0, tzinfo=UTC)
FILES = sorted(ETH.rglob("*.txt"))


def ctx(device: str | None = "eth2", port: str | None = None) -> ToolContext:
    return ToolContext(node="gpu-node-07", ts=TS, source="ethtool", device=device, port=port)


def counters(text: str, device: str | None = "eth2") -> dict[str, float]:
    rows = parse_ethtool(text, ctx(device))["fabric_counters"]
    for row in rows:
        assert set(row) == {"ts", "node", "device", "port", "counter", "value", "source"}
        assert isinstance(row["value"], float) and row["port"] == "1"
    return {r["counter"]: r["value"] for r in rows}


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_every_fixture_parses_and_is_detected(path: Path) -> None:
    text = path.read_text()
    assert detect(text)
    assert len(counters(text)) > 10


def test_mlx5_keeps_every_driver_name_and_adds_aliases() -> None:
    text = (ETH / "ethq/ethtool-S_mlx5_core.txt").read_text()
    c = counters(text)
    driver = {line.split(":")[0] for line in text.splitlines() if line.strip()}
    assert len(driver) == 751 and driver <= set(c)
    assert c["rx_prio0_bytes"] == 2202570777997.0
    assert c["rx_global_pause"] == 0.0 and c["pause_rx_frames"] == 0.0
    assert c["tx_pause_ctrl_phy"] == 0.0 and c["pause_ctrl_tx_frames"] == 0.0
    assert c["rx_discards"] == c["rx_discards_phy"] == 0.0
    assert "pfc_rx_pause_frames_prio3" not in c  # PFC not enabled on this port: no per-prio pause


def test_bnxt_per_ring_names_and_pfc_aliases() -> None:
    c = counters((ETH / "ethq/ethtool-S_bnxt_en.txt").read_text())
    assert c["[0]: rx_discards"] == 11763190.0
    assert c["rx_stat_discard"] == 49337.0 and c["rx_discards"] == 49337.0
    assert c["rx_total_ring_discards"] == 655430134.0
    assert c["rx_pfc_ena_frames_pri3"] == 0.0 and c["pfc_rx_pause_frames_prio3"] == 0.0
    assert c["pfc_rx_pause_duration_us_prio5"] == 0.0
    assert c["pause_rx_frames"] == 0.0


def test_intel_i40e_and_ice_xoff_aliases() -> None:
    i40e = counters((ETH / "ethq/ethtool-S_i40e.txt").read_text())
    assert i40e["port.rx_priority_3_xoff"] == 0.0 and i40e["pfc_rx_pause_frames_prio3"] == 0.0
    assert i40e["pfc_tx_pause_frames_prio7"] == 0.0
    assert i40e["pause_rx_frames"] == i40e["port.link_xoff_rx"]
    assert i40e["rx_packets"] == 371706048609.0
    ice = counters((ETH / "ethq/ethtool-S_ice.txt").read_text())
    assert ice["rx_priority_3_xoff.nic"] == 0.0 and "pfc_rx_pause_frames_prio3" in ice
    assert ice["rx_discards"] == ice["rx_dropped.nic"] == 0.0
    assert ice["tx_bytes"] == 73862244221.0


def test_e1000e_interface_from_comment_and_odd_names() -> None:
    rows = parse_ethtool((ETH / "node_exporter/eth0_statistics.txt").read_text(),
                         ctx(device=None))["fabric_counters"]
    assert {r["device"] for r in rows} == {"eth0"}
    c = {r["counter"]: r["value"] for r in rows}
    assert c["duplicate metric"] == 1.0 and c["duplicate_metric"] == 2.0
    assert c["port.rx_dropped"] == 12028.0 and c["rx_discards"] == 12028.0
    assert c["rx_missed"] == 401.0


# The bpf-list mlx5 post has no stated licence: checked in place, never copied.
@pytest.mark.skipif(not SHARED.exists(), reason=IN_PLACE_REASON)
def test_mailing_list_mlx5_pause_counters_checked_in_place() -> None:
    path = SHARED / "mailing_list/mlx5_ethtool-S_bpf-list_2024-06-19_kernel-5.15_nonzero-only.txt"
    c = counters(path.read_text())
    assert c["tx_pause_ctrl_phy"] == 5745055.0 and c["pause_ctrl_tx_frames"] == 5745055.0
    assert c["tx_global_pause"] == 5745042.0 and c["pause_tx_frames"] == 5745042.0
    assert c["pause_tx_duration_us"] == 771103810.0
    assert c["rx_discards"] == c["rx_discards_phy"] == 58591428329.0
    assert c["rx_discards_prio0"] == 58591314012.0
    assert c["rx_out_of_buffer"] == 990473555.0


def test_malformed_truncated_and_conflicting() -> None:
    text = (ETH / "ethq/ethtool-S_ice.txt").read_text()
    cut = text[: text.index("tx_unicast:") + len("tx_unicast:")]
    with pytest.raises(RecordError) as err:
        parse_ethtool(cut, ctx())
    assert err.value.reason == ("ethtool -S line 3 is not 'name: integer': 'tx_unicast:' "
                                "(output truncated?)")
    with pytest.raises(RecordError, match=r"^ethtool -S line 2 is not 'name: integer': "
                                          r"'rx_bytes: 12 MB'$"):
        parse_ethtool("NIC statistics:\n     rx_bytes: 12 MB\n", ctx())
    with pytest.raises(RecordError, match=r"^ethtool -S lists 'rx_bytes' twice with different "
                                          r"values \(line 2: 1, line 3: 2\)$"):
        parse_ethtool("NIC statistics:\n rx_bytes: 1\n rx_bytes: 2\n", ctx())
    with pytest.raises(RecordError, match="only the header"):
        parse_ethtool("NIC statistics:\n", ctx())
    with pytest.raises(RecordError, match="names no interface"):
        parse_ethtool("NIC statistics:\n rx_bytes: 1\n", ctx(device=None))


def test_aliases() -> None:
    assert canonical_alias("rx_prio3_pause") == "pfc_rx_pause_frames_prio3"
    assert canonical_alias("tx_prio3_pause_duration") == "pfc_tx_pause_duration_us_prio3"
    assert canonical_alias("port_rx_priority_2_xoff") == "pfc_rx_pause_frames_prio2"
    assert canonical_alias("rx_priority_2_xon.nic") is None
    assert canonical_alias("rx_prio3_bytes") is None
    assert mlx5_name("pfc_tx_pause_frames_prio4") == "tx_prio4_pause"
    assert mlx5_name("ecn_marked") == "rx_ecn_mark"


@pytest.mark.parametrize("value", [
    None, 5, {}, [], "",
    "# Port extended counters: Lid 1 port 1\nPortXmitWait:.........1\n",
    "# HELP node_x x\n# TYPE node_x counter\nnode_x{device=\"eth0\"} 1\n",
    "/sys/class/infiniband/mlx5_0/ports/1/counters/port_xmit_wait:1\n" * 3,
    "Physical(NAND) bytes written                  : 157,035,510,104,064\n" * 3,
])
def test_detect_rejects_other_inputs(value: Any) -> None:
    assert detect(value) is False


def test_render_round_trip() -> None:
    wanted = {"pfc_rx_pause_frames_prio3": 1200, "pfc_rx_pause_duration_us_prio3": 86000,
              "tx_prio3_pause": 7, "rx_discards": 3, "ecn_marked": 55, "rx_bytes": 10**12}
    text = render_ethtool_s("mlx5_core", wanted)
    assert text.startswith("NIC statistics:\n     rx_packets: 0\n")
    assert "     rx_prio3_pause: 1200\n" in text
    c = counters(text)
    assert c["rx_prio3_pause"] == 1200.0 and c["pfc_rx_pause_frames_prio3"] == 1200.0
    assert c["rx_prio3_pause_duration"] == 86000.0
    assert c["pfc_tx_pause_frames_prio3"] == 7.0
    assert c["rx_discards_phy"] == 3.0 and c["rx_ecn_mark"] == 55.0
    assert c["rx_bytes"] == 1e12
    assert c["pfc_rx_pause_frames_prio5"] == 0.0
    with pytest.raises(ValueError, match="mlx5_core naming only"):
        render_ethtool_s("bnxt_en", {})
    with pytest.raises(ValueError, match="RDMA hw_counter"):
        render_ethtool_s("mlx5_core", {"cnp_sent": 1})


def test_truncated_file_quarantined_through_ingest() -> None:
    envelope = pytest.importorskip("ckptwatch.sources.envelope")
    data = (ETH / "ethq/ethtool-S_bnxt_en.txt").read_bytes()
    cut = data[: data.index(b"rx_errors") + len("rx_errors")]
    parsed = envelope.read_tool_file(cut, file_label="fabric/n1/eth0.txt", node="n1", ts=TS,
                                     device="eth0")
    assert not parsed.frames
    assert [r.reason for r in parsed.rejects] == [
        "ethtool -S line 6 is not 'name: integer': '[0]: rx_errors'"]


def test_every_alias_is_documented() -> None:
    from ckptwatch.sources.ethtool import ALIASES

    doc = (Path(__file__).parents[2] / "docs" / "formats.md").read_text()
    for _, template in ALIASES:
        assert template.replace("{p}", "<N>") in doc, template
