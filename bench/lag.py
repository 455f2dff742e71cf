"""The bare ``lag()`` passes the benchmarks hold our counter work against: deltas and rates of
cumulative counters by ``lag()`` over the lake's Parquet, with none of our rules (no dedup of
re-sent samples, resets, wraps, saturation, catalog or windows). One definition, read by
``bench_marts.py``, ``derived.py``, ``attribution.py`` and ``run.py``.

Parameters: ``$fabric_glob`` (and ``$smart_glob`` for :data:`COUNTER_TABLES_LAG`), each a
``Lake.glob`` of its table."""

from __future__ import annotations


def _deltas(glob: str, series: str) -> str:
    """Each sample's delta and interval by ``lag()`` over the series of one table."""
    return f"""
        select
            value - lag(value) over w as delta,
            epoch(ts - lag(ts) over w) as interval_s,
        from read_parquet(${glob})
        window w as (partition by {series} order by ts)"""


def _pass(*parts: str) -> str:
    """One pass: count, summed deltas and summed rates over the parts' samples."""
    return ("select count(*), sum(delta), sum(delta / interval_s)\nfrom ("
            + "\n    union all".join(parts) + "\n)\n")


#: One pass over the fabric counters: what the derived counter deltas refresh does at its core.
FABRIC_LAG = _pass(_deltas("fabric_glob", "node, device, port, counter"))

#: One pass over every counter table (fabric counters and SMART: every metric, counters and
#: gauges alike): the work attribution cannot avoid.
COUNTER_TABLES_LAG = _pass(_deltas("fabric_glob", "node, device, port, counter"),
                           _deltas("smart_glob", "node, device, metric"))
