-- int_node_leaves: one row per node: the leaf switch(es) its NICs hang off. A node whose NICs
-- go to several leaves (rail-optimised fabrics) lists them all, comma-separated and sorted.
create or replace view int_node_leaves as
with
topology as (
    select * from stg_topology
),

final as (
    select
        node,
        string_agg(distinct leaf_switch, ',' order by leaf_switch) as leaf_switch,
        count(distinct leaf_switch) as n_leaf_switches,
    from topology
    group by node
)

select * from final;
