"""The bulk path for JSON outputs (``sources/json_bulk.py``): smartctl, nvme-cli smart-log and
the OCP log as JSON give, read in bulk, exactly the rows and rejects of parsing every envelope
one by one (``read_envelopes(..., bulk=False)``), on the real fixtures and on variants of them."""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tests.bulk_oracle import BULK_EXAMPLES, assert_bulk_matches_one_by_one
from tests.in_place import IN_PLACE, IN_PLACE_REASON
from tests.sources.test_nvme_cli import _ocp_json_v1

from ckptwatch.errors import RecordError
from ckptwatch.sources import envelope as envelope_module
from ckptwatch.sources import load_all
from ckptwatch.sources.base import JSON_BULK_PARSERS, LONG_DIGITS, load_json, quick_json
from ckptwatch.sources.nvme_cli import render_ocp_smart_json
from ckptwatch.sources.smartctl import render_smartctl_json

load_all()
REAL = Path(__file__).parents[1] / "fixtures" / "real"
SMARTCTL_FILES = sorted((REAL / "smartctl_json_nvme").rglob("*.json"))
NETDATA = IN_PLACE / "nvme_cli_json" / "netdata"

#: nvme-cli ``smart-log -o json`` as its versions print it (values ours, layouts nvme-cli's):
#: 1.x/2.x integers, 2.3 floats and strings, 2.11's ``critical_warning`` object.
SMART_LOG_INTS: dict[str, Any] = {
    "critical_warning": 0, "temperature": 310, "avail_spare": 100, "spare_thresh": 5,
    "percent_used": 2, "endurance_grp_critical_warning_summary": 0,
    "data_units_read": 9898518, "data_units_written": 136157684,
    "host_read_commands": 313528805, "host_write_commands": 1928062610,
    "controller_busy_time": 8284, "power_cycles": 64, "power_on_hours": 4974,
    "unsafe_shutdowns": 39, "media_errors": 0, "num_err_log_entries": 110,
    "warning_temp_time": 0, "critical_comp_time": 0, "temperature_sensor_1": 309,
    "temperature_sensor_2": 41, "thm_temp1_trans_count": 0, "thm_temp2_trans_count": 0,
    "thm_temp1_total_time": 0, "thm_temp2_total_time": 0,
}
SMART_LOG_FLOATS = {k: float(v) for k, v in SMART_LOG_INTS.items()} | {"media_errors": 0}
SMART_LOG_STRINGS = {k: str(v) for k, v in SMART_LOG_INTS.items()}
SMART_LOG_2_11 = ({k: v for k, v in SMART_LOG_INTS.items() if not k.startswith("temperature_")}
                  | {"critical_warning": {"value": 4, "available_spare": 0, "temp_threshold": 1,
                                          "reliability_degraded": 0, "ro": 0}})
OCP_RENDERED = render_ocp_smart_json(dict(
    media_written=10**12, media_read=7 * 10**11, free_blocks=30, erase_min=1, erase_max=9,
    soft_ecc=0, system_used=1, refresh=0, nuse=5, plp=2, endurance=1000, power_changes=3))
OCP_SNAKE = {"physical_media_units_written": {"hi": 0, "lo": 5 * 10**12},
             "physical_media_units_read": {"hi": 0, "lo": 84923571298304},
             "max_user_data_erase_count": 34, "min_user_data_erase_count": 25,
             "percent_free_blocks": 7, "log_page_guid": "0xafd514c97c6f4f9ca4f2bfea2810afc5"}
SMARTCTL_RENDERED = render_smartctl_json(
    "SAMSUNG MZQL23T8HCLS-00A07", "S64HNE0R", "GDC5902Q", "nvme3",
    {"temperature_c": 41, "host_written_bytes": 512000 * 10**9, "power_on_hours": 9000,
     "temperature_sensor1_c": 41, "temperature_sensor2_c": 39})


def _smartctl_docs() -> list[dict[str, Any]]:
    return [json.loads(p.read_text()) for p in SMARTCTL_FILES] + [SMARTCTL_RENDERED]


#: (source, output) pairs the generated variants start from.
BASES: list[tuple[str, dict[str, Any]]] = (
    [("smartctl", d) for d in _smartctl_docs()]
    + [("nvme-smart-log", d) for d in (SMART_LOG_INTS, SMART_LOG_FLOATS, SMART_LOG_STRINGS,
                                       SMART_LOG_2_11)]
    + [("nvme-ocp-smart", d) for d in (OCP_RENDERED, OCP_SNAKE, _ocp_json_v1())])


