-- stall_pool_jobs: for each stall, the job's own latency on the pool as the pool's per-job
-- statistics give it (Lustre job_stats: write latency per OST, metadata latency per MDT), beside
-- the pool-wide signals of stall_signals: a slow pool and a job slow on it are told apart.
-- Grain: (job_id, step, pool, target, signal); signal: write_latency_ms or metadata_latency_ms.
-- level_ms: the mean over the job's intervals (int_pool_interval_means, the job's rows through
-- int_pool_jobs) that overlap the checkpoint's window (within clock_skew_s), weighted by their
-- operations; max_ms: the highest latency in them where the pool gives it; n_ops: their
-- operations. baseline_ms: the median of the job's interval means on that target over the
-- whole lake, n_intervals of them. A job writes mostly when it checkpoints, so its intervals
-- are mostly its checkpoints' and the baseline is its usual checkpoint.
-- Contract: stall_pool_jobs.contract.yml.
create or replace view stall_pool_jobs as
with
-- The stall's window as far as the pool's clock may place it (clock_skew_s each side).
stalls as (
    select
        job_id,
        step,
        start_ts - to_microseconds(skew_us) as reach_start_ts,
        end_ts + to_microseconds(skew_us) as reach_end_ts,
    from stalls
    cross join (
        select cast(round(coalesce(getvariable('clock_skew_s'), 0) * 1e6) as bigint) as skew_us
    )
    where is_stall
),

pool_jobs as (
    select * from int_pool_jobs
),

job_means as (
    select
        pool_jobs.job_id,
        means.job_id as pool_job_id,
        means.pool,
        means.target,
        means.signal,
        means.prev_ts,
        means.ts,
        means.value,
        means.max_value,
        coalesce(means.samples, 1) as n_ops,
    from int_pool_interval_means as means
    inner join pool_jobs on means.job_id = pool_jobs.pool_job_id
    where
        means.signal in ('write_latency_ms', 'metadata_latency_ms')
        and means.value is not null
),

baselines as (
    select
        job_id,
        pool,
        target,
        signal,
        median(value) as baseline_ms,
        count(*) as n_intervals,
    from job_means
    group by job_id, pool, target, signal
),

windows as (
    select
        stalls.job_id,
        stalls.step,
        job_means.pool,
        job_means.target,
        job_means.signal,
        any_value(job_means.pool_job_id) as pool_job_id,
        sum(job_means.value * job_means.n_ops) / sum(job_means.n_ops) as level_ms,
        max(job_means.max_value) as max_ms,
        cast(sum(job_means.n_ops) as double) as n_ops,
    from stalls
    inner join job_means
        on job_means.job_id = stalls.job_id
        and coalesce(job_means.prev_ts, job_means.ts) < stalls.reach_end_ts
        and job_means.ts > stalls.reach_start_ts
    group by stalls.job_id, stalls.step, job_means.pool, job_means.target, job_means.signal
),

final as (
    select
        windows.job_id,
        windows.step,
        windows.pool,
        windows.target,
        windows.signal,
        windows.pool_job_id,
        windows.level_ms,
        windows.max_ms,
        windows.n_ops,
        baselines.baseline_ms,
        baselines.n_intervals,
    from windows
    inner join baselines using (job_id, pool, target, signal)
)

select * from final;
