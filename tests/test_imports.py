"""The package's imports go down the stages once: no cycle between modules, no import from a
lower stage to a higher one, and every module imports on its own.

The graph is read with ``ast`` from ``src/ckptwatch``: every ``import``/``from … import`` of a
``ckptwatch`` module, at module level or inside a function (a deferred import is an edge all
the same: it runs the other module), except under ``if TYPE_CHECKING:`` (never run). A
package's ``__init__`` executed on the way to a submodule is not counted as an edge.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from functools import cache
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parent.parent / "src"
PACKAGE = SRC / "ckptwatch"

#: The stages, lowest first: a module may import its own stage and the ones before it. The
#: order is the one the code implies (each line: what its modules import).
#: - errors, safetext, the package's ``__init__``: the standard library only.
#: - settings (and httpclient, which redacts with it): errors.
#: - lake.schema: the tables' columns and types, the contract every parser writes to (pyarrow
#:   only); it sits below sources because sources build rows of those schemas.
#: - sources: the format parsers (schema, settings).
#: - lake and the SQL: rows into Parquet and views over it, in this order: the store (parts,
#:   manifest, lock), the freshness of the stored counter deltas, the view cache (the views a
#:   connection built, copied into the next: duckdb only), the seam (every run-time rewrite of
#:   the views), ``query.connect``, and ``derived.refresh`` (built with connect).
#: - ingest, and collect (the cluster-side recorder and collector, which write what sources
#:   read: sources only).
#: - pull: Prometheus into raw files, then the ingest.
#: - analysis: stalls, attribution, latency over the views.
#: - alerts, planning, simulate: built on analysis (simulate generates lakes and evaluates
#:   attribution).
#: - report: reads analysis, alerts and planning.
#: - live: the watcher (alerts, analysis, ingest).
#: - flows: Prefect around everything below.
#: - cli, and the top-level import shims ``recorder``/``recorder_adapters`` training code uses.
STAGES: tuple[tuple[str, ...], ...] = (
    ("ckptwatch", "ckptwatch.errors", "ckptwatch.safetext"),
    ("ckptwatch.settings", "ckptwatch.httpclient"),
    ("ckptwatch.lake.schema",),
    ("ckptwatch.sources",),
    ("ckptwatch.lake.store",),
    ("ckptwatch.lake.freshness",),
    ("ckptwatch.lake.viewcache",),
    ("ckptwatch.lake.seam",),
    ("ckptwatch.lake.query",),
    ("ckptwatch.lake",),
    ("ckptwatch.ingest", "ckptwatch.collect"),
    ("ckptwatch.pull",),
    ("ckptwatch.analysis",),
    ("ckptwatch.alerts", "ckptwatch.planning", "ckptwatch.simulate"),
    ("ckptwatch.report",),
    ("ckptwatch.live",),
    ("ckptwatch.flows",),
    ("ckptwatch.cli", "ckptwatch.recorder", "ckptwatch.recorder_adapters"),
)

#: Imports that go up a stage today, each with why it stays (the lead decides; an entry whose
#: import is gone fails ``test_the_allow_list_is_current``).
ALLOWED_UPWARD: dict[tuple[str, str], str] = {}


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(SRC).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


@cache
def _modules() -> dict[str, Path]:
    return {_module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def _imports_of(name: str, path: Path, modules: dict[str, Path]) -> dict[str, int]:
    """The package modules module ``name`` (file ``path``) imports, with the first line."""
    found: dict[str, int] = {}
    is_package = path.name == "__init__.py"

    def add(target: str, line: int) -> None:
        if target in modules and target != name:
            found.setdefault(target, line)

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            for stmt in node.orelse:
                visit(stmt)
            return
        if isinstance(node, ast.Import):
            for alias in node.names:
                add(alias.name, node.lineno)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                package = name.split(".")
                if not is_package:
                    package.pop()
                package = package[:len(package) - node.level + 1]
                base = ".".join([*package, *([base] if base else [])])
            for alias in node.names:  # ``from pkg import module`` names the module
                full = f"{base}.{alias.name}"
                add(full if full in modules else base, node.lineno)
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(ast.parse(path.read_text(), str(path)))
    return found


@cache
def _graph() -> dict[str, dict[str, int]]:
    """Each module's imports of package modules, with the line of the first one."""
    modules = _modules()
    return {name: _imports_of(name, path, modules) for name, path in modules.items()}


