"""The bulk parsers of text tool outputs (OCP / vendor SMART logs, sysfs snapshots) give
exactly what the per-envelope parsers give.

``read_envelopes(..., bulk=False)`` parses every envelope one by one: the oracle. Each test
builds an envelope file, reads it both ways and compares rows (to the bit), rejects and notes
(``assert_bulk_matches_one_by_one``). Inputs: the genuine tool outputs under
``tests/fixtures/real`` and variants generated from them (reordered, dropped and repeated
lines, vendor extras, odd spacing, CRLF, huge, negative and garbage numbers).
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

from ckptwatch.simulate.telemetry.render import render_sysfs_ib_text
from ckptwatch.sources import load_all
from ckptwatch.sources.base import BULK_PARSERS
from ckptwatch.sources.nvme_cli import _LINE, OCP_SOURCE
from ckptwatch.sources.sysfs_ib import read_sysfs_tree

load_all()
REAL = Path(__file__).parents[1] / "fixtures" / "real"
OCP_TEXTS = sorted((REAL / "nvme_cli_vendor_logs").rglob("*.txt"))
#: Fixtures nvme-cli printed as the OCP / vendor ``label : value`` layout (the bulk path's);
#: Intel's and Seagate's own tables and nvme-cli's error go one by one.
OCP_LAYOUT = [p for p in OCP_TEXTS if not any(
    k in p.name for k in ("Intel", "intel", "Seagate", "OutputErr"))]


def count_bulk(monkeypatch: pytest.MonkeyPatch, source: str) -> dict[str, int]:
    """How many envelopes ``source``'s bulk parser was given, and how many it declined."""
    counts = {"given": 0, "declined": 0}
    parse = BULK_PARSERS[source]

    def counted(env: pl.DataFrame) -> Any:
        rows, no = parse(env)
        counts["given"] += env.height
        counts["declined"] += no.len()
        return rows, no

    monkeypatch.setitem(BULK_PARSERS, source, counted)
    return counts


def envelopes(outputs: list[Any], **env: Any) -> bytes:
    """An envelope file: one ``nvme-ocp-smart`` envelope per output, a minute apart."""
    lines = [json.dumps({"node": "n1", "collected_at": f"2026-11-28T00:{i % 60:02d}:00Z",
                         "source": OCP_SOURCE, "device": "nvme0", "output": out, **env})
             for i, out in enumerate(outputs)]
    return ("\n".join(lines) + "\n").encode()


@pytest.mark.parametrize("path", OCP_TEXTS, ids=lambda p: p.name)
@pytest.mark.parametrize("device", [{"device": "nvme0"}, {"device": "/dev/nvme3n1"},
                                    {"device": ""}, {"device": None}, {"device": 7}])
