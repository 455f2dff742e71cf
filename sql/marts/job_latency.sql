-- job_latency: one row per (job_id, tier): the barrier time over the job's checkpoints, its
-- trend, and how far the tail sits from the job's checkpoint timeout.
-- p50/p99 here are over checkpoints (the barrier time of each checkpoint is one value): "how
-- slow is a bad checkpoint of this job?". checkpoint_latency's p50/p99 are over the ranks of one
-- checkpoint: "how much slower is the slowest rank than the typical one?". Different questions;
-- see sql/README.md. headroom = timeout - tail: headroom_s against the worst checkpoint,
-- headroom_p99_s against the p99 barrier. barrier_trend_s_per_h: least-squares slope of the
-- barrier time against the checkpoint's start time (positive: getting slower; null with fewer
-- than two distinct start times). n_timed_out: the job's checkpoints on the tier that timed out
-- (checkpoint_latency.timed_out, whatever its reason).
-- Contract: job_latency.contract.yml.
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
        count(*) filter (where timed_out) as n_timed_out,
        quantile_cont(barrier_s, [0.5, 0.9, 0.99]) as barrier_quantiles,
        max(barrier_s) as barrier_max_s,
        arg_max(step, barrier_s) as worst_step,
        median(p50_s) as rank_p50_s,
        median(p99_s) as rank_p99_s,
        case
            when regr_sxx(barrier_s, epoch(start_ts)) > 0
                then regr_slope(barrier_s, epoch(start_ts)) * 3600
        end as barrier_trend_s_per_h,
        min(start_ts) as first_ts,
        max(end_ts) as last_ts,
    from checkpoints
    group by job_id, tier
),

final as (
    select
        per_job.job_id,
        per_job.tier,
        per_job.n_checkpoints,
        per_job.n_timed_out,
        per_job.rank_p50_s,
        per_job.rank_p99_s,
        per_job.barrier_quantiles[1] as barrier_p50_s,
        per_job.barrier_quantiles[2] as barrier_p90_s,
        per_job.barrier_quantiles[3] as barrier_p99_s,
        per_job.barrier_max_s,
        per_job.worst_step,
        per_job.barrier_trend_s_per_h,
        jobs.checkpoint_timeout_s as timeout_s,
        jobs.checkpoint_timeout_s - per_job.barrier_max_s as headroom_s,
        jobs.checkpoint_timeout_s - per_job.barrier_quantiles[3] as headroom_p99_s,
        per_job.barrier_quantiles[3] / jobs.checkpoint_timeout_s as p99_fraction_of_timeout,
        per_job.barrier_max_s / jobs.checkpoint_timeout_s as max_fraction_of_timeout,
        per_job.first_ts,
        per_job.last_ts,
    from per_job
    left join jobs using (job_id)
)

select * from final;
