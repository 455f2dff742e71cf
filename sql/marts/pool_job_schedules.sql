-- pool_job_schedules: one row per (pool, job) that checkpoints to a shared pool: its schedule as
-- measured, what `ckptwatch plan stagger` spreads. From the job's pool-tier rank records
-- (int_pool_rank_writes): n_checkpoints; interval_s, the median gap between its consecutive
-- checkpoints' starts; duration_s, the median time from a checkpoint's first rank start to its
-- last rank end (its write window); bytes, the median bytes a checkpoint writes; rate_bps =
-- bytes / duration_s, its demand while it writes; last_start_ts, its latest checkpoint's start
-- (the phase the advice shifts); jitter_s, how far a checkpoint's start strays from the schedule
-- (the 90th percentile of |gap - interval_s|: two jobs nearer than that meet now and then).
-- barrier_p50_s / barrier_p99_s: job_latency's (the one place
-- they are computed). The pool's capacity as pool_demand has it.
-- Contract: pool_job_schedules.contract.yml.
create or replace view pool_job_schedules as
with
checkpoints as (
    select
        pool,
        job_id,
        step,
        min(start_ts) as start_ts,
        max(end_ts) as end_ts,
        sum(bytes) as bytes,
    from int_pool_rank_writes
    group by pool, job_id, step
),

gaps as (
    select
        *,
        epoch(start_ts - lag(start_ts) over (partition by pool, job_id order by start_ts))
            as gap_s,
    from checkpoints
),

intervals as (
    select pool, job_id, median(gap_s) as interval_s,
    from gaps
    group by pool, job_id
),

schedules as (
    select
        pool,
        job_id,
        count(*) as n_checkpoints,
        median(gap_s) as interval_s,
        coalesce(quantile_cont(abs(gap_s - intervals.interval_s), 0.9), 0) as jitter_s,
        median(epoch(end_ts - start_ts)) as duration_s,
        median(bytes) as bytes,
        max(start_ts) as last_start_ts,
    from gaps
    inner join intervals using (pool, job_id)
    group by pool, job_id
),

latency as (
    select job_id, barrier_p50_s, barrier_p99_s from job_latency where tier = 'pool'
),

capacities as (
    select pool, any_value(capacity_bps) as capacity_bps,
        any_value(capacity_source) as capacity_source,
    from pool_demand
    group by pool
),

final as (
    select
        schedules.pool,
        schedules.job_id,
        schedules.n_checkpoints,
        schedules.interval_s,
        schedules.duration_s,
        schedules.bytes,
        schedules.bytes / nullif(schedules.duration_s, 0) as rate_bps,
        schedules.last_start_ts,
        schedules.jitter_s,
        latency.barrier_p50_s,
        latency.barrier_p99_s,
        capacities.capacity_bps,
        capacities.capacity_source,
    from schedules
    left join latency using (job_id)
    left join capacities using (pool)
    where schedules.n_checkpoints >= 2 and schedules.duration_s > 0
)

select * from final;
