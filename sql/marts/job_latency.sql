-- job_latency: one row per (job_id, tier): the barrier time over the job's checkpoints.
-- p50/p99 here are over checkpoints (a different question from p99 over ranks of one checkpoint).
create or replace view job_latency as
with
checkpoints as (
    select * from checkpoint_latency
),

jobs as (
    select * from stg_jobs
),

per_job as (
    select
        job_id,
        tier,
        count(*) as n_checkpoints,
        quantile_cont(barrier_s, 0.5) as barrier_p50_s,
        quantile_cont(barrier_s, 0.99) as barrier_p99_s,
        max(barrier_s) as barrier_max_s,
        quantile_cont(p50_s, 0.5) as rank_p50_s,
        min(start_ts) as first_ts,
        max(end_ts) as last_ts,
    from checkpoints
    group by job_id, tier
),

final as (
    select
        per_job.*,
        jobs.checkpoint_timeout_s as timeout_s,
        jobs.checkpoint_timeout_s - per_job.barrier_max_s as headroom_s,
    from per_job
    left join jobs using (job_id)
)

select * from final;
