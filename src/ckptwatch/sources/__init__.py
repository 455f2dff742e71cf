"""One module per telemetry format; ``load_all`` imports them all, which registers every tool
parser (the order of registration is the order in which ``base.detect_tool`` tries them)."""

from __future__ import annotations

import importlib
import pkgutil

_NOT_FORMATS = {"base", "coerce", "tabular", "envelope", "textkv", "pool_common", "pool_bulk",
                "json_bulk"}


_LOADED = False


def load_all() -> None:
    """Import every format module so that its ``register_tool`` runs. Once a process: a
    later call returns at once (discovery asks before recognising each file, and walking the
    package costs ~1 ms)."""
    global _LOADED
    if _LOADED:
        return
    for info in pkgutil.iter_modules(__path__):
        if info.name not in _NOT_FORMATS and not info.name.startswith("_"):
            importlib.import_module(f"{__name__}.{info.name}")
    _LOADED = True
