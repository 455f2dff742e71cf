-- tier_latency: one row per tier (local | pool): the barrier time over every checkpoint written
-- to that tier, across jobs; p50/p99 are over checkpoints, as in job_latency. Jobs of different
-- sizes mix here: compare tiers with it, and read job_latency for any one job.
-- Contract: tier_latency.contract.yml.
create or replace view tier_latency as
with
checkpoints as (
    select * from checkpoint_latency
),

per_tier as (
    select
        tier,
        count(distinct job_id) as n_jobs,
        count(*) as n_checkpoints,
        cast(sum(n_ranks) as bigint) as n_rank_writes,
        median(p50_s) as rank_p50_s,
        median(p99_s) as rank_p99_s,
        quantile_cont(barrier_s, [0.5, 0.9, 0.99]) as barrier_quantiles,
        max(barrier_s) as barrier_max_s,
        median(effective_bandwidth_bytes_per_s) as bandwidth_p50_bytes_per_s,
        min(start_ts) as first_ts,
        max(end_ts) as last_ts,
    from checkpoints
    group by tier
),

final as (
    select
        tier,
        n_jobs,
        n_checkpoints,
        n_rank_writes,
        rank_p50_s,
        rank_p99_s,
        barrier_quantiles[1] as barrier_p50_s,
        barrier_quantiles[2] as barrier_p90_s,
        barrier_quantiles[3] as barrier_p99_s,
        barrier_max_s,
        bandwidth_p50_bytes_per_s,
        first_ts,
        last_ts,
    from per_tier
)

select * from final;
