"""Detection thresholds, defined once (the ``detection`` branch of the settings tree):
``sql/session.sql`` holds their defaults (so the views run as-is in the ``duckdb`` CLI);
:class:`DetectionSettings` reads those defaults, takes overrides (CLI flags, tests) and hands
every value to the SQL as a session variable.

docs/concepts.md: a stall is a checkpoint whose barrier time is ``stall_factor`` x the job's
healthy baseline (the median of the healthy checkpoints among its previous 10) and
``stall_min_excess_s`` over it; a slow rank of a stall is ``slow_rank_factor``
x the job's normal rank duration and ``slow_rank_min_excess_s`` over it; a straggler is a rank
``straggler_factor`` x its checkpoint's p50 and ``straggler_min_excess_s`` over it.
``clock_skew_s``: how many seconds apart hosts' clocks may be; a series whose samples miss a
stall's window by at most that still reaches it (sql/session.sql, stall_signals).
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING

from ckptwatch.errors import QueryError
from ckptwatch.settings.paths import sql_dir

if TYPE_CHECKING:
    import duckdb

SESSION_FILE = "session.sql"
#: A clock further off than this is broken, not skewed: no tolerance hides it (stall_coverage
#: shows the feed as missing instead).
MAX_CLOCK_SKEW_S = 300.0
_SET_VARIABLE = re.compile(r"^\s*set\s+variable\s+(\w+)\s*=\s*([-+0-9.eE]+)\s*;",
                           re.IGNORECASE | re.MULTILINE)


@functools.cache
def session_defaults() -> dict[str, float]:
    """The numeric ``SET VARIABLE name = value;`` lines of ``sql/session.sql``."""
    path = sql_dir() / SESSION_FILE
    try:
        text = path.read_text()
    except OSError as exc:
        raise QueryError(f"cannot read the SQL session settings {path}: {exc}") from exc
    return {m.group(1): float(m.group(2)) for m in _SET_VARIABLE.finditer(text)}


def _default(name: str) -> float:
    try:
        return session_defaults()[name]
    except KeyError:
        raise QueryError(f"sql/{SESSION_FILE} sets no default for {name} "
                         f"(add `SET VARIABLE {name} = …;`)") from None


def _session(name: str) -> float:
    return field(default_factory=lambda: _default(name))


@dataclass(frozen=True)
class DetectionSettings:
    """Thresholds of stall, slow-rank and straggler detection (defaults: ``sql/session.sql``)."""

    stall_factor: float = _session("stall_factor")
    stall_min_excess_s: float = _session("stall_min_excess_s")
    slow_rank_factor: float = _session("slow_rank_factor")
    slow_rank_min_excess_s: float = _session("slow_rank_min_excess_s")
    straggler_factor: float = _session("straggler_factor")
    straggler_min_excess_s: float = _session("straggler_min_excess_s")
    clock_skew_s: float = _session("clock_skew_s")

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if f.name.endswith("_factor") and not value > 1.0:
                raise QueryError(f"{f.name} must be > 1 (got {value})")
            if f.name.endswith("_min_excess_s") and not value >= 0.0:
                raise QueryError(f"{f.name} must be >= 0 s (got {value})")
        if not 0.0 <= self.clock_skew_s <= MAX_CLOCK_SKEW_S:
            raise QueryError(f"clock_skew_s must be between 0 and {MAX_CLOCK_SKEW_S:g} s "
                             f"(got {self.clock_skew_s})")

    def apply(self, con: duckdb.DuckDBPyConnection) -> None:
        """Set every threshold as the SQL session variable of the same name."""
        for f in fields(self):
            # the name is a field of this class, never user text
            con.execute(f"SET VARIABLE {f.name} = ?", [float(getattr(self, f.name))]).fetchall()
