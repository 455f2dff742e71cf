-- int_checkpoint_hosts: one row per (job_id, step, host): every host a checkpoint touched.
-- A host is a node that ran ranks of the checkpoint (its NICs and local drives matter) or a
-- target the ranks wrote to (a pool target: its pool telemetry and drives, which SMART lists
-- under node = target name). A host can be both.
create or replace view int_checkpoint_hosts as
with
writes as not materialized (
    select * from stg_checkpoint_writes
),

rank_nodes as (
    select
        job_id,
        step,
        node as host,
        count(*) as n_ranks_on_node,
        0 as n_ranks_to_target,
    from writes
    group by job_id, step, node
),

write_targets as (
    select
        job_id,
        step,
        target as host,
        0 as n_ranks_on_node,
        count(*) as n_ranks_to_target,
    from writes
    where target is not null
    group by job_id, step, target
),

combined as (
    select * from rank_nodes
    union all
    select * from write_targets
),

final as (
    select
        job_id,
        step,
        host,
        sum(n_ranks_on_node) > 0 as is_rank_node,
        sum(n_ranks_to_target) > 0 as is_target,
        cast(sum(n_ranks_on_node) as bigint) as n_ranks_on_node,
        cast(sum(n_ranks_to_target) as bigint) as n_ranks_to_target,
    from combined
    group by job_id, step, host
)

select * from final;