def envelope(source: str | None, output: Any, **extra: Any) -> str:
    env = {"node": "n1", "collected_at": "2026-11-28T00:00:00Z", "source": source,
           "output": output, **extra}
    return json.dumps({k: v for k, v in env.items() if v is not None})


@pytest.fixture
def json_counts(monkeypatch: pytest.MonkeyPatch) -> dict[str, int]:
    """How many envelopes the JSON bulk parsers were given, and how many they declined."""
    counts = {"given": 0, "declined": 0}
    for source, parse in list(JSON_BULK_PARSERS.items()):
        def counted(env: pl.DataFrame, outputs: list[dict[str, Any]],
                    parse: Any = parse) -> Any:
            rows, declined = parse(env, outputs)
            counts["given"] += env.height
            counts["declined"] += declined.len()
            return rows, declined
        monkeypatch.setitem(JSON_BULK_PARSERS, source, counted)
    return counts


def _lines(source: str, output: Any) -> list[str]:
    return [envelope(source, output, collected_at=f"2026-11-28T00:0{i}:00Z", **extra)
            for i, extra in enumerate([{"device": "nvme0"}, {"device": "/dev/nvme1n1"},
                                       {"device": ""}, {}])]


@pytest.mark.parametrize("path", SMARTCTL_FILES, ids=lambda p: p.name)
def test_real_smartctl_fixtures_parse_the_same_in_bulk(path: Path,
                                                       json_counts: dict[str, int]) -> None:
    doc = json.loads(path.read_text())
    out = assert_bulk_matches_one_by_one(("\n".join(_lines("smartctl", doc)) + "\n").encode())
    assert json_counts["given"] == 4
    nvme = isinstance(doc.get("nvme_smart_health_information_log"), dict)
    if nvme and "\\u" not in json.dumps(doc):  # an NVMe report: read in bulk, none declined
        assert json_counts["declined"] == 0 and out.rows("nvme_smart") > 0
    elif not nvme:  # not one (ATA, SCSI, a scan): parse_smartctl says what is wrong
        assert json_counts["declined"] == 4 and len(out.rejects) == 4


@pytest.mark.parametrize(("source", "doc"), [
    ("nvme-smart-log", SMART_LOG_INTS), ("nvme-smart-log", SMART_LOG_FLOATS),
    ("nvme-smart-log", SMART_LOG_STRINGS), ("nvme-smart-log", SMART_LOG_2_11),
    ("nvme-ocp-smart", OCP_RENDERED), ("nvme-ocp-smart", OCP_SNAKE),
    ("nvme-ocp-smart", _ocp_json_v1())], ids=lambda v: v if isinstance(v, str) else "")
def test_nvme_cli_layouts_take_the_bulk_path(source: str, doc: dict[str, Any],
                                             json_counts: dict[str, int]) -> None:
    lines = _lines(source, doc)
    out = assert_bulk_matches_one_by_one(("\n".join(lines) + "\n").encode())
    # with a device the envelope is read in bulk; without one parse_* says it names none
    assert json_counts == {"given": 4, "declined": 2}
    assert out.rows("nvme_smart") > 0
    assert [r.line for r in out.rejects] == [3, 4]
    assert all("names no device" in r.reason for r in out.rejects)


def test_smart_log_values_in_bulk() -> None:
    """Kelvin, data units and the 2.11 warning object as ``parse_smart_log`` reads them."""
    data = "\n".join(envelope("nvme-smart-log", d, device="nvme0")
                     for d in (SMART_LOG_INTS, SMART_LOG_STRINGS, SMART_LOG_2_11)) + "\n"
    out = assert_bulk_matches_one_by_one(data.encode())
    df = pl.concat(out.frames["nvme_smart"])
    got = {(m, v) for m, v in df.select("metric", "value").iter_rows()}
    assert {("temperature_c", 37.0), ("temperature_sensor1_c", 36.0),
            ("temperature_sensor2_c", 41.0), ("host_written_bytes", 136157684 * 512000.0),
            ("critical_warning", 4.0)} <= got


@pytest.mark.skipif(not NETDATA.exists(), reason=IN_PLACE_REASON)
def test_netdata_smart_log_samples_in_bulk_checked_in_place(json_counts: dict[str, int]) -> None:
    docs = [json.loads(p.read_text()) for p in sorted(NETDATA.glob("*smart-log*.json"))]
    lines = [envelope("nvme-smart-log", d, device="nvme0") for d in docs]
    assert_bulk_matches_one_by_one(("\n".join(lines) + "\n").encode())
    assert json_counts == {"given": len(docs), "declined": 0}


