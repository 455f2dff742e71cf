-- stalls: one row per checkpoint with its job's robust baseline and whether it is a stall.
-- baseline_s: the job's healthy level: the median barrier time of the healthy checkpoints among
-- its previous 10 (the job's healthy median while fewer than 3 of them are healthy). A
-- checkpoint is healthy when its barrier is under stall_factor x the lower quartile of the
-- job's previous 10 (its own reference; the job's lower quartile while fewer than 3 precede):
-- a run of stalls is left out of the baseline instead of becoming it, as long as 3 of the last
-- 10 checkpoints were healthy; a lasting change of level (a bigger model, a slower pool)
-- becomes the baseline at once when it is under stall_factor x the old, else once it is 8 of
-- the last 10 (each checkpoint a stall until then).
-- A stall: barrier_s >= stall_factor * baseline_s and barrier_s - baseline_s >=
-- stall_min_excess_s (defaults in sql/session.sql; SET VARIABLE stall_factor = 3; to change).
-- Detection looks at the barrier only: no checkpoint is a stall because a signal moved.
-- Unfinished ranks (checkpoint_latency): the barrier of a checkpoint with unfinished ranks is
-- a lower bound (barrier_is_lower_bound), judged against the baseline like any other; a
-- timed_out checkpoint is a stall whatever the ratio (it is the one that killed the job), and
-- carries why it timed out (timeout_reason: status, unfinished or barrier).
-- Contract: stalls.contract.yml.
create or replace view stalls as
with
checkpoints as (
    select * from checkpoint_latency
),

stragglers as (
    select * from stragglers
),

settings as (
    select
        cast(getvariable('stall_factor') as double) as factor,
        cast(getvariable('stall_min_excess_s') as double) as min_excess_s,
),

-- Each checkpoint's reference (the lower quartile of the job's previous 10) and whether it is
-- healthy against it; then the baseline from the healthy ones among the previous 10.
reference_levels as (
    select
        checkpoints.*,
        quantile_cont(barrier_s, 0.25) over (
            partition by job_id order by start_ts, step
            rows between 10 preceding and 1 preceding
        ) as recent_reference_s,
        count(*) over (
            partition by job_id order by start_ts, step
            rows between 10 preceding and 1 preceding
        ) as n_reference,
        quantile_cont(barrier_s, 0.25) over (partition by job_id) as job_reference_s,
    from checkpoints
),

health as (
    select
        reference_levels.*,
        barrier_s < settings.factor * case
            when n_reference >= 3 then recent_reference_s
            else job_reference_s
        end as is_healthy,
    from reference_levels
    cross join settings
),

history as (
    select
        health.*,
        median(case when is_healthy then barrier_s end) over (
            partition by job_id order by start_ts, step
            rows between 10 preceding and 1 preceding
        ) as recent_median_s,
        count(case when is_healthy then 1 end) over (
            partition by job_id order by start_ts, step
            rows between 10 preceding and 1 preceding
        ) as n_recent,
        coalesce(
            median(case when is_healthy then barrier_s end) over (partition by job_id),
            median(barrier_s) over (partition by job_id)
        ) as job_median_s,
    from health
),

straggler_counts as (
    select
        job_id,
        step,
        count(*) as n_stragglers,
    from stragglers
    group by job_id, step
),

judged as (
    select
        history.*,
        case
            when history.n_recent >= 3 then history.recent_median_s
            else history.job_median_s
        end as baseline_s,
        coalesce(straggler_counts.n_stragglers, 0) as n_stragglers,
        settings.factor,
        settings.min_excess_s,
    from history
    cross join settings
    left join straggler_counts using (job_id, step)
),

final as (
    select
        job_id,
        step,
        tier,
        start_ts,
        end_ts,
        n_ranks,
        n_started,
        n_unfinished,
        p50_s,
        p99_s,
        barrier_s,
        barrier_is_lower_bound,
        timed_out,
        timeout_reason,
        n_timed_out,
        baseline_s,
        barrier_s / nullif(baseline_s, 0) as ratio_to_baseline,
        barrier_s - baseline_s as excess_s,
        n_stragglers,
        timed_out
            or (barrier_s >= factor * baseline_s and barrier_s - baseline_s >= min_excess_s)
            as is_stall,
    from judged
)

select * from final;