def test_real_ocp_text_is_the_same_in_bulk(path: Path, device: dict[str, Any],
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    declined = count_bulk(monkeypatch, OCP_SOURCE)
    out = assert_bulk_matches_one_by_one(envelopes([path.read_text()] * 3, **device))
    assert declined["given"] == 3
    if path in OCP_LAYOUT and device["device"]:  # read in bulk, none left to the fallback
        assert declined["declined"] == 0 and out.rows("nvme_smart") >= 3 * 10
    else:
        assert declined["declined"] == 3


def test_ocp_values_as_nvme_cli_prints_them(monkeypatch: pytest.MonkeyPatch) -> None:
    declined = count_bulk(monkeypatch, OCP_SOURCE)
    text = "\n".join([
        "  SMART Cloud Attributes :- ",
        "  Physical media units written -   \t        0 80410014056448",  # 128-bit "hi lo"
        "Physical(NAND) bytes read : 158,313,163,558,912",                 # grouped digits
        "Total data written to NAND               : 1133997.9 GiB",        # scaled, rounded
        "  Current throttling status\t\t  \t0x1F",                         # hex
        "System Data Used                         : 8 %",
        "  Refresh counts\t\t\t\t79503",
        "  Refresh counts\t\t\t\tnot a number",                           # later: not read
        "  Percent free blocks   :   100   ",
        "  Log page GUID\t\t\t\t\t0xafd514c97c6f4f9ca4f2bfea2810afc5",     # not a metric
    ])
    out = assert_bulk_matches_one_by_one(envelopes([text]))
    assert declined == {"given": 1, "declined": 0}
    rows = pl.concat(out.frames["nvme_smart"]).select("metric", "value").rows()
    assert rows == [("media_written_bytes", 80410014056448.0),
                    ("media_read_bytes", 158313163558912.0),
                    ("thermal_throttle_status", 31.0),
                    ("system_data_used_pct", 8.0),
                    ("refresh_count", 79503.0),
                    ("free_blocks_pct", 100.0)]


def test_ocp_text_the_bulk_path_cannot_vouch_for_goes_one_by_one(
        monkeypatch: pytest.MonkeyPatch) -> None:
    declined = count_bulk(monkeypatch, OCP_SOURCE)
    ocp = "Refresh counts : 5\n"
    outputs = [
        ocp,                                              # 1 read in bulk
        "  ERROR : WDC: unsupported device for this command\n",  # 2 an error: rejected
        "Refresh counts : 1,23\n",                        # 3 not a number: rejected
        "Refresh counts : 1 5\n",                         # 4 nonzero high word: one by one
        "Refresh counts : " + "9" * 320 + "\n",           # 5 past a float: rejected
        "Nothing here : 5\n",                             # 6 no field: rejected
        "Refresh counts : 5 \u00e9\n",                    # 7 not plain text (no field)
        "Physical Media Units Written - TLC : 9\nRefresh counts : 2\n",  # 8 SK hynix: bulk
        "Physical Media Units Written - TLC : 9\n",       # 9 SK hynix, nothing else: rejected
        ocp.replace("\n", "\r\n"),                        # 10 CRLF: one by one, read
    ]
    out = assert_bulk_matches_one_by_one(envelopes(outputs))
    assert [r.line for r in out.rejects] == [2, 3, 5, 6, 7, 9]
    assert "printed an error instead of the log" in out.rejects[0].reason
    assert "line 1: cannot read a number from '1,23'" in out.rejects[1].reason
    assert declined == {"given": 9, "declined": 7}  # line 7 has a \u escape: never set aside
    assert "a number is too large to store" in out.rejects[2].reason
    assert out.rows("nvme_smart") == 4  # 1, 4, 8 (the refresh count only), 10


# ------------------------------------------------------------------ generated variants


def _real_lines() -> list[str]:
    return [line for p in OCP_LAYOUT for line in p.read_text().splitlines() if line.strip()]


REAL_LINES = _real_lines()
LABELS = sorted({m.group("label") for line in REAL_LINES if (m := _LINE.match(line))}) + [
    "Vendor Specific Foo", "Temperature Sensor 1", "9Lives", "a:b", "Reserved",
    "[015:000] PhysicallyWrittenBytes", "Physical Media Units Written - TLC", "x"]
SEPS = [" : ", ":", " - ", "\t\t", "  ", " ", "\t: ", "-", "   \t  ", ":-", " :", ""]
VALUES = st.one_of(
    st.integers(0, 2 ** 70).map(str),
    st.sampled_from([
        "0", "00", "007", "0 123", "1 5", "00 7", "0x1F", "0x" + "f" * 14, "0xZ", "1,234,567",
        "1,23", "12.5", "12.5 GiB", "3 KiB", "2 TiB", "8 %", "7%", "-5", "abc", "", "N/A",
        "1e5", "5 B", "0.5 B", "2.5 B", "1.5 MiB", "9" * 290, "9" * 291, "9" * 330,
        "0 " + "9" * 300, "1.2.3", "5 6 7"]))
HEADS = ["SMART Cloud Attributes :- ", "Vendor Log Page 0xCA for NVME device:nvme0",
         "  ERROR : WDC: unsupported device for this command", "Error: not supported",
         "Additional Smart Log for NVME device:nvme0", "Seagate Extended SMART Information :",
         "Description        Ext-Smart-Id    Ext-Smart-Value", "----------", ""]


@st.composite
def ocp_text(draw: st.DrawFn) -> str:
    """An OCP / vendor text log: real lines (reordered, dropped, repeated) mixed with
    generated ``label sep value`` lines and headers, with odd spacing and line endings."""
    lines: list[str] = []
    for _ in range(draw(st.integers(0, 12))):
        kind = draw(st.integers(0, 9))
        if kind < 4:
            lines.append(draw(st.sampled_from(REAL_LINES)))
        elif kind == 4:
            lines.append(draw(st.sampled_from(HEADS)))
        else:
            lines.append(draw(st.sampled_from(["", "  ", "\t"])) + draw(st.sampled_from(LABELS))
                         + draw(st.sampled_from(SEPS)) + draw(VALUES)
                         + draw(st.sampled_from(["", " ", "\t", "  "])))
    end = draw(st.sampled_from(["\n", "\n", "\r\n"]))
    return end.join(lines) + draw(st.sampled_from(["", end]))


@settings(max_examples=BULK_EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck))
@given(texts=st.lists(ocp_text(), min_size=1, max_size=6),
       device=st.sampled_from(["nvme0", "/dev/nvme2n1", "", None, "d" * 300]))
