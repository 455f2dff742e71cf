-- int_lake_table_rows: how many rows each lake table holds (the summary and the report show it).
create or replace view int_lake_table_rows as
with
counts as (
    select 'checkpoint_writes' as table_name, count(*) as n_rows, from checkpoint_writes
    union all select 'checkpoint_starts', count(*), from checkpoint_starts
    union all select 'checkpoint_loads', count(*), from checkpoint_loads
    union all select 'jobs', count(*), from jobs
    union all select 'nvme_smart', count(*), from nvme_smart
    union all select 'fabric_counters', count(*), from fabric_counters
    union all select 'pool_metrics', count(*), from pool_metrics
    union all select 'topology', count(*), from topology
    union all select 'quarantine', count(*), from quarantine
),

final as (
    select
        table_name,
        n_rows,
    from counts
)

select * from final;
