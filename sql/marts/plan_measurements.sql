-- plan_measurements: one row per (job_id, tier): what `ckptwatch plan --from-lake` calibrates
-- the planning model with (ckptwatch.planning.measure): the job's size, its bytes per rank and
-- its barrier p50/p99. The barrier quantiles are job_latency's (over the job's checkpoints,
-- every rank counted whatever its status); the writes are stg_checkpoint_writes' (a write sent
-- twice counts once), each under its checkpoint's tier as checkpoint_latency names it.
-- is_main_tier marks the tier planning uses: the one with more rank writes (ties: by name).
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
    from job_barriers
    inner join per_tier using (job_id, tier)
    inner join node_sizes using (job_id, tier)
)

select * from final;
