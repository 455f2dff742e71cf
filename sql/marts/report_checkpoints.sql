-- report_checkpoints: one row per checkpoint (job, step) with what the daily report draws for
-- it: rank p50 / p99, the barrier time and the stall baseline (from stalls), whether it is a
-- stall, and the job's checkpoint timeout (from stg_jobs; null when the job is unknown). The
-- report selects one UTC day with `where start_ts >= $t0 and start_ts < $t1`. A checkpoint whose
-- ranks never finished carries n_unfinished, timed_out and barrier_is_lower_bound (see
-- checkpoint_latency); its rank p50 / p99 are null when no rank finished. A timed-out
-- checkpoint says why (timeout_reason) and how many ranks' records say timeout (n_timed_out).
create or replace view report_checkpoints as
with
stalls as (
    select * from stalls
),

jobs as (
    select * from stg_jobs
),

final as (
    select
        stalls.job_id,
        stalls.tier,
        stalls.step,
        stalls.start_ts,
        stalls.end_ts,
        stalls.n_ranks,
        stalls.n_unfinished,
        stalls.p50_s,
        stalls.p99_s,
        stalls.barrier_s,
        stalls.barrier_is_lower_bound,
        stalls.timed_out,
        stalls.timeout_reason,
        stalls.n_timed_out,
        stalls.baseline_s,
        stalls.is_stall,
        jobs.checkpoint_timeout_s as timeout_s,
    from stalls
    left join jobs using (job_id)
)

select * from final;
