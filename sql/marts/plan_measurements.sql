-- plan_measurements: one row per (job_id, tier): what `ckptwatch plan --from-lake` calibrates
-- the planning model with (ckptwatch.planning.measure): the job's size, its bytes per rank and
-- its barrier p50/p99. The barrier quantiles are job_latency's (over the job's checkpoints,
-- every rank counted whatever its status); the writes are stg_checkpoint_writes' (a write sent
-- twice counts once), each under its checkpoint's tier as checkpoint_latency names it.
-- is_main_tier marks the tier planning uses: the one with more rank writes (ties: by name).
-- What the job's timeouts cost: its checkpoint timeout and interval (stg_jobs; null without
-- metadata), the interval measured instead (measured_interval_s: the median gap between
-- consecutive checkpoint starts on the tier), its timed-out checkpoints (job_latency.n_timed_out)
-- and the span they were observed over (observed_s: first checkpoint start to last end).
-- ckptwatch.planning.measure scales n_timed_out / observed_s to a year.
-- Contract: plan_measurements.contract.yml.
create or replace view plan_measurements as
with
writes as (
    select * from stg_checkpoint_writes
),

checkpoints as (
    select * from checkpoint_latency
),

job_barriers as (
    select * from job_latency
),

jobs as (
    select * from stg_jobs
),

start_gaps as (
    select
        job_id,
        tier,
        epoch(start_ts - lag(start_ts) over (
            partition by job_id, tier order by start_ts, step
        )) as gap_s,
    from checkpoints
),

intervals as (
    select
        job_id,
        tier,
        median(gap_s) as measured_interval_s,
    from start_gaps
    group by job_id, tier
),

tier_writes as (
    select
        writes.job_id,
        checkpoints.tier,
        writes.rank,
        writes.node,
        writes.bytes,
    from writes
    inner join checkpoints using (job_id, step)
),

per_tier as (
    select
        job_id,
        tier,
        count(*) as n_rank_writes,
        count(distinct rank) as n_ranks,
        median(bytes) as bytes_per_rank,
    from tier_writes
    group by job_id, tier
),

ranks_per_node as (
    select
        job_id,
        tier,
        node,
        count(distinct rank) as n_node_ranks,
    from tier_writes
    group by job_id, tier, node
),

node_sizes as (
    select
        job_id,
        tier,
        max(n_node_ranks) as gpus_per_node,
    from ranks_per_node
    group by job_id, tier
),

final as (
    select
        job_barriers.job_id,
        job_barriers.tier,
        row_number() over (
            partition by job_barriers.job_id
            order by per_tier.n_rank_writes desc, job_barriers.tier
        ) = 1 as is_main_tier,
        job_barriers.n_checkpoints,
        per_tier.n_rank_writes,
        per_tier.n_ranks,
        node_sizes.gpus_per_node,
        per_tier.bytes_per_rank,
        job_barriers.barrier_p50_s,
        job_barriers.barrier_p99_s,
        jobs.checkpoint_timeout_s as timeout_s,
        jobs.checkpoint_interval_s,
        intervals.measured_interval_s,
        job_barriers.n_timed_out,
        epoch(job_barriers.last_ts - job_barriers.first_ts) as observed_s,
    from job_barriers
    inner join per_tier using (job_id, tier)
    inner join node_sizes using (job_id, tier)
    left join intervals using (job_id, tier)
    left join jobs using (job_id)
)

select * from final;
