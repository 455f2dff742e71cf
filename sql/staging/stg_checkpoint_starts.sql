-- stg_checkpoint_starts: one in-flight marker per (job_id, step, rank): when the rank began
-- writing that checkpoint. A marker sent twice (a re-sent or grown file) keeps the earliest
-- start; its node, tier and target come from the most recently ingested copy.
create or replace view stg_checkpoint_starts as
with
source as (
    select * from checkpoint_starts
    where not ids_over_limit([job_id, node, tier, target])  -- see int_lake_skipped_rows
),

final as (
    select
        job_id,
        step,
        rank,
        arg_max(node, ingested_ts) as node,
        arg_max(tier, ingested_ts) as tier,
        arg_max(target, ingested_ts) as target,
        min(start_ts) as start_ts,
        max(ingested_ts) as ingested_ts,
    from source
    group by job_id, step, rank
)

select * from final;
