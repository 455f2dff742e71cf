"""Fuzzing every parser: the outcome is a parsed row or a quarantined record with a reason.

Each test feeds hostile input to one layer and checks the guarantee of RELIABILITY.md
"Hostile input": no exception escapes (the run would stop), and no record disappears without a
quarantined record saying why. Inputs start from real tool output (``tests/fixtures/real``) and
canonical rows, then are mutated: truncation, random text and bytes, huge numbers, NaN and
infinities, lone surrogates and NUL, deep JSON, wrong types.

Budget: ``CKPTWATCH_FUZZ_EXAMPLES`` (default 25) examples per test, so that the default run
stays short; RELIABILITY.md records the larger campaigns run by hand. With
``CKPTWATCH_FUZZ_REPORT=path`` the number of inputs each test ran is written to ``path``.
"""

from __future__ import annotations

import contextlib
import copy
import csv
import gzip
import io
import json
import math
import os
import re
from collections import Counter
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from ckptwatch.errors import RecordError
from ckptwatch.ingest.run import ingest
from ckptwatch.lake.schema import TABLES
from ckptwatch.lake.store import PART_PATH, Lake
from ckptwatch.settings import INGEST
from ckptwatch.sources import load_all, mlperf
from ckptwatch.sources.base import TOOL_FORMATS, Parsed, ToolContext
from ckptwatch.sources.envelope import (
    device_from_name,
    parse_time,
    parse_tool_output,
    read_envelopes,
    read_tool_file,
    rows_to_frames,
    time_from_name,
)
from ckptwatch.sources.perfquery import render_perfquery_x
from ckptwatch.sources.smartctl import render_smartctl_json
from ckptwatch.sources.sysfs_ib import read_sysfs_tree
from ckptwatch.sources.tabular import canonicalise, load_csv, load_jsonl, load_parquet

EXAMPLES = int(os.environ.get("CKPTWATCH_FUZZ_EXAMPLES", "25"))
FUZZ = settings(max_examples=EXAMPLES, deadline=None,
                suppress_health_check=[HealthCheck.function_scoped_fixture,
                                       HealthCheck.too_slow, HealthCheck.data_too_large])
#: Inputs run per test in this session (for RELIABILITY.md's figures).
FUZZED: Counter[str] = Counter()
REAL = Path(__file__).parents[1] / "fixtures" / "real"
T0 = datetime(2026, 11, 28, 12, 0, tzinfo=UTC)


@pytest.fixture(scope="module", autouse=True)
def _report_counts() -> Iterator[None]:
    yield
    path = os.environ.get("CKPTWATCH_FUZZ_REPORT")
    if path:
        Path(path).write_text(json.dumps({"examples_setting": EXAMPLES, **FUZZED}, indent=1))


# ----------------------------------------------------------------------------- seeds


def _text(path: Path) -> str:
    return path.read_text(encoding="utf-8", errors="replace")


def _seeds() -> dict[str, list[Any]]:
    """Real outputs per registered source (plus a rendered one where the project renders)."""
    smart_log = {"critical_warning": 0, "temperature": 318, "avail_spare": 100,
                 "spare_thresh": 10, "percent_used": 4, "data_units_read": 1000,
                 "data_units_written": 2500, "host_read_commands": 10,
                 "host_write_commands": 20, "controller_busy_time": 7, "power_cycles": 3,
                 "power_on_hours": 99, "unsafe_shutdowns": 1, "media_errors": 0,
                 "num_err_log_entries": 2, "temperature_sensor_1": 320}
    ocp_json = {"Physical media units written": {"hi": 0, "lo": 80410014056448},
                "Physical media units read": {"hi": 0, "lo": 84923571298304},
                "Max User data erase counts": 34, "Percent free blocks": 7}
    sysfs_tree = read_sysfs_tree(REAL / "infiniband" / "node_exporter_sysfs" / "sys" / "class"
                                 / "infiniband")
    sysfs_text = "\n".join(f"/sys/class/infiniband/{k}:{v}" for k, v in
                           list(sysfs_tree.items())[:40])
    pool = REAL / "pool_telemetry"
    return {
        "smartctl": [json.loads(_text(p)) for p in sorted(
            (REAL / "smartctl_json_nvme").rglob("*.json"))][:4] + [render_smartctl_json(
                "M", "S", "F", "nvme0", {"temperature_c": 40, "host_written_bytes": 5e9})],
        "nvme-smart-log": [smart_log],
        "nvme-ocp-smart": [ocp_json] + [_text(p) for p in sorted(
            (REAL / "nvme_cli_vendor_logs").rglob("*.txt"))][:6],
        "perfquery": [_text(p) for p in sorted(
            (REAL / "infiniband" / "treydock_infiniband_exporter").rglob("*")) if p.is_file()
                      ][:3] + [render_perfquery_x(7, 1, {"port_xmit_wait": 12})],
        "sysfs-ib": [dict(list(sysfs_tree.items())[:60]), sysfs_text],
        "ethtool": [_text(p) for p in sorted((REAL / "ethtool").rglob("*.txt"))][:3],
        "prometheus": [_text(p) for p in sorted(
            (REAL / "prometheus_exposition").glob("*.prom"))],
        "daos-metrics": [_text(p) for p in sorted((pool / "daos").glob("*.txt"))
                         if "dmg_pool_query" not in p.name],
        "dmg-pool-query": [_text(pool / "daos" / "telemetry_guide_dmg_pool_query.txt")],
        "spdk-iostat": [json.loads(_text(p)) for p in (pool / "spdk").glob("bdev_*.json")],
        "spdk-nvmf-stats": [json.loads(_text(p)) for p in (pool / "spdk").glob("nvmf_*.json")],
        "mmpmon": [_text(pool / "gpfs_exporter" / "mmpmon_fs_io_s_stdout.txt")],
        "mmlsqos": [_text(pool / "gpfs_exporter" / "mmlsqos_stats_stdout.txt")],
        "mmdiag-waiters": [_text(pool / "gpfs_exporter" / "mmdiag_waiters_stdout.txt")],
        "lctl": [_text(p)[:6000] for p in sorted((pool / "lustrefs_exporter_ddn").glob("*.txt"))],
    }


