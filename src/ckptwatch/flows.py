"""Load the Prefect flows of ``pipelines/`` (they live beside the package, not inside it)."""

from __future__ import annotations

import importlib
import sys
from types import ModuleType

from ckptwatch.config import pipelines_dir
from ckptwatch.errors import CkptwatchError


def load_flow_module(name: str) -> ModuleType:
    """Import ``pipelines.<name>``; the project root goes on ``sys.path`` if needed."""
    root = pipelines_dir().parent
    if not (pipelines_dir() / f"{name}.py").exists():
        raise CkptwatchError(f"flow pipelines/{name}.py not found under {root} (run from a "
                             "ckptwatch checkout, or set CKPTWATCH_PIPELINES_DIR)")
    if str(root) not in sys.path:
        sys.path.insert(0, str(root))
    return importlib.import_module(f"pipelines.{name}")
