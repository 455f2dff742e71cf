-- pool_demand: one row per (pool, second) in which checkpoint ranks wrote to a shared pool: the
-- aggregate write demand the rank records put on it, who made it, and what the pool measured.
-- A rank's record writes its bytes at an even rate over (start_ts, end_ts] (int_pool_rank_writes,
-- with the pool of its first target); the records are summed per second on a common time base
-- (each rank's share of each second it spans; never by equal timestamps).
-- demand_bps: bytes the ranks wrote in that second (= bytes/s); n_ranks: ranks writing in it;
-- n_jobs and jobs (job_id, bytes, share of the second's bytes, stalled: a stalled checkpoint
-- of the job was being written then), most first; n_stalled_jobs of them.
-- measured_bps: the pool's own write throughput in that second (pool telemetry write_bytes:
-- each target's rate over the interval covering the second, summed), write_latency_ms and
-- queue_depth (the mean over targets of the interval means covering it: int_pool_interval_means);
-- null without pool telemetry.
-- capacity_bps and capacity_source: the pool's write bandwidth, 'configured' (the session
-- variable pool_write_bandwidth, a list of {pool, gbs}: ckptwatch sets it from [pool]
-- write_bandwidth_gbs), else estimated from the lake: 'telemetry' (the 99th percentile of
-- measured_bps over the seconds whose write latency was under twice the pool's median: the
-- throughput it reached while healthy) or 'records' (the 99th percentile of demand_bps: what
-- the ranks reached), whichever is higher (the pool took at least what the ranks wrote). An
-- estimate is the most the pool was seen to take, so its busiest seconds sit near 1 by
-- construction: configure the bandwidth to judge saturation against the pool's real limit.
-- utilisation = demand_bps / capacity_bps; is_saturated: at or above saturation_utilisation
-- (sql/session.sql) of it.
-- Contract: pool_demand.contract.yml.
create or replace view pool_demand as
with
rank_rates as (
    select * from int_pool_rank_writes
),

-- A job's write rate on a pool as a step function: +rate at each start, -rate at each end.
events as (
    select pool, job_id, start_ts as ts, rate_bps as d_rate, 1 as d_ranks from rank_rates
    union all
    select pool, job_id, end_ts as ts, -rate_bps as d_rate, -1 as d_ranks from rank_rates
),

steps as (
    select
        pool,
        job_id,
        ts,
        sum(d_rate) as d_rate,
        sum(d_ranks) as d_ranks,
    from events
    group by pool, job_id, ts
),

segments as (
    select
        pool,
        job_id,
        ts,
        lead(ts) over job_time as next_ts,
        sum(d_rate) over (job_time rows unbounded preceding) as rate_bps,
        sum(d_ranks) over (job_time rows unbounded preceding) as n_ranks,
    from steps
    window job_time as (partition by pool, job_id order by ts)
),