def test_bulk_matches_one_by_one_on_generated_ocp_text(texts: list[str],
                                                       device: str | None) -> None:
    assert_bulk_matches_one_by_one(envelopes(texts, device=device))


@settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_bulk_matches_one_by_one_on_shuffled_real_logs(data: st.DataObject) -> None:
    path = data.draw(st.sampled_from(OCP_TEXTS))
    lines = path.read_text().splitlines()
    lines = data.draw(st.permutations(lines))
    cut = data.draw(st.integers(0, len(lines)))
    dup = data.draw(st.lists(st.sampled_from(lines or [""]), max_size=3))
    assert_bulk_matches_one_by_one(envelopes(["\n".join(lines[cut:] + dup + lines[:cut])]))


# ------------------------------------------------------------------ sysfs snapshots (text)

SYSFS_TREES = sorted(p / "sys" / "class" / "infiniband"
                     for p in (REAL / "infiniband").glob("*sysfs"))


def sysfs_envelopes(outputs: list[str], **env: Any) -> bytes:
    """An envelope file: one ``sysfs-ib`` envelope per output."""
    lines = [json.dumps({"node": "n1", "collected_at": f"2026-11-28T00:{i % 60:02d}:00Z",
                         "source": "sysfs-ib", "output": out, **env})
             for i, out in enumerate(outputs)]
    return ("\n".join(lines) + "\n").encode()


def grep_h(tree: Path, prefix: str = "/sys/class/infiniband/") -> str:
    """What ``grep -H . <tree>/*/ports/*/counters*/*`` prints for a copied sysfs tree."""
    return "".join(f"{prefix}{k}:{v}\n" for k, v in read_sysfs_tree(tree).items())


