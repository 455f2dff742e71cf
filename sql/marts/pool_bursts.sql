-- pool_bursts: one row per correlated burst on a shared pool: a period in which two or more
-- jobs wrote checkpoints to the same pool (pool_demand seconds with n_jobs >= 2, gaps of up to
-- burst_gap_s joined, sql/session.sql). Per burst: its time, the jobs and each one's bytes and
-- share, the ranks at its peak, the bytes written, the peak and mean demand against the pool's
-- capacity (and where that comes from), the seconds at or above saturation_utilisation of it,
-- and the stall seconds: seconds in which a stalled checkpoint of a job of the burst was being
-- written (stalled_saturated_s: of those, the saturated ones).
-- Contract: pool_bursts.contract.yml.
create or replace view pool_bursts as
with
demand as (
    select * from pool_demand
),

overlapping as (
    select *
    from demand
    where n_jobs >= 2
),

-- A new burst starts where the previous overlapping second is more than burst_gap_s back.
numbered as (
    select
        *,
        sum(case when epoch(second_ts - previous_ts) is null
            or epoch(second_ts - previous_ts) > getvariable('burst_gap_s') + 1
            then 1 else 0 end) over (partition by pool order by second_ts) as burst_no,
    from (
        select *, lag(second_ts) over (partition by pool order by second_ts) as previous_ts
        from overlapping
    )
),

job_bytes as (
    select
        pool,
        burst_no,
        job.job_id,
        sum(job.bytes) as bytes,
    from (select pool, burst_no, unnest(jobs) as job from numbered)
    group by pool, burst_no, job.job_id
),

job_shares as (
    select
        *,
        bytes / nullif(sum(bytes) over (partition by pool, burst_no), 0) as share,
    from job_bytes
),

burst_jobs as (
    select
        pool,
        burst_no,
        list({'job_id': job_id, 'bytes': bytes, 'share': share} order by bytes desc, job_id)
            as jobs,
    from job_shares
    group by pool, burst_no
),

bursts as (
    select
        pool,
        burst_no,
        min(second_ts) as start_ts,
        max(second_ts) + interval 1 second as end_ts,
        count(*) as n_seconds,
        max(n_jobs) as peak_jobs,
        max(n_ranks) as peak_ranks,
        sum(demand_bps) as bytes,
        max(demand_bps) as peak_demand_bps,
        avg(demand_bps) as mean_demand_bps,
        any_value(capacity_bps) as capacity_bps,
        any_value(capacity_source) as capacity_source,
        max(utilisation) as peak_utilisation,
        count(*) filter (where is_saturated) as saturated_s,
        count(*) filter (where is_stalled) as stalled_s,
        count(*) filter (where is_stalled_saturated) as stalled_saturated_s,
    from numbered
    group by pool, burst_no
),

final as (
    select
        bursts.pool,
        bursts.start_ts,
        bursts.end_ts,
        epoch(bursts.end_ts - bursts.start_ts) as duration_s,
        bursts.n_seconds,
        len(burst_jobs.jobs) as n_jobs,
        burst_jobs.jobs,
        bursts.peak_jobs,
        bursts.peak_ranks,
        bursts.bytes,
        bursts.peak_demand_bps,
        bursts.mean_demand_bps,
        bursts.capacity_bps,
        bursts.capacity_source,
        bursts.peak_utilisation,
        bursts.saturated_s,
        bursts.stalled_s,
        bursts.stalled_saturated_s,
    from bursts
    inner join burst_jobs using (pool, burst_no)
)

select * from final;