def _stage(module: str) -> int:
    """The stage of ``module``: that of the longest prefix named in ``STAGES``."""
    best, stage = -1, -1
    for i, prefixes in enumerate(STAGES):
        for prefix in prefixes:
            if (module == prefix or module.startswith(prefix + ".")) and len(prefix) > best:
                best, stage = len(prefix), i
    return stage


def _cycles(graph: dict[str, dict[str, int]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    out: list[list[str]] = []
    counter = 0
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            for child in children:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                    break
                if child in on_stack:
                    low[node] = min(low[node], index[child])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        out.append(sorted(component))
    return out


def _upward() -> dict[tuple[str, str], str]:
    """Every import from a lower stage to a higher one: (importer, imported) -> where."""
    out = {}
    for module, targets in _graph().items():
        for target, line in targets.items():
            if _stage(target) > _stage(module):
                out[(module, target)] = f"{_modules()[module].relative_to(SRC)}:{line}"
    return out


def test_the_graph_sees_every_kind_of_import(tmp_path: Path) -> None:
    graph = _graph()
    assert {"ckptwatch.lake.query", "ckptwatch.cli.main", "ckptwatch.sources.base"} <= set(graph)
    module = tmp_path / "m.py"
    module.write_text(
        "from typing import TYPE_CHECKING\n"
        "import ckptwatch.errors\n"
        "from ckptwatch.lake import seam\n"
        "from ckptwatch.lake.store import Lake\n"
        "if TYPE_CHECKING:\n"
        "    from ckptwatch.report.facts import Facts\n"
        "def f():\n"
        "    from ckptwatch.cli import main\n")
    modules = {**_modules(), "ckptwatch.x.m": module}
    assert set(_imports_of("ckptwatch.x.m", module, modules)) == {
        "ckptwatch.errors", "ckptwatch.lake.seam", "ckptwatch.lake.store", "ckptwatch.cli.main"}
    assert _cycles({"a": {"b": 1}, "b": {"c": 1}, "c": {"a": 1}, "d": {"a": 1}}) == [
        ["a", "b", "c"]]
    assert _stage("ckptwatch.lake.schema") < _stage("ckptwatch.sources.base") \
        < _stage("ckptwatch.lake.store") < _stage("ckptwatch.lake.derived") \
        < _stage("ckptwatch.cli.main")


def test_every_module_has_a_stage() -> None:
    unstaged = sorted(m for m in _modules() if _stage(m) < 0)
    assert not unstaged, f"modules in no stage of STAGES: {unstaged}"


def test_no_import_cycle() -> None:
    cycles = _cycles(_graph())
    assert not cycles, "modules that import each other (directly or around a loop): " + \
        "; ".join(" <-> ".join(c) for c in cycles)


def test_no_import_goes_up_a_stage() -> None:
    found = {edge: where for edge, where in _upward().items() if edge not in ALLOWED_UPWARD}
    assert not found, "imports from a lower stage to a higher one:\n" + "\n".join(
        f"  {where}: {a} imports {b}" for (a, b), where in sorted(found.items()))


def test_the_allow_list_is_current() -> None:
    gone = sorted(set(ALLOWED_UPWARD) - set(_upward()))
    assert not gone, f"allowed upward imports that no longer exist (remove them): {gone}"
    assert all(reason.strip() for reason in ALLOWED_UPWARD.values())


#: One fresh interpreter per subpackage; in it each module is imported with every
#: ``ckptwatch`` module unloaded first (third-party modules stay loaded: only our order
#: matters), so a module that works only after another has been imported fails here.
_IMPORT_EACH = """
import importlib, sys
failed = []
for name in sys.argv[1:]:
    for loaded in [m for m in sys.modules if m == "ckptwatch" or m.startswith("ckptwatch.")]:
        del sys.modules[loaded]
    try:
        importlib.import_module(name)
    except Exception as exc:
        failed.append(f"{name}: {type(exc).__name__}: {exc}")
print("\\n".join(failed))
sys.exit(1 if failed else 0)
"""

SUBPACKAGES = sorted({m.split(".")[1] for m in _modules() if m.count(".") >= 1})


@pytest.mark.parametrize("subpackage", SUBPACKAGES)
def test_each_module_imports_on_its_own(subpackage: str) -> None:
    names = sorted(m for m in _modules()
                   if m == f"ckptwatch.{subpackage}" or m.startswith(f"ckptwatch.{subpackage}."))
    done = subprocess.run([sys.executable, "-c", _IMPORT_EACH, *names],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, f"modules that do not import on their own:\n{done.stdout}" \
        f"{done.stderr[-2000:]}"
