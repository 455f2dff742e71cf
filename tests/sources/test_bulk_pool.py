"""The pool readers' bulk parsers give exactly what their reference parsers give.

``lctl get_param`` dumps (``lustre.parse_lctl_bulk``), ``daos_metrics -C`` CSV
(``daos.parse_daos_metrics_bulk``), ``bdev_get_iostat`` JSON (``spdk.parse_iostat_bulk``),
``mmpmon -p fs_io_s`` (``storage_scale.parse_mmpmon_bulk``), ``mmlsqos -Y``
(``storage_scale.parse_mmlsqos_bulk``) and ``mmdiag --waiters -Y``
(``storage_scale.parse_waiters_bulk``), read in bulk, give the rows, rejects and notes of
the one-at-a-time parse, to the bit: as envelopes (with a ``source`` and without one: the
format recognised first), as bare files under ``pool/<server>/`` (``read_tool_file``) and as
many bare files at once (``read_tool_files``). Inputs: what the simulator writes for each
``--pool-format``, the genuine samples under ``tests/fixtures/real/pool_telemetry``, and
variants of them (lines dropped, repeated or moved; numbers replaced by odd ones; blanks,
tabs, other parameters and commands put in).
"""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tests.bulk_oracle import BULK_EXAMPLES, assert_bulk_matches_one_by_one, assert_same_parse

from ckptwatch.simulate.scenario import simulate
from ckptwatch.sources import load_all
from ckptwatch.sources.base import BULK_PARSERS, JSON_BULK_PARSERS, Parsed
from ckptwatch.sources.envelope import ToolFile, read_tool_file, read_tool_files

load_all()
POOL = Path(__file__).parents[1] / "fixtures" / "real" / "pool_telemetry"
TS = datetime(2026, 11, 28, 12, 0, tzinfo=UTC)
#: The source of each bulk parser tested, by the simulator's pool format.
SOURCES = {"lustre": "lctl", "daos": "daos-metrics", "spdk": "spdk-iostat",
           "gpfs": "mmdiag-waiters"}