@pytest.mark.parametrize("tree", SYSFS_TREES, ids=lambda p: p.parents[2].name)
@pytest.mark.parametrize("prefix", ["/sys/class/infiniband/", "", "x//"])
def test_real_sysfs_snapshots_are_the_same_in_bulk(tree: Path, prefix: str,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    counts = count_bulk(monkeypatch, "sysfs-ib")
    text = grep_h(tree, prefix)
    out = assert_bulk_matches_one_by_one(sysfs_envelopes([text, text], device="d", port=9))
    assert counts == {"given": 2, "declined": 0}
    assert out.rows("fabric_counters") >= 2 * 30 and not out.rejects


def test_rendered_sysfs_snapshot_is_read_in_bulk(monkeypatch: pytest.MonkeyPatch) -> None:
    counts = count_bulk(monkeypatch, "sysfs-ib")
    text = render_sysfs_ib_text([("mlx5_0", "1", {"port_xmit_data": 10, "port_rcv_data": 5}),
                                 ("mlx5_1", "1", {"port_xmit_data": 7})])
    out = assert_bulk_matches_one_by_one(sysfs_envelopes([text]))
    assert counts == {"given": 1, "declined": 0}
    rows = pl.concat(out.frames["fabric_counters"])
    assert rows.filter(pl.col("counter") == "port_xmit_bytes")["value"].to_list() == [40.0, 28.0]


_SYSFS_NAMES = ["port_xmit_data", "port_rcv_data", "port_xmit_wait", "symbol_error",
                "port_xmit_data_64", "port_rcv_packets_64", "port_unicast_xmit_packets",
                "unicast_xmit_packets", "port_xmit_bytes", "np_ecn_marked_roce_packets",
                "ecn_marked", "np_cnp_sent", "cnp_sent", "rp_cnp_handled", "out_of_buffer",
                "counters", "hw_counters", "a b", "x"]
_SYSFS_VALUES = st.one_of(st.integers(-2 ** 70, 2 ** 70).map(str), st.sampled_from(
    ["0", "-0", "+5", "007", "0x1f", "1,234", "", "abc", "N/A", "N/A (no PMA)", "n/a",
     "N/Ax", " 12 ", "5 6", "9" * 300, "9" * 301]))


@st.composite
def sysfs_line(draw: st.DrawFn) -> str:
    """One ``path:value`` line, mostly a counter file of a few ports, sometimes not."""
    device = draw(st.sampled_from(["mlx5_0", "mlx5_1", "mlx4_0", "hfi1_0", " m "]))
    port = draw(st.sampled_from(["1", "2", "10"]))
    group = draw(st.sampled_from(["counters", "counters", "counters_ext", "hw_counters",
                                  "other"]))
    name = draw(st.sampled_from(_SYSFS_NAMES))
    path = draw(st.sampled_from([
        f"/sys/class/infiniband/{device}/ports/{port}/{group}/{name}",
        f"{device}/ports/{port}/{group}/{name}", f"{device}//ports/{port}/{group}/{name}/",
        f"ports/{port}/{group}/{name}", f"{group}/{name}", f"{device}/{port}/{group}/{name}",
        "/sys/class/infiniband/mlx5_0/ports/1/state", "garbage"]))
    sep = draw(st.sampled_from([":", ":", ": ", " : ", "", "::"]))
    return draw(st.sampled_from(["", " "])) + path + sep + draw(_SYSFS_VALUES)


@st.composite
def sysfs_text(draw: st.DrawFn) -> str:
    """A ``grep -H .`` snapshot: generated lines, or real lines reordered and repeated."""
    real = grep_h(draw(st.sampled_from(SYSFS_TREES))).splitlines()
    good = st.builds("/sys/class/infiniband/{}/ports/{}/{}/{}:{}".format,
                     st.sampled_from(["mlx5_0", "mlx5_1"]), st.sampled_from(["1", "2"]),
                     st.sampled_from(["counters", "counters_ext", "hw_counters"]),
                     st.sampled_from(_SYSFS_NAMES[:15]), st.integers(0, 2 ** 64).map(str))
    line = draw(st.sampled_from([sysfs_line(), good, st.sampled_from(real)]))
    lines = draw(st.lists(st.one_of(line, st.sampled_from(real)), max_size=14))
    end = draw(st.sampled_from(["\n", "\n", "\r\n"]))
    return end.join(lines) + end


@settings(max_examples=BULK_EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck))
@given(texts=st.lists(sysfs_text(), min_size=1, max_size=6),
       env=st.sampled_from([{}, {"device": "mlx5_9", "port": "1"}, {"device": "d" * 300},
                            {"port": 2}]))
def test_bulk_matches_one_by_one_on_generated_sysfs_text(texts: list[str],
                                                         env: dict[str, Any]) -> None:
    assert_bulk_matches_one_by_one(sysfs_envelopes(texts, **env))


def test_a_mixed_file_is_the_same_in_bulk(monkeypatch: pytest.MonkeyPatch) -> None:
    ocp, sysfs = count_bulk(monkeypatch, OCP_SOURCE), count_bulk(monkeypatch, "sysfs-ib")
    ocp_text = OCP_LAYOUT[0].read_text()
    ocp_json = {"Physical media units written": {"hi": 0, "lo": 5}, "Refresh counts": 3}
    eth = (REAL / "ethtool" / "ethq" / "ethtool-S_mlx5_core.txt").read_text()
    outputs = [("nvme-ocp-smart", ocp_text), ("nvme-ocp-smart", ocp_json),
               ("sysfs-ib", grep_h(SYSFS_TREES[0])), ("ethtool", eth),
               ("nvme-ocp-smart", "  ERROR : WDC: unsupported device for this command\n"),
               ("nvme-ocp-smart", ocp_text.replace("\n", "\r\n"))]
    data = "\n".join(json.dumps({"node": "n1", "collected_at": "2026-11-28T00:00:00Z",
                                 "source": s, "device": "nvme0", "output": o})
                     for s, o in outputs) + "\n"
    out = assert_bulk_matches_one_by_one(data.encode())
    assert [r.line for r in out.rejects] == [5]
    assert ocp == {"given": 3, "declined": 2} and sysfs == {"given": 1, "declined": 0}
    assert out.rows("nvme_smart") > 2 * 10 and out.rows("fabric_counters") > 100
