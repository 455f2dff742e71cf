-- stg_pool_metrics: one row per (pool, target, metric, ts): disaggregated-pool telemetry, with
-- its kind (counter: cumulative, e.g. write_bytes, write_ops, write_latency_us_total; gauge:
-- gc_active, free_blocks_pct, metadata_latency_ms, metadata_ops per second, queue_depth; the
-- pool vocabulary is stg_pool_vocabulary, kinds stg_metric_names). Duplicate samples (same
-- key and ts) collapse to the most recently ingested one (ties: later source file).
-- Deltas: stg_counter_deltas; interval means of the cumulative sums: int_pool_interval_means.
--
-- stg_pool_metric_source(): the rows before deduplication, target as pool_target (sql/session.sql)
-- spells it, so one target's rows are one series whichever tool (or spelling) wrote them; rows
-- over the field limit left out (see int_lake_skipped_rows).
-- stg_pool_targets(): each target (so spelled) with its pool (the least, should two pools name
-- it), of the rows with a known metric: the (pool, target) pairs of stg_pool_metrics without its
-- deduplication, which never adds or removes a pair (a re-sent sample repeats one). What
-- int_pool_rank_writes maps a record's target to a pool by, without a window over every sample.
create or replace macro stg_pool_metric_source() as table
select * replace (pool_target(target) as target)
from pool_metrics
where not ids_over_limit(greatest(
    length(pool),
    length(target),
    length(metric)
));

create or replace macro stg_pool_targets() as table
select
    target,
    min(pool) as pool,
from stg_pool_metric_source()
where metric in (select metric from stg_metric_names where source_table = 'pool_metrics')
group by target;

create or replace view stg_pool_metrics as
with
source as (
    select * from stg_pool_metric_source()
),

metric_names as (
    select * from stg_metric_names
),

deduplicated as (
    select *
    from source
    qualify row_number() over (
        partition by pool, target, metric, ts
        order by ingested_ts desc, source_file desc
    ) = 1
),

kinds as (
    select
        metric,
        kind,
    from metric_names
    where source_table = 'pool_metrics'
),

final as (
    select
        deduplicated.ts,
        deduplicated.pool,
        deduplicated.target,
        deduplicated.metric,
        kinds.kind,
        deduplicated.value,
    from deduplicated
    inner join kinds using (metric)
)

select * from final;
