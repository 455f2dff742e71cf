-- stg_metric_names: one row per (source_table, metric): every counter / metric name present in
-- fabric_counters, nvme_smart and pool_metrics, and its kind. counter: cumulative (deltas in
-- stg_counter_deltas); gauge: a level that passes through. Every fabric counter is cumulative.
-- For SMART and pool metrics the unit suffix of the name decides (units live in names:
-- host_written_bytes, write_bytes, power_on_hours, controller_busy_time_min, …); a name that
-- matches no counter suffix is a gauge (temperature_c, free_blocks_pct, gc_active,
-- metadata_latency_ms, critical_warning, and the pool's metadata_ops, which the pool format
-- reports as operations per second; a cumulative count would be metadata_ops_total).
create or replace view stg_metric_names as
with
fabric as (
    select * from fabric_counters
),

smart as (
    select * from nvme_smart
),

pool as (
    select * from pool_metrics
),

counter_suffixes as (
    select *
    from (
        values
            ('_bytes', 'bytes moved since power-on or reset'),
            ('_commands', 'commands completed'),
            ('_count', 'events counted'),
            ('_total', 'events counted (Prometheus style)'),
            ('_events', 'events counted'),
            ('_errors', 'errors counted'),
            ('_entries', 'log entries counted'),
            ('_shutdowns', 'shutdowns counted'),
            ('_cycles', 'power cycles counted'),
            ('_hours', 'hours accumulated'),
            ('_min', 'minutes accumulated (busy time, time over temperature)'),
    ) as counter_suffixes (name_suffix, meaning)
),

names as (
    select distinct 'fabric_counters' as source_table, counter as metric from fabric
    union all
    select distinct 'nvme_smart' as source_table, metric from smart
    union all
    select distinct 'pool_metrics' as source_table, metric from pool
),

final as (
    select
        names.source_table,
        names.metric,
        case
            when names.source_table = 'fabric_counters' then 'counter'
            when count(counter_suffixes.name_suffix) > 0 then 'counter'
            else 'gauge'
        end as kind,
    from names
    left join counter_suffixes on ends_with(names.metric, counter_suffixes.name_suffix)
    group by names.source_table, names.metric
)

select * from final;
