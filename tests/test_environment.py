"""The environment is read in few places: the settings loader, the cluster-side recorder and
collector (the job's own ``RANK``, ``SLURM_*``; the tools they run), where Prefect is handed its
variables, and where the parse workers are handed their allocator's. Every other module gets
its settings passed down. No ambient state either: no ``ContextVar``."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

from tests.conftest import PROJECT_ROOT

PACKAGE = PROJECT_ROOT / "src" / "ckptwatch"

#: module (relative to the package) -> the functions in it that may touch the environment
#: (None: the whole module), and why.
ALLOWED: dict[str, tuple[str, ...] | None] = {
    # the settings loader: config file, CKPTWATCH_* variables, paths, Prefect's home
    "settings/loading.py": None,
    "settings/paths.py": None,
    "settings/prefect_env.py": None,
    # cluster side: the training job's RANK / SLURM_*, and the tools the collector runs
    "collect/recorder.py": None,
    "collect/collector.py": None,
    # Prefect reads its settings from the environment when imported: handed over here
    "flows/local_prefect.py": None,
    # the spawned parse workers' allocator (jemalloc reads its variable at their start)
    "ingest/parallel.py": ("_worker_allocator",),
}

_ENV_NAMES = {"environ", "environb", "getenv", "putenv", "unsetenv", "getenvb"}


def _modules() -> Iterator[tuple[str, ast.Module]]:
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE).as_posix()
        yield rel, ast.parse(path.read_text(), filename=str(path))


def _environment_uses(tree: ast.Module) -> Iterator[tuple[int, str, str | None]]:
    """(line, what, enclosing function) of every use of the process environment: ``os.environ``
    (and ``getenv``, ``putenv``, …), or such a name imported from ``os``."""
    def walk(node: ast.AST, func: str | None) -> Iterator[tuple[int, str, str | None]]:
        for child in ast.iter_child_nodes(node):
            inner = child.name if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef) \
                else func
            if isinstance(child, ast.Attribute) and child.attr in _ENV_NAMES \
                    and isinstance(child.value, ast.Name) and child.value.id == "os":
                yield child.lineno, f"os.{child.attr}", func
            if isinstance(child, ast.ImportFrom) and child.module == "os":
                for alias in child.names:
                    if alias.name in _ENV_NAMES:
                        yield child.lineno, f"from os import {alias.name}", func
            yield from walk(child, inner)
    yield from walk(tree, None)


def test_only_the_allowed_modules_read_the_environment() -> None:
    found = []
    for rel, tree in _modules():
        allowed = ALLOWED.get(rel, ())
        for line, what, func in _environment_uses(tree):
            if allowed is None or func in allowed:
                continue
            found.append(f"{rel}:{line}: {what} (in {func or 'module level'})")
    assert not found, ("the environment is read outside the settings loader; load the value "
                       "there and pass it down:\n" + "\n".join(found))


def test_the_allow_list_names_modules_and_functions_that_exist() -> None:
    """A stale entry would let a new module of that name read the environment unseen."""
    trees = dict(_modules())
    for rel, funcs in ALLOWED.items():
        assert rel in trees, rel
        names = {n.name for n in ast.walk(trees[rel]) if isinstance(n, ast.FunctionDef)}
        assert set(funcs or ()) <= names, (rel, funcs)


def test_no_ambient_context_variables() -> None:
    found = [f"{rel}:{node.lineno}" for rel, tree in _modules() for node in ast.walk(tree)
             if (isinstance(node, ast.Import) and any(a.name == "contextvars"
                                                       for a in node.names))
             or (isinstance(node, ast.ImportFrom) and node.module == "contextvars")
             or (isinstance(node, ast.Name | ast.Attribute)
                 and (getattr(node, "id", None) or getattr(node, "attr", None)) == "ContextVar")]
    assert not found, f"ContextVar used at {found}: pass the value instead"


def test_the_walk_finds_what_it_looks_for(tmp_path: Path) -> None:
    code = ("import os\nfrom os import getenv\nX = os.environ.get('A')\n"
            "def f():\n    return os.getenv('B')\n")
    uses = list(_environment_uses(ast.parse(code)))
    assert uses == [(2, "from os import getenv", None), (3, "os.environ", None),
                    (5, "os.getenv", "f")]