def _mixed_lines() -> list[str]:
    eth = "NIC statistics:\n     rx_prio3_pause: 7\n     rx_bytes: 9\n"
    bad_log = copy.deepcopy(SMARTCTL_RENDERED)
    bad_log["nvme_smart_health_information_log"]["temperature"] = "hot"
    lines = [
        envelope("smartctl", SMARTCTL_RENDERED),                       # 1 bulk
        "{not json",                                                   # 2 invalid JSON
        envelope("ethtool", eth, device="mlx5_0"),                     # 3 text bulk
        envelope("nvme-smart-log", SMART_LOG_INTS, device="nvme0"),    # 4 bulk
        envelope("smartctl", bad_log),                                 # 5 declined: rejected
        envelope("nvme-ocp-smart", OCP_RENDERED, device="nvme0",
                 collected_at="2026-02-30T00:00:00Z"),                 # 6 bad time
        envelope(None, SMART_LOG_INTS, device="nvme0"),                # 7 detected, then bulk
        envelope("nvme-ocp-smart", OCP_SNAKE, device="nvme0"),         # 8 bulk
        "",                                                            # 9 blank
        envelope("nvme-smart-log", SMART_LOG_INTS | {"avail_spare": None},
                 device="nvme0"),                                      # 10 declined: rejected
        envelope("smartctl", SMARTCTL_RENDERED | {"model_name": "m" * 300}),  # 11 too long
    ]
    return lines


@pytest.mark.parametrize("chunk", [8192, 2], ids=["one-chunk", "chunks-of-2"])
def test_mixed_sources_and_bad_lines_in_one_file(chunk: int, json_counts: dict[str, int],
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """Parsed in chunks of envelopes (``_BULK_CHUNK``) or in one, the file reads the same."""
    monkeypatch.setattr(envelope_module, "_BULK_CHUNK", chunk)
    out = assert_bulk_matches_one_by_one(("\n".join(_mixed_lines()) + "\n").encode())
    # line 11: each of its 20 rows names a model over the field limit
    assert [r.line for r in out.rejects] == [2, 5, 6, 10] + [11] * 20
    assert out.rejects[1].reason == ("nvme_smart_health_information_log.temperature is not a "
                                     "number: 'hot'")
    assert out.rejects[3].reason == "nvme smart-log field 'avail_spare' is not a number: None"
    assert out.rejects[4].reason.startswith("nvme_smart row critical_warning model is 300 "
                                            "characters, over the limit of 256")
    assert out.rows("nvme_smart") == 20 + 24 + 24 + 5  # lines 1, 4, 7 and 8
    # given to the JSON bulk parsers: 1, 4, 5, 7 (no source: recognised first), 8, 10, 11
    # (6 has a bad time); declined, so parsed one by one to say what is wrong: 5, 10
    assert json_counts == {"given": 7, "declined": 2}


# -- generated variants -----------------------------------------------------------------------

_ODD_VALUES = st.one_of(
    st.none(), st.booleans(), st.integers(-2**70, 2**70), st.integers(-50, 400),
    st.floats(allow_nan=True, allow_infinity=True), st.floats(-1e6, 1e6),
    st.sampled_from(["12", " 12", "0x1f", "1,234", "abc", "", "9" * 19, "-5", "1.5", "+7",
                     "\uff11\uff12", "007", 2**63, 2**64, -(2**63), 10**30, 10**400,
                     {"hi": 0, "lo": 5}, {"hi": 1, "lo": 2}, {"hi": "0", "lo": 5}, {"lo": 3},
                     {"value": 3}, {"value": None}, [1, None, 2], [], "SSD \u00e9",
                     "\ud800", "m" * 300]))


def _target(doc: dict[str, Any], draw: st.DrawFn) -> dict[str, Any]:
    """The object a mutation edits: the output, or one of its nested objects."""
    nested = [v for v in doc.values() if isinstance(v, dict)]
    return draw(st.sampled_from([doc, doc, *nested])) if nested else doc


def _map_numbers(doc: Any, f: Callable[[int], Any]) -> Any:
    if isinstance(doc, dict):
        return {k: _map_numbers(v, f) for k, v in doc.items()}
    if isinstance(doc, list):
        return [_map_numbers(v, f) for v in doc]
    return f(doc) if type(doc) is int else doc


@st.composite
def _json_envelope(draw: st.DrawFn) -> str:
    source, base = draw(st.sampled_from(BASES))
    doc = copy.deepcopy(base)
    for _ in range(draw(st.integers(0, 4))):
        what = draw(st.sampled_from(["drop", "set", "extra", "floats", "strings", "order"]))
        target = _target(doc, draw)
        keys = sorted(target)
        if what == "drop" and keys:
            del target[draw(st.sampled_from(keys))]
        elif what == "set" and keys:
            target[draw(st.sampled_from(keys))] = draw(_ODD_VALUES)
        elif what == "extra":
            target[draw(st.sampled_from(["vendor_x", "Vendor Specific", "temperature_sensor9",
                                         "percentage_used", "Physical media units read"]))] = \
                draw(_ODD_VALUES)
        elif what == "floats":
            doc = _map_numbers(doc, lambda v: float(v) if abs(v) < 10**300 else v)
        elif what == "strings":
            doc = _map_numbers(doc, str)
        elif what == "order" and keys:
            order = draw(st.permutations(keys))
            reordered = {k: target[k] for k in order}
            target.clear()
            target.update(reordered)
    env: dict[str, Any] = {
        "node": "n1", "source": draw(st.sampled_from([source, source, source, None])),
        "collected_at": draw(st.sampled_from(
            ["2026-11-28T00:00:07Z", "2026-11-28T00:00:07.123+00:00", "2026-02-30T00:00:00Z",
             "2026-11-28T00:00:07+02:00", "1795824212.5"])),
        "output": doc}
    device = draw(st.sampled_from([None, "nvme0", "/dev/nvme2n1", "", 3, "d" * 300]))
    if device is not None:
        env["device"] = device
    text = json.dumps({k: v for k, v in env.items() if v is not None})
    if draw(st.booleans()) and '"output": {' in text:  # a key given twice: the last one counts
        key = draw(st.sampled_from(sorted(doc) or ["x"]))
        text = text.replace('"output": {', '"output": {' + json.dumps(key) + ': '
                            + json.dumps(draw(_ODD_VALUES)) + ', ', 1)
    return text


@settings(max_examples=BULK_EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.lists(st.one_of(_json_envelope(), _json_envelope(),
                          st.sampled_from(["{not json", "", "[1]", '{"node": "n1"}'])),
                min_size=1, max_size=8))
def test_bulk_matches_one_by_one_on_generated_json(lines: list[str]) -> None:
    assert_bulk_matches_one_by_one(("\n".join(lines) + "\n").encode())


# -- orjson reads a line as json does (base.quick_json) -------------------------------------

_JSON_VALUES = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(-2**70, 2**70), st.floats(),
              st.text(max_size=8)),
    lambda inner: st.one_of(st.lists(inner, max_size=4),
                            st.dictionaries(st.text(max_size=4), inner, max_size=4)),
    max_leaves=12)


