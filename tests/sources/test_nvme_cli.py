"""nvme-cli parsers: ``smart-log -o json`` and the OCP / vendor extended SMART logs."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from tests.in_place import IN_PLACE, IN_PLACE_REASON

from ckptwatch.errors import RecordError
from ckptwatch.sources.base import ToolContext
from ckptwatch.sources.nvme_cli import (
    detect_ocp,
    detect_smart_log,
    kelvin_to_celsius,
    ocp_metric,
    parse_ocp_smart,
    parse_smart_log,
)

VENDOR = Path(__file__).parents[1] / "fixtures" / "real" / "nvme_cli_vendor_logs"
CACHELIB = VENDOR / "cachelib_nandwrites"
SHARED = IN_PLACE
TS = datetime(2026, 11, 28, 12, 0, tzinfo=UTC)
VENDOR_TEXTS = sorted(p for p in VENDOR.rglob("*.txt")
                      if "Seagate" not in p.name and not p.name.endswith("OutputErr.txt"))


def ctx(source: str, device: str | None = "nvme0") -> ToolContext:
    return ToolContext(node="pool-t3", ts=TS, source=source, device=device)


def ocp(output: Any, device: str | None = "nvme0") -> dict[str, float]:
    rows = parse_ocp_smart(output, ctx("nvme-ocp-smart", device))["nvme_smart"]
    assert all(r["source"] == "nvme-ocp-smart" and r["device"] == "nvme0" for r in rows)
    return {r["metric"]: r["value"] for r in rows}


def smart_log(output: Any) -> dict[str, float]:
    rows = parse_smart_log(output, ctx("nvme-smart-log"))["nvme_smart"]
    return {r["metric"]: r["value"] for r in rows}


@pytest.mark.parametrize("path", VENDOR_TEXTS, ids=lambda p: p.name)
def test_every_vendor_and_ocp_text_parses(path: Path) -> None:
    text = path.read_text()
    assert detect_ocp(text)
    values = ocp(text)
    assert values
    assert all(isinstance(v, float) and v >= 0 for v in values.values())


def test_ocp_smart_add_log_text_wdc_model_listed() -> None:
    m = ocp((CACHELIB / "handlesOcpSupportedDevice_ModelListed__kSmartLogOutputOcp.txt")
            .read_text())
    assert m["media_written_bytes"] == 80410014056448.0  # "0 80410014056448": hi=0, lo
    assert m["media_read_bytes"] == 84923571298304.0
    assert m["free_blocks_pct"] == 100.0
    assert (m["min_erase_count"], m["max_erase_count"]) == (25.0, 34.0)
    assert (m["thermal_throttle_count"], m["thermal_throttle_status"]) == (0.0, 0.0)
    assert m["refresh_count"] == 79503.0
    assert m["plp_start_count"] == 101.0


def test_ocp_smart_add_log_text_model_not_listed() -> None:
    m = ocp((CACHELIB / "handlesOcpSupportedDevice_ModelNotListed__kSmartLogOutputOcp.txt")
            .read_text())
    assert m["pcie_correctable_errors"] == 10450.0
    assert m["pcie_link_retraining_count"] == 8084.0
    assert m["media_written_bytes"] == 88403820249088.0


def test_wdc_vs_smart_add_log_is_the_ocp_page() -> None:
    m = ocp((CACHELIB / "handlesWesternDigitalDevice__kSmartLogOutput.txt").read_text())
    assert m["media_written_bytes"] == 609651339018240.0
    assert m["free_blocks_pct"] == 1.0
    assert (m["min_erase_count"], m["max_erase_count"]) == (197.0, 293.0)
    assert m["capacitor_health_pct"] == 114.0


def test_samsung_liteon_toshiba_media_bytes() -> None:
    samsung = ocp((CACHELIB / "handlesSamsungDevice__kSmartLogOutput.txt").read_text())
    assert samsung["media_written_bytes"] == 5357954930143232.0
    assert (samsung["min_erase_count"], samsung["max_erase_count"]) == (2291.0, 2497.0)
    assert samsung["free_blocks_pct"] == 0.0
    pm9a3 = ocp((CACHELIB / "handlesSamsungPM9A3Device__kSmartLogOutput.txt").read_text())
    assert pm9a3["free_blocks_pct"] == 96.0
    liteon = ocp((CACHELIB / "handlesLiteonDevice__kSmartLogOutput.txt").read_text())
    assert liteon["media_written_bytes"] == 157035510104064.0  # "157,035,510,104,064"
    assert liteon["pcie_correctable_errors"] == 53.0
    toshiba = ocp((CACHELIB / "handlesToshibaDevice__kSmartLogOutput.txt").read_text())
    assert toshiba["media_written_bytes"] == float(round(1133997.9 * 2**30))  # "1133997.9 GiB"
    assert toshiba["free_blocks_pct"] == 13.0
    assert toshiba["thermal_throttle_heavy_time_s"] == 0.0


def test_sk_hynix_unitless_media_units_are_not_read() -> None:
    m = ocp((CACHELIB / "handlesSkhmsDevice__kSmartLogOutput.txt").read_text())
    assert "media_written_bytes" not in m and "media_read_bytes" not in m
    assert m["free_blocks_pct"] == 68.0
    assert (m["min_erase_count"], m["max_erase_count"]) == (433.0, 484.0)


def test_intel_smart_log_add_both_layouts() -> None:
    old = ocp((CACHELIB / "handlesIntelDevice__kSmartLogOutput.txt").read_text())
    assert (old["min_erase_count"], old["max_erase_count"], old["avg_erase_count"]) == (
        3523.0, 3603.0, 3562.0)
    assert "media_written_bytes" not in old  # "sectors:" of undocumented size
    v1 = ocp((VENDOR / "telegraf/nvme-intel-smart-log-add_nvme-cli-1.x.txt").read_text())
    assert v1["crc_errors"] == 13.0
    assert (v1["min_erase_count"], v1["max_erase_count"]) == (39.0, 40.0)
    v2 = ocp((VENDOR / "telegraf/nvme-intel-smart-log-add_nvme-cli-2.x.txt").read_text())
    # wear_leveling_count raw 700090417315 = le16 min | max << 16 | avg << 32
    assert (v2["min_erase_count"], v2["max_erase_count"], v2["avg_erase_count"]) == (
        163.0, 164.0, 163.0)
    assert v2["crc_errors"] == 13.0


def test_seagate_table_and_error_text_are_rejected_with_reasons() -> None:
    seagate = (CACHELIB / "handlesSeagateDevice__kSmartLogOutput.txt").read_text()
    with pytest.raises(RecordError, match=r"^Seagate vs-smart-add-log table: .*not read"):
        parse_ocp_smart(seagate, ctx("nvme-ocp-smart"))
    err_text = (CACHELIB / "handlesOcpSupportedDevice_ModelListed__kSmartLogOutputErr.txt")
    with pytest.raises(RecordError) as err:
        parse_ocp_smart(err_text.read_text(), ctx("nvme-ocp-smart"))
    assert err.value.reason == ("nvme-cli printed an error instead of the log: "
                                "'ERROR : WDC: unsupported device for this command'")


def test_truncated_ocp_text_is_rejected() -> None:
    text = (CACHELIB / "handlesOcpSupportedDevice_ModelListed__kSmartLogOutputOcp.txt").read_text()
    head = "\n".join(text.splitlines()[:2])  # the title line only
    with pytest.raises(RecordError, match="no OCP / vendor extended SMART field recognised"):
        parse_ocp_smart(head, ctx("nvme-ocp-smart"))


def _ocp_json_v1() -> dict[str, Any]:
    # nvme-cli `ocp smart-add-log -o json` titled keys (ocp-print-json.c, v1 layout)
    return {
        "Physical media units written": {"hi": 0, "lo": 80410014056448},
        "Physical media units read": {"hi": 0, "lo": 84923571298304},
        "Bad user nand blocks - Raw": 0, "Bad user nand blocks - Normalized": 100,
        "Max User data erase counts": 34, "Min User data erase counts": 25,
        "Number of Thermal throttling events": 2, "Current throttling status": 1,
        "Percent free blocks": 7, "PCIe correctable error count": 0,
        "Log page version": 3, "Log page GUID": "0xafd514c97c6f4f9ca4f2bfea2810afc5",
    }


def test_ocp_json_titled_and_snake_case_keys() -> None:
    v1 = ocp(_ocp_json_v1())
    snake = ocp({"physical_media_units_written": {"hi": 1, "lo": 5},
                 "physical_media_units_read": {"hi": 0, "lo": 84923571298304},
                 "max_user_data_erase_count": 34, "min_user_data_erase_count": 25,
                 "thermal_throttling_events": 2, "current_throttling_status": 1,
                 "percent_free_blocks": 7, "pcie_correctable_errors": 0,
                 "log_page_guid": "0xafd514c97c6f4f9ca4f2bfea2810afc5"})
    assert v1["media_written_bytes"] == 80410014056448.0
    assert snake["media_written_bytes"] == float(2**64 + 5)
    for m in (v1, snake):
        assert m["free_blocks_pct"] == 7.0
        assert (m["min_erase_count"], m["max_erase_count"]) == (25.0, 34.0)
        assert (m["thermal_throttle_count"], m["thermal_throttle_status"]) == (2.0, 1.0)
    assert detect_ocp(_ocp_json_v1())


def test_ocp_json_malformed_field_is_named() -> None:
    doc = _ocp_json_v1() | {"Percent free blocks": "lots"}
    with pytest.raises(RecordError, match="^OCP smart-add-log field 'Percent free blocks' is not "
                                          "a number: 'lots'$"):
        parse_ocp_smart(doc, ctx("nvme-ocp-smart"))


def test_ocp_labels() -> None:
    assert ocp_metric("  Physical media units written -   \t") == "media_written_bytes"
    assert ocp_metric("[119:119] % Free Blocks") == "free_blocks_pct"
    assert ocp_metric("Log page version") is None


# ---------------------------------------------------------------- nvme smart-log -o json

#: A `nvme smart-log /dev/nvme0 -o json` object in nvme-cli 2.x layout (values ours), with a
#: temperature already in Celsius as some builds print it.
SMART_LOG = {
    "critical_warning": 0, "temperature": 318, "avail_spare": 100, "spare_thresh": 10,
    "percent_used": 4, "endurance_grp_critical_warning_summary": 0,
    "data_units_read": 1000, "data_units_written": 2500, "host_read_commands": 10,
    "host_write_commands": 20, "controller_busy_time": 7, "power_cycles": 3,
    "power_on_hours": 99, "unsafe_shutdowns": 1, "media_errors": 0, "num_err_log_entries": 2,
    "warning_temp_time": 0, "critical_comp_time": 0, "temperature_sensor_1": 320,
    "thm_temp1_trans_count": 5, "thm_temp2_trans_count": 0, "thm_temp1_total_time": 60,
    "thm_temp2_total_time": 0,
}


def test_smart_log_json_values_and_kelvin() -> None:
    m = smart_log(SMART_LOG)
    assert m["temperature_c"] == 45.0  # 318 K
    assert m["temperature_sensor1_c"] == 47.0
    assert m["host_written_bytes"] == 2500 * 512_000
    assert m["percent_used_pct"] == 4.0
    assert m["thermal_mgmt_temp1_transitions"] == 5.0
    assert m["thermal_mgmt_temp1_time_s"] == 60.0
    assert smart_log(SMART_LOG | {"temperature": 45})["temperature_c"] == 45.0
    assert kelvin_to_celsius(310) == 37 and kelvin_to_celsius(60) == 60
    assert detect_smart_log(SMART_LOG)


def test_smart_log_malformed_and_truncated() -> None:
    with pytest.raises(RecordError, match="^nvme smart-log field 'data_units_written' is not a "
                                          "number: 'lots'$"):
        parse_smart_log(SMART_LOG | {"data_units_written": "lots"}, ctx("nvme-smart-log"))
    cut = {k: v for k, v in list(SMART_LOG.items())[:3]}
    with pytest.raises(RecordError, match="^nvme smart-log output lacks data_units_written "
                                          r"\(truncated"):
        parse_smart_log(cut, ctx("nvme-smart-log"))
    with pytest.raises(RecordError, match="names no device"):
        parse_smart_log(SMART_LOG, ctx("nvme-smart-log", device=None))


@pytest.mark.parametrize("value", [None, "text", 1.5, [], {"temperature": 300}, {
    "smartctl": {}, "data_units_written": 1, "avail_spare": 1}])
def test_detectors_reject_other_inputs(value: Any) -> None:
    assert detect_smart_log(value) is False
    assert detect_ocp(value) is False


def test_truncated_ocp_file_quarantined_through_ingest() -> None:
    envelope = pytest.importorskip("ckptwatch.sources.envelope")
    data = (CACHELIB / "handlesWesternDigitalDevice__kSmartLogOutput.txt").read_bytes()
    parsed = envelope.read_tool_file(data[:40], file_label="smart/t3/nvme0.ocp.txt",
                                     node="t3", ts=TS, device="nvme0")
    assert not parsed.frames
    assert [r.reason for r in parsed.rejects] == [
        "no OCP / vendor extended SMART field recognised (expected e.g. 'Physical media units "
        "written', 'Percent free blocks')"]


# GPL-3.0 nvme-cli JSON samples (netdata): checked in place, never copied.
@pytest.mark.skipif(not SHARED.exists(), reason=IN_PLACE_REASON)
def test_netdata_smart_log_samples_checked_in_place() -> None:
    root = SHARED / "nvme_cli_json" / "netdata"
    v211 = json.loads((root / "v2.11_nvme-smart-log.json").read_text())
    m = smart_log(v211)
    assert m["temperature_c"] == 51.0  # 324 K
    assert m["critical_warning"] == 0.0  # object form {"value": 0, ...}
    assert m["percent_used_pct"] == 30.0
    assert m["num_err_log_entries"] == 212.0
    assert m["thermal_mgmt_temp1_time_s"] == 1474.0
    plain = smart_log(json.loads((root / "v2.3_nvme-smart-log.json").read_text()))
    assert plain["temperature_c"] == 37.0  # 310 K
    for variant in ("v2.3_nvme-smart-log-float.json", "v2.3_nvme-smart-log-string.json"):
        assert smart_log(json.loads((root / variant).read_text())) == plain


def test_every_metric_is_documented() -> None:
    from ckptwatch.sources.nvme_cli import SMART_LOG_METRICS, ocp_metrics_known

    doc = (Path(__file__).parents[2] / "docs" / "formats.md").read_text()
    names = [*ocp_metrics_known(), *(m for m, _ in SMART_LOG_METRICS.values())]
    missing = [name for name in names if f"`{name}" not in doc and f", {name}" not in doc]
    assert not missing


def test_render_ocp_smart_json_round_trips_through_the_parser() -> None:
    from datetime import UTC, datetime

    from ckptwatch.sources.base import ToolContext
    from ckptwatch.sources.nvme_cli import parse_ocp_smart, render_ocp_smart_json

    values = {"media_written": 123_456_789_000, "media_read": 5, "free_blocks": 7,
              "erase_min": 10, "erase_max": 30, "soft_ecc": 0, "system_used": 1, "refresh": 0,
              "nuse": 1, "plp": 2, "endurance": 3, "power_changes": 4}
    ctx = ToolContext(node="t1", ts=datetime(2026, 11, 28, tzinfo=UTC), source="nvme-ocp-smart",
                      device="nvme0")
    rows = {r["metric"]: r["value"] for r in
            parse_ocp_smart(render_ocp_smart_json(values), ctx)["nvme_smart"]}
    assert rows["media_written_bytes"] == 123_456_789_000
    assert rows["free_blocks_pct"] == 7
    assert rows["max_erase_count"] == 30
