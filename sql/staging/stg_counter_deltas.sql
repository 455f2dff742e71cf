-- stg_counter_deltas: one row per sample of a cumulative counter, with the increase since the
-- previous sample of the same series and its rate. The one place counter deltas are computed.
-- Series: fabric_counters (host = node, device, port, counter), nvme_smart counters
-- (host = node, device, counter = metric) and pool_metrics counters (host = target,
-- pool, counter = metric); gauges are not here (read stg_nvme_smart / stg_pool_metrics).
-- Rules, per series ordered by ts:
--   cur >= prev                     delta = cur - prev
--   cur <  prev                     reset (driver reload, reboot, counter cleared): the counter
--                                   restarted from 0, so delta = cur; reset = true
--   fabric value = 4294967295       a legacy 32-bit InfiniBand counter stuck at 2^32-1:
--                                   saturated = true, delta null (unknown traffic, not zero)
--   value < 0                       not a reading (a cumulative counter cannot go below 0; a
--                                   tool printed a wrapped signed number): invalid = true,
--                                   delta null, and the next sample's delta is taken from the
--                                   last valid sample
--   first sample of a series        delta, interval_s and rate_per_s null
-- rate_per_s = delta / interval_s, in the counter's own unit per second.
create or replace view stg_counter_deltas as
with
fabric as (
    select * from stg_fabric_counters
),

smart as (
    select * from stg_nvme_smart
),

pool as (
    select * from stg_pool_metrics
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
        value = 4294967295 as saturated,
    from fabric
    union all
    select
        'nvme_smart' as source_table,
        node as host,
        device,
        cast(null as varchar) as port,
        cast(null as varchar) as pool,
        metric as counter,
        ts,
        value,
        false as saturated,
    from smart
    where kind = 'counter'
    union all
    select
        'pool_metrics' as source_table,
        target as host,
        cast(null as varchar) as device,
        cast(null as varchar) as port,
        pool,
        metric as counter,
        ts,
        value,
        false as saturated,
    from pool
    where kind = 'counter'
),

sequenced as (
    select
        *,
        lag(case when value >= 0 then ts end ignore nulls) over series as prev_ts,
        lag(case when value >= 0 then value end ignore nulls) over series as prev_value,
    from samples
    window series as (
        partition by source_table, host, device, port, pool, counter
        order by ts
    )
),

deltas as (
    select
        *,
        value < 0 as invalid,
        prev_value is not null and value >= 0 and value < prev_value as reset,
        case
            when prev_value is null or saturated or value < 0 then null
            when value >= prev_value then value - prev_value
            else value
        end as delta,
        epoch(ts - prev_ts) as interval_s,
    from sequenced
),

final as (
    select
        source_table,
        host,
        device,
        port,
        pool,
        counter,
        ts,
        prev_ts,
        interval_s,
        value,
        prev_value,
        delta,
        delta / nullif(interval_s, 0) as rate_per_s,
        reset,
        saturated,
        invalid,
    from deltas
)

select * from final;
