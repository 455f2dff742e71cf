"""The bare ``lag()`` passes the benchmarks hold our counter work against: deltas and rates of
cumulative counters by ``lag()`` over the lake's Parquet, with none of our rules (no dedup of
re-sent samples, resets, wraps, saturation, catalog or windows). One definition, read by
``bench_marts.py``, ``derived.py``, ``attribution.py`` and ``run.py``.

Parameters: ``$fabric_glob`` (and ``$smart_glob`` for :data:`COUNTER_TABLES_LAG`), each a
``Lake.glob`` of its table."""

from __future__ import annotations

#: One pass over the fabric counters: what the derived counter deltas refresh does at its core.
FABRIC_LAG = """
    select count(*), sum(delta), sum(delta / interval_s)
    from (
        select
            value - lag(value) over w as delta,
            epoch(ts - lag(ts) over w) as interval_s,
        from read_parquet($fabric_glob)
        window w as (partition by node, device, port, counter order by ts)
    )
"""

#: One pass over every counter table (fabric counters and SMART: every metric, counters and
#: gauges alike): the work attribution cannot avoid.
COUNTER_TABLES_LAG = """
    select count(*), sum(delta), sum(delta / interval_s)
    from (
        select
            value - lag(value) over w as delta,
            epoch(ts - lag(ts) over w) as interval_s,
        from read_parquet($fabric_glob)
        window w as (partition by node, device, port, counter order by ts)
        union all
        select
            value - lag(value) over w as delta,
            epoch(ts - lag(ts) over w) as interval_s,
        from read_parquet($smart_glob)
        window w as (partition by node, device, metric order by ts)
    )
"""
