-- int_lake_skipped_rows: rows of the lake the staging views leave out, per table and source
-- file: an identifier (job_id, node, device, …) longer than max_field_chars (sql/session.sql).
-- The ingest quarantines such records; only a lake written by an older version holds them.
-- The nightly run and `ckptwatch stalls` warn with this view's rows; nothing else fails.
-- Each table's identifier list is the one its staging view filters on (tests/sql checks both).
create or replace view int_lake_skipped_rows as
with
skipped as (
    select
        'checkpoint_writes' as table_name,
        source_file,
        count(*) as n_rows,
    from checkpoint_writes
    where ids_over_limit(greatest(length(job_id), length(node), length(tier), length(target)))
    group by source_file
    union all
    select
        'checkpoint_starts' as table_name,
        source_file,
        count(*) as n_rows,
    from checkpoint_starts
    where ids_over_limit(greatest(length(job_id), length(node), length(tier), length(target)))
    group by source_file
    union all
    select
        'checkpoint_loads' as table_name,
        source_file,
        count(*) as n_rows,
    from checkpoint_loads
    where ids_over_limit(greatest(length(job_id), length(node), length(tier), length(target)))
    group by source_file
    union all
    select
        'jobs' as table_name,
        source_file,
        count(*) as n_rows,
    from jobs
    where ids_over_limit(greatest(length(job_id)))
    group by source_file
    union all
    select
        'nvme_smart' as table_name,
        source_file,
        count(*) as n_rows,
    from nvme_smart
    where ids_over_limit(greatest(
        length(node),
        length(device),
        length(metric),
        length(model),
        length(serial),
        length(firmware)
    ))
    group by source_file
    union all
    select
        'fabric_counters' as table_name,
        source_file,
        count(*) as n_rows,
    from fabric_counters
    where ids_over_limit(greatest(length(node), length(device), length(port), length(counter)))
    group by source_file
    union all
    select
        'pool_metrics' as table_name,
        source_file,
        count(*) as n_rows,
    from pool_metrics
    where ids_over_limit(greatest(length(pool), length(target), length(metric)))
    group by source_file
    union all
    select
        'topology' as table_name,
        source_file,
        count(*) as n_rows,
    from topology
    where ids_over_limit(greatest(length(node), length(leaf_switch), length(nic), length(port)))
    group by source_file
),

final as (
    select
        table_name,
        source_file,
        n_rows,
        'an identifier longer than ' || getvariable('max_field_chars') || ' characters' as reason,
    from skipped
)

select * from final;
