-- int_pool_rank_writes: one row per rank record of the pool tier with bytes and a duration:
-- the pool it wrote to (the pool its first target belongs to in the pool telemetry, else
-- 'pool': one shared pool, unnamed) and its even write rate over (start_ts, end_ts]. What
-- pool_demand sums per second and pool_job_schedules measures per job.
create or replace view int_pool_rank_writes as
with
writes as (
    select * from stg_checkpoint_writes
    where tier = 'pool' and duration_s > 0 and bytes > 0
),

target_pools as (
    select * from stg_pool_targets()
),

final as (
    select
        coalesce(target_pools.pool, 'pool') as pool,
        writes.job_id,
        writes.step,
        writes.rank,
        writes.start_ts,
        writes.end_ts,
        writes.bytes,
        writes.bytes / writes.duration_s as rate_bps,
    from writes
    left join target_pools on target_pools.target = split_part(writes.target, ',', 1)
)

select * from final;