load_all()
SEEDS = _seeds()
SOURCES = sorted(TOOL_FORMATS)
DLIO_SEED = _text(REAL / "checkpoint_timing" / "dlio_benchmark_tests" / "per_epoch_stats.json")


def test_every_registered_format_has_seeds() -> None:
    assert set(SOURCES) == set(SEEDS), "a new tool format needs seeds in this fuzz test"


# ----------------------------------------------------------------------------- strategies

#: Values that broke, or could break, a parser: numbers past every limit, non-finite floats,
#: text Arrow cannot store, path-like names, control characters.
NASTY_TEXT = ["", " ", "\x00", "\ud800", "\udcff", "NaN", "nan", "Infinity", "-inf", "1e309",
              "-1", "0x", "0xffffffffffffffffffffffff", "9" * 5000, "1,2,3", "..",
              "../../etc/passwd", "/etc/passwd", "C:\\x", "\u202eevil", "\r\n", "\t", "é",
              "\ufeff", "null", "true", "{}", "[]", "a" * 10_000, "2026-13-45T99:99:99Z",
              "1e11", "-9999999999999", "+02:00", "\\", '"', ","]
NASTY_JSON = [None, True, False, 0, -1, 2**63, 2**64 + 5, 10**400, -(10**30), 1e308,
              float("nan"), float("inf"), float("-inf"), -0.0, [], {}, [1, [2, [3]]],
              {"hi": 10**30, "lo": -1}, {"hi": "x", "lo": 1}, *NASTY_TEXT]

nasty_text = st.one_of(st.sampled_from(NASTY_TEXT), st.text(max_size=40),
                       st.text(alphabet=st.characters(codec="utf-8"), max_size=40))
nasty_json = st.one_of(st.sampled_from(NASTY_JSON).map(copy.deepcopy),  # mutated later
                       st.integers(), st.floats(), nasty_text)


def deep(depth: int) -> str:
    """JSON nested ``depth`` levels (past the parser's recursion limit from ~1000)."""
    return "[" * depth + "]" * depth


@st.composite
def mutated_text(draw: st.DrawFn, seeds: list[str]) -> str:
    """A seed text with a few random edits: cut, insert, number swaps, line edits."""
    text = draw(st.sampled_from(seeds))
    for _ in range(draw(st.integers(0, 4))):
        op = draw(st.sampled_from(["cut", "insert", "number", "dup", "drop", "garbage"]))
        n = len(text)
        if op == "cut" and n:
            text = text[: draw(st.integers(0, n))]
        elif op == "insert":
            at = draw(st.integers(0, n))
            text = text[:at] + draw(nasty_text) + text[at:]
        elif op == "number":
            nums = list(re.finditer(r"\d+", text))
            if nums:
                m = draw(st.sampled_from(nums))
                text = text[: m.start()] + draw(nasty_text) + text[m.end():]
        elif op in ("dup", "drop"):
            lines = text.split("\n")
            i = draw(st.integers(0, len(lines) - 1))
            lines = lines[: i + 1] + lines[i:] if op == "dup" else lines[:i] + lines[i + 1:]
            text = "\n".join(lines)
        else:
            text = draw(st.binary(max_size=200)).decode("latin-1")
    return text


