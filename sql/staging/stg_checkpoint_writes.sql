-- stg_checkpoint_writes: one row per (job_id, step, rank), typed as the lake's canonical schema.
-- Duplicate rule: when the same (job, step, rank) arrives more than once (a re-sent or grown
-- file), the most recently ingested record wins; ties go to the later source file name.
-- Checkpoints without a repeated rank (nearly all) skip the window sort: a bitmap of the ranks
-- seen, per checkpoint and block of 1024 ranks, proves there is nothing to drop. The test is
-- conservative (negative ranks share bits), so a false alarm only costs the exact path.
-- Identifiers over the field limit are left out (see int_lake_skipped_rows). A checkpoint with
-- such a node, tier or target takes the exact path too, so the rows of the others are read
-- without those columns when a query needs none of them (checkpoint_latency): the limit is
-- checked once, in the bitmap pass, not on every column of every row.
-- target: each target as pool_target (sql/session.sql) spells it, the key it joins the pool
-- telemetry by.
-- status: the canonical value (canonical_status, sql/session.sql): the ingest writes it, and a
-- lake written before the accepted spellings were normalised reads the same.
create or replace view stg_checkpoint_writes as
with
rows_of_short_jobs as not materialized (
    select * from checkpoint_writes
    where not ids_over_limit(length(job_id))
),

source as not materialized (
    select * from rows_of_short_jobs
    where not ids_over_limit(greatest(
        length(node),
        length(tier),
        length(target)
    ))
),

rank_blocks as (
    select
        job_id,
        step,
        count(*) > bit_count(bitstring_agg(abs(rank % 1024), 0, 1023))
        or bool_or(ids_over_limit(greatest(
            length(node),
            length(tier),
            length(target)
        ))) as needs_exact_path,
    from rows_of_short_jobs
    group by job_id, step, rank // 1024
),

exact_checkpoints as (
    select distinct
        job_id,
        step,
    from rank_blocks
    where needs_exact_path
),

unique_rows as (
    select rows_of_short_jobs.*
    from rows_of_short_jobs
    anti join exact_checkpoints using (job_id, step)
),

deduplicated_rows as (
    select source.*
    from source
    semi join exact_checkpoints using (job_id, step)
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
        pool_targets(target) as target,
        start_ts,
        end_ts,
        duration_s,
        bytes,
        open_s,
        write_s,
        fsync_s,
        close_s,
        canonical_status(status) as status,
        source_file,
        ingested_ts,
    from combined
)

select * from final;
