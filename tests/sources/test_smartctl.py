"""smartctl JSON (NVMe) parser: real outputs from smartctl_exporter, scrutiny and beszel."""

from __future__ import annotations

import copy
import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from tests.in_place import IN_PLACE, IN_PLACE_REASON

from ckptwatch.errors import RecordError
from ckptwatch.sources.base import ToolContext
from ckptwatch.sources.smartctl import (
    DATA_UNIT_BYTES,
    decode_exit_status,
    detect,
    nvme_device_name,
    parse_smartctl,
    render_smartctl_json,
)

REAL = Path(__file__).parents[1] / "fixtures" / "real" / "smartctl_json_nvme"
SHARED = IN_PLACE / "smartctl_json_nvme"
TS = datetime(2026, 11, 28, 12, 0, tzinfo=UTC)
NOT_HEALTH_REPORTS = {"smartctl_scan_nvme.json", "smartctl_info_nvme.json"}
NVME_FILES = sorted(p for p in REAL.rglob("*.json")
                    if "non-nvme" not in p.parts and p.name not in NOT_HEALTH_REPORTS)


def ctx(device: str | None = None) -> ToolContext:
    return ToolContext(node="gpu-node-07", ts=TS, source="smartctl", device=device)


def load(rel: str, root: Path = REAL) -> dict[str, Any]:
    doc = json.loads((root / rel).read_text())
    assert isinstance(doc, dict)
    return doc


def metrics(output: Any, device: str | None = None) -> dict[str, float]:
    rows = parse_smartctl(output, ctx(device))["nvme_smart"]
    return {r["metric"]: r["value"] for r in rows}


@pytest.mark.parametrize("path", NVME_FILES, ids=lambda p: p.name)
def test_every_nvme_fixture_parses_to_canonical_rows(path: Path) -> None:
    doc = json.loads(path.read_text())
    assert detect(doc)
    rows = parse_smartctl(doc, ctx())["nvme_smart"]
    assert {"temperature_c", "host_written_bytes", "power_on_hours", "percent_used_pct",
            "smartctl_exit_status"} <= {r["metric"] for r in rows}
    for row in rows:
        assert set(row) == {"ts", "node", "device", "source", "metric", "value", "model",
                            "serial", "firmware"}
        assert isinstance(row["value"], float)
        assert row["source"] == "smartctl" and row["node"] == "gpu-node-07"
        assert not row["device"].startswith("/dev/")


def test_intel_ssdpe2kx080t8_values() -> None:
    rows = parse_smartctl(load("smartctl_exporter/INTEL_SSDPE2KX080T8_1.json"), ctx())
    row = rows["nvme_smart"][0]
    assert (row["device"], row["model"], row["serial"], row["firmware"]) == (
        "nvme0", "INTEL SSDPE2KX080T8", "REDACTED", "REDACTED")
    m = metrics(load("smartctl_exporter/INTEL_SSDPE2KX080T8_1.json"))
    assert m["temperature_c"] == 29.0
    assert m["host_written_bytes"] == 184919244 * 512_000
    assert m["host_read_bytes"] == 20126802 * DATA_UNIT_BYTES
    assert m["host_write_commands"] == 4922206599.0
    assert m["power_on_hours"] == 12164.0
    assert m["available_spare_pct"] == 100.0
    assert m["available_spare_threshold_pct"] == 10.0
    assert m["controller_busy_time_min"] == 165.0
    assert m["unsafe_shutdowns"] == 8.0
    assert m["smartctl_exit_status"] == 0.0


def test_failing_samsung_reports_exit_status_8_and_critical_warning_16() -> None:
    m = metrics(load("smartctl_exporter/nvme-null-SAMSUNG_MZWLL3T2HAJQ-00005-nvme0.json"))
    assert m["smartctl_exit_status"] == 8.0
    assert decode_exit_status(8) == ["SMART status: disk failing"]
    assert m["critical_warning"] == 16.0
    assert (m["temperature_sensor1_c"], m["temperature_sensor2_c"],
            m["temperature_sensor3_c"]) == (40.0, 40.0, 35.0)


