-- stg_checkpoint_starts: one in-flight marker per (job_id, step, rank): when the rank began
-- writing that checkpoint. A marker sent twice (a re-sent or grown file) keeps the earliest
-- start; its node, tier and target come from the most recently ingested copy.
-- Checkpoints without a repeated rank (nearly all) skip the grouping: a bitmap of the ranks
-- seen, per checkpoint and block of 1024 ranks, proves there is nothing to merge (as in
-- stg_checkpoint_writes; negative ranks share bits, so a false alarm only costs the exact path).
create or replace view stg_checkpoint_starts as
with
source as not materialized (
    select * from checkpoint_starts
    where not ids_over_limit(greatest(
        length(job_id),
        length(node),
        length(tier),
        length(target)
    ))  -- see int_lake_skipped_rows
),

rank_blocks as (
    select
        job_id,
        step,
        count(*) > bit_count(bitstring_agg(abs(rank % 1024), 0, 1023)) as has_repeated_rank,
    from source
    group by job_id, step, rank // 1024
),

repeated_checkpoints as (
    select distinct
        job_id,
        step,
    from rank_blocks
    where has_repeated_rank
),

unique_rows as (
    select
        source.job_id,
        source.step,
        source.rank,
        source.node,
        source.tier,
        source.target,
        source.start_ts,
        source.ingested_ts,
    from source
    anti join repeated_checkpoints using (job_id, step)
),

merged_rows as (
    select
        source.job_id,
        source.step,
        source.rank,
        arg_max(source.node, source.ingested_ts) as node,
        arg_max(source.tier, source.ingested_ts) as tier,
        arg_max(source.target, source.ingested_ts) as target,
        min(source.start_ts) as start_ts,
        max(source.ingested_ts) as ingested_ts,
    from source
    semi join repeated_checkpoints using (job_id, step)
    group by source.job_id, source.step, source.rank
),

final as (
    select * from unique_rows
    union all
    select * from merged_rows
)

select * from final;
