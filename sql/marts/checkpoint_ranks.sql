-- checkpoint_ranks: one row per rank write of every checkpoint (job, step, rank), as the
-- post-mortem's rank timeline draws it: where the rank ran (node, leaf switch) and wrote
-- (target), when it started and ended, its phases, and, for a stall, whether stall_ranks finds
-- it slow and the job's normal rank duration (a checkpoint that is no stall: is_slow false,
-- normal_rank_s null). An unfinished rank (int_unfinished_ranks: a start marker, no record) is a
-- row too, with status 'unfinished', is_unfinished, no phases, and as end_ts the end of its
-- checkpoint's known window (checkpoint_latency.end_ts: the timeout, or the data end), so
-- duration_s is a lower bound.
create or replace view checkpoint_ranks as
with
writes as (
    select * from stg_checkpoint_writes
),

unfinished_ranks as (
    select * from int_unfinished_ranks
),

checkpoints as (
    select * from checkpoint_latency
),

ranks as (
    select * from stall_ranks
),

node_leaves as (
    select * from int_node_leaves
),

finished as (
    select
        job_id,
        step,
        rank,
        tier,
        node,
        target,
        status,
        false as is_unfinished,
        start_ts,
        end_ts,
        duration_s,
        open_s,
        write_s,
        fsync_s,
        close_s,
    from writes
),

unfinished as (
    select
        unfinished_ranks.job_id,
        unfinished_ranks.step,
        unfinished_ranks.rank,
        unfinished_ranks.tier,
        unfinished_ranks.node,
        unfinished_ranks.target,
        'unfinished' as status,
        true as is_unfinished,
        unfinished_ranks.start_ts,
        greatest(checkpoints.end_ts, unfinished_ranks.start_ts) as end_ts,
        greatest(epoch(checkpoints.end_ts - unfinished_ranks.start_ts), 0) as duration_s,
        cast(null as double) as open_s,
        cast(null as double) as write_s,
        cast(null as double) as fsync_s,
        cast(null as double) as close_s,
    from unfinished_ranks
    inner join checkpoints using (job_id, step)
),

all_ranks as (
    select * from finished
    union all
    select * from unfinished
),

final as (
    select
        all_ranks.job_id,
        all_ranks.step,
        all_ranks.rank,
        all_ranks.tier,
        all_ranks.node,
        node_leaves.leaf_switch,
        all_ranks.target,
        all_ranks.status,
        all_ranks.is_unfinished,
        all_ranks.start_ts,
        all_ranks.end_ts,
        all_ranks.duration_s,
        all_ranks.open_s,
        all_ranks.write_s,
        all_ranks.fsync_s,
        all_ranks.close_s,
        coalesce(ranks.is_slow, false) as is_slow,
        ranks.normal_rank_s,
    from all_ranks
    left join ranks
        on all_ranks.job_id = ranks.job_id
        and all_ranks.step = ranks.step
        and all_ranks.rank = ranks.rank
    left join node_leaves on all_ranks.node = node_leaves.node
)

select * from final;