@st.composite
def mutated_json(draw: st.DrawFn, seeds: list[Any]) -> Any:
    """A seed JSON object with random leaves replaced, keys dropped or renamed."""
    doc = json.loads(json.dumps(draw(st.sampled_from(seeds))))
    for _ in range(draw(st.integers(0, 5))):
        node = doc
        path: list[Any] = []
        while isinstance(node, dict | list) and node and draw(st.booleans()):
            key = draw(st.sampled_from(list(node) if isinstance(node, dict)
                                       else list(range(len(node)))))
            path.append(key)
            node = node[key]
        if not path:
            if isinstance(doc, dict):
                doc[draw(nasty_text)] = draw(nasty_json)
            continue
        parent = doc
        for key in path[:-1]:
            parent = parent[key]
        op = draw(st.sampled_from(["replace", "drop", "rename"]))
        if op == "replace" or isinstance(parent, list):
            parent[path[-1]] = draw(nasty_json)
        elif op == "drop":
            del parent[path[-1]]
        else:
            parent[draw(nasty_text)] = parent.pop(path[-1])
    return doc


@st.composite
def tool_output(draw: st.DrawFn, source: str) -> Any:
    """Raw output for ``source``: a mutated seed, random text, or a random JSON value."""
    seeds = SEEDS[source]
    texts = [s for s in seeds if isinstance(s, str)]
    docs = [s for s in seeds if not isinstance(s, str)]
    choices = [st.text(max_size=300), nasty_json]
    if texts:
        choices += [mutated_text(texts)] * 3
    if docs:
        choices += [mutated_json(docs)] * 3
    return draw(st.one_of(*choices))


def _check_frames(out: Parsed) -> None:
    """Rows that reach the lake have the canonical columns, finite numbers, plausible times."""
    for table, frames in out.frames.items():
        names = [f.name for f in TABLES[table].schema if f.name not in
                 ("source_file", "ingested_ts")]
        for df in frames:
            assert df.columns == names
            for col, dtype in df.schema.items():
                if dtype == pl.Float64:
                    vals = df[col].drop_nulls()
                    assert vals.is_finite().all(), (table, col)
                if isinstance(dtype, pl.Datetime):
                    years = df[col].drop_nulls().dt.year()
                    assert years.is_empty() or (years.min() >= INGEST.min_year  # type: ignore[operator]
                                                and years.max() <= INGEST.max_year)  # type: ignore[operator]
            required = [f.name for f in TABLES[table].schema if not f.nullable
                        and f.name in names]
            assert df.select(pl.col(required).null_count()).sum_horizontal().item() == 0


# ----------------------------------------------------------------------------- tool parsers


@pytest.mark.parametrize("source", SOURCES)
@pytest.mark.slow
@FUZZ
@given(data=st.data())
def test_tool_parser_returns_rows_or_a_reason(source: str, data: st.DataObject) -> None:
    output = data.draw(tool_output(source))
    ctx = ToolContext(node="n0", ts=T0, source=source,
                      device=data.draw(st.sampled_from([None, "nvme0", "mlx5_0", "eth0"])),
                      port=data.draw(st.sampled_from([None, "1"])))
    FUZZED[f"tool:{source}"] += 1
    try:
        result = parse_tool_output(output, ctx)
    except RecordError as exc:
        assert exc.reason.strip()
        return
    out = Parsed()
    rows_to_frames(result, out)
    produced = sum(len(rows) for rows in result.values())
    kept = sum(out.rows(t) for t in result)
    assert kept + len(out.rejects) == produced  # every row kept or rejected with a reason
    assert all(r.reason.strip() for r in out.rejects)
    _check_frames(out)


@pytest.mark.parametrize("text", [
    deep(50_000), '{"a":' + deep(990) + "}", "9" * 5000, '{"x": ' + "9" * 5000 + "}",
    '{"smartctl": {}, "json_format_version": [1], "nvme_smart_health_information_log": '
    '{"temperature": Infinity, "data_units_written": NaN}}', "\x00" * 100, "\ud800",
])
@pytest.mark.parametrize("source", SOURCES)
def test_tool_parser_literal_hostile_inputs(source: str, text: str) -> None:
    """Pinned worst cases: deep nesting, 5000-digit numbers, NaN/Infinity tokens, NUL."""
    try:
        output: Any = json.loads(text)
    except (ValueError, RecursionError):
        output = text
    ctx = ToolContext(node="n0", ts=T0, source=source, device="d0", port="1")
    FUZZED[f"tool:{source}"] += 1
    try:
        result = parse_tool_output(output, ctx)
    except RecordError:
        return
    out = Parsed()
    rows_to_frames(result, out)
    _check_frames(out)


