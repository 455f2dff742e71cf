-- stg_checkpoint_writes: one row per (job_id, step, rank), typed as the lake's canonical schema.
-- Duplicate rule: when the same (job, step, rank) arrives more than once (a re-sent or grown
-- file), the most recently ingested record wins; ties go to the later source file name.
-- Checkpoints without a repeated rank (nearly all) skip the window sort: a bitmap of the ranks
-- seen, per checkpoint and block of 1024 ranks, proves there is nothing to drop. The test is
-- conservative (negative ranks share bits), so a false alarm only costs the exact path.
create or replace view stg_checkpoint_writes as
with
source as not materialized (
    select * from checkpoint_writes
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
    select source.*
    from source
    anti join repeated_checkpoints using (job_id, step)
),

deduplicated_rows as (
    select source.*
    from source
    semi join repeated_checkpoints using (job_id, step)
    qualify row_number() over (
        partition by job_id, step, rank
        order by ingested_ts desc, source_file desc
    ) = 1
),

combined as (
    select * from unique_rows
    union all
    select * from deduplicated_rows
),

final as (
    select
        job_id,
        step,
        rank,
        node,
        tier,
        target,
        start_ts,
        end_ts,
        duration_s,
        bytes,
        open_s,
        write_s,
        fsync_s,
        close_s,
        status,
        source_file,
        ingested_ts,
    from combined
)

select * from final;
