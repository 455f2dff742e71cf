-- stg_topology: one row per (node, nic, port): which leaf switch it hangs off.
-- When the topology is re-sent (a node moved), the most recently ingested row wins.
create or replace view stg_topology as
with
source as (
    select * from topology
    where not ids_over_limit(greatest(
        length(node),
        length(leaf_switch),
        length(nic),
        length(port)
    ))  -- see int_lake_skipped_rows
),

latest as (
    select *
    from source
    qualify row_number() over (
        partition by node, nic, port
        order by ingested_ts desc, source_file desc
    ) = 1
),

final as (
    select
        node,
        leaf_switch,
        nic,
        port,
        source_file,
        ingested_ts,
    from latest
)

select * from final;
