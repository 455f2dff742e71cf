-- int_signal_counter_deltas: the rows of stg_counter_deltas for the attribution signal counters
-- (int_signal_counters; unset: every counter), computed once. When ckptwatch has found every day
-- read materialised and fresh (ckptwatch.lake.derived; variable counter_deltas_derived), they
-- are read from derived_counter_deltas; otherwise (and in the duckdb CLI) computed here by
-- stg_counter_deltas_of. The unused branch is not run (its filter is a constant false).
-- The materialised rows carry each series' prev across days; a pass over the days read alone
-- (lake_since) starts each series afresh. So a sample whose prev_ts is before lake_since is
-- a series' first here (prev, interval, delta, rate null; reset and wrapped false), and both
-- branches give the same rows.
create or replace view int_signal_counter_deltas as
with
computed as (
    select * from stg_counter_deltas_of(getvariable('int_signal_counters'))
    where not coalesce(getvariable('counter_deltas_derived'), false)
),

derived as (
    select
        *,
        coalesce(
            prev_ts < timezone('UTC', cast(getvariable('lake_since') as timestamp)), false
        ) as starts_before,
    from derived_counter_deltas
    where
        coalesce(getvariable('counter_deltas_derived'), false)
        and (
            getvariable('int_signal_counters') is null
            or list_contains(getvariable('int_signal_counters'), counter)
        )
),

read_days as (
    select
        source_table,
        host,
        device,
        port,
        pool,
        counter,
        series_id,
        ts,
        case when not starts_before then prev_ts end as prev_ts,
        case when not starts_before then interval_s end as interval_s,
        value,
        case when not starts_before then prev_value end as prev_value,
        case when not starts_before then delta end as delta,
        case when not starts_before then rate_per_s end as rate_per_s,
        reset and not starts_before as reset,
        wrapped and not starts_before as wrapped,
        saturated,
        invalid,
    from derived
),

final as (
    select * from computed
    union all
    select * from read_days
)

select * from final;