# ----------------------------------------------------------------------------- envelopes


@st.composite
def envelope_line(draw: st.DrawFn) -> str:
    """One line of an envelope file: a valid envelope, a mutated one, or garbage."""
    source = draw(st.sampled_from(SOURCES))
    env: dict[str, Any] = {
        "node": draw(st.one_of(st.just("n0"), nasty_text, nasty_json)),
        "device": draw(st.sampled_from(["nvme0", "mlx5_0", "eth0", None, 7])),
        "port": draw(st.sampled_from(["1", 1, None])),
        "collected_at": draw(st.one_of(st.just("2026-11-28T12:00:00Z"), st.just(1764331200),
                                       nasty_json)),
        "source": draw(st.one_of(st.just(source), st.none(), nasty_text)),
        "output": draw(tool_output(source)),
    }
    for key in draw(st.lists(st.sampled_from(list(env)), max_size=2)):
        env.pop(key, None)
    if draw(st.booleans()):
        env[draw(nasty_text)] = draw(nasty_json)
    line = json.dumps(env)
    return draw(st.one_of(st.just(line), mutated_text([line]), st.just(deep(3000)),
                          st.text(max_size=80)))


def _envelope_outcome(lines: list[str], node: str | None) -> Parsed:
    data = "\n".join(lines).encode("utf-8", "surrogatepass")
    return read_envelopes(data, file_label="smart/n0/env.jsonl", default_node=node)


@pytest.mark.slow
@FUZZ
@given(lines=st.lists(envelope_line(), min_size=1, max_size=6),
       node=st.sampled_from([None, "n0"]))
def test_envelope_file_accounts_for_every_line(lines: list[str], node: str | None) -> None:
    FUZZED["envelope"] += 1
    whole = _envelope_outcome(lines, node)
    _check_frames(whole)
    physical = "\n".join(lines).encode("utf-8", "surrogatepass").decode(
        "utf-8", "replace").split("\n")
    rows_total = 0
    for i, line in enumerate(physical, start=1):
        if not line.strip():
            continue
        alone = _envelope_outcome([line], node)
        n = sum(alone.rows(t) for t in alone.frames)
        assert n or alone.rejects, f"line {i} vanished: {line[:200]!r}"
        rows_total += n
        assert sorted(r.reason for r in alone.rejects) == sorted(
            r.reason for r in whole.rejects if r.line == i)
    assert sum(whole.rows(t) for t in whole.frames) == rows_total


@pytest.mark.slow
@FUZZ
@given(output=st.one_of(*[tool_output(s) for s in SOURCES]),
       name=st.sampled_from(["nvme0.json", "eth0_20261128T120000Z.txt", "x", "1764331200.prom"]))
def test_bare_tool_file_is_rows_or_one_reason(output: Any, name: str) -> None:
    FUZZED["tool_file"] += 1
    data = (output if isinstance(output, str) else json.dumps(output)).encode(
        "utf-8", "surrogatepass")
    out = read_tool_file(data, file_label=f"smart/n0/{name}", node="n0", ts=T0)
    assert sum(out.rows(t) for t in out.frames) or out.rejects
    _check_frames(out)


@pytest.mark.slow
@FUZZ
@given(name=st.one_of(nasty_text, st.text(max_size=120)), value=nasty_json)
@example(name="x_99999999999999999999T000000Z", value=float("inf"))
def test_names_and_times_never_raise_beyond_value_error(name: str, value: Any) -> None:
    FUZZED["names_times"] += 1
    ts = time_from_name(name)
    assert ts is None or INGEST.min_year <= ts.year <= INGEST.max_year
    device_from_name(name)
    with contextlib.suppress(ValueError):
        parse_time(value)


# ----------------------------------------------------------------------------- DLIO


@pytest.mark.slow
@FUZZ
@given(data=st.data())
def test_dlio_stats_are_rows_or_a_reason(data: st.DataObject) -> None:
    FUZZED["dlio"] += 1
    text = data.draw(st.one_of(mutated_text([DLIO_SEED]),
                               mutated_json([json.loads(DLIO_SEED)]).map(json.dumps)))
    try:
        rows = mlperf.parse_dlio_per_epoch_stats(text, rank=0, job_id="j", node=None,
                                                 n_ranks=data.draw(st.sampled_from([None, 4])))
    except RecordError:
        return
    out = Parsed()
    rows_to_frames({"checkpoint_writes": rows}, out)
    assert out.rows("checkpoint_writes") + len(out.rejects) == len(rows)
    _check_frames(out)