-- Each segment split at the seconds it spans: its bytes in each (rate x overlap).
segment_seconds as (
    select
        pool,
        job_id,
        rate_bps,
        n_ranks,
        epoch_us(ts) as from_us,
        epoch_us(next_ts) as to_us,
        unnest(range(epoch_us(ts) // 1000000, (epoch_us(next_ts) - 1) // 1000000 + 1)) as second,
    from segments
    where n_ranks > 0 and next_ts > ts
),

job_seconds as (
    select
        pool,
        second,
        job_id,
        sum(rate_bps * (least(to_us, (second + 1) * 1000000)
            - greatest(from_us, second * 1000000)) / 1e6) as bytes,
        max(n_ranks) as n_ranks,
    from segment_seconds
    group by pool, second, job_id
),

stall_windows as (
    select job_id, epoch_us(start_ts) // 1000000 as from_second,
        (epoch_us(end_ts) - 1) // 1000000 as to_second,
    from stalls
    where is_stall
),

-- A job's second is stalled when one of its stalled checkpoints was being written then.
job_shares as (
    select
        job_seconds.*,
        job_seconds.bytes / nullif(sum(job_seconds.bytes) over (
            partition by job_seconds.pool, job_seconds.second
        ), 0) as share,
        exists (
            select 1 from stall_windows
            where stall_windows.job_id = job_seconds.job_id
                and job_seconds.second between stall_windows.from_second
                and stall_windows.to_second
        ) as is_stalled,
    from job_seconds
),

seconds as (
    select
        pool,
        make_timestamptz(second * 1000000) as second_ts,
        sum(bytes) as demand_bps,
        sum(n_ranks) as n_ranks,
        count(*) as n_jobs,
        list({'job_id': job_id, 'bytes': bytes, 'share': share, 'stalled': is_stalled}
            order by bytes desc, job_id) as jobs,
        count(*) filter (where is_stalled) as n_stalled_jobs,
    from job_shares
    group by pool, second
),

-- The pool's own readings: each target's write rate (its write_bytes counter), write latency
-- and queue depth over the interval (prev_ts, ts] covering a second.
pool_rates as (
    select pool, host as target, prev_ts, ts, signal, coalesce(rate_per_s, value) as value
    from int_signal_samples
    where
        source_table = 'pool_metrics'
        and signal in ('write_bytes', 'write_latency_ms', 'queue_depth')
        and prev_ts is not null
        and coalesce(rate_per_s, value) is not null
),

measured as (
    select
        seconds.pool,
        seconds.second_ts,
        sum(pool_rates.value) filter (where pool_rates.signal = 'write_bytes') as measured_bps,
        avg(pool_rates.value) filter (where pool_rates.signal = 'write_latency_ms')
            as write_latency_ms,
        avg(pool_rates.value) filter (where pool_rates.signal = 'queue_depth') as queue_depth,
    from seconds
    inner join pool_rates
        on pool_rates.pool = seconds.pool
        and pool_rates.prev_ts < seconds.second_ts + interval 1 second
        and pool_rates.ts > seconds.second_ts
    group by seconds.pool, seconds.second_ts
),

observed as (
    select
        seconds.*,
        measured.measured_bps,
        measured.write_latency_ms,
        measured.queue_depth,
    from seconds
    left join measured using (pool, second_ts)
),

configured as (
    select
        entry.pool,
        entry.gbs * 1e9 as capacity_bps,
    from (select unnest(getvariable('pool_write_bandwidth')) as entry)
),

healthy_latency as (
    select
        pool,
        2 * median(write_latency_ms) as limit_ms,
    from observed
    group by pool
),

estimated as (
    select
        observed.pool,
        quantile_cont(observed.measured_bps, 0.99) filter (
            where observed.write_latency_ms is null
            or observed.write_latency_ms <= healthy_latency.limit_ms
        ) as telemetry_bps,
        quantile_cont(observed.demand_bps, 0.99) as records_bps,
    from observed
    left join healthy_latency using (pool)
    group by observed.pool
),

capacities as (
    select
        estimated.pool,
        coalesce(configured.capacity_bps,
            greatest(estimated.telemetry_bps, estimated.records_bps)) as capacity_bps,
        case
            when configured.capacity_bps is not null then 'configured'
            when estimated.telemetry_bps >= estimated.records_bps then 'telemetry'
            else 'records'
        end as capacity_source,
    from estimated
    left join configured using (pool)
),

final as (
    select
        observed.pool,
        observed.second_ts,
        observed.demand_bps,
        cast(observed.n_ranks as bigint) as n_ranks,
        observed.n_jobs,
        observed.jobs,
        observed.measured_bps,
        observed.write_latency_ms,
        observed.queue_depth,
        capacities.capacity_bps,
        capacities.capacity_source,
        observed.demand_bps / nullif(capacities.capacity_bps, 0) as utilisation,
        coalesce(observed.demand_bps >= getvariable('saturation_utilisation')
            * capacities.capacity_bps, false) as is_saturated,
        observed.n_stalled_jobs,
    from observed
    inner join capacities using (pool)
)

-- is_stalled: a stalled checkpoint was being written in the second; is_stalled_saturated:
-- and the second was saturated (the seconds pool_bursts and the daily report count).
select
    *,
    n_stalled_jobs > 0 as is_stalled,
    n_stalled_jobs > 0 and is_saturated as is_stalled_saturated,
from final;
