"""The JSON Lines envelope: dispatch by source, detection by content, per-line rejects."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from tests.bulk_oracle import BULK_EXAMPLES, assert_bulk_matches_one_by_one

from ckptwatch.errors import RecordError
from ckptwatch.sources import load_all
from ckptwatch.sources.base import (
    BULK_PARSERS,
    PLAIN_TEXT,
    TOOL_FORMATS,
    ToolContext,
    plain_json_strings,
    register_tool,
)
from ckptwatch.sources.envelope import read_envelopes, read_tool_file, time_from_name


@pytest.fixture
def toy_tool() -> Iterator[str]:
    """A registered toy format: text 'TOY key=value …' -> one nvme_smart row per key."""

    def detect(output: Any) -> bool:
        return isinstance(output, str) and output.startswith("TOY ")

    @register_tool("toy", detect)
    def parse(output: Any, ctx: ToolContext) -> dict[str, list[dict[str, Any]]]:
        if not isinstance(output, str) or not output.startswith("TOY "):
            raise RecordError("toy output must start with 'TOY '")
        rows = []
        for kv in output[4:].split():
            k, v = kv.split("=")
            rows.append({"ts": ctx.ts, "node": ctx.node, "device": ctx.device or "nvme0",
                         "source": ctx.source, "metric": k, "value": v})
        return {"nvme_smart": rows}

    yield "toy"
    del TOOL_FORMATS["toy"]


def _env(**kw: Any) -> str:
    base = {"node": "n1", "device": "nvme1", "collected_at": "2026-11-28T00:00:00Z",
            "source": "toy", "output": "TOY temperature_c=41"}
    base.update(kw)
    return json.dumps({k: v for k, v in base.items() if v is not None})


def test_envelope_rows_carry_node_device_and_time(toy_tool: str) -> None:
    out = read_envelopes((_env() + "\n").encode(), file_label="smart/x.jsonl")
    [df] = out.frames["nvme_smart"]
    row = df.row(0, named=True)
    assert (row["node"], row["device"], row["metric"], row["value"]) == (
        "n1", "nvme1", "temperature_c", 41.0)
    assert row["ts"] == datetime(2026, 11, 28, tzinfo=UTC)


def test_source_is_detected_when_missing(toy_tool: str) -> None:
    out = read_envelopes((_env(source=None) + "\n").encode(), file_label="f")
    assert out.rows("nvme_smart") == 1 and not out.rejects


@pytest.mark.parametrize(("line", "reason"), [
    (_env(node=None), "envelope has no 'node'"),
    (_env(collected_at="soon"), "collected_at: Invalid isoformat string: 'soon'"),
    (_env(collected_at=None), "envelope has no 'collected_at'"),
    (_env(source="nvme-teapot"), "no parser for source 'nvme-teapot'"),
    (_env(source=None, output={"what": 1}), "envelope names no 'source'"),
    (_env(output="TOY temperature_c=hot"), "nvme_smart row temperature_c has no valid value"),
    (_env(output="nonsense"), "toy output must start with 'TOY '"),
    ('{"node": "n1", "output": "TOY a=1", "collected_at": "2026-11-28T00:00:00Z"', "invalid JSON"),
    ("[1]", "expected a JSON object, got list"),
])
def test_bad_envelope_lines_are_rejected_with_line_and_reason(toy_tool: str, line: str,
                                                              reason: str) -> None:
    data = "\n".join([_env(), line, _env(device="nvme2")]) + "\n"
    out = read_envelopes(data.encode(), file_label="f")
    assert out.rows("nvme_smart") == 2
    [rej] = out.rejects
    assert rej.line == 2
    assert rej.reason.startswith(reason), rej.reason


def test_bare_tool_file_takes_node_from_its_place(toy_tool: str) -> None:
    out = read_tool_file(b"TOY percent_used_pct=3", file_label="smart/n7/x.txt", node="n7",
                         ts=datetime(2026, 11, 28, tzinfo=UTC))
    assert out.frames["nvme_smart"][0]["node"].to_list() == ["n7"]


@pytest.mark.parametrize(("name", "iso"), [
    ("nvme0-20261129T030000Z.json", "2026-11-29T03:00:00+00:00"),
    ("perfquery_2026-11-29T03:00:00+01:00.txt", "2026-11-29T02:00:00+00:00"),
    ("ethtool.1764385200.txt", "2025-11-29T03:00:00+00:00"),
])
def test_time_from_name(name: str, iso: str) -> None:
    ts = time_from_name(name)
    assert ts is not None and ts.isoformat() == iso


def test_time_from_name_none() -> None:
    assert time_from_name("nvme0.json") is None


# -- the bulk path (ethtool and perfquery envelopes parsed together in polars) ---------------
load_all()
REAL = Path(__file__).parents[1] / "fixtures" / "real"
TEXT_FIXTURES = [("ethtool", p) for p in sorted((REAL / "ethtool").rglob("*.txt"))] + [
    ("perfquery", p) for p in sorted(
        (REAL / "infiniband" / "treydock_infiniband_exporter").rglob("*")) if p.is_file()]


@pytest.fixture
def bulk_counts(monkeypatch: pytest.MonkeyPatch) -> dict[str, int]:
    """How many envelopes the bulk parsers were given, and how many they declined."""
    counts = {"given": 0, "declined": 0}
    for source, parse in list(BULK_PARSERS.items()):
        def counted(env: pl.DataFrame, parse: Any = parse) -> Any:
            rows, declined = parse(env)
            counts["given"] += env.height
            counts["declined"] += declined.len()
            return rows, declined
        monkeypatch.setitem(BULK_PARSERS, source, counted)
    return counts


@pytest.mark.parametrize(("source", "path"), TEXT_FIXTURES,
                         ids=lambda v: v if isinstance(v, str) else v.name)
def test_real_fixtures_parse_the_same_in_bulk(source: str, path: Path,
                                              bulk_counts: dict[str, int]) -> None:
    text = path.read_text()
    lines = [json.dumps({"node": "n1", "collected_at": f"2026-11-28T00:0{i}:00Z",
                         "source": source, "output": text, **extra})
             for i, extra in enumerate([{"device": "mlx5_0"}, {"device": "eth3", "port": 2},
                                        {"device": "", "port": ""}, {}])]
    assert_bulk_matches_one_by_one(("\n".join(lines) + "\n").encode())
    assert bulk_counts["given"] == 4


def test_mlx5_and_perfquery_fixtures_take_the_bulk_path(bulk_counts: dict[str, int]) -> None:
    eth = (REAL / "ethtool" / "ethq" / "ethtool-S_mlx5_core.txt").read_text()
    [pq] = [p for _, p in TEXT_FIXTURES if p.name == "0x506b4b03005c2740"] or [
        next(p for s, p in TEXT_FIXTURES if s == "perfquery" and p.stat().st_size)]
    data = "\n".join(json.dumps({"node": "n1", "device": "mlx5_0", "port": "1", "source": s,
                                 "collected_at": "2026-11-28T00:00:00Z", "output": o})
                     for s, o in [("ethtool", eth), ("perfquery", pq.read_text())]) + "\n"
    out = assert_bulk_matches_one_by_one(data.encode())
    assert out.rows("fabric_counters") > 700 and not out.rejects
    assert bulk_counts == {"given": 2, "declined": 0}


def test_mixed_good_and_bad_file_is_the_same_in_bulk(bulk_counts: dict[str, int]) -> None:
    eth = "NIC statistics:\n     rx_prio3_pause: 7\n     rx_global_pause: 2\n     rx_bytes: 9\n"
    pq = ("# Port extended counters: Lid 12 port 1 (CapMask: 0x5A00)\n"
          "PortSelect:......................1\nPortXmitData:....................10\n"
          "PortXmitWait:....................4\n")

    def env(**kw: Any) -> str:
        base = {"node": "n1", "device": "mlx5_0", "collected_at": "2026-11-28T00:00:00Z",
                "source": "ethtool", "output": eth}
        base.update(kw)
        return json.dumps({k: v for k, v in base.items() if v is not None})

    lines = [
        env(),                                                    # 1 good, bulk
        env(source="perfquery", output=pq, port="1"),             # 2 good, bulk
        "{not json",                                              # 3 invalid JSON
        env(collected_at="2026-13-01T00:00:00Z"),                 # 4 bad time (bulk-eligible)
        env(collected_at="1999-01-01T00:00:00Z"),                 # 5 implausible year
        env(output="NIC statistics:\n rx_x: 1\n rx_x: 2\n"),       # 6 conflicting duplicate
        env(output="NIC statistics:\n rx_bytes:\n"),               # 7 truncated
        env(output="NIC statistics:\n rx_bytes: 5 \u00e9\n"),      # 8 not an integer
        env(output="NIC statistics:\n rx_bytes: -0\n rx_x: 5\n"),  # 9 -0 is 0.0
        "",                                                       # 10 blank
        env(source=None),                                         # 11 detected, then bulk
        env(device=None),                                         # 12 no interface
        env(collected_at="2026-11-28T01:00:00+01:00", extra=1),   # 13 offset; extra key
        env(source="perfquery", output=pq),                       # 14 headered, no port
        env(source="perfquery", output="PortXmitWait:...3\n"),    # 15 headerless, no port
        env(source="perfquery", output="PortXmitWait:...3\n", port=1),  # 16 headerless ok
        env(source="perfquery", output=pq + "XmtWait:.....5\n", port="1"),  # 17 given twice
        env(output="NIC statistics:\n [0]: rx_ucast_packets: 3\n tx_bytes: 1\n"),  # 18 bnxt
        env(output=eth.replace("rx_bytes: 9", "rx_bytes: " + "9" * 400)),  # 19 too large
    ]
    out = assert_bulk_matches_one_by_one(("\n".join(lines) + "\n").encode())
    assert [r.line for r in out.rejects] == [3, 4, 5, 6, 7, 8, 12, 15, 17, 19]
    assert "month must be in 1..12" in out.rejects[1].reason
    # set aside for bulk: all but 3 (not JSON), 8 (a \u escape), 10 (blank) (11, no source:
    # recognised first); declined, so parsed one by one to say what is wrong: 6, 7, 12, 15,
    # 17, 19
    assert bulk_counts == {"given": 14, "declined": 6}
    assert out.rows("fabric_counters") > 0


_NAMES = st.sampled_from([
    "rx_bytes", "rx_prio3_pause", "tx_prio3_pause", "rx_global_pause", "rx_pause_frames",
    "port.rx_dropped", "rx_dropped.nic", "rx_discards", "[0]: rx_ucast", "[1]:rx_x", "a b",
    "x[1]", "rx_ecn_mark", "np_ecn_marked_roce_packets", "ecn_marked", "PortXmitData",
    "PortRcvData", "PortXmitWait", "XmtWait", "PortSelect", "SymbolErrors", "9Bad", "",
    "port_xmit_bytes", "PortRcvErrors"])
_VALUES = st.one_of(st.integers(-2 ** 70, 2 ** 70).map(str), st.sampled_from(
    ["0", "-0", "+5", "007", "0x1f", "1,234", "", "abc", "5 6", "9" * 301, "9" * 300]))
_SEPS = st.sampled_from([":", ": ", " : ", ":....", ":......", "::", " ", "\t:\t"])
_HEADS = st.sampled_from([
    "NIC statistics:", "# ethtool -S eth7", "# comment", "",
    "# Port extended counters: Lid 2052 port 1 (CapMask: 0x5A00)",
    "# Port counters: Lid 7 port 2", "# port counters: lid 9 ALL PORTS"])


@st.composite
def _text_envelope(draw: st.DrawFn) -> str:
    body = [draw(_HEADS) if draw(st.integers(0, 5)) == 0 else
            draw(st.sampled_from(["", " ", "\t"])) + draw(_NAMES) + draw(_SEPS) + draw(_VALUES)
            for _ in range(draw(st.integers(0, 8)))]
    env: dict[str, Any] = {
        "node": "n1", "source": draw(st.sampled_from(["ethtool", "perfquery"])),
        "collected_at": draw(st.sampled_from(
            ["2026-11-28T00:00:07Z", "2026-11-28T00:00:07.123+00:00", "2026-02-30T00:00:00Z",
             "2026-11-28T00:00:07+02:00", "1795824212.5"])),
        "output": "\n".join(body) + draw(st.sampled_from(["", "\n", "\r\n"]))}
    # a device name over the field limit (256 characters) must be rejected alike on both paths
    for key, choices in (("device", [None, "mlx5_0", "mlx5_0", "", "d" * 300]),
                         ("port", [None, "1", 2])):
        value = draw(st.sampled_from(choices))
        if value is not None:
            env[key] = value
    return json.dumps(env)


@settings(max_examples=BULK_EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.lists(_text_envelope(), min_size=1, max_size=8))
def test_bulk_matches_one_by_one_on_generated_text(lines: list[str]) -> None:
    assert_bulk_matches_one_by_one(("\n".join(lines) + "\n").encode())


def test_json_error_reasons_read_as_one_sentence() -> None:
    from ckptwatch.errors import RecordError
    from ckptwatch.sources.base import load_json

    with pytest.raises(RecordError) as err:
        load_json('{"job_id": "abc', one_line=True)
    assert str(err.value) == "invalid JSON (Unterminated string starting at column 12)"
    with pytest.raises(RecordError) as err:
        load_json('{"a": 1} x')
    assert str(err.value) == "invalid JSON (Extra data at line 1 column 10)"


@settings(max_examples=BULK_EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.dictionaries(st.sampled_from(["node", "device", "output", "x"]), st.text(), min_size=1))
def test_a_line_said_plain_holds_only_plain_strings(doc: dict[str, str]) -> None:
    # written as collectors write it (UTF-8, not \u-escaped); lines with a \u escape are never
    # set aside for a bulk parser, so they are not asked about
    line = json.dumps(doc, ensure_ascii=False)
    assume("\\u" not in line)
    said = pl.select(plain_json_strings(pl.lit(pl.Series([line])))).item()
    really = all(re.fullmatch(PLAIN_TEXT, v) for v in (*doc, *doc.values()))
    assert not said or really
    if really and "\\" not in line and "\x7f" not in line:
        assert said  # plain text is read in bulk


def test_outputs_that_are_not_plain_text_go_one_by_one(bulk_counts: dict[str, int]) -> None:
    eth = "NIC statistics:\n     rx_prio3_pause: 7\n     rx_bytes: 9\n"
    outputs = [
        eth,                                  # 1 plain: bulk
        eth.replace("\n", "\r\n"),            # 2 CRLF (a \r escape): one by one, the same rows
        eth + "\f",                           # 3 form feed: one by one
        eth.replace("rx_bytes", "rx_b\bytes"),  # 4 backspace: one by one (rejected)
        eth.replace("rx_bytes", "rx_\x7fbytes"),  # 5 DEL (raw in JSON): one by one
        eth.replace("rx_bytes", "rx_bytés"),  # 6 raw UTF-8: one by one
        eth.replace("     ", "\t"),           # 7 tabs (a \t escape): bulk
        eth.replace("rx_bytes", "rx\\bytes"),  # 8 a backslash then b: one by one, the same
    ]
    lines = [json.dumps({"node": "n1", "device": "eth0", "collected_at": "2026-11-28T00:00:00Z",
                         "source": "ethtool", "output": o}, ensure_ascii=False)
             for o in outputs]
    out = assert_bulk_matches_one_by_one(("\n".join(lines) + "\n").encode())
    assert bulk_counts == {"given": 8, "declined": 6}
    assert out.rows("fabric_counters") >= 2 * 3