def _read(text: str, read: Callable[[str], Any]) -> Any:
    try:
        return ("ok", read(text))
    except RecordError as exc:
        return ("reject", exc.reason)


@settings(max_examples=300, deadline=None)
@given(_JSON_VALUES, st.booleans(), st.sampled_from(["", " ", "\r", "x", "}", "\ufeff"]))
def test_quick_json_reads_as_load_json(value: Any, ascii_only: bool, tail: str) -> None:
    text = json.dumps(value, ensure_ascii=ascii_only)
    for line in (text, text + tail, tail + text, text[: len(text) // 2]):
        if re.search(LONG_DIGITS, line):
            continue  # read with json (read_envelopes looks first)
        slow = _read(line, lambda t: load_json(t, one_line=True))
        quick = _read(line, quick_json)
        assert repr(quick) == repr(slow)  # repr: nan, -0.0 and int/float told apart


@pytest.mark.parametrize("line", [
    '{"a": 18446744073709551616}', '{"a": -9223372036854775809}', '{"a": NaN}',
    '{"a": 1e400}', '{"a": "\\ud800"}', '{"a": 1, "a": 2}', "[" * 2000 + "]" * 2000,
    '{"a": 1} x', '\ufeff{"a": 1}'])
def test_read_envelopes_reads_odd_json_as_json_does(line: str) -> None:
    huge = {"data_units_written": 12345678901234567890123, "temperature": 1e400}
    wide = {"Physical media units written": {"hi": 0, "lo": 2**64}}
    data = "\n".join([line, envelope("nvme-smart-log", huge, device="nvme0"),
                      envelope("nvme-ocp-smart", wide, device="nvme0")])
    assert_bulk_matches_one_by_one((data + "\n").encode())
