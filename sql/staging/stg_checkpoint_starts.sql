-- stg_checkpoint_starts: one in-flight marker per (job_id, step, rank): when the rank began
-- writing that checkpoint. A marker sent twice (a re-sent or grown file) keeps the earliest
-- start; its node, tier and target come from the most recently ingested copy. Markers with an
-- identifier over the field limit are left out first (see int_lake_skipped_rows).
-- The rule is the table macro stg_checkpoint_starts_of(marker_relation): the name of a relation
-- of the caller (a view or a CTE: query_table) holding rows of checkpoint_starts, every copy of
-- each (job_id, step, rank) it holds (whole checkpoints, say). The view is the rule over every
-- marker; int_unfinished_ranks_of applies it to the markers of a few checkpoints only.
-- Checkpoints without a repeated rank or a long identifier (nearly all) skip the grouping and
-- the per-row length check: stg_checkpoint_start_blocks_of(marker_relation) says, per checkpoint
-- and block of 1024 ranks, whether the block needs that exact path. A bitmap of the ranks seen
-- proves there is nothing to merge (as in stg_checkpoint_writes; negative ranks share bits, so a
-- false alarm only costs the exact path), and the longest identifier in bytes (strlen, at least
-- its length in characters) proves none is over the limit. Where no block of a checkpoint needs
-- the exact path, its markers are its staged rows as they are, so the block's count, rank
-- range, earliest start and latest ingest are those of its staged rows (checkpoint_latency sums
-- them instead of reading the rows).
create or replace macro stg_checkpoint_start_blocks_of(marker_relation) as table
select
    job_id,
    step,
    rank // 1024 as block,
    count(*) > bit_count(bitstring_agg(abs(rank % 1024), 0, 1023))
    or ids_over_limit(max(greatest(
        strlen(job_id),
        strlen(node),
        strlen(tier),
        strlen(target)
    ))) as needs_exact_path,
    count(*) as n_markers,
    cast(min(rank) as bigint) as rank_min,
    cast(max(rank) as bigint) as rank_max,
    min(start_ts) as start_ts,
    max(ingested_ts) as ingested_ts,
from query_table(marker_relation)
group by job_id, step, rank // 1024;

create or replace macro stg_checkpoint_starts_of(marker_relation) as table
with
source_markers as not materialized (
    select * from query_table(marker_relation)
),

rank_blocks as (
    select * from stg_checkpoint_start_blocks_of(marker_relation)
),

exact_checkpoints as (
    select distinct
        job_id,
        step,
    from rank_blocks
    where needs_exact_path
),

unique_rows as (
    select
        source_markers.job_id,
        source_markers.step,
        source_markers.rank,
        source_markers.node,
        source_markers.tier,
        source_markers.target,
        source_markers.start_ts,
        source_markers.ingested_ts,
    from source_markers
    anti join exact_checkpoints using (job_id, step)
),

short_rows as not materialized (
    select source_markers.*
    from source_markers
    semi join exact_checkpoints using (job_id, step)
    where not ids_over_limit(greatest(
        length(source_markers.job_id),
        length(source_markers.node),
        length(source_markers.tier),
        length(source_markers.target)
    ))  -- see int_lake_skipped_rows
),

merged_rows as (
    select
        job_id,
        step,
        rank,
        arg_max(node, ingested_ts) as node,
        arg_max(tier, ingested_ts) as tier,
        arg_max(target, ingested_ts) as target,
        min(start_ts) as start_ts,
        max(ingested_ts) as ingested_ts,
    from short_rows
    group by job_id, step, rank
),

-- target: each target as pool_target (sql/session.sql) spells it, as stg_checkpoint_writes.
final as (
    select * replace (pool_targets(target) as target)
    from (
        select * from unique_rows
        union all
        select * from merged_rows
    )
)

select * from final;

create or replace view stg_checkpoint_starts as
select * from stg_checkpoint_starts_of('checkpoint_starts');