# ----------------------------------------------------------------------------- canonical tables

#: Plausible raw values per canonical column (what a good file holds).
GOOD: dict[str, st.SearchStrategy[Any]] = {
    "job_id": st.sampled_from(["j1", "j2"]), "step": st.integers(0, 3),
    "rank": st.integers(0, 3), "node": st.sampled_from(["n0", "n1"]),
    "tier": st.sampled_from(["local", "pool", "POOL"]), "target": st.sampled_from(["t0", None]),
    "start_time": st.sampled_from(["2026-11-28T00:00:00Z", 1764288000, "1764288000.5"]),
    "end_time": st.sampled_from(["2026-11-28T00:00:09+00:00", 1764288010]),
    "bytes": st.integers(0, 10**12), "open_s": st.floats(0, 10), "status": st.sampled_from(
        ["ok", "error", None, "started"]), "n_ranks": st.integers(1, 512),
    "checkpoint_timeout_s": st.floats(1, 1e4), "checkpoint_interval_s": st.floats(1, 1e4),
    "ts": st.sampled_from(["2026-11-28T00:00:00Z", 1764288000, "2026-11-28 01:00:00"]),
    "pool": st.just("pool0"), "metric": st.sampled_from(["gc_active", "free_blocks_pct"]),
    "value": st.floats(-1e9, 1e9), "device": st.just("mlx5_0"), "port": st.just("1"),
    "counter": st.just("port_xmit_wait"), "leaf_switch": st.just("leaf01"),
    "nic": st.just("mlx5_0"),
}
COLUMNS = {
    "checkpoint_writes": ["job_id", "step", "rank", "node", "tier", "target", "start_time",
                          "end_time", "bytes", "open_s", "status"],
    "jobs": ["job_id", "n_ranks", "checkpoint_timeout_s", "checkpoint_interval_s"],
    "fabric_counters": ["ts", "node", "device", "port", "counter", "value"],
    "pool_metrics": ["ts", "pool", "target", "metric", "value"],
    "topology": ["node", "leaf_switch", "nic", "port"],
}


@st.composite
def records(draw: st.DrawFn, table: str) -> list[dict[str, Any]]:
    """Records for ``table``: mostly good values, some nasty ones, missing and extra keys."""
    cols = COLUMNS[table]
    out = []
    for _ in range(draw(st.integers(1, 8))):
        rec = {}
        for col in cols:
            if draw(st.integers(0, 9)) == 0:
                continue  # missing
            rec[col] = draw(st.one_of(GOOD[col], GOOD[col], GOOD[col], nasty_json))
        if draw(st.integers(0, 4)) == 0:
            rec[draw(nasty_text)] = draw(nasty_json)
        out.append(rec)
    return out


def _cell(v: Any) -> str:
    return "" if v is None else v if isinstance(v, str) else json.dumps(v)


def _as_jsonl(recs: list[dict[str, Any]]) -> bytes:
    return "\n".join(json.dumps(r) for r in recs).encode("utf-8", "surrogatepass") + b"\n"


def _as_csv(recs: list[dict[str, Any]], cols: list[str]) -> bytes:
    buf = io.StringIO()
    w = csv.writer(buf)
    w.writerow(cols)
    for r in recs:
        w.writerow([_cell(r.get(c)) for c in cols])
    return buf.getvalue().encode("utf-8", "surrogatepass")


def _as_parquet(recs: list[dict[str, Any]], cols: list[str], typed: bool) -> bytes:
    """Columns of text, or (``typed``) of whatever Arrow infers, with odd values as JSON."""
    arrays = {}
    for c in cols:
        vals = [r.get(c) for r in recs]
        name = c.encode("utf-8", "backslashreplace").decode()  # Parquet names are UTF-8
        if typed:
            try:
                arrays[name] = pa.array(vals)
                continue
            except (pa.ArrowException, OverflowError, TypeError, ValueError):
                pass
        arrays[name] = pa.array([None if v is None else _cell(v).encode(
            "utf-8", "backslashreplace").decode() for v in vals], pa.string())
    buf = io.BytesIO()
    try:
        pq.write_table(pa.table(arrays), buf)
    except pa.ArrowException:  # a type Parquet cannot hold (e.g. an empty struct)
        return _as_parquet(recs, cols, typed=False)
    return buf.getvalue()


Loader = Callable[[bytes, str], Any]