def test_scrutiny_failed_drive_media_errors_and_identity() -> None:
    doc = load("scrutiny/smart-nvme-failed.json")
    row = parse_smartctl(doc, ctx())["nvme_smart"][0]
    assert (row["model"], row["serial"], row["firmware"]) == (
        "Samsung SSD 970 EVO 500GB", "S466NX0M776250H", "2B2QEXE7")
    m = metrics(doc)
    assert m["media_errors"] == 7.0
    assert m["num_err_log_entries"] == 62.0
    assert m["temperature_sensor2_c"] == 39.0
    assert m["host_written_bytes"] == 65602088 * 512_000


def test_apple_exit_status_4_still_reads_the_log() -> None:
    m = metrics(load("beszel/apple_nvme.json"))
    assert m["smartctl_exit_status"] == 4.0
    assert decode_exit_status(4) == ["a SMART or other command to the device failed"]
    assert m["available_spare_threshold_pct"] == 99.0
    assert m["temperature_c"] == 42.0


def test_device_names_are_short_kernel_names() -> None:
    rows = parse_smartctl(load("smartctl_exporter/nvme-null-Micron_7400_MTFDKCB1T9TDZ-nvme10.json"),
                          ctx())["nvme_smart"]
    assert {r["device"] for r in rows} == {"nvme10"}
    rows = parse_smartctl(load("beszel/nvme0.json"), ctx("/dev/nvme3n1"))["nvme_smart"]
    assert {r["device"] for r in rows} == {"nvme3"}
    assert nvme_device_name("/dev/nvme0n1p2") == "nvme0"
    assert nvme_device_name("nvme12") == "nvme12"


@pytest.mark.parametrize(("rel", "reason"), [
    ("smartctl_exporter/non-nvme/sat-Samsung_based_SSDs-SAMSUNG_MZ7LH1T9HMLT-00005-sda.json",
     "smartctl output is for a non-NVMe device (/dev/sda, protocol ATA); nvme_smart takes NVMe "
     "devices only"),
    ("smartctl_exporter/non-nvme/HITACHI_H109060SESUN600G_10.json",
     "smartctl output is for a non-NVMe device (/dev/sdb, protocol SCSI); nvme_smart takes NVMe "
     "devices only"),
    ("scrutiny/smartctl_scan_nvme.json",
     "smartctl --scan output (a device list), not one device's health report; collect with "
     "`smartctl -j -a /dev/nvmeX`"),
    ("scrutiny/smartctl_info_nvme.json",
     "smartctl output has no nvme_smart_health_information_log (smartctl exit_status 0; argv: "
     "smartctl --info --json /dev/nvme4)"),
])
def test_outputs_that_are_not_nvme_health_reports_are_rejected(rel: str, reason: str) -> None:
    doc = load(rel)
    assert detect(doc)
    with pytest.raises(RecordError) as err:
        parse_smartctl(doc, ctx())
    assert err.value.reason == reason


def test_device_open_failure_reason_decodes_exit_status() -> None:
    doc = copy.deepcopy(load("smartctl_exporter/INTEL_SSDPE2KX080T8_1.json"))
    del doc["nvme_smart_health_information_log"]
    doc["smartctl"]["exit_status"] = 2
    doc["smartctl"]["messages"] = [{"string": "/dev/nvme0: Unable to detect device type",
                                    "severity": "error"}]
    with pytest.raises(RecordError) as err:
        parse_smartctl(doc, ctx())
    assert err.value.reason == (
        "smartctl output has no nvme_smart_health_information_log (smartctl exit_status 2: "
        "device open failed; messages: /dev/nvme0: Unable to detect device type)")


def test_malformed_field_is_named() -> None:
    doc = copy.deepcopy(load("scrutiny/smart-nvme.json"))
    doc["nvme_smart_health_information_log"]["temperature"] = "hot"
    with pytest.raises(RecordError, match=r"^nvme_smart_health_information_log\.temperature is "
                                          r"not a number: 'hot'$"):
        parse_smartctl(doc, ctx())


def test_not_json_object() -> None:
    with pytest.raises(RecordError, match="not a JSON object"):
        parse_smartctl("smartctl 7.3 ...", ctx())


