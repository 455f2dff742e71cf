-- stg_checkpoint_writes: one row per (job_id, step, rank).
-- Duplicate rule: when the same (job, step, rank) arrives more than once (a re-sent or grown
-- file), the most recently ingested record wins; ties go to the later source file name.
create or replace view stg_checkpoint_writes as
with
source as (
    select * from checkpoint_writes
),

ranked as (
    select
        *,
        row_number() over (
            partition by job_id, step, rank
            order by ingested_ts desc, source_file desc
        ) as dup_rank,
    from source
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
    from ranked
    where dup_rank = 1
)

select * from final;
