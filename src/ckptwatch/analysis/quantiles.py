"""The marts' quantiles of a job's or a checkpoint's durations, for Python that holds the rows
itself (a trailing window, a day of the report, a post-mortem's ranks) rather than a mart to
read: :func:`quantiles` mirrors DuckDB's ``quantile_cont`` as ``checkpoint_latency.sql`` (rank
p50, p90, p99 of a checkpoint), ``job_latency.sql`` and ``tier_latency.sql`` (barrier p50, p90,
p99 over checkpoints) compute it. tests/test_one_number.py holds the two equal on the same rows.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from fractions import Fraction


def quantiles(values: Iterable[float | None], qs: Sequence[float]) -> list[float | None]:
    """The ``qs`` quantiles of ``values`` as ``quantile_cont`` computes them: linear
    interpolation between order statistics, at position ``(n - 1) × q`` of the sorted values.
    Nulls and NaN are left out; no value: None for each q.

    The interpolation is DuckDB's own arithmetic for doubles, ``lo × (1 − d) + hi × d`` with the
    first product and the sum fused (one rounding), so the doubles are the mart's to the last
    bit, not only to a tolerance."""
    xs = sorted(float(v) for v in values if v is not None and not math.isnan(v))
    if not xs:
        return [None] * len(qs)
    out: list[float | None] = []
    for q in qs:
        if not 0.0 <= q <= 1.0:
            raise ValueError(f"quantile {q} is outside [0, 1]")
        pos = (len(xs) - 1) * q
        lo, hi = math.floor(pos), math.ceil(pos)
        out.append(xs[lo] if lo == hi else _interpolate(xs[lo], pos - lo, xs[hi]))
    return out


def _interpolate(lo: float, d: float, hi: float) -> float:
    """``fma(lo, 1 - d, hi * d)``: exact products and sum, rounded once (math.fma is 3.13+)."""
    return float(Fraction(lo) * Fraction(1.0 - d) + Fraction(hi * d))