@pytest.mark.parametrize("value", [None, "text", 3, [], {"device": {}}, {"smartctl": "x"}])
def test_detect_rejects_other_inputs(value: Any) -> None:
    assert detect(value) is False


def test_render_round_trip() -> None:
    values = {"temperature_c": 47.0, "host_written_bytes": 12_345 * 512_000.0,
              "host_read_bytes": 999 * 512_000.0, "percent_used_pct": 3.0,
              "available_spare_pct": 100.0, "available_spare_threshold_pct": 10.0,
              "power_on_hours": 1234.0, "media_errors": 0.0, "critical_warning": 0.0,
              "temperature_sensor1_c": 47.0, "temperature_sensor2_c": 52.0}
    doc = render_smartctl_json("SAMSUNG MZWLR7T6HALA-00007", "S6EWNA0R123456", "MPK7525Q",
                               "nvme2", values, exit_status=0)
    assert detect(doc)
    doc = json.loads(json.dumps(doc))  # what a collector would write
    rows = parse_smartctl(doc, ctx())["nvme_smart"]
    got = {r["metric"]: r["value"] for r in rows}
    assert {k: got[k] for k in values} == values
    assert got["smartctl_exit_status"] == 0.0
    assert {(r["device"], r["model"], r["serial"], r["firmware"]) for r in rows} == {
        ("nvme2", "SAMSUNG MZWLR7T6HALA-00007", "S6EWNA0R123456", "MPK7525Q")}


def test_truncated_file_is_quarantined_through_ingest() -> None:
    envelope = pytest.importorskip("ckptwatch.sources.envelope")
    data = (REAL / "scrutiny/smart-nvme.json").read_bytes()
    parsed = envelope.read_tool_file(data[: len(data) // 2], file_label="smart/n1/nvme0.json",
                                     node="n1", ts=TS, device="nvme0")
    assert not parsed.frames
    assert [r.reason.split(" (")[0] for r in parsed.rejects] == ["invalid JSON"]


def test_envelope_line_is_quarantined_with_the_parser_reason() -> None:
    envelope = pytest.importorskip("ckptwatch.sources.envelope")
    doc = load("scrutiny/smartctl_info_nvme.json")
    line = json.dumps({"node": "n1", "device": "nvme4", "collected_at": "2026-11-28T12:00:00Z",
                       "source": "smartctl", "output": doc})
    parsed = envelope.read_envelopes(line.encode(), file_label="smart/n1/day.jsonl")
    assert [(r.line, r.reason) for r in parsed.rejects] == [
        (1, "smartctl output has no nvme_smart_health_information_log (smartctl exit_status 0; "
            "argv: smartctl --info --json /dev/nvme4)")]


# GPL-3.0 samples (netdata, nasty): never copied; checked in place by hand (tests/in_place.py).
@pytest.mark.skipif(not SHARED.exists(), reason=IN_PLACE_REASON)
def test_gpl_samples_checked_in_place() -> None:
    kingston = metrics(load("nasty/nvme_kingston_snv3s.json", SHARED))
    assert "temperature_sensor1_c" not in kingston  # smartctl printed null for sensor 1
    assert kingston["temperature_sensor2_c"] == 43.0
    assert kingston["host_written_bytes"] == 14257237 * 512_000
    firecuda = parse_smartctl(load("netdata/type-nvme-device-nvme1.json", SHARED), ctx())
    assert {r["device"] for r in firecuda["nvme_smart"]} == {"nvme1"}
    for path in sorted((SHARED / "nasty").glob("*.json")):
        assert parse_smartctl(json.loads(path.read_text()), ctx())["nvme_smart"]
    with pytest.raises(RecordError, match="--scan output"):
        parse_smartctl(load("netdata/type-nvme-scan.json", SHARED), ctx())


def test_every_metric_is_documented() -> None:
    from ckptwatch.sources.smartctl import HEALTH_LOG_METRICS

    doc = (Path(__file__).parents[2] / "docs" / "formats.md").read_text()
    assert not [m for m, _ in HEALTH_LOG_METRICS.values() if m not in doc]
