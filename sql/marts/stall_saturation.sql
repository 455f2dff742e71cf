-- stall_saturation: one row per pool-tier stall and pool it wrote to: how loaded the shared pool
-- was over the stall's window (the checkpoint's first rank start to its last rank end), from
-- pool_demand's seconds in it. What attribution judges the `saturation` cause on: a pool that
-- wrote at its ceiling for most of a stall's window was the bottleneck (GC, metadata and a
-- fabric pause slow the checkpoint's ranks and so the pool's throughput falls; a burst that
-- saturates the pool keeps it at the ceiling while every rank waits its turn).
-- utilisation_p75 / utilisation_median: the 75th percentile / median over the window's seconds
-- of the pool's load, max(the ranks' demand, the pool's measured write throughput) over its
-- capacity (pool_demand: configured, or estimated from the lake, capacity_source);
-- saturated_share: share of the window's seconds at or above saturation_utilisation of it.
-- demand_bytes: what the ranks of every job wrote to the pool in the window; peak_demand_bps,
-- peak_ranks: the busiest second's; n_jobs and jobs: the jobs that wrote in the window with
-- their bytes and share of demand_bytes (most first); job_share: this stall's job's share.
-- Contract: stall_saturation.contract.yml.
create or replace view stall_saturation as
with
pool_stalls as (
    select job_id, step, start_ts, end_ts
    from stalls
    where is_stall and tier = 'pool' and start_ts is not null and end_ts is not null
),

stall_pools as (
    select distinct job_id, step, pool
    from int_pool_rank_writes
    where (job_id, step) in (select (job_id, step) from pool_stalls)
),

window_seconds as (
    select
        pool_stalls.job_id,
        pool_stalls.step,
        demand.*,
        greatest(demand.demand_bps, coalesce(demand.measured_bps, 0))
        / nullif(demand.capacity_bps, 0) as load,
    from pool_stalls
    inner join stall_pools using (job_id, step)
    inner join pool_demand as demand
        on demand.pool = stall_pools.pool
        and demand.second_ts >= date_trunc('second', pool_stalls.start_ts)
        and demand.second_ts < pool_stalls.end_ts
),

per_stall as (
    select
        job_id,
        step,
        pool,
        any_value(capacity_bps) as capacity_bps,
        any_value(capacity_source) as capacity_source,
        count(*) as n_seconds,
        quantile_cont(load, 0.75) as utilisation_p75,
        median(load) as utilisation_median,
        avg(cast(load >= getvariable('saturation_utilisation') as double)) as saturated_share,
        sum(demand_bps) as demand_bytes,
        max(demand_bps) as peak_demand_bps,
        max(n_ranks) as peak_ranks,
        bool_or(measured_bps is not null) as has_measured,
    from window_seconds
    group by job_id, step, pool
),

job_bytes as (
    select
        job_id as stall_job_id,
        step,
        pool,
        entry.job_id,
        sum(entry.bytes) as bytes,
    from (select job_id, step, pool, unnest(jobs) as entry from window_seconds)
    group by all
),

job_shares as (
    select
        *,
        bytes / nullif(sum(bytes) over (partition by stall_job_id, step, pool), 0) as share,
    from job_bytes
),

jobs as (
    select
        stall_job_id as job_id,
        step,
        pool,
        count(*) as n_jobs,
        list({'job_id': job_id, 'bytes': bytes, 'share': share} order by bytes desc, job_id)
            as jobs,
    from job_shares
    group by all
)

select
    per_stall.*,
    jobs.n_jobs,
    jobs.jobs,
    list_filter(jobs.jobs, lambda j: j.job_id = per_stall.job_id)[1].share as job_share,
from per_stall
inner join jobs using (job_id, step, pool);
