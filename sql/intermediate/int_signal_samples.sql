-- int_signal_samples: one row per sample of an attribution signal (see int_signal_catalog),
-- counters and gauges in one long form, each with the sampling interval it closes:
-- (prev_ts, ts]. Counters carry delta / rate_per_s / reset / saturated from stg_counter_deltas;
-- gauges carry value. host = node for fabric and SMART, = target for pool telemetry. The pool's
-- interval means (write latency, metadata latency from its counters, queue) join them as gauges
-- (pool_means below).
--
-- Two table macros beside the view (a macro, not a view, so that
-- ckptwatch.lake.seam.pinned_views can have every reader read one computed table):
-- int_signal_families(): (source_table, signal, family) of every metric the catalog names
-- (its first matching rule; the list int_signal_names, found when the views are built:
-- int_signal_counters.sql); int_signal_gauge_samples(): the gauge rows of the view, each
-- sample with the interval it closes (one lag() pass over every gauge series, read by
-- stall_signals, int_signal_series() and counter_windows through this view).
create or replace macro int_signal_families() as table
with
signals as (
    select unnest(getvariable('int_signal_names')) as signal_row
),

final as (
    select
        signal_row.source_table,
        signal_row.signal,
        signal_row.family,
    from signals
)

select * from final;

create or replace macro int_signal_gauge_samples() as table
with
metric_samples as (
    select * from stg_metric_samples
),

signal_families as (
    select * from int_signal_families()
),

-- Meets the catalog (signal_families) before its lag, so only signal series travel on.
gauges as (
    select
        metric_samples.source_table,
        signal_families.family,
        metric_samples.host,
        metric_samples.device,
        metric_samples.port,
        metric_samples.pool,
        metric_samples.metric as signal,
        metric_samples.ts,
        metric_samples.value,
    from metric_samples
    inner join signal_families
        on metric_samples.source_table = signal_families.source_table
        and metric_samples.metric = signal_families.signal
    where
        metric_samples.kind = 'gauge'
        -- the signal gauges (int_signal_counters.sql) before the dedup windows; null: all
        and (
            getvariable('int_signal_gauges') is null
            or list_contains(getvariable('int_signal_gauges'), metric_samples.metric)
        )
),

gauge_intervals as (
    select
        *,
        lag(ts) over (
            partition by source_table, host, device, port, pool, signal order by ts
        ) as prev_ts,
    from gauges
),

final as (
    select
        source_table,
        family,
        signal,
        'gauge' as kind,
        host,
        device,
        port,
        pool,
        ts,
        prev_ts,
        epoch(ts - prev_ts) as interval_s,
        value,
        cast(null as double) as delta,
        cast(null as double) as rate_per_s,
        false as reset,
        false as saturated,
    from gauge_intervals
)

select * from final;

create or replace view int_signal_samples as
with
-- The deltas of the signal counters only (int_signal_counters; unset: every counter),
-- materialised or computed (int_signal_counter_deltas).
counter_deltas as (
    select * from int_signal_counter_deltas
),

signal_families as (
    select * from int_signal_families()
),

gauges as (
    select * from int_signal_gauge_samples()
),

-- The counters meet the catalog (signal_families) before the union, so only signal series
-- travel on.
counters as (
    select
        counter_deltas.source_table,
        signal_families.family,
        counter_deltas.counter as signal,
        'counter' as kind,
        counter_deltas.host,
        counter_deltas.device,
        counter_deltas.port,
        counter_deltas.pool,
        counter_deltas.ts,
        counter_deltas.prev_ts,
        counter_deltas.interval_s,
        counter_deltas.value,
        counter_deltas.delta,
        counter_deltas.rate_per_s,
        counter_deltas.reset,
        counter_deltas.saturated,
    from counter_deltas
    inner join signal_families
        on counter_deltas.source_table = signal_families.source_table
        and counter_deltas.counter = signal_families.signal
    where not counter_deltas.invalid  -- not a reading; the next sample's interval spans it
),

-- The pool's interval means (int_pool_interval_means, the one place they are computed) as
-- gauge samples of their own families: write_latency (write_latency_ms) and queue
-- (queue_depth, queue_wait_ms, active_requests) from the counters or the source's own mean;
-- metadata_latency_ms only from the counters (Δmetadata_latency_us_total /
-- Δmetadata_ops_total): a source's metadata_latency_ms gauge is a catalog signal already
-- (gauges above). The unqualified aggregate only: per-operation, per-job (.job=) and
-- block-device (.disk) rows are the pool's detail, not a second series of the target. A
-- gauge-source mean closes the interval since the series' previous reading.
pool_means_read as (
    select * from int_pool_interval_means
    where
        qualifier is null
        and value is not null
        and (source = 'counters' or signal <> 'metadata_latency_ms')
),

pool_means as (
    select
        'pool_metrics' as source_table,
        case
            when signal = 'write_latency_ms' then 'write_latency'
            when signal = 'metadata_latency_ms' then 'metadata'
            else 'queue'
        end as family,
        signal,
        'gauge' as kind,
        target as host,
        cast(null as varchar) as device,
        cast(null as varchar) as port,
        pool,
        ts,
        coalesce(prev_ts, lag(ts) over (
            partition by pool, target, signal, source order by ts
        )) as prev_ts,
        cast(null as double) as interval_s,
        value,
        cast(null as double) as delta,
        cast(null as double) as rate_per_s,
        reset,
        false as saturated,
    from pool_means_read
),

final as (
    select * from counters
    union all
    select * from gauges
    union all
    select * replace (epoch(ts - prev_ts) as interval_s) from pool_means
)

select * from final;