@pytest.fixture(scope="module")
def pool_days(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A short day of each pool format (2.5 h: one server's statistics are cleared)."""
    days = {}
    for fmt in SOURCES:
        root = tmp_path_factory.mktemp(fmt)
        simulate(root, 5, 8, 2.5, pool_format=fmt, omit=("smart", "fabric", "ocp"))
        days[fmt] = root
    return days


def counting(monkeypatch: pytest.MonkeyPatch) -> dict[str, list[int]]:
    """Per source, [envelopes given to its bulk parser, declined by it]."""
    counts: dict[str, list[int]] = {}
    for registry in (BULK_PARSERS, JSON_BULK_PARSERS):
        for source, parse in list(registry.items()):
            def counted(*args: Any, _parse: Any = parse, _source: str = source) -> Any:
                rows, no = _parse(*args)
                tally = counts.setdefault(_source, [0, 0])
                tally[0] += args[0].height
                tally[1] += no.len()
                return rows, no
            monkeypatch.setitem(registry, source, counted)
    return counts


def bare_alone(text: str, name: str, node: str = "srv01") -> Parsed:
    """``text`` as a bare file under ``pool/<node>/``, read in bulk and one at a time: the
    same; the bulk reading."""
    data = text.encode()
    fast = read_tool_file(data, file_label=f"pool/{node}/{name}", node=node, ts=TS)
    slow = read_tool_file(data, file_label=f"pool/{node}/{name}", node=node, ts=TS, bulk=False)
    assert_same_parse(fast, slow)
    return fast


def envelopes(outputs: list[Any], source: str | None, node: str = "srv01") -> bytes:
    lines = [json.dumps({"node": node, "collected_at": f"2026-11-28T00:{i % 60:02d}:00Z",
                         **({"source": source} if source else {}), "output": out})
             for i, out in enumerate(outputs)]
    return ("\n".join(lines) + "\n").encode()


# -- what the simulator writes ----------------------------------------------------------------
@pytest.mark.parametrize("fmt", list(SOURCES))
def test_simulated_pool_files_are_read_in_bulk(fmt: str, pool_days: dict[str, Path],
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    counts = counting(monkeypatch)
    root = pool_days[fmt]
    tools = []
    for path in sorted((root / "pool").rglob("*")):
        if not path.is_file():
            continue
        if path.suffix == ".jsonl":  # envelopes naming no source: recognised, then bulk
            out = assert_bulk_matches_one_by_one(path.read_bytes())
            assert not out.rejects and out.rows("pool_metrics")
        else:
            tools.append(path)
            out = bare_alone(path.read_text(), path.name, path.parent.name)
            assert not out.rejects and out.rows("pool_metrics")
    source = SOURCES[fmt] if fmt != "gpfs" else "mmdiag-waiters"
    given, declined = counts[source]
    assert given and not declined
    if fmt == "gpfs":
        assert counts["mmpmon"][0] and not counts["mmpmon"][1]
        assert counts["mmlsqos"][0] and not counts["mmlsqos"][1]
    # many bare files at once: each gets what it gets alone
    files = [ToolFile(p.read_bytes(), f"pool/{p.parent.name}/{p.name}", p.parent.name, TS)
             for p in tools]
    together = read_tool_files(files)
    for f, got in zip(files, together, strict=True):
        assert_same_parse(got, read_tool_file(f.data, file_label=f.label, node=f.node,
                                              ts=f.ts, bulk=False))


# -- genuine samples --------------------------------------------------------------------------
LUSTRE = sorted((POOL / "lustrefs_exporter_ddn").glob("*.txt"))
DAOS = sorted((POOL / "daos").glob("*.txt"))


@pytest.mark.parametrize("path", LUSTRE, ids=lambda p: p.name)
def test_real_lctl_dumps(path: Path) -> None:
    text = path.read_text()
    bare_alone(text, "lctl_get_param.txt", "oss01")
    assert_bulk_matches_one_by_one(envelopes([text, text], "lctl"))
    assert_bulk_matches_one_by_one(envelopes([text], None))


@pytest.mark.parametrize("path", DAOS, ids=lambda p: p.name)
@pytest.mark.parametrize("source", ["daos-metrics", None])
def test_real_daos_outputs(path: Path, source: str | None) -> None:
    text = path.read_text()
    assert_bulk_matches_one_by_one(envelopes([text, text], source, node="daos01"))
    bare_alone(text, "daos_metrics.txt", "daos01")


def test_real_gpfs_and_spdk_outputs(monkeypatch: pytest.MonkeyPatch) -> None:
    counts = counting(monkeypatch)
    waiters = (POOL / "gpfs_exporter" / "mmdiag_waiters_stdout.txt").read_text()
    mmpmon = (POOL / "gpfs_exporter" / "mmpmon_fs_io_s_stdout.txt").read_text()
    iostat = json.loads((POOL / "spdk" / "bdev_get_iostat_example_response.json").read_text())
    for source in ("mmdiag-waiters", None):  # (a line of another section: declined)
        out = assert_bulk_matches_one_by_one(envelopes([waiters, waiters], source))
        assert out.rows("pool_metrics") and out.rejects
    clean = waiters.split(":foo:")[0].rsplit("\n", 1)[0]  # the genuine lines, not the bad
    # ones the exporter's test puts after them
    waited = assert_bulk_matches_one_by_one(envelopes([clean], None))
    assert waited.rows("pool_metrics") == 3 and not waited.rejects
    for source in ("mmpmon", None):
        assert_bulk_matches_one_by_one(envelopes([mmpmon], source))
    bare_alone(mmpmon, "mmpmon.txt", "node01")
    for source in ("spdk-iostat", None):
        out = assert_bulk_matches_one_by_one(envelopes([iostat, iostat["result"]], source))
        assert out.rows("pool_metrics") == 2 * 2 * 4
    assert counts["mmdiag-waiters"] == [5, 4] and counts["spdk-iostat"] == [4, 0]
    assert waited.frames["pool_metrics"][0]["value"].to_list() == [1.0, 3.0, 0.0244 * 1000]
    assert counts["mmpmon"][1] == 0
    qos = (POOL / "gpfs_exporter" / "mmlsqos_stats_stdout.txt").read_text()
    for source in ("mmlsqos", None):
        out = assert_bulk_matches_one_by_one(envelopes([qos, qos], source))
        assert out.rows("pool_metrics") == 2 * 4 and not out.rejects
    for name in ("mmfs1_mmlsqos.txt", "mmlsqos.txt"):
        assert bare_alone(qos, name).rows("pool_metrics") == 4
    assert counts["mmlsqos"] == [6, 0]


# -- variants ---------------------------------------------------------------------------------
_ODD_NUMBERS = ["", " ", "0", "-0", "-5", "007", "1.5", "1e3", "1E+308", "inf", "nan", "0x10",
                "1_000", "+4", "9" * 16, "9" * 19, "9" * 400, "3,5", "١٢", "½", "1 2", "x"]
_ODD_LINES = ["", "   ", "\t", "# a comment", "sudo daos_metrics -C -S 0", "garbage",
              "name,value,min,max,mean,sample_size,sum,std_dev",
              "memused=5969573401", "obdfilter.fs-OST0009.stats=",
              "osd-ldiskfs.fs-OST0000.brw_stats=", "snapshot_time 12 secs.nsecs",
              "snapshot_time             1795824036.5 secs.nsecs",
              "write 3 samples [usecs] 1 2 3 4", "statfs 3 samples [reqs]",
              "ID: 0/pool/p1/ops/pool_query,5", "ID: 1/io/latency/update/4KB/tgt_0,7,1,9,3.5,2,7,",
              "ID: 0/sched/cycle_size/xs_9,", "mmdiag:waiters:0:1:::1:2:NSDThread:x:0.5:m::::::"
              "for I/O completion:::", "mmdiag:waiters:HEADER:a:b:", "mmdiag:other:0:1",
              "_io_s_ _n_ 1 _t_ 5", "_fs_io_s_ _n_ 1 _rc_ 1"]


@st.composite
def _variant(draw: st.DrawFn, text: str) -> str:
    """``text`` with a few of its lines dropped, repeated, moved or replaced, numbers in them
    replaced by odd ones, blanks changed."""
    lines = text.split("\n")
    for _ in range(draw(st.integers(1, 4))):
        if not lines:
            break
        k = draw(st.integers(0, len(lines) - 1))
        op = draw(st.sampled_from(["drop", "repeat", "move", "insert", "number", "number",
                                   "blank"]))
        if op == "drop":
            del lines[k]
        elif op == "repeat":
            lines.insert(k, lines[k])
        elif op == "move":
            lines.insert(draw(st.integers(0, len(lines) - 1)), lines.pop(k))
        elif op == "insert":
            lines.insert(k, draw(st.sampled_from(_ODD_LINES)))
        elif op == "number":
            numbers = list(re.finditer(r"-?[0-9]+(?:\.[0-9]+)?", lines[k]))
            if numbers:
                m = numbers[draw(st.integers(0, len(numbers) - 1))]
                number = draw(st.one_of(  # an odd one, or another of the same kind
                    st.sampled_from(_ODD_NUMBERS), st.integers(0, 10**18).map(str),
                    st.integers(0, 10**6).map(str),
                    st.floats(0, 1e9, allow_nan=False).map(repr)))
                lines[k] = lines[k][:m.start()] + number + lines[k][m.end():]
        else:
            lines[k] = draw(st.sampled_from(["  ", "\t", ""])) + lines[k].replace(
                " ", draw(st.sampled_from([" ", "  ", "\t"])), draw(st.integers(0, 2)))
    return "\n".join(lines)


def _sample(pool_days: dict[str, Path], fmt: str) -> list[str]:
    """A few outputs of the simulated day of ``fmt`` (text; SPDK's as JSON text)."""
    root = pool_days[fmt]
    out: list[str] = []
    for path in sorted((root / "pool").rglob("*")):
        if path.suffix == ".jsonl":
            docs = [json.loads(line) for line in path.read_text().splitlines()[:40:7]]
            out += [d["output"] if isinstance(d["output"], str) else json.dumps(d["output"])
                    for d in docs]
        elif path.is_file():
            out.append("\n".join(path.read_text().split("\n")[:60]))
    return out[:12]


@pytest.mark.parametrize("fmt", list(SOURCES))
def test_variants_read_in_bulk_as_one_by_one(fmt: str, pool_days: dict[str, Path]) -> None:
    samples = _sample(pool_days, fmt) + {
        "lustre": [p.read_text() for p in LUSTRE[:2]],
        # the genuine outputs, and one with the metadata object RPCs' latency rows
        "daos": [p.read_text() for p in DAOS] + [_read_real_daos() + _op_latency_rows()],
        "spdk": [(POOL / "spdk" / "bdev_get_iostat_example_response.json").read_text()],
        "gpfs": [(POOL / "gpfs_exporter" / n).read_text()
                 for n in ("mmdiag_waiters_stdout.txt", "mmpmon_fs_io_s_stdout.txt")]}[fmt]

    @settings(max_examples=BULK_EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck))
    @given(st.data())
    def check(data: st.DataObject) -> None:
        texts = [data.draw(_variant(data.draw(st.sampled_from(samples))))
                 for _ in range(data.draw(st.integers(1, 3)))]
        if fmt == "spdk":
            outputs: list[Any] = []
            for text in texts:
                try:
                    outputs.append(json.loads(text))
                except ValueError:
                    outputs.append(text)
            assert_bulk_matches_one_by_one(envelopes(outputs, None))
            return
        source = data.draw(st.sampled_from([SOURCES[fmt], "mmpmon", None] if fmt == "gpfs"
                                           else [SOURCES[fmt], None]))
        assert_bulk_matches_one_by_one(envelopes(texts, source))
        files = [ToolFile(t.encode(), f"pool/srv{k}/out.txt", f"srv{k}", TS)
                 for k, t in enumerate(texts)]
        for f, got in zip(files, read_tool_files(files), strict=True):
            assert_same_parse(got, read_tool_file(f.data, file_label=f.label, node=f.node,
                                                  ts=f.ts, bulk=False))
            assert_same_parse(got, read_tool_file(f.data, file_label=f.label, node=f.node,
                                                  ts=f.ts))

    check()


_SPDK_VALUES = st.one_of(st.none(), st.booleans(), st.integers(-5, 2**64 + 5),
                         st.integers(0, 10**6), st.floats(allow_nan=True, allow_infinity=True),
                         st.floats(0, 1e12), st.text(max_size=5), st.just("12"))


@settings(max_examples=BULK_EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.lists(st.dictionaries(
           st.sampled_from(["bytes_written", "num_write_ops", "write_latency_ticks",
                            "max_write_latency_ticks", "queue_depth_polling_period",
                            "queue_depth", "name"]), _SPDK_VALUES, max_size=7),
           min_size=1, max_size=3),
       st.one_of(st.integers(-2, 2**54), st.floats(0, 1e10), st.just(2_200_000_000)),
       st.booleans())
def test_iostat_odd_values_read_in_bulk_as_one_by_one(bdevs: list[dict[str, Any]], rate: Any,
                                                      wrapped: bool) -> None:
    base = {"name": "Nvme0n1", "bytes_written": 10, "num_write_ops": 2,
            "write_latency_ticks": 2_200_000, "queue_depth_polling_period": 10,
            "queue_depth": 3}
    result = {"tick_rate": rate, "bdevs": [base | b for b in bdevs]}
    output = {"jsonrpc": "2.0", "id": 1, "result": result} if wrapped else result
    assert_bulk_matches_one_by_one(envelopes([output, output], "spdk-iostat"))


def test_daos_outputs_with_metadata_rpc_latency_read_in_bulk_as_one_by_one() -> None:
    from tests.sources.test_daos import OP_LATENCY

    from ckptwatch.sources.daos import parse_daos_metrics_bulk

    rows = OP_LATENCY.split("\n", 1)[1]
    # one output with the RPCs, one where a target's first RPC reading has no stats (its
    # place among the targets is still its first reading's), one without any
    odd = rows.replace("ID: 0/io/ops/dkey_enum/latency/tgt_1,90,60,150,100.000000,4,400,",
                       "ID: 0/io/ops/key_query/latency/tgt_1,7\n"
                       "ID: 0/io/ops/dkey_enum/latency/tgt_1,90,60,150,100.000000,4,400,")
    texts = [_read_real_daos() + rows, rows + _read_real_daos(), odd, _read_real_daos()]
    fast = assert_bulk_matches_one_by_one(envelopes(texts, "daos-metrics", node="daos01"))
    metrics = {m for frame in fast.frames["pool_metrics"] for m in frame["metric"].to_list()}
    assert {"metadata_latency_us_total.key_query", "metadata_ops_total.obj_punch",
            "metadata_latency_us_total", "metadata_latency_peak_ms"} <= metrics
    # and the bulk parser read them itself: none declined to the plain parser
    env = pl.DataFrame({"__env": range(len(texts)), "node": ["daos01"] * len(texts),
                        "output": texts})
    _, declined = parse_daos_metrics_bulk(env)
    assert declined.to_list() == []


def _op_latency_rows() -> str:
    from tests.sources.test_daos import OP_LATENCY

    return OP_LATENCY.split("\n", 1)[1]


def _read_real_daos() -> str:
    return next(p for p in DAOS if "io_latency" in p.name).read_text()


# -- mmlsqos -Y: its stats lines' fields --------------------------------------------------------
_QOS_ODD = ["", "0", "00", "-0", "-1", "0,0", "0,00000", "1,0751e-05", "1,7781e+08", "2.5",
            "3,5,1", "1e99", "1e999", "1E+08", "1e-400", ".5", "5,", "inf", "nan", "1_0",
            "%31", " 7", "9" * 30, "9" * 31, "17951234567", "1795824034,5", "x"]
_QOS_NAMES = ["", "system", "data", "maintenance", "misc", "other", "ma%69ntenance", "%3A",
              "fs-OST0001_UUID", "sys tem"]


@st.composite
def _qos_variant(draw: st.DrawFn, text: str) -> str:
    """``text`` (``mmlsqos -Y`` output) with some stats lines' fields replaced (numbers, pool
    and class names: odd ones, or another line's, so that intervals and pools coincide),
    lines repeated, moved or dropped, a field added or a HEADER changed."""
    lines = text.split("\n")
    for _ in range(draw(st.integers(1, 5))):
        stats = [k for k, line in enumerate(lines) if line.startswith("mmlsqos:stats:0:")]
        op = draw(st.sampled_from(["number", "number", "name", "same", "repeat", "move", "drop",
                                   "field", "header"]))
        if op in ("number", "name", "same") and stats:
            k = draw(st.sampled_from(stats))
            parts = lines[k].split(":")
            if len(parts) < 13:
                continue
            if op == "number":
                at = draw(st.sampled_from([7, 9, 10, 11, 12]))
                parts[at] = draw(st.one_of(st.sampled_from(_QOS_ODD),
                                           st.floats(0, 1e6).map(lambda f: repr(f).replace(
                                               ".", ",")),
                                           st.integers(0, 10**9).map(str)))
            elif op == "name":
                parts[draw(st.sampled_from([6, 8]))] = draw(st.sampled_from(_QOS_NAMES))
            else:  # another line's pool or interval
                other = lines[draw(st.sampled_from(stats))].split(":")
                for at in draw(st.sampled_from([[6], [7], [12], [6, 7, 12]])):
                    if at < len(other):
                        parts[at] = other[at]
            lines[k] = ":".join(parts)
        elif op == "repeat" and lines:
            k = draw(st.integers(0, len(lines) - 1))
            lines.insert(k, lines[k])
        elif op == "move" and lines:
            lines.insert(draw(st.integers(0, len(lines) - 1)),
                         lines.pop(draw(st.integers(0, len(lines) - 1))))
        elif op == "drop" and lines:
            del lines[draw(st.integers(0, len(lines) - 1))]
        elif op == "field" and lines:
            k = draw(st.integers(0, len(lines) - 1))
            lines[k] = lines[k] + draw(st.sampled_from(["x:", ":", " "]))
        elif op == "header" and lines:
            k = draw(st.integers(0, len(lines) - 1))
            lines[k] = lines[k].replace(":0:1:", ":HEADER:", 1).replace("MBs", "mbs")
    return "\n".join(lines)


def test_mmlsqos_variants_read_in_bulk_as_one_by_one(pool_days: dict[str, Path],
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """Odd stats fields, pools and intervals that coincide (sums of several lines, in order),
    repeated HEADERs, lines out of place: envelopes (with and without a ``source``, their
    ``device`` a file system, a tool's name or none) and bare files (alone and together) give
    in bulk what ``parse_mmlsqos`` gives."""
    real = (POOL / "gpfs_exporter" / "mmlsqos_stats_stdout.txt").read_text()
    day = next((pool_days["gpfs"] / "pool").rglob("*_mmlsqos.txt")).read_text()
    samples = [real, "\n".join(day.split("\n")[:40]), "\n".join(day.split("\n")[-30:])]
    counts = counting(monkeypatch)

    @settings(max_examples=BULK_EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck))
    @given(st.data())
    def check(data: st.DataObject) -> None:
        texts = [data.draw(_qos_variant(data.draw(st.sampled_from(samples))))
                 for _ in range(data.draw(st.integers(1, 3)))]
        source = data.draw(st.sampled_from(["mmlsqos", None]))
        devices = [data.draw(st.sampled_from([None, "mmfs1", " fs2 ", "mmlsqos", "GPFS"]))
                   for _ in texts]
        lines = [json.dumps({"node": "nsd01", "collected_at": "2026-11-28T00:00:00Z",
                             **({"source": source} if source else {}),
                             **({"device": d} if d is not None else {}), "output": t})
                 for t, d in zip(texts, devices, strict=True)]
        assert_bulk_matches_one_by_one(("\n".join(lines) + "\n").encode())
        names = ["mmfs1_mmlsqos.txt", "mmlsqos.txt", "fs3_20261128T120000Z.txt"]
        files = [ToolFile(t.encode(), f"pool/nsd{k}/{names[k % 3]}", f"nsd{k}", TS)
                 for k, t in enumerate(texts)]
        for f, got in zip(files, read_tool_files(files), strict=True):
            assert_same_parse(got, read_tool_file(f.data, file_label=f.label, node=f.node,
                                                  ts=f.ts, bulk=False))

    check()
    given_, declined = counts["mmlsqos"]
    assert given_ > declined > 0  # both ways taken
