"""Node MTBF from a log of real interruptions (``ckptwatch plan --failures FILE``).

A CSV in one of two forms (a header row; other columns are ignored):

- **counts**: one row per cause with ``interruption_count`` (or ``count``): the interruptions
  of a fleet over a period, e.g. Table 5 of the Llama 3 paper (419 unexpected interruptions of
  a 16,384-GPU job in 54 days);
- **timestamps**: one row per interruption with ``timestamp`` (ISO 8601).

The period and the fleet come from columns ``period_days`` (or ``period_h``) and ``gpus`` (or
``nodes``), one value throughout, or from the arguments (``--failures-days``,
``--failures-gpus``); a timestamp log without a period spans its first to its last timestamp
(and counts the intervals between them). Nodes = GPUs / ``gpus_per_node``.

Estimate (interruptions as a Poisson process over the observed node-time): node MTBF =
period x nodes / interruptions, with the exact (chi-square) confidence interval of a Poisson
count; the fleet's own mean time between interruptions = period / interruptions.
"""

from __future__ import annotations

import csv
import math
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from ckptwatch.errors import PlanInputError

_COUNT_COLUMNS = ("interruption_count", "count")
_PERIOD_COLUMNS = {"period_days": 86400.0, "period_h": 3600.0}
_FLEET_COLUMNS = ("gpus", "nodes")


@dataclass(frozen=True)
class FailureEstimate:
    """Node MTBF estimated from an interruption log."""

    source: str
    interruptions: int
    period_s: float
    gpus: int
    nodes: int
    #: Mean time between interruptions of the observed fleet (period / interruptions).
    fleet_mtbf_s: float
    node_mtbf_s: float
    #: Confidence interval of the node MTBF (low, high), seconds.
    node_mtbf_ci_s: tuple[float, float]
    confidence: float

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready mapping (seconds)."""
        return {"source": self.source, "interruptions": self.interruptions,
                "period_s": self.period_s, "gpus": self.gpus, "nodes": self.nodes,
                "fleet_mtbf_s": self.fleet_mtbf_s, "node_mtbf_s": self.node_mtbf_s,
                "node_mtbf_ci_s": list(self.node_mtbf_ci_s), "confidence": self.confidence}


def poisson_rate_ci(count: int, exposure: float,
                    confidence: float = 0.95) -> tuple[float, float]:
    """Exact confidence interval of a Poisson rate: ``count`` events in ``exposure``."""
    from scipy.stats import chi2

    a = 1.0 - confidence
    lo = 0.0 if count == 0 else float(chi2.ppf(a / 2.0, 2 * count)) / 2.0
    hi = float(chi2.ppf(1.0 - a / 2.0, 2 * count + 2)) / 2.0
    return lo / exposure, hi / exposure


def estimate_mtbf(interruptions: int, period_s: float, gpus: int, gpus_per_node: int, *,
                  source: str, confidence: float = 0.95) -> FailureEstimate:
    """Node MTBF and its confidence interval from ``interruptions`` in ``period_s`` on
    ``gpus`` GPUs."""
    if interruptions < 1:
        raise PlanInputError(f"{source}: no interruptions counted; an MTBF needs at least one")
    if period_s <= 0 or gpus < 1:
        raise PlanInputError(f"{source}: the period ({period_s:g} s) and the fleet ({gpus} GPUs) "
                             "must be > 0")
    nodes = max(1, math.ceil(gpus / gpus_per_node))
    exposure = period_s * nodes
    lo_rate, hi_rate = poisson_rate_ci(interruptions, exposure, confidence)
    return FailureEstimate(
        source=source, interruptions=interruptions, period_s=period_s, gpus=gpus, nodes=nodes,
        fleet_mtbf_s=period_s / interruptions, node_mtbf_s=exposure / interruptions,
        node_mtbf_ci_s=(1.0 / hi_rate, math.inf if lo_rate == 0 else 1.0 / lo_rate),
        confidence=confidence)


def _column_value(rows: list[dict[str, str]], names: tuple[str, ...], path: Path,
                  scale: dict[str, float] | None = None) -> float | None:
    for name in names:
        values = {(r.get(name) or "").strip() for r in rows} - {""}
        if not values:
            continue
        if len(values) > 1:
            raise PlanInputError(f"{path}: column {name} must hold one value throughout "
                                 f"(found {', '.join(sorted(values))})")
        raw = values.pop()
        try:
            v = float(raw)
        except ValueError as exc:
            raise PlanInputError(f"{path}: column {name} must be a number (got {raw!r})") from exc
        return v * (scale[name] if scale else 1.0)
    return None


def read_failures(path: Path, *, gpus_per_node: int, period_days: float | None = None,
                  gpus: int | None = None, confidence: float = 0.95) -> FailureEstimate:
    """The node MTBF of an interruption CSV (see the module docstring); ``period_days`` and
    ``gpus`` are used where the file has no such column."""
    if not path.is_file():
        raise PlanInputError(f"failures file {path} not found; check --failures")
    with path.open(newline="", encoding="utf-8") as fh:
        reader = csv.DictReader(fh)
        header = reader.fieldnames or []
        rows = list(reader)
    count_col = next((c for c in _COUNT_COLUMNS if c in header), None)
    if count_col is None and "timestamp" not in header:
        raise PlanInputError(
            f"{path}: expected a column interruption_count (counts per cause) or timestamp "
            f"(one row per interruption); found: {', '.join(header) or 'no header'}")
    period_s = _column_value(rows, tuple(_PERIOD_COLUMNS), path, _PERIOD_COLUMNS)
    if period_s is None and period_days is not None:
        period_s = period_days * 86400.0
    fleet_gpus = _column_value(rows, ("gpus",), path)
    fleet_nodes = _column_value(rows, ("nodes",), path)
    if fleet_gpus is None and fleet_nodes is not None:
        fleet_gpus = fleet_nodes * gpus_per_node
    if fleet_gpus is None and gpus is not None:
        fleet_gpus = float(gpus)
    if fleet_gpus is None:
        raise PlanInputError(f"{path}: the fleet size is missing: add a gpus (or nodes) column "
                             "or pass --failures-gpus N")
    if count_col is not None:
        total = 0
        for line, row in enumerate(rows, start=2):
            raw = (row.get(count_col) or "").strip()
            try:
                n = int(raw)
            except ValueError as exc:
                raise PlanInputError(f"{path}:{line}: {count_col} must be a whole number "
                                     f"(got {raw!r})") from exc
            if n < 0:
                raise PlanInputError(f"{path}:{line}: {count_col} must be >= 0 (got {n})")
            total += n
        if period_s is None:
            raise PlanInputError(f"{path}: the observation period is missing: add a "
                                 "period_days column or pass --failures-days D")
    else:
        stamps = []
        for line, row in enumerate(rows, start=2):
            raw = (row.get("timestamp") or "").strip()
            try:
                stamps.append(datetime.fromisoformat(raw.replace("Z", "+00:00")))
            except ValueError as exc:
                raise PlanInputError(f"{path}:{line}: timestamp must be ISO 8601, e.g. "
                                     f"2024-05-01T12:00:00Z (got {raw!r})") from exc
        total = len(stamps)
        if period_s is None:
            if total < 2:
                raise PlanInputError(f"{path}: {total} timestamp(s) and no period: pass "
                                     "--failures-days D or log at least two interruptions")
            stamps.sort()
            period_s = (stamps[-1] - stamps[0]).total_seconds()
            total -= 1  # intervals between the first and the last interruption
    return estimate_mtbf(total, period_s, round(fleet_gpus), gpus_per_node, source=str(path),
                         confidence=confidence)
