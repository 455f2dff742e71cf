"""perfquery text parser: real ``perfquery -x`` / ``-E`` outputs (treydock/infiniband_exporter)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from tests.sql_seed import fabric_deltas

from ckptwatch.errors import RecordError
from ckptwatch.sources.base import ToolContext
from ckptwatch.sources.perfquery import counter_name, detect, parse_perfquery, render_perfquery_x

ROOT = (Path(__file__).parents[1] / "fixtures" / "real" / "infiniband"
        / "treydock_infiniband_exporter")
EXTENDED = ROOT / "perfquery"
TS = datetime(2026, 11, 28, 12, 0, tzinfo=UTC)
NON_EMPTY = sorted(p for p in ROOT.glob("perfquery*/*.out") if p.stat().st_size)

#: A legacy ``perfquery`` (PortCounters, 32-bit) block in current infiniband-diags naming, and
#: the same port as old libibmad printed it (``XmtData``…); values are ours.
LEGACY = """\
# Port counters: Lid 17 port 1 (CapMask: 0x5200)
PortSelect:......................1
CounterSelect:...................0x0000
SymbolErrorCounter:..............3
LinkErrorRecoveryCounter:........0
LinkDownedCounter:...............1
PortRcvErrors:...................0
PortRcvRemotePhysicalErrors:.....0
PortRcvSwitchRelayErrors:........0
PortXmitDiscards:................12
PortXmitConstraintErrors:........0
PortRcvConstraintErrors:.........0
CounterSelect2:..................0x00
LocalLinkIntegrityErrors:........0
ExcessiveBufferOverrunErrors:....0
VL15Dropped:.....................0
PortXmitData:....................4294967295
PortRcvData:.....................1887436800
PortXmitPkts:....................50331648
PortRcvPkts:.....................41943040
PortXmitWait:....................4294967295
"""
LEGACY_OLD_NAMES = """\
# Port counters: Lid 17 port 1
PortSelect:......................1
CounterSelect:...................0x0000
SymbolErrors:....................3
LinkRecovers:....................0
LinkDowned:......................1
RcvErrors:.......................0
RcvRemotePhysErrors:.............0
RcvSwRelayErrors:................0
XmtDiscards:.....................12
XmtConstraintErrors:.............0
RcvConstraintErrors:.............0
LinkIntegrityErrors:.............0
ExcBufOverrunErrors:.............0
VL15Dropped:.....................0
XmtData:.........................4294967295
RcvData:.........................1887436800
XmtPkts:.........................50331648
RcvPkts:.........................41943040
XmtWait:.........................4294967295
"""


def ctx(device: str | None = None, port: str | None = None) -> ToolContext:
    return ToolContext(node="gpu-node-07", ts=TS, source="perfquery", device=device, port=port)


def counters(text: str, device: str | None = None) -> dict[tuple[str, str, str], float]:
    rows = parse_perfquery(text, ctx(device))["fabric_counters"]
    for row in rows:
        assert set(row) == {"ts", "node", "device", "port", "counter", "value", "source"}
        assert isinstance(row["value"], float) and row["source"] == "perfquery"
    return {(r["device"], r["port"], r["counter"]): r["value"] for r in rows}


@pytest.mark.parametrize("path", NON_EMPTY, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_every_fixture_parses(path: Path) -> None:
    text = path.read_text()
    assert detect(text)
    assert counters(text)


def test_extended_counters_of_0x506b4b03005c2740() -> None:
    c = counters((EXTENDED / "0x506b4b03005c2740.out").read_text())
    assert c[("lid2052", "1", "port_xmit_wait")] == 41864608.0
    assert c[("lid2052", "1", "port_xmit_data")] == 178791657177235.0
    assert c[("lid2052", "1", "port_xmit_bytes")] == 178791657177235.0 * 4
    assert c[("lid2052", "1", "port_rcv_bytes")] == 178762341961629.0 * 4
    assert c[("lid2052", "1", "port_xmit_discards")] == 20046.0
    assert c[("lid2052", "1", "link_downed")] == 1.0
    assert c[("lid2052", "1", "port_rcv_switch_relay_errors")] == 7.0
    assert c[("lid2052", "1", "unicast_xmit_packets")] == 387471005571.0
    assert c[("lid2052", "1", "qp1_dropped")] == 0.0
    assert len(c) == 22 + 2  # 22 counters (selects skipped) + 2 byte forms


def test_two_port_block_and_envelope_device() -> None:
    c = counters((EXTENDED / "0x7cfe9003009ce5b0.out").read_text(), device="mlx5_1")
    assert c[("mlx5_1", "1", "port_xmit_wait")] == 22730501.0
    assert c[("mlx5_1", "2", "port_xmit_wait")] == 36510964.0
    assert c[("mlx5_1", "2", "port_rcv_data")] == 39078804993378.0


def test_receive_error_details() -> None:
    path = ROOT / "perfquery-rcv-error" / "0x7cfe9003009ce5b0-2.out"
    c = counters(path.read_text())
    assert sorted(name for _, _, name in c) == [
        "port_buffer_overrun_errors", "port_dlid_mapping_errors", "port_local_physical_errors",
        "port_looping_errors", "port_malformed_pkt_errors", "port_vl_mapping_errors"]
    assert {port for _, port, _ in c} == {"2"}


def test_legacy_layouts_map_to_the_same_names() -> None:
    new, old = counters(LEGACY), counters(LEGACY_OLD_NAMES)
    assert new == old
    assert new[("lid17", "1", "port_xmit_wait")] == 4294967295.0
    assert new[("lid17", "1", "symbol_error")] == 3.0
    assert new[("lid17", "1", "port_xmit_discards")] == 12.0
    assert counter_name("PortXmitWait") == counter_name("XmtWait") == "port_xmit_wait"


def test_saturated_legacy_counter_is_flagged_not_zero(tmp_path: Path) -> None:
    rows = []
    for k, text in enumerate([LEGACY.replace("PortXmitWait:....................4294967295",
                                             "PortXmitWait:....................4294967000"),
                              LEGACY, LEGACY]):
        rows += parse_perfquery(text, ToolContext("n1", TS + timedelta(seconds=10 * k),
                                                  "perfquery"))["fabric_counters"]
    out = fabric_deltas(tmp_path, rows).filter(pl.col("counter") == "port_xmit_wait")
    assert out["saturated"].to_list() == [False, True, True]
    assert out["delta"].to_list() == [None, None, None]


def test_empty_output_is_rejected() -> None:
    text = (EXTENDED / "0x506b4b0300cc02a6.out").read_text()
    assert text == ""
    with pytest.raises(RecordError) as err:
        parse_perfquery(text, ctx())
    assert err.value.reason == ("perfquery output is empty (the port did not answer, or the "
                                "collector captured no stdout)")


def test_truncated_copy_is_rejected_with_line() -> None:
    text = (EXTENDED / "0x506b4b03005c2740.out").read_text()
    cut = text[: text.index("PortXmitWait:") + len("PortXmitWait:....")]
    with pytest.raises(RecordError) as err:
        parse_perfquery(cut, ctx())
    assert err.value.reason == ("perfquery line 25: PortXmitWait is not an integer: '' (output "
                                "truncated?)")
    header_only = text.splitlines()[0]
    with pytest.raises(RecordError, match="^perfquery block for port 1 has a header but no "
                                          r"counters \(output truncated\?\)$"):
        parse_perfquery(header_only, ctx())


def test_malformed_value() -> None:
    with pytest.raises(RecordError, match=r"^perfquery line 2: SymbolErrorCounter is not an "
                                          r"integer: 'many'$"):
        parse_perfquery("# Port counters: Lid 1 port 1\nSymbolErrorCounter:....many\n", ctx())


def test_headerless_needs_envelope_device_and_port() -> None:
    body = "PortXmitWait:....................7\nPortXmitData:....................9\n"
    rows = parse_perfquery(body, ctx("mlx5_0", "1"))["fabric_counters"]
    assert {(r["device"], r["port"], r["counter"]) for r in rows} >= {
        ("mlx5_0", "1", "port_xmit_wait")}
    with pytest.raises(RecordError, match="no '# Port counters: Lid N port P' header"):
        parse_perfquery(body, ctx())


@pytest.mark.parametrize("value", [None, 7, {}, [], "rx_bytes: 1\ntx_bytes: 2\nrx_x: 3\n",
                                   "# HELP node_x y\nnode_x 1\n"])
def test_detect_rejects_other_inputs(value: Any) -> None:
    assert detect(value) is False


def test_render_round_trip_matches_real_layout() -> None:
    values = {"port_xmit_data": 178791657177235.0, "port_rcv_data": 9.0,
              "port_xmit_wait": 41864608.0, "port_xmit_discards": 20046.0, "link_downed": 1.0,
              "symbol_error": 0.0, "VL15_dropped": 0.0}
    text = render_perfquery_x(2052, 1, values, cap_mask="0x5300", cap_mask2="0x0000002")
    real = (EXTENDED / "0x506b4b03005c2740.out").read_text()
    assert text.splitlines()[0] == real.splitlines()[0]
    assert [line.split(":")[0] for line in text.splitlines()] == [
        line.split(":")[0] for line in real.splitlines() if line]
    assert "PortXmitWait:....................41864608" in text.splitlines()
    got = counters(text, device="mlx5_0")
    for name, value in values.items():
        assert got[("mlx5_0", "1", name)] == value
    assert got[("mlx5_0", "1", "port_xmit_bytes")] == 178791657177235.0 * 4
    assert counters(render_perfquery_x(3, 2, {"port_xmit_bytes": 400.0}))[
        ("lid3", "2", "port_xmit_data")] == 100.0
    with pytest.raises(ValueError, match="no field for: rx_prio3_pause"):
        render_perfquery_x(1, 1, {"rx_prio3_pause": 1})


def test_truncated_file_quarantined_through_ingest() -> None:
    envelope = pytest.importorskip("ckptwatch.sources.envelope")
    data = (EXTENDED / "0x7cfe9003003b4b96.out").read_bytes()
    parsed = envelope.read_tool_file(data[:300], file_label="fabric/n1/perfquery.txt",
                                     node="n1", ts=TS)
    assert not parsed.frames
    assert [r.reason for r in parsed.rejects] == ["perfquery line 7 is not 'Name:....value': "
                                                  "'PortR'"]


def test_detectors_are_exclusive_over_every_real_fixture() -> None:
    import json

    from ckptwatch.sources import load_all, sysfs_ib
    from ckptwatch.sources.base import TOOL_FORMATS

    load_all()  # every registered format's detector, the pool readers' too
    detectors = {fmt.source: fmt.detect for fmt in TOOL_FORMATS.values()}
    real = Path(__file__).parents[1] / "fixtures" / "real"
    expected = {"smartctl_json_nvme": "smartctl", "nvme_cli_vendor_logs": "nvme-ocp-smart",
                "prometheus_exposition": "prometheus", "ethtool": "ethtool",
                "treydock_infiniband_exporter": "perfquery", "lustrefs_exporter_ddn": "lctl"}
    checked = 0
    for path in sorted(real.rglob("*")):
        if not path.is_file() or path.suffix not in {".json", ".txt", ".out", ".prom"}:
            continue
        if "checkpoint_timing" in path.parts or not path.stat().st_size:
            continue
        text = path.read_text()
        output = json.loads(text) if path.suffix == ".json" else text
        hits = [name for name, fn in detectors.items() if fn(output)]
        want = next((v for k, v in expected.items() if k in path.parts), None)
        if want is None:  # other samples (DAOS, SPDK, Storage Scale, Slurm): one format at most
            assert len(hits) <= 1, (path, hits)
        if path.name.endswith("OutputErr.txt"):  # nvme-cli error text: no format claims it
            assert hits == [], path
        elif want is not None:
            assert hits == [want], path
        checked += 1
    for tree in ("procfs_sysfs", "node_exporter_sysfs"):
        snap = sysfs_ib.read_sysfs_tree(real / "infiniband" / tree)
        assert [name for name, fn in detectors.items() if fn(snap)] == ["sysfs-ib"]
    assert checked > 80
