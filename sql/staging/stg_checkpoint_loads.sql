-- stg_checkpoint_loads: one row per (job_id, step, rank) of a checkpoint load (a restore: DLIO
-- load_ckptN), typed as the lake's canonical schema. Kept apart from stg_checkpoint_writes: a
-- load is not a save, and a stall of a save says nothing about how long a restart takes.
-- Planning reads it as the measured restore time (per job and step, the slowest rank's
-- duration_s): keep these column names.
-- Duplicate rule as stg_checkpoint_writes: when the same (job, step, rank) arrives more than
-- once, the most recently ingested record wins; ties go to the later source file name.
create or replace view stg_checkpoint_loads as
with
source as (
    select * from checkpoint_loads
    where not ids_over_limit(greatest(
        length(job_id),
        length(node),
        length(tier),
        length(target)
    ))  -- see int_lake_skipped_rows
),

deduplicated as (
    select *
    from source
    qualify row_number() over (
        partition by job_id, step, rank
        order by ingested_ts desc, source_file desc
    ) = 1
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
        source_file,
        ingested_ts,
    from deduplicated
)

select * from final;
