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
-- The macros, one rule set: stg_counter_samples(counters) gathers the samples (is_carry false;
-- fabric samples not yet deduplicated, each with its version: stg_fabric_counter_versions);
-- counter_deltas_by_series(sample_relation) applies the rules to the rows of a relation of the
-- caller (query_table) and leaves out its carry rows (is_carry true: a series' last valid
-- sample before the rows, which only serves as their prev), keyed by series_id alone;
-- counter_series_of(sample_relation) is each series' key; counter_deltas_over(sample_relation)
-- joins the two; stg_counter_deltas_of(counters) is that over the lake.
-- ckptwatch.lake.derived computes a day at a time with the previous day's last samples as carry
-- rows (the same rows as one pass over every day), and stores the rows by series_id and the
-- keys once per series (counter_deltas_by_series and counter_series_of).
-- Re-sent samples (same series and ts) are deduplicated in the one window pass over the
-- samples, not by a group-by before it: the pass finds them (the next sample of the series has
-- the same ts), and a series holding any (rare: a file ingested twice) is recomputed from its
-- samples deduplicated as stg_fabric_counters does (the highest version wins); every other
-- series takes the window pass as it is (no sample of it is dropped, so its rows are the same).
create or replace macro counter_series_id(source_table, host, device, port, pool, counter) as
    hash(source_table, host, device, port, pool, counter);

create or replace macro stg_counter_samples(counters) as table
with
fabric as (
    select *
    from stg_fabric_counter_versions()
    where counters is null or list_contains(counters, counter)
),

-- SMART counters before their dedup, each with its version (the window pass below dedups
-- them, as the fabric's); pool telemetry deduplicated already (stg_metric_samples).
smart as (
    select smart_versions.*
    from stg_nvme_smart_versions() as smart_versions
    inner join stg_metric_names as metric_names
        on metric_names.source_table = 'nvme_smart'
        and smart_versions.metric = metric_names.metric
    where
        metric_names.kind = 'counter'
        and (counters is null or list_contains(counters, smart_versions.metric))
),

-- SMART (each sample with its version) and pool counters (deduplicated already: version 0),
-- in the long form.
metric_samples as (
    select * from smart_as_samples('smart')
    union all by name
    select
        *,
        cast(0 as hugeint) as version,
    from stg_metric_samples
    where
        source_table = 'pool_metrics'
        and kind = 'counter'
        and (counters is null or list_contains(counters, metric))
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
        version,
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
        version,
    from metric_samples
),

final as (
    select
        *,
        false as is_carry,
    from samples
)

select * from final;

create or replace macro counter_series_of(sample_relation) as table
with
samples as (
    select * from query_table(sample_relation)
),

final as (
    select
        counter_series_id(source_table, host, device, port, pool, counter) as series_id,
        any_value(source_table) as source_table,
        any_value(host) as host,
        any_value(device) as device,
        any_value(port) as port,
        any_value(pool) as pool,
        any_value(counter) as counter,
    from samples
    where not is_carry
    group by series_id
)

select * from final;

create or replace macro counter_deltas_by_series(sample_relation) as table
with
samples as (
    select * from query_table(sample_relation)
),

metric_names as (
    select
        hash(source_table, metric) as limit_key,
        saturate_at,
        wrap_at,
    from stg_metric_names
),

-- limit_key: (source_table, counter) as one integer, so the window carries no string.
keyed as (
    select
        counter_series_id(source_table, host, device, port, pool, counter) as series_id,
        hash(source_table, counter) as limit_key,
        ts,
        value,
        coalesce(version, 0) as version,  -- a carry row has none (arg_max skips a null key)
        is_carry,
    from samples
),

-- A series is told apart by series_id, a 64-bit hash of its key (source_table, host, device,
-- port, pool, counter): partitioning by an integer instead of six strings halves the cost of
-- this 35 M-row step. Two series could only mix if their keys shared a hash: with 100 k series
-- the chance is about 3e-10 (DuckDB has a fast path for one integer partition key: adding
-- source_table and counter as keys makes this step 3x slower).
-- The one pass: prev as below, and next_ts to find re-sent samples (the order among samples of
-- one ts does not matter: their series is recomputed below, so version is not a sort key).
sequenced as (
    select
        series_id,
        limit_key,
        ts,
        value,
        version,
        is_carry,
        lead(ts) over series as next_ts,
        lag(case when value >= 0 then ts end ignore nulls) over series as prev_ts,
        lag(case when value >= 0 then value end ignore nulls) over series as prev_value,
    from keyed
    window series as (
        partition by series_id
        order by ts
    )
),

resent_series as (
    select distinct series_id
    from sequenced
    where next_ts = ts
),

single_series as (
    select * exclude (version, next_ts)
    from sequenced
    where series_id not in (select series_id from resent_series)
),

-- A series with re-sent samples: each (ts, carry or not) keeps its highest version's value
-- (stg_fabric_counters' rule), then the same lag() as above. Read from sequenced, not keyed:
-- the samples are then read once (two readers would materialise them, strings and all).
resent_samples as (
    select
        series_id,
        is_carry,
        ts,
        any_value(limit_key) as limit_key,
        arg_max(value, version) as value,
    from sequenced
    where series_id in (select series_id from resent_series)
    group by series_id, is_carry, ts
),

resent_sequenced as (
    select
        series_id,
        limit_key,
        ts,
        value,
        is_carry,
        lag(case when value >= 0 then ts end ignore nulls) over series as prev_ts,
        lag(case when value >= 0 then value end ignore nulls) over series as prev_value,
    from resent_samples
    window series as (
        partition by series_id
        order by ts
    )
),

all_sequenced as (
    select * from single_series
    union all by name
    select * from resent_sequenced
),

limited as (
    select
        all_sequenced.*,
        metric_names.saturate_at,
        metric_names.wrap_at,
    from all_sequenced
    left join metric_names
        on all_sequenced.limit_key = metric_names.limit_key
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
        epoch_us(ts) - epoch_us(prev_ts) as interval_us,
    from kinds_of_drop
),

-- interval_s: interval_seconds (sql/session.sql), the formula derived_counter_deltas reads too.
intervals as (
    select
        *,
        interval_seconds(interval_us) as interval_s,
    from deltas
),

final as (
    select
        series_id,
        ts,
        prev_ts,
        interval_s,
        value,
        prev_value,
        delta,
        counter_rate(delta, interval_us) as rate_per_s,
        reset,
        wrapped,
        saturated,
        invalid,
        interval_us,  -- what ckptwatch.lake.derived stores in place of prev_ts and interval_s
    from intervals
    where not is_carry
)

select * from final;

create or replace macro counter_deltas_over(sample_relation) as table
with
deltas as (
    select * from counter_deltas_by_series(sample_relation)
),

series as (
    select * from counter_series_of(sample_relation)
),

final as (
    select
        series.source_table,
        series.host,
        series.device,
        series.port,
        series.pool,
        series.counter,
        deltas.series_id,
        deltas.ts,
        deltas.prev_ts,
        deltas.interval_s,
        deltas.value,
        deltas.prev_value,
        deltas.delta,
        deltas.rate_per_s,
        deltas.reset,
        deltas.wrapped,
        deltas.saturated,
        deltas.invalid,
    from deltas
    inner join series
        on deltas.series_id = series.series_id
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
