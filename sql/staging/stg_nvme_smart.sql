-- stg_nvme_smart: one row per (node, device, metric, ts): an NVMe SMART / vendor-log reading,
-- with its kind (counter: cumulative, see stg_metric_names; gauge: a level). Duplicate samples
-- (same key and ts, e.g. smartctl and nvme-cli run together, or a file ingested twice) collapse
-- to the most recently ingested one (ties: later source file). Deltas: stg_counter_deltas.
-- The rows before that dedup, each with its version (the higher wins: ingested later, then the
-- later source file by name; a null ingested_ts or source_file loses), are the table macro
-- stg_nvme_smart_versions(): stg_counter_deltas dedups the counters in its window pass instead
-- of sorting every sample here first (as stg_fabric_counter_versions() does for the fabric,
-- whose ties go by a hash of the file name). The files are ranked by name once (a row per
-- file), so the version is one integer, not a timestamp and a path.
create or replace macro stg_nvme_smart_versions() as table
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

files as (
    select
        source_file,
        row_number() over (order by source_file) as file_rank,
    from (select distinct source_file from nvme_smart where source_file is not null)
),

final as (
    select
        source.*,
        coalesce(epoch_us(source.ingested_ts)::hugeint, -4611686018427387904)
        * 18446744073709551616 + coalesce(files.file_rank, 0) as version,
    from source
    left join files on source.source_file = files.source_file
)

select * from final;

create or replace view stg_nvme_smart as
with
versioned as (
    select * from stg_nvme_smart_versions()
),

metric_names as (
    select * from stg_metric_names
),

deduplicated as (
    select *
    from versioned
    qualify row_number() over (
        partition by node, device, metric, ts
        order by version desc
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
