-- stg_counter_deltas: one row per sample of a cumulative counter, with the increase since the
-- previous sample of the same series and its rate. The one place counter deltas are computed
-- (there is no Python twin: notebooks and tests query this view).
-- Series: fabric_counters (host = node, device, port, counter), nvme_smart counters
-- (host = node, device, counter = metric) and pool_metrics counters (host = target,
-- pool, counter = metric); gauges are not here (read stg_nvme_smart / stg_pool_metrics).
-- Each counter's saturate_at / wrap_at come from stg_metric_names (the one list of limits).
-- Rules, per series ordered by ts; prev = the last valid (value >= 0) sample before this one:
--   first valid sample of a series   prev_ts, prev_value, interval_s, delta, rate_per_s null
--   value < 0                        not a reading (a cumulative counter cannot go below 0; a
--                                    tool printed a wrapped signed number): invalid = true,
--                                    delta null; the next sample is measured from prev
--   value = saturate_at              saturated = true, delta null: the counter stopped at its
--                                    ceiling (legacy InfiniBand: 2^32-1, 2^16-1, 2^8-1; any
--                                    other fabric counter at exactly 2^32-1), the increase is
--                                    unknown, never 0; reset and wrapped false
--   cur >= prev                      delta = cur - prev
--   cur < prev, wrap_at known and    wrap: delta = wrap_at - prev + cur; wrapped = true
--     prev - cur > wrap_at / 2       (mlx5 queue counters wrap at 2^32, other fabric 2^64)
--   any other cur < prev             reset (driver reload, reboot, perfquery -R): the counter
--                                    restarted from 0, so delta = cur; reset = true. This
--                                    includes the first sample below the ceiling after a
--                                    saturated one: a legacy counter holds its ceiling until
--                                    it is cleared, so delta = cur (counted since the clear)
-- A reset that leaves the value above prev cannot be told from traffic (as in Prometheus'
-- increase). rate_per_s = delta / interval_s, in the counter's own unit per second. Deltas and
-- rates are never negative. Values are double: counts above 2^53 lose precision.
-- The rules live in one table macro, stg_counter_deltas_of(counters): counters is a list of
-- counter names to compute (null: every counter). The view is the macro over every counter;
-- int_signal_samples calls it with the attribution signals only, so the name filter runs before
-- the dedup and this window, in the Parquet scan, instead of after them (a 512-node day: 24 M
-- of 37 M rows).
-- Three macros, one rule set: stg_counter_samples(counters) gathers the samples (is_carry
-- false); counter_deltas_over(sample_relation) applies the rules to the rows of a relation of
-- the caller (query_table) and leaves out its carry rows (is_carry true: a series' last valid
-- sample before the rows, which only serves as their prev); stg_counter_deltas_of(counters) is
-- the two over the lake. ckptwatch.lake.derived computes a day at a time with the previous
-- day's last samples as carry rows: the same rows as one pass over every day.
create or replace macro stg_counter_samples(counters) as table
with
fabric as (
    select *
    from stg_fabric_counters
    where counters is null or list_contains(counters, counter)
),

metric_samples as (
    select * from stg_metric_samples
),

samples as (
    select
        'fabric_counters' as source_table,
        node as host,
        device,
        port,
        cast(null as varchar) as pool,
        counter,
        ts,
        value,
    from fabric
    union all
    select
        source_table,
        host,
        device,
        port,
        pool,
        metric as counter,
        ts,
        value,
    from metric_samples
    where kind = 'counter' and (counters is null or list_contains(counters, metric))
),

final as (
    select
        *,
        false as is_carry,
    from samples
)

select * from final;

create or replace macro counter_deltas_over(sample_relation) as table
with
samples as (
    select * from query_table(sample_relation)
),

metric_names as (
    select * from stg_metric_names
),

keyed as (
    select
        hash(source_table, host, device, port, pool, counter) as series_id,
        *,
    from samples
),

-- A series is told apart by series_id, a 64-bit hash of its key (source_table, host, device,
-- port, pool, counter): partitioning by an integer instead of six strings halves the cost of
-- this 35 M-row step. Two series could only mix if their keys shared a hash: with 100 k series
-- the chance is about 3e-10 (DuckDB has a fast path for one integer partition key: adding
-- source_table and counter as keys makes this step 3x slower).
sequenced as (
    select
        *,
        lag(case when value >= 0 then ts end ignore nulls) over series as prev_ts,
        lag(case when value >= 0 then value end ignore nulls) over series as prev_value,
    from keyed
    window series as (
        partition by series_id
        order by ts
    )
),

limited as (
    select
        sequenced.*,
        metric_names.saturate_at,
        metric_names.wrap_at,
    from sequenced
    left join metric_names
        on sequenced.source_table = metric_names.source_table
        and sequenced.counter = metric_names.metric
),

classified as (
    select
        *,
        value < 0 as invalid,
        coalesce(value = saturate_at, false) as saturated,
        prev_value is not null and value >= 0 and value < prev_value as dropped,
    from limited
),

kinds_of_drop as (
    select
        *,
        dropped and not saturated
            and coalesce(prev_value - value > wrap_at / 2, false) as wrapped,
    from classified
),

deltas as (
    select
        *,
        dropped and not saturated and not wrapped as reset,
        case
            when prev_value is null or invalid or saturated then null
            when wrapped then wrap_at - prev_value + value
            when dropped then value
            else value - prev_value
        end as delta,
        epoch(ts - prev_ts) as interval_s,
    from kinds_of_drop
),

final as (
    select
        source_table,
        host,
        device,
        port,
        pool,
        counter,
        series_id,
        ts,
        prev_ts,
        interval_s,
        value,
        prev_value,
        delta,
        delta / nullif(interval_s, 0) as rate_per_s,
        reset,
        wrapped,
        saturated,
        invalid,
    from deltas
    where not is_carry
)

select * from final;

create or replace macro stg_counter_deltas_of(counters) as table
with
samples as (
    select * from stg_counter_samples(counters)
)

select * from counter_deltas_over('samples');

create or replace view stg_counter_deltas as
select * from stg_counter_deltas_of(null);