def _check_accounting(table: str, data: bytes, loader: Loader, n_records: int,
                      exact: bool) -> None:
    try:
        out = canonicalise(loader(data, table), table, file_label="f")
    except RecordError as exc:
        assert exc.reason.strip()  # the whole file goes to quarantine with this reason
        return
    _check_frames(out)
    got = sum(map(out.rows, out.frames)) + len(out.rejects)  # markers: checkpoint_starts
    if exact:
        assert got == n_records, [r.reason for r in out.rejects]
    elif loader is load_jsonl:  # every non-blank line is a record: a row or a reject
        assert got == sum(1 for ln in data.decode("utf-8", "replace").split("\n")
                          if ln.strip())


@pytest.mark.parametrize("fmt", ["jsonl", "csv", "parquet"])
@pytest.mark.slow
@FUZZ
@given(data=st.data())
def test_canonical_file_accounts_for_every_record(fmt: str, data: st.DataObject) -> None:
    table = data.draw(st.sampled_from(sorted(COLUMNS)))
    recs = data.draw(records(table))
    cols = COLUMNS[table] + sorted({k for r in recs for k in r} - set(COLUMNS[table]))
    FUZZED[f"tabular:{fmt}"] += 1
    if fmt == "jsonl":
        _check_accounting(table, _as_jsonl(recs), load_jsonl, len(recs), exact=True)
    elif fmt == "csv":
        blank = sum(all(_cell(r.get(c)).strip() == "" for c in cols) for r in recs)
        try:
            out = canonicalise(load_csv(_as_csv(recs, cols), table), table, file_label="f")
        except RecordError:
            return
        _check_frames(out)
        got = sum(map(out.rows, out.frames)) + len(out.rejects)  # markers: checkpoint_starts
        assert len(recs) - blank <= got <= len(recs)  # an all-empty row holds no record
    else:
        raw = _as_parquet(recs, cols, typed=data.draw(st.booleans()))
        _check_accounting(table, raw, load_parquet, len(recs), exact=True)


@pytest.mark.parametrize("fmt", ["jsonl", "csv", "parquet"])
@pytest.mark.slow
@FUZZ
@given(data=st.data())
def test_damaged_canonical_file_never_raises(fmt: str, data: st.DataObject) -> None:
    """Truncated or overwritten files: rows, rejects or one whole-file reason, never a crash."""
    table = data.draw(st.sampled_from(sorted(COLUMNS)))
    recs = data.draw(records(table))
    cols = COLUMNS[table]
    raw = {"jsonl": lambda: _as_jsonl(recs), "csv": lambda: _as_csv(recs, cols),
           "parquet": lambda: _as_parquet(recs, cols, typed=True)}[fmt]()
    FUZZED[f"tabular-damaged:{fmt}"] += 1
    buf = bytearray(raw)
    for _ in range(data.draw(st.integers(1, 4))):
        op = data.draw(st.sampled_from(["cut", "flip", "insert"]))
        at = data.draw(st.integers(0, len(buf)))
        if op == "cut":
            del buf[at:]
        elif op == "flip" and at < len(buf):
            buf[at] ^= data.draw(st.integers(1, 255))
        else:
            buf[at:at] = data.draw(st.one_of(st.binary(max_size=40), st.sampled_from(
                [b"\x00", b"\xff\xfe", b"\n\n", b'"', deep(2000).encode(), b"9" * 5000])))
    loader = {"jsonl": load_jsonl, "csv": load_csv, "parquet": load_parquet}[fmt]
    _check_accounting(table, bytes(buf), loader, 0, exact=False)


# ----------------------------------------------------------------------------- whole files

PLACES = ["checkpoints/", "jobs/", "pool/", "fabric/", "fabric/n0/", "smart/", "smart/n0/",
          "", "misc/"]
NAMES = ["a.csv", "a.jsonl", "a.json", "a.parquet", "a.txt", "a.prom", "a.csv.gz",
         "a.jsonl.gz", "nvme0.json", "eth0_20261128T120000Z.txt", "topology.csv",
         "0_per_epoch_stats.json", "noext"]


@st.composite
def raw_file(draw: st.DrawFn) -> tuple[str, bytes]:
    """(path under the raw dir, content): any place, any name, any content."""
    place, name = draw(st.sampled_from(PLACES)), draw(st.sampled_from(NAMES))
    source = draw(st.sampled_from(SOURCES))
    table = draw(st.sampled_from(sorted(COLUMNS)))
    content = draw(st.one_of(
        st.binary(max_size=300),
        tool_output(source).map(lambda o: (o if isinstance(o, str) else json.dumps(o)).encode(
            "utf-8", "surrogatepass")),
        records(table).map(_as_jsonl),
        records(table).map(lambda r: _as_csv(r, COLUMNS[table])),
        st.lists(envelope_line(), min_size=1, max_size=3).map(
            lambda ls: "\n".join(ls).encode("utf-8", "surrogatepass")),
        mutated_text([DLIO_SEED]).map(lambda t: t.encode("utf-8", "surrogatepass")),
    ))
    if name.endswith(".gz") and draw(st.booleans()):
        content = gzip.compress(content)
    return place + name, content


