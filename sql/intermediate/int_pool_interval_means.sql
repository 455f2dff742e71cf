-- int_pool_interval_means: one row per (pool, target, signal, qualifier, ts): the pool's write
-- latency, metadata latency and queue as means over each interval between two readings, the
-- per-target series attribution reads. The one place they are computed.
-- signal: a gauge of the pool vocabulary (stg_pool_vocabulary.mean_metric): write_latency_ms,
-- metadata_latency_ms (ms), queue_depth, active_requests (requests), queue_wait_ms (ms).
-- qualifier: the metric's text after its first dot (open, disk, job=1234) or null; job_id: the
-- job of a `job=` qualifier (Lustre job_stats), else null.
-- source:
--   counters  a cumulative sum over its count (write_latency_us_total / write_ops, …; the
--             pairs are stg_pool_vocabulary.per_metric): value = Δsum / Δcount x scale over
--             the interval (prev_ts, ts], samples = Δcount. The deltas follow the lake's counter
--             rules (counter_deltas_over, stg_counter_deltas): a drop is a reset (a cleared
--             Lustre stats file), the increase then counted from 0. value is null when the
--             interval had no operation (samples 0), when the two counters' intervals differ
--             (one missed a reading) or only one of them was reset, or a delta is unknown.
--   gauge     a source's own mean (write_latency_ms, …) as read; samples and prev_ts null.
-- max_value: the highest latency in the interval, where the source gives it: a counters row
-- takes the peak since the counters started (write_latency_peak_ms, Lustre's max) when it rose
-- in the interval, or, after a reset, the peak since the clear; a gauge row takes the source's
-- interval max (write_latency_max_ms). Otherwise null: the interval's max is not known.
create or replace view int_pool_interval_means as
with
vocabulary as (
    select * from stg_pool_vocabulary
),

pool_samples as (
    select
        *,
        split_part(metric, '.', 1) as base_metric,
        nullif(substr(metric, length(split_part(metric, '.', 1)) + 2), '') as qualifier,
    from stg_metric_samples
    where source_table = 'pool_metrics'
),

paired_names as (
    select metric as base_metric from vocabulary where per_metric is not null
    union
    select per_metric as base_metric from vocabulary where per_metric is not null
),

pool_counters as (
    select
        source_table,
        host,
        device,
        port,
        pool,
        metric as counter,
        ts,
        value,
        cast(0 as hugeint) as version,
        false as is_carry,
    from pool_samples
    where
        kind = 'counter'
        and base_metric in (select base_metric from paired_names)
),

deltas as (
    select
        *,
        split_part(counter, '.', 1) as base_metric,
        nullif(substr(counter, length(split_part(counter, '.', 1)) + 2), '') as qualifier,
    from counter_deltas_over('pool_counters')
),

sums as (
    select
        deltas.*,
        vocabulary.per_metric,
        vocabulary.mean_metric,
        vocabulary.scale,
    from deltas
    inner join vocabulary
        on deltas.base_metric = vocabulary.metric
        and vocabulary.per_metric is not null
),

from_counters as (
    select
        sums.ts,
        sums.prev_ts,
        sums.interval_s,
        sums.pool,
        sums.host as target,
        sums.mean_metric as signal,
        sums.qualifier,
        'counters' as source,
        counts.delta as samples,
        case
            when counts.prev_ts is distinct from sums.prev_ts then null
            when counts.reset != sums.reset then null
            when counts.delta > 0 then sums.delta / counts.delta * sums.scale
        end as value,
        sums.reset or counts.reset as reset,
    from sums
    inner join deltas as counts
        on counts.pool = sums.pool
        and counts.host = sums.host
        and counts.ts = sums.ts
        and counts.base_metric = sums.per_metric
        and counts.qualifier is not distinct from sums.qualifier
    where sums.prev_ts is not null
),

peaks as (
    select
        pool_samples.pool,
        pool_samples.host as target,
        vocabulary.peak_of as signal,
        pool_samples.qualifier,
        pool_samples.ts,
        pool_samples.value,
        lag(pool_samples.value) over (
            partition by pool_samples.pool, pool_samples.host, pool_samples.metric
            order by pool_samples.ts
        ) as prev_value,
    from pool_samples
    inner join vocabulary
        on pool_samples.base_metric = vocabulary.metric
        and vocabulary.peak_of is not null
),

interval_maxima as (
    select
        pool_samples.pool,
        pool_samples.host as target,
        vocabulary.max_of as signal,
        pool_samples.qualifier,
        pool_samples.ts,
        pool_samples.value,
    from pool_samples
    inner join vocabulary
        on pool_samples.base_metric = vocabulary.metric
        and vocabulary.max_of is not null
),

from_gauges as (
    select
        pool_samples.ts,
        cast(null as timestamptz) as prev_ts,
        cast(null as double) as interval_s,
        pool_samples.pool,
        pool_samples.host as target,
        pool_samples.base_metric as signal,
        pool_samples.qualifier,
        'gauge' as source,
        cast(null as double) as samples,
        pool_samples.value,
        false as reset,
    from pool_samples
    where
        pool_samples.kind = 'gauge'
        and pool_samples.base_metric in (
            select mean_metric from vocabulary where mean_metric is not null
        )
),

counters_with_max as (
    select
        from_counters.*,
        case
            when from_counters.reset then peaks.value
            when peaks.value > peaks.prev_value then peaks.value
        end as max_value,
    from from_counters
    left join peaks
        on peaks.pool = from_counters.pool
        and peaks.target = from_counters.target
        and peaks.signal = from_counters.signal
        and peaks.qualifier is not distinct from from_counters.qualifier
        and peaks.ts = from_counters.ts
),

gauges_with_max as (
    select
        from_gauges.*,
        interval_maxima.value as max_value,
    from from_gauges
    left join interval_maxima
        on interval_maxima.pool = from_gauges.pool
        and interval_maxima.target = from_gauges.target
        and interval_maxima.signal = from_gauges.signal
        and interval_maxima.qualifier is not distinct from from_gauges.qualifier
        and interval_maxima.ts = from_gauges.ts
),

final as (
    select
        ts,
        prev_ts,
        interval_s,
        pool,
        target,
        signal,
        qualifier,
        case when starts_with(qualifier, 'job=') then substr(qualifier, 5) end as job_id,
        source,
        samples,
        value,
        max_value,
        reset,
    from counters_with_max
    union all by name
    select
        ts,
        prev_ts,
        interval_s,
        pool,
        target,
        signal,
        qualifier,
        case when starts_with(qualifier, 'job=') then substr(qualifier, 5) end as job_id,
        source,
        samples,
        value,
        max_value,
        reset,
    from gauges_with_max
)

select * from final;
