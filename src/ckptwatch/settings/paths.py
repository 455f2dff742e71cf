"""Paths: the package's own SQL and notebook, and the default lake and model, each with the
environment variable that overrides it (read here, when asked, and by
:func:`ckptwatch.settings.loading.load_settings` into ``Settings.paths``)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

#: The package's own data: the SQL views and the post-mortem notebook ship inside it (package
#: data of the wheel; in a checkout ``src/ckptwatch/sql`` and ``src/ckptwatch/notebooks`` are
#: links to the top-level ``sql/`` and ``notebooks/``, the one copy of each).
PACKAGE_DIR = Path(__file__).resolve().parent.parent

SQL_DIR_ENV = "CKPTWATCH_SQL_DIR"
MODEL_ENV = "CKPTWATCH_MODEL"
LAKE_ENV = "CKPTWATCH_LAKE"
DEFAULT_MODEL = Path("data/models/attribution.joblib")
DEFAULT_LAKE = Path("data/lake")


def sql_dir(environ: Mapping[str, str] | None = None) -> Path:
    """Directory of the layered SQL views (``CKPTWATCH_SQL_DIR`` overrides)."""
    env = os.environ if environ is None else environ
    value = env.get(SQL_DIR_ENV)
    if value:
        return Path(value)
    return PACKAGE_DIR / "sql"


def notebook_path() -> Path:
    """The post-mortem notebook shipped with the package."""
    return PACKAGE_DIR / "notebooks" / "stall_postmortem.ipynb"


def model_path(environ: Mapping[str, str] | None = None) -> Path:
    """The attribution model file (``CKPTWATCH_MODEL`` overrides); built by `train-model`."""
    env = os.environ if environ is None else environ
    return Path(env.get(MODEL_ENV, str(DEFAULT_MODEL)))


def default_lake(environ: Mapping[str, str] | None = None) -> Path:
    """Default lake location (``CKPTWATCH_LAKE`` overrides): ``data/lake`` under the working dir."""
    env = os.environ if environ is None else environ
    return Path(env.get(LAKE_ENV, str(DEFAULT_LAKE)))