def _lake_is_well_formed(lake: Path) -> None:
    for path in lake.rglob("*"):
        rel = path.relative_to(lake).as_posix()
        if path.is_dir():
            assert re.fullmatch(r"_manifest|_inflight|(derived/)?[a-z_]+"
                                r"|(derived/)?[a-z_]+/date=\d{4}-\d{2}-\d{2}", rel), rel
        else:  # derived/: the stored counter deltas' schema stub (lake.derived)
            assert (PART_PATH.fullmatch(rel) or rel == ".lock"
                    or re.fullmatch(r"(derived/)?[a-z_]+/date=1970-01-01/part-schema\.parquet",
                                    rel)
                    or re.fullmatch(r"_manifest/[0-9a-f]{64}\.json", rel)), rel


@pytest.mark.slow
@FUZZ
@given(files=st.lists(raw_file(), min_size=1, max_size=4, unique_by=lambda f: f[0]))
def test_ingest_of_hostile_raw_dir_never_stops_and_loses_nothing(
        tmp_path_factory: pytest.TempPathFactory, files: list[tuple[str, bytes]]) -> None:
    FUZZED["ingest"] += 1
    root = tmp_path_factory.mktemp("fuzz")
    raw = root / "raw"
    for rel, content in files:
        (raw / rel).parent.mkdir(parents=True, exist_ok=True)
        (raw / rel).write_bytes(content)
    report = ingest(raw, root / "lake", lock_wait_s=5)
    assert len(report.files) == len(files)
    for f in report.files:
        assert f.status in ("ingested", "ignored", "skipped", "failed"), (f.rel, f.status)
        if f.status == "ingested":
            assert f.rows or f.quarantined or any("no records" in n for n in f.notes), f
        if f.status == "failed":  # not readable whole: a reason, and its records in quarantine
            assert f.error and f.quarantined and not f.rows, f
    lake = Lake(root / "lake")
    q = lake.read("quarantine")
    assert q.height == report.quarantined
    assert q["reason"].str.strip_chars().str.len_chars().min() or q.is_empty()
    for table, n in report.rows.items():
        assert lake.read(table).height == n
    assert sorted(p.name for p in root.iterdir()) == ["lake", "raw"]  # nothing written outside
    _lake_is_well_formed(root / "lake")
    again = ingest(raw, root / "lake", lock_wait_s=5)
    # idempotent on hostile input too: a failed file is read again (it is not in the
    # manifest), and its quarantine rows replace those of the first run
    assert again.rows == {}
    assert again.quarantined == sum(f.quarantined for f in report.files if f.status == "failed")
    assert lake.read("quarantine").height == q.height


def test_nan_and_infinity_never_reach_the_lake(tmp_path: Path) -> None:
    """NaN/±inf in canonical files, JSON tokens and tool outputs are quarantined, with reasons."""
    raw = tmp_path / "raw"
    (raw / "pool").mkdir(parents=True)
    (raw / "pool" / "p.csv").write_text(
        "ts,pool,target,metric,value\n2026-11-28T00:00:00Z,p,t,gc_active,nan\n"
        "2026-11-28T00:00:00Z,p,t,gc_active,-inf\n2026-11-28T00:00:00Z,p,t,gc_active,1e309\n")
    (raw / "pool" / "p.jsonl").write_text(
        '{"ts": "2026-11-28T00:00:00Z", "pool": "p", "target": "t", "metric": "m", '
        '"value": NaN}\n')
    (raw / "smart" / "n0").mkdir(parents=True)
    (raw / "smart" / "n0" / "nvme0.json").write_text(json.dumps(
        render_smartctl_json("M", "S", "F", "nvme0", {"temperature_c": 40})).replace(
            '"temperature": 40', '"temperature": Infinity', 1))
    report = ingest(raw, tmp_path / "lake")
    q = Lake(tmp_path / "lake").read("quarantine")
    assert report.rows.get("pool_metrics", 0) == 0
    reasons = sorted(q["reason"])
    assert reasons[:4] == ["nvme_smart row temperature_c value is inf (not a finite number)",
                           "value: '-inf' is not a finite number",
                           "value: '1e309' is not a finite number",
                           "value: 'nan' is not a finite number"]
    assert len(reasons) == 5
    smart = Lake(tmp_path / "lake").read("nvme_smart")
    assert smart["value"].is_finite().all()


