-- int_signal_samples: one row per sample of an attribution signal (see int_signal_catalog),
-- counters and gauges in one long form, each with the sampling interval it closes:
-- (prev_ts, ts]. Counters carry delta / rate_per_s / reset / saturated from stg_counter_deltas;
-- gauges carry value. host = node for fabric and SMART, = target for pool telemetry.
create or replace view int_signal_samples as
with
catalog as (
    select * from int_signal_catalog
),

metric_names as (
    select * from stg_metric_names
),

counter_deltas as (
    select * from stg_counter_deltas
),

metric_samples as (
    select * from stg_metric_samples
),

gauges as (
    select
        source_table,
        host,
        device,
        port,
        pool,
        metric as signal,
        ts,
        value,
    from metric_samples
    where kind = 'gauge'
),

gauge_intervals as (
    select
        *,
        lag(ts) over (
            partition by source_table, host, device, port, pool, signal order by ts
        ) as prev_ts,
    from gauges
),

samples as (
    select
        source_table,
        host,
        device,
        port,
        pool,
        counter as signal,
        'counter' as kind,
        ts,
        prev_ts,
        interval_s,
        value,
        delta,
        rate_per_s,
        reset,
        saturated,
    from counter_deltas
    where not invalid  -- not a reading; the next sample's interval spans it
    union all
    select
        source_table,
        host,
        device,
        port,
        pool,
        signal,
        'gauge' as kind,
        ts,
        prev_ts,
        epoch(ts - prev_ts) as interval_s,
        value,
        cast(null as double) as delta,
        cast(null as double) as rate_per_s,
        false as reset,
        false as saturated,
    from gauge_intervals
),

signal_families as (
    select
        metric_names.source_table,
        metric_names.metric as signal,
        arg_min(catalog.family, catalog.rule_order) as family,
    from metric_names
    inner join catalog
        on metric_names.source_table = catalog.source_table
        and regexp_full_match(metric_names.metric, catalog.signal_pattern)
    group by metric_names.source_table, metric_names.metric
),

final as (
    select
        samples.source_table,
        signal_families.family,
        samples.signal,
        samples.kind,
        samples.host,
        samples.device,
        samples.port,
        samples.pool,
        samples.ts,
        samples.prev_ts,
        samples.interval_s,
        samples.value,
        samples.delta,
        samples.rate_per_s,
        samples.reset,
        samples.saturated,
    from samples
    inner join signal_families using (source_table, signal)
)

select * from final;
