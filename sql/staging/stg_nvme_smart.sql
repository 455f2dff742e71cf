-- stg_nvme_smart: one row per (node, device, metric, ts): an NVMe SMART / vendor-log reading,
-- with its kind (counter: cumulative, see stg_metric_names; gauge: a level). Duplicate samples
-- (same key and ts, e.g. smartctl and nvme-cli run together, or a file ingested twice) collapse
-- to the most recently ingested one (ties: later source file). Deltas: stg_counter_deltas.
create or replace view stg_nvme_smart as
with
source as (
    select * from nvme_smart
    where not ids_over_limit(greatest(
        length(node),
        length(device),
        length(metric),
        length(model),
        length(serial),
        length(firmware)
    ))  -- see int_lake_skipped_rows
),

metric_names as (
    select * from stg_metric_names
),

deduplicated as (
    select *
    from source
    qualify row_number() over (
        partition by node, device, metric, ts
        order by ingested_ts desc, source_file desc
    ) = 1
),

kinds as (
    select
        metric,
        kind,
    from metric_names
    where source_table = 'nvme_smart'
),

final as (
    select
        deduplicated.ts,
        deduplicated.node,
        deduplicated.device,
        deduplicated.metric,
        kinds.kind,
        deduplicated.value,
        deduplicated.source,
        deduplicated.model,
        deduplicated.serial,
        deduplicated.firmware,
    from deduplicated
    inner join kinds using (metric)
)

select * from final;
