"""Every run-time rewrite of the view graph is in ``ckptwatch.lake.seam``, and sql/README.md
names each: what a view returns at run time can be read in one place."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import duckdb
import polars as pl
import pytest

from ckptwatch.lake import freshness, seam

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "src" / "ckptwatch"
README = (ROOT / "sql" / "README.md").read_text()

#: SQL that defines or redefines a view or a table macro.
_REWRITE = re.compile(r"\b(create\s+(or\s+replace\s+)?(temp\s+|temporary\s+)?(view|macro)"
                      r"|alter\s+view)\b", re.I)
#: Modules that still rewrite a view outside the seam, each with why (the lead decides).
OUTSIDE_THE_SEAM: dict[str, str] = {}


def _strings(path: Path) -> list[str]:
    """The string constants of a module that are not docstrings (what it may run as SQL)."""
    tree = ast.parse(path.read_text())
    docs = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef) \
                and node.body and isinstance(node.body[0], ast.Expr) \
                and isinstance(node.body[0].value, ast.Constant):
            docs.add(id(node.body[0].value))
    return [n.value for n in ast.walk(tree) if isinstance(n, ast.Constant)
            and isinstance(n.value, str) and id(n) not in docs]


def _rewriters() -> set[str]:
    return {path.relative_to(PACKAGE.parent).as_posix() for path in PACKAGE.rglob("*.py")
            if path.name != "seam.py" and any(_REWRITE.search(s) for s in _strings(path))}


def test_no_module_but_the_seam_rewrites_a_view() -> None:
    found = _rewriters() - set(OUTSIDE_THE_SEAM)
    assert not found, f"modules that rewrite views outside ckptwatch.lake.seam: {sorted(found)}"


def test_the_exceptions_are_current() -> None:
    gone = set(OUTSIDE_THE_SEAM) - _rewriters()
    assert not gone, f"no longer rewrite a view (remove from OUTSIDE_THE_SEAM): {sorted(gone)}"


def test_the_readme_names_every_swap_and_pinned_view() -> None:
    section = README.split("## What a view returns at run time", 1)[1].split("\n## ", 1)[0]
    for name in (*seam.PINNED_VIEWS, *seam.PINNED_SAMPLES, *seam.PINNED_SERIES,
                 *seam.PINNED_STORED, "signalstats",
                 seam.DERIVED_READER, seam.DERIVED_SWITCH, "lake_view_sql", "use_stored_deltas",
                 "pinned_views", "extra_rows=", "read_parts"):
        assert name in section, f"sql/README.md's seam section does not name {name}"


def test_added_rows_and_some_parts_only(tmp_path: Path) -> None:
    """``add_rows`` shows the lake's rows and the caller's; ``read_parts`` only the files'."""
    con = duckdb.connect()
    parts = []
    for i, hosts in enumerate((["a", "b"], ["c"])):
        part = tmp_path / "t" / f"date=2026-11-2{i}" / "part-0.parquet"
        part.parent.mkdir(parents=True)
        pl.DataFrame({"host": hosts}).write_parquet(part)
        parts.append(str(part))
    seam.read_parts(con, "t", parts[1:])
    assert con.execute("select host, date::varchar from t").fetchall() == [("c", "2026-11-21")]
    seam.add_rows(con, "t", pl.DataFrame({"host": ["z"], "extra": [1]}))
    assert sorted(con.execute("select host, extra from t").fetchall()) == [
        ("c", None), ("z", 1)]
    seam.read_parts(con, "u", parts)
    assert con.execute("select count(*) from u").fetchone() == (3,)


def test_only_counter_rows_turn_the_stored_deltas_off(tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """Rows added to a counter table are not in the stored deltas: they are computed then.
    Rows of any other table (a checkpoint's records) change no delta: stored ones are read."""
    monkeypatch.setattr(freshness, "is_fresh", lambda root, days=None: True)
    con = duckdb.connect()
    switch = "select getvariable('counter_deltas_derived')"
    assert seam.use_stored_deltas(con, tmp_path, None)
    assert seam.use_stored_deltas(con, tmp_path, None, added_to={"checkpoint_writes": None})
    assert con.execute(switch).fetchone() == (True,)
    assert not seam.use_stored_deltas(con, tmp_path, None, added_to=["fabric_counters"])
    assert con.execute(switch).fetchone() == (False,)
    monkeypatch.setattr(freshness, "is_fresh", lambda root, days=None: False)
    assert not seam.use_stored_deltas(con, tmp_path, None)
