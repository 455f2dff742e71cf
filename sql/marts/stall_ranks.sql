-- stall_ranks: every rank of every stall (see stalls), against its job's normal: where it ran
-- and wrote, how long it took, and which phases lost time.
-- normal_*: medians over the job's checkpoints that are not stalls (per-checkpoint medians of
-- rank duration and of each phase, then the median of those). excess = value - normal.
-- is_slow: duration_s >= slow_rank_factor * normal_rank_s and at least slow_rank_min_excess_s
-- over it (defaults in sql/session.sql). Unlike `stragglers` (far above the checkpoint's own p50),
-- this still finds the slow ranks when most of a checkpoint is slow.
-- Unfinished ranks (int_unfinished_ranks: a start marker, no record) are ranks of the stall too,
-- with status 'unfinished', is_unfinished, no phases, and as duration_s a lower bound: from
-- their start to the end of the stall's known window (stalls.end_ts). They count as slow
-- whatever the numbers: they are the slowest ranks, so attribution looks at their hosts,
-- leaf switches and targets first.
create or replace view stall_ranks as
with
stalls as (
    select * from stalls
),

writes as (
    select * from stg_checkpoint_writes
),

unfinished_ranks as (
    select * from int_unfinished_ranks
),

node_leaves as (
    select * from int_node_leaves
),

settings as (
    select
        cast(getvariable('slow_rank_factor') as double) as factor,
        cast(getvariable('slow_rank_min_excess_s') as double) as min_excess_s,
),

normal_checkpoints as (
    select
        writes.job_id,
        writes.step,
        median(writes.duration_s) as rank_s,
        median(writes.open_s) as open_s,
        median(writes.write_s) as write_s,
        median(writes.fsync_s) as fsync_s,
        median(writes.close_s) as close_s,
    from writes
    semi join (select job_id, step from stalls where not is_stall) as ok using (job_id, step)
    group by writes.job_id, writes.step
),

normals as (
    select
        job_id,
        median(rank_s) as normal_rank_s,
        median(open_s) as normal_open_s,
        median(write_s) as normal_write_s,
        median(fsync_s) as normal_fsync_s,
        median(close_s) as normal_close_s,
    from normal_checkpoints
    group by job_id
),

stall_writes as (
    select
        writes.job_id,
        writes.step,
        writes.rank,
        writes.tier,
        writes.node,
        writes.target,
        split_part(writes.target, ':', 1) as target_host,
        writes.status,
        false as is_unfinished,
        writes.duration_s,
        writes.open_s,
        writes.write_s,
        writes.fsync_s,
        writes.close_s,
    from writes
    semi join (select job_id, step from stalls where is_stall) as s using (job_id, step)
),

stall_unfinished as (
    select
        unfinished_ranks.job_id,
        unfinished_ranks.step,
        unfinished_ranks.rank,
        unfinished_ranks.tier,
        unfinished_ranks.node,
        unfinished_ranks.target,
        unfinished_ranks.target_host,
        'unfinished' as status,
        true as is_unfinished,
        greatest(epoch(stalls.end_ts - unfinished_ranks.start_ts), 0) as duration_s,
        cast(null as double) as open_s,
        cast(null as double) as write_s,
        cast(null as double) as fsync_s,
        cast(null as double) as close_s,
    from unfinished_ranks
    inner join (select * from stalls where is_stall) as stalls using (job_id, step)
),

stall_rows as (
    select * from stall_writes
    union all
    select * from stall_unfinished
),

final as (
    select
        stall_rows.job_id,
        stall_rows.step,
        stall_rows.rank,
        stall_rows.tier,
        stall_rows.node,
        node_leaves.leaf_switch,
        stall_rows.target,
        stall_rows.target_host,
        stall_rows.status,
        stall_rows.is_unfinished,
        stall_rows.duration_s,
        normals.normal_rank_s,
        stall_rows.duration_s - normals.normal_rank_s as excess_s,
        stall_rows.open_s,
        stall_rows.write_s,
        stall_rows.fsync_s,
        stall_rows.close_s,
        normals.normal_open_s,
        normals.normal_write_s,
        normals.normal_fsync_s,
        normals.normal_close_s,
        (stall_rows.open_s - normals.normal_open_s)
            + (stall_rows.close_s - normals.normal_close_s) as metadata_excess_s,
        (stall_rows.write_s - normals.normal_write_s)
            + (stall_rows.fsync_s - normals.normal_fsync_s) as data_excess_s,
        stall_rows.is_unfinished
            or (
                stall_rows.duration_s >= settings.factor * normals.normal_rank_s
                and stall_rows.duration_s - normals.normal_rank_s >= settings.min_excess_s
            )
            as is_slow,
    from stall_rows
    cross join settings
    left join normals using (job_id)
    left join node_leaves on stall_rows.node = node_leaves.node
)

select * from final;
