-- checkpoint_ranks: one row per rank write of every checkpoint (job, step, rank), as the
-- post-mortem's rank timeline draws it: where the rank ran (node, leaf switch) and wrote
-- (target), when it started and ended, its phases, and, for a stall, whether stall_ranks finds
-- it slow and the job's normal rank duration (a checkpoint that is no stall: is_slow false,
-- normal_rank_s null).
create or replace view checkpoint_ranks as
with
writes as (
    select * from stg_checkpoint_writes
),

ranks as (
    select * from stall_ranks
),

node_leaves as (
    select * from int_node_leaves
),

final as (
    select
        writes.job_id,
        writes.step,
        writes.rank,
        writes.tier,
        writes.node,
        node_leaves.leaf_switch,
        writes.target,
        writes.status,
        writes.start_ts,
        writes.end_ts,
        writes.duration_s,
        writes.open_s,
        writes.write_s,
        writes.fsync_s,
        writes.close_s,
        coalesce(ranks.is_slow, false) as is_slow,
        ranks.normal_rank_s,
    from writes
    left join ranks
        on writes.job_id = ranks.job_id
        and writes.step = ranks.step
        and writes.rank = ranks.rank
    left join node_leaves on writes.node = node_leaves.node
)

select * from final;
