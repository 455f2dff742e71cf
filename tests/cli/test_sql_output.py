"""``ckptwatch sql`` prints from DuckDB's rows (``write_result``) exactly what the polars frame
of ``run_sql`` printed (``render_table``, ``write_data``), in every format, without polars."""

from __future__ import annotations

import math
import random
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest

from ckptwatch.cli import _render
from ckptwatch.cli._render import polars_float_text, render_table, write_data, write_result
from ckptwatch.lake.query import run_sql
from ckptwatch.lake.store import Lake

FORMATS = ("table", "csv", "json")
EVIL = "'evil\x1b[2J\x1b]0;owned\x07' || chr(155) || chr(127)"

QUERIES = {
    "scalars": "select 1 as i, -1234567::bigint as big, 18446744073709551615::ubigint as u, "
               "2.5::double as d, -0.0004::double as small, 1e20::double as huge, "
               "'nan'::double as nan, '-inf'::double as ninf, "
               "true as yes, false as no, null as nothing, 'x' as s",
    "float32": "select 0.1::float as f32, [0.1::float] as f32s, 7 as i",
    "nulls": "select * from (values (1, null::double, null::varchar, null::boolean), "
             "(null, 1.25, 'a', true)) as t(i, d, s, b)",
    "strings": f"select {EVIL} as evil, '' as empty, 'a,b' as comma, 'q\"q' as quote, "
               "'two\nlines' as nl, 'cr\rx' as cr, 'tab\tx' as tab, ' lead' as lead, "
               "'back\\' as back, chr(8) || chr(12) || chr(0) as low, "
               "repeat('x', 200) as long, 'ok' as \"name\x1b[31m, with comma\"",
    "times": "select * from (values "
             "(timestamp '2026-03-02 01:02:03', timestamptz '2026-03-02 01:02:03.123+00', "
             " date '2026-03-02'), "
             "(timestamp '2026-03-02 01:02:03.1234', timestamptz '2026-03-02 00:00:00.000005+00', "
             " date '0001-01-01'), "
             "(timestamp '0099-12-31 23:59:59.999', null, null)) as t(ts, tz, d)",
    "lists": f"select [1, 2, null] as ints, ['a', null, {EVIL}] as strs, [1.5, 2.25]::double[] "
             "as dbls, [[1], [], null] as nested, [] as empty, null::int[] as none, "
             "[true, false] as bools, [timestamp '2026-03-02 01:02:03'] as stamps, "
             "[date '2026-03-02'] as dates",
    "wide": "select " + ", ".join(f"{i} as c{i}" for i in range(40)),
    "thirty": "select " + ", ".join(f"'v{i}' as c{i}" for i in range(30)),
    "over_width": "select repeat('a', 150) as a, repeat('b', 150) as b, repeat('c', 150) as c",
    "unicode": "select 'é' as e, '漢字' as cjk, '😀' as emoji, 'ok' as \"ñame\"",
    "empty": "select 1 as a, 'x' as b from range(3) where false",
    "many_rows": "select range as i, range * 1.5::double as d, "
                 "case when range = 120 then repeat('m', 40) else 'v' || range end as s "
                 "from range(250)",
    "rows_200": "select range as i from range(200)",
    "rows_201": "select range as i from range(201)",
    "decimal_struct": "select 1.5 as dec, {'k': 1, 'v': 'x'} as st, 2::hugeint as h, "
                      "time '01:02:03' as tm",
    "repeated_names": "select 1 as a, 2 as a",
    "statement": "create table t (a int)",
}
#: Results that go through polars still (types it draws its own way, renamed columns).
THROUGH_POLARS = {"decimal_struct", "repeated_names"}


def polars_output(sql: str, fmt: str, capsys: pytest.CaptureFixture[str]) -> str:
    """What ``ckptwatch sql`` printed before: run_sql's frame through the polars printers."""
    df = run_sql(duckdb.connect(), sql)
    if fmt == "table":
        print(render_table(df, float_precision=3))
        print(df.height)
    else:
        write_data(df, fmt)
    return capsys.readouterr().out


def streamed_output(sql: str, fmt: str, capsys: pytest.CaptureFixture[str]) -> str:
    n_rows = write_result(duckdb.connect(), sql, fmt, float_precision=3)
    if fmt == "table":
        print(n_rows)
    return capsys.readouterr().out


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("name", sorted(QUERIES))
def test_streamed_result_prints_what_polars_printed(
        name: str, fmt: str, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    sql = QUERIES[name]
    frames: list[object] = []
    through_polars = _render.relation_frame

    def frame(rel: duckdb.DuckDBPyRelation) -> object:
        frames.append(rel)
        return through_polars(rel)

    monkeypatch.setattr(_render, "relation_frame", frame)
    if fmt == "csv" and name in ("lists", "decimal_struct", "float32"):
        with pytest.raises(Exception, match="CSV format does not support nested data"):
            streamed_output(sql, fmt, capsys)  # as before: polars refuses nested CSV
        return
    assert streamed_output(sql, fmt, capsys) == polars_output(sql, fmt, capsys)
    assert bool(frames) == (name in THROUGH_POLARS or (fmt != "table" and name == "float32"))


@pytest.mark.parametrize("fmt", FORMATS)
def test_batches_of_any_size_give_the_same_text(
        fmt: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    sql = QUERIES["many_rows"]
    expected = polars_output(sql, fmt, capsys)
    monkeypatch.setattr(_render, "BATCH_ROWS", 7)
    assert streamed_output(sql, fmt, capsys) == expected


def test_csv_on_a_terminal_escapes_like_polars_did(
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("sys.stdout.isatty", lambda: True)
    sql = QUERIES["strings"]
    out = streamed_output(sql, "csv", capsys)
    assert out == polars_output(sql, "csv", capsys)
    assert "\x1b" not in out and "evil\\x1b[2J" in out


def test_doubles_are_written_as_polars_writes_them(capsys: pytest.CaptureFixture[str]) -> None:
    """Shortest text, positional from 1e-5, unpadded exponents: over every decade."""
    rng = random.Random(18)
    values = [m * 10.0 ** e for e in range(-320, 309) for m in (1.0, -1.5, rng.random())]
    values += [0.0, -0.0, 5e-324, 1.7976931348623157e308, 1e-5, 9.99e-6, 1e16, 1e15]
    values = [v for v in values if math.isfinite(v)]
    sql = "select unnest(?::double[]) as v"
    df = run_sql(duckdb.connect(), sql, [values])
    assert [polars_float_text(v) for v in values] == df.write_csv().splitlines()[1:]


def test_errors_are_one_line_query_errors(capsys: pytest.CaptureFixture[str]) -> None:
    from ckptwatch.errors import QueryError

    with pytest.raises(QueryError, match="nope") as bad:
        write_result(duckdb.connect(), "select * from nope", "table")
    assert "\n" not in str(bad.value)
    with pytest.raises(QueryError, match="Conversion Error"):
        write_result(duckdb.connect(), "select 'x'::int", "csv")


def test_sql_select_1_imports_neither_polars_nor_pyarrow(tmp_path: Path) -> None:
    Lake(tmp_path / "lake").init()
    script = ("import sys\n"
              "from ckptwatch.cli.main import main\n"
              f"code = main(['sql', '--lake', {str(tmp_path / 'lake')!r}, 'select 1'])\n"
              "print(sorted(m for m in ('polars', 'pyarrow', 'numpy') if m in sys.modules))\n"
              "sys.exit(code)\n")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "| 1 |\n|---|\n| 1 |\n(1 row)\n[]\n"
