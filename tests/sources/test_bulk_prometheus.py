"""The bulk parser of Prometheus exposition (node_exporter's infiniband and ethtool families)
gives exactly what ``parse_prometheus`` gives one scrape at a time.

``read_envelopes(..., bulk=False)`` is the oracle (``assert_bulk_matches_one_by_one``). Inputs:
the real scrapes under ``tests/fixtures/real/prometheus_exposition`` and variants generated
from their samples: reordered and repeated samples, HELP/TYPE lines missing or extra, escaped
labels, braces in labels, sample timestamps, NaN/+Inf, Go float formats, duplicate series.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tests.bulk_oracle import BULK_EXAMPLES, assert_bulk_matches_one_by_one

from ckptwatch.sources import load_all
from ckptwatch.sources.base import BULK_PARSERS
from ckptwatch.sources.prometheus import SOURCE

load_all()
PROM = Path(__file__).parents[1] / "fixtures" / "real" / "prometheus_exposition"
IB_PROM = PROM / "node_exporter_e2e_infiniband_excerpt.prom"
SMART_PROM = PROM / "smartctl_exporter_EXAMPLE.prom"

#: node_exporter ``--collector.ethtool`` samples of an mlx5 port (names as node_exporter
#: renders them, values ours), with the HELP/TYPE lines node_exporter writes.
ETHTOOL_SCRAPE = """\
# HELP node_boot_time_seconds Node boot time, in unixtime.
# TYPE node_boot_time_seconds gauge
node_boot_time_seconds 1.7641e+09
# HELP node_ethtool_info A metric with a constant '1' value labeled by bus_info, device, driver
# TYPE node_ethtool_info gauge
node_ethtool_info{bus_info="0000:3b:00.0",device="eth2",firmware_version="28.39 (MT_0838)"} 1
# TYPE node_ethtool_received_prio3_pause untyped
node_ethtool_received_prio3_pause{device="eth2"} 1200
node_ethtool_received_prio3_pause_duration{device="eth2"} 86000
node_ethtool_transmitted_pause_ctrl_phy{device="eth2"} 17
node_ethtool_received_bytes_phy{device="eth2"} 3.487869423791142e+15
node_ethtool_port_received_dropped{device="eth3"} 4
node_ethtool_received_ecn_mark{device="eth3"} 0
"""


def count_bulk(monkeypatch: pytest.MonkeyPatch) -> dict[str, int]:
    """How many scrapes the bulk parser was given, and how many it declined."""
    counts = {"given": 0, "declined": 0}
    parse = BULK_PARSERS[SOURCE]

    def counted(env: pl.DataFrame) -> Any:
        rows, no = parse(env)
        counts["given"] += env.height
        counts["declined"] += no.len()
        return rows, no

    monkeypatch.setitem(BULK_PARSERS, SOURCE, counted)
    return counts


def envelopes(outputs: list[str], envs: list[dict[str, Any]] | None = None) -> bytes:
    """An envelope file: one ``prometheus`` envelope per output, a minute apart."""
    envs = envs or [{}] * len(outputs)
    lines = [json.dumps({"node": "n1", "collected_at": f"2026-11-28T00:{i % 60:02d}:00Z",
                         "source": SOURCE, "output": out, **env})
             for i, (out, env) in enumerate(zip(outputs, envs, strict=True))]
    return ("\n".join(lines) + "\n").encode()


PORTS = [{}, {"port": 3}, {"port": ""}, {"device": "mlx5_9", "port": "2"}]


@pytest.mark.parametrize("text", [IB_PROM.read_text(), ETHTOOL_SCRAPE],
                         ids=["infiniband", "ethtool"])
def test_node_exporter_scrapes_are_read_in_bulk(text: str,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    counts = count_bulk(monkeypatch)
    out = assert_bulk_matches_one_by_one(envelopes([text] * 4, PORTS))
    assert counts == {"given": 4, "declined": 0}
    assert out.rows("fabric_counters") >= 4 * 8 and not out.rejects


def test_legacy_series_override_in_place_and_words_follow(
        monkeypatch: pytest.MonkeyPatch) -> None:
    counts = count_bulk(monkeypatch)
    text = IB_PROM.read_text()
    out = assert_bulk_matches_one_by_one(envelopes([text]))
    assert counts["declined"] == 0
    df = pl.concat(out.frames["fabric_counters"])
    port2 = df.filter(pl.col("port") == "2")
    values = dict(zip(port2["counter"], port2["value"], strict=True))
    assert values["port_rcv_bytes"] == 18527668.0  # the legacy series won over the plain 0
    assert values["port_rcv_data"] == 18527668.0 / 4
    counters = df["counter"].to_list()
    assert counters.index("port_rcv_data") > counters.index("link_downed")  # words follow


def test_smartctl_exporter_scrape_goes_one_by_one(monkeypatch: pytest.MonkeyPatch) -> None:
    counts = count_bulk(monkeypatch)
    out = assert_bulk_matches_one_by_one(envelopes([SMART_PROM.read_text(), ETHTOOL_SCRAPE]))
    assert counts == {"given": 2, "declined": 1}
    assert out.rows("nvme_smart") > 0 and out.rows("fabric_counters") > 0


def test_scrape_without_fabric_counters_is_rejected_alike(
        monkeypatch: pytest.MonkeyPatch) -> None:
    counts = count_bulk(monkeypatch)
    out = assert_bulk_matches_one_by_one(envelopes(
        ["# TYPE up gauge\nup 1\n", ETHTOOL_SCRAPE, "node_ethtool_x{device=\"e\"} NaN\n"]))
    assert [r.line for r in out.rejects] == [1, 3]
    assert "has no node_infiniband_*" in out.rejects[0].reason
    assert counts["declined"] == 2


def test_derived_series_that_clash_are_added_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """Two counters with one alias give it once (the first's value); an alias the scrape
    gives itself, or a word count it gives, is not added again; a series given twice keeps
    its first place and last value."""
    counts = count_bulk(monkeypatch)
    text = ('node_ethtool_port_received_dropped{device="eth2"} 4\n'
            'node_ethtool_received_dropped_nic{device="eth2"} 9\n'
            'node_ethtool_received_ecn_mark{device="eth2"} 3\n'
            'node_ethtool_ecn_marked{device="eth2"} 5\n'
            'node_infiniband_port_data_received_bytes_total{device="mlx5_0",port="1"} 40\n'
            'node_infiniband_port_rcv_data{device="mlx5_0",port="1"} 7\n')
    distinct = assert_bulk_matches_one_by_one(envelopes([text]))
    twice = assert_bulk_matches_one_by_one(envelopes(
        [text + 'node_ethtool_received_ecn_mark{device="eth2"} 8\n']))
    assert counts == {"given": 2, "declined": 0}
    for out, ecn in ((distinct, 3.0), (twice, 8.0)):
        df = pl.concat(out.frames["fabric_counters"])
        got = dict(zip(df["counter"], df["value"], strict=False))
        assert df["counter"].to_list().count("rx_discards") == 1 and got["rx_discards"] == 4.0
        assert df["counter"].to_list().count("ecn_marked") == 1 and got["ecn_marked"] == 5.0
        assert got["port_rcv_data"] == 7.0 and got["rx_ecn_mark"] == ecn
        assert df["counter"].to_list().index("rx_ecn_mark") == 2


# -- generated variants -----------------------------------------------------------------------
def _real_samples() -> list[str]:
    lines = [line for text in (IB_PROM.read_text(), ETHTOOL_SCRAPE)
             for line in text.splitlines() if line and not line.startswith("#")]
    return lines


_NAMES = st.sampled_from([
    "node_infiniband_port_data_received_bytes_total",
    "node_infiniband_legacy_data_received_bytes_total",
    "node_infiniband_port_packets_received_total", "node_infiniband_legacy_packets_received_total",
    "node_infiniband_port_transmit_wait_total", "node_infiniband_state_id",
    "node_infiniband_info", "node_infiniband_vl15_dropped_total", "node_infiniband_",
    "node_infiniband_port_xmit_data", "node_ethtool_received_prio3_pause",
    "node_ethtool_transmitted_prio3_pause_duration", "node_ethtool_port_received_dropped",
    "node_ethtool_received_dropped_nic", "node_ethtool_info", "node_ethtool_received_ecn_mark",
    "node_ethtool_np_ecn_marked_roce_packets", "node_ethtool_ecn_marked", "up",
    "go_goroutines", "node:recorded_rule"])
_ODD_NAMES = st.sampled_from(["smartctl_device_temperature", "smartctl_device", "9bad"])
#: Label sets, values and timestamps the bulk path reads, and odd ones it must decline (or
#: read exactly as ``parse_prometheus`` does); an odd one is drawn about once in 15 lines.
_LABELS = st.sampled_from([
    'device="mlx5_0"', 'device="mlx5_0",port="1"', 'port="2",device="mlx5_0"',
    ' device = "mlx5_0" , port = "1" , ', 'device="mlx5_0",device="mlx5_1"',
    'device="eth2",driver="mlx5_core"', 'device="mlx5_0",port=""', 'device="mlx5_0",',
    'foo=",device=",device="mlx5_1",port="7"', 'device="mlx5_0",port="1",port="2"'])
_ODD_LABELS = st.sampled_from([
    None, "", 'device="",port="1"', 'port="1"', 'foo=",device=",port="7"',
    'device="a\\"b"', 'device="a\\\\b"', 'device="a}b"', 'device="a{b"', 'device="x",,',
    'device=mlx5_0', 'device="mlx5_0" port="1"', ","])
_VALUES = st.one_of(st.integers(-2 ** 70, 2 ** 70).map(str),
                    st.floats(allow_nan=False).map(repr), st.sampled_from([
                        "0", "-0", "+5", "1.5e+12", "1e-05", "3.487869423791142e+15", "NaN",
                        "+Inf", "-Inf", "inf", "nan", "1e400", ".5", "5.", "1E5", "9" * 400]))
_ODD_VALUES = st.sampled_from(["1_000", "0x10", "abc", "", "1e", "--1", "Infinity", "+nan"])
_STAMPS = st.sampled_from([" 1764331200000", " -5", " 99999999999999999999"])
_SPACE = st.sampled_from([" ", " ", "  ", "\t"])
#: Whole lines whose series (``name{labels}``) and value the bulk path cuts apart by where the
#: braces and blanks fall: a blank before the brace, a brace left open, closed twice or before
#: it opens, no blank before the value, a brace in the value, blanks around the value.
_ODD_LINES = st.sampled_from([
    *(f"node_ethtool_received_ecn_mark{rest}" for rest in [
        ' {device="eth2"} 5', '{device="eth2" 5', '}{device="eth2"} 5', '{device="eth2"}} 5',
        '{device="eth2"}5', '{device="eth2"} 5{}', '{device="eth2"}\t5\t', " 5"]),
    *(f"node_infiniband_link_downed_total{rest}" for rest in [
        '\t{ port="1" ,device="mlx5_0" }  7', '{device="mlx5_0"}', "{}", "{} 1"]),
    '{device="mlx5_0"} 1', "node_infiniband_port_xmit_data "])


def _mostly(draw: st.DrawFn, usual: st.SearchStrategy[Any], odd: st.SearchStrategy[Any]) -> Any:
    return draw(odd if draw(st.integers(0, 14)) == 7 else usual)


@st.composite
def _sample(draw: st.DrawFn) -> str:
    if draw(st.integers(0, 3)) == 0:  # a real sample line as it stands
        return draw(st.sampled_from(_real_samples()))
    if draw(st.integers(0, 19)) == 0:
        return draw(_ODD_LINES)
    labels = _mostly(draw, _LABELS, _ODD_LABELS)
    return (_mostly(draw, _NAMES, _ODD_NAMES) + ("" if labels is None else "{" + labels + "}")
            + draw(_SPACE) + _mostly(draw, _VALUES, _ODD_VALUES)
            + _mostly(draw, st.just(""), _STAMPS))


@st.composite
def _scrape(draw: st.DrawFn) -> str:
    lines = []
    for sample in draw(st.lists(_sample(), min_size=0, max_size=10)):
        if draw(st.booleans()):
            name = sample.split("{")[0].split(" ")[0]
            lines += [f"# HELP {name} some help", f"# TYPE {name} counter"]
        lines.append(draw(st.sampled_from(["", "", " ", "\t"])) + sample)
        if draw(st.integers(0, 6)) == 0:  # a duplicate series, maybe with another value
            lines.append(draw(st.sampled_from([sample, sample.rsplit(" ", 1)[0] + " 42"])))
        if draw(st.integers(0, 6)) == 0:
            lines.append(draw(st.sampled_from(["", "# a comment", "#", "   "])))
    return "\n".join(lines) + draw(st.sampled_from(["", "\n", "\r\n"]))


_ENV = st.sampled_from([{}, {"port": 3}, {"port": ""}, {"port": "2"}, {"device": "d"}])


@settings(max_examples=BULK_EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.lists(st.tuples(_scrape(), _ENV), min_size=1, max_size=6))
def test_bulk_matches_one_by_one_on_generated_scrapes(scrapes: list[tuple[str, Any]]) -> None:
    assert_bulk_matches_one_by_one(envelopes([s for s, _ in scrapes], [e for _, e in scrapes]))


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.randoms(use_true_random=False), st.integers(0, 3))
def test_reordered_real_scrapes_match(rnd: Any, drop: int) -> None:
    for text in (IB_PROM.read_text(), ETHTOOL_SCRAPE):
        lines = text.splitlines()
        rnd.shuffle(lines)
        lines = lines[drop:] + lines[:drop]  # a repeated sample at the end, another one lost
        assert_bulk_matches_one_by_one(envelopes(["\n".join(lines + lines[-drop:])]))


def test_declined_scrape_before_a_detected_one_keeps_line_order(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A scrape the bulk parser declines is parsed after the line loop: its rows still come
    before those of a later line parsed in the loop (source detected from the content; its
    node spelt with a ``\\u`` escape, which keeps a line out of the bulk parsers)."""
    counts = count_bulk(monkeypatch)
    stamped = ETHTOOL_SCRAPE.replace("} 1200\n", "} 1200 1795824030000\n")  # a sample time
    lines = [json.loads(envelopes([stamped])),
             {"node": "n1", "collected_at": "2026-11-28T00:01:00Z", "output": ETHTOOL_SCRAPE}]
    text = "\n".join(json.dumps(e) for e in lines).replace('"node": "n1", "collected_at": '
                                                         '"2026-11-28T00:01:00Z"',
                                                         '"node": "n\\u0031", "collected_at": '
                                                         '"2026-11-28T00:01:00Z"')
    assert "\\u0031" in text
    out = assert_bulk_matches_one_by_one((text + "\n").encode())
    assert counts == {"given": 1, "declined": 1}
    later = pl.concat(out.frames["fabric_counters"])["ts"].dt.minute() == 1  # line 2's rows
    assert later.any() and not later.all()
    assert later.arg_true().min() > (~later).arg_true().max()