def test_pinned_reasons_for_hostile_json(tmp_path: Path) -> None:
    """Each hostile JSON shape gets a reason a person can act on (and the line number)."""
    raw = tmp_path / "raw" / "smart" / "n0"
    raw.mkdir(parents=True)
    env = {"node": "n0", "collected_at": "2026-11-28T00:00:00Z", "source": "smartctl"}
    lines = [
        deep(20_000),  # past the recursion limit, within the 64 kB head discovery reads
        '{"output": ' + "9" * 5000 + "}",
        json.dumps({**env, "collected_at": 1e300, "output": {}}),
        json.dumps({**env, "collected_at": "NaN", "output": {}}),
        json.dumps({**env, "source": "prometheus",
                    "output": 'node_infiniband_link_downed_total{device="m",port="1"} 1 '
                              '99999999999999999999\n'}),
    ]
    (raw / "env.jsonl").write_text("\n".join(lines) + "\n")
    ingest(tmp_path / "raw", tmp_path / "lake")
    q = Lake(tmp_path / "lake").read("quarantine").sort("line")
    assert q.select("line", "reason").rows() == [
        (1, "invalid JSON (nested too deeply to read)"),
        (2, "invalid JSON (a number has more than 4300 digits)"),
        (3, "collected_at: implausible timestamp 1e+300"),
        (4, "collected_at: not a timestamp: 'NaN'"),
        (5, "prometheus exposition line 1: sample timestamp 99999999999999999999 ms is out "
            "of range"),
    ]


def test_parser_bug_quarantines_the_file_and_the_run_goes_on(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Last line of defence: an unexpected exception inside a reader (a bug that hostile
    input found) quarantines that file with a reason and the run goes on."""
    from ckptwatch.sources import tabular

    def broken(data: bytes, table: str) -> Any:
        if b"boom" in data:
            raise ZeroDivisionError("boom")
        return load_csv(data, table)

    monkeypatch.setitem(tabular.LOADERS, ".csv", broken)
    raw = tmp_path / "raw" / "pool"
    raw.mkdir(parents=True)
    (raw / "a.csv").write_text("ts,pool,target,metric,value\n2026-11-28T00:00:00Z,p,boom,m,1\n")
    (raw / "b.csv").write_text("ts,pool,target,metric,value\n2026-11-28T00:00:00Z,p,t,m,1\n")
    report = ingest(tmp_path / "raw", tmp_path / "lake")
    assert report.rows == {"pool_metrics": 1}
    [reason] = Lake(tmp_path / "lake").read("quarantine")["reason"]
    assert reason == ("the tabular reader failed on this file (ZeroDivisionError: boom); the "
                      "whole file is quarantined; please report it as a ckptwatch bug")


def test_corrupt_gzip_and_gzip_bomb_are_refused(tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """Both are ``failed`` (issue 17: they were "ingested" and never read again), with the
    reason in quarantine; neither is recorded in the manifest, so a rerun reads them again."""
    raw = tmp_path / "raw" / "pool"
    raw.mkdir(parents=True)
    good = gzip.compress(b"ts,pool,target,metric,value\n" + b"x" * 50_000, mtime=0)
    bad = bytearray(good)
    bad[12] ^= 0xFF  # zlib.error inside the deflate stream
    (raw / "bad.csv.gz").write_bytes(bytes(bad))
    (raw / "bomb.csv.gz").write_bytes(good)
    report = ingest(tmp_path / "raw", tmp_path / "lake")
    assert {f.rel: f.status for f in report.files} == {"pool/bad.csv.gz": "failed",
                                                       "pool/bomb.csv.gz": "failed"}
    q = Lake(tmp_path / "lake").read("quarantine")
    assert q.height == report.quarantined
    first = {f: r[0] for f, r in q.filter(pl.col("line").is_null()).group_by(
        "source_file", maintain_order=True).agg("reason").iter_rows()}
    assert first["pool/bad.csv.gz"].startswith("cannot read file: corrupt gzip file")
    assert first["pool/bomb.csv.gz"] == (  # 50 kB of "x" compress 450-fold: over 64-fold
        "cannot read file: decompresses to more than 7,104 bytes (64 times its 111 bytes; "
        "CKPTWATCH_MAX_DECOMPRESSED_RATIO): read up to there only; split the file or raise the "
        "limit")
    assert Lake(tmp_path / "lake").manifest_keys() == set()
    assert ingest(tmp_path / "raw", tmp_path / "lake").count("failed") == 2
    assert math.isfinite(report.elapsed_s)
