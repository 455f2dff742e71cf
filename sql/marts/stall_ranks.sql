-- stall_ranks: every rank of every stall (see stalls), against its job's normal: where it ran
-- and wrote, how long it took, and which phases lost time.
-- normal_*: medians over the job's checkpoints that are not stalls (per-checkpoint medians of
-- rank duration and of each phase, then the median of those). excess = value - normal.
-- is_slow: duration_s >= slow_rank_factor * normal_rank_s and at least slow_rank_min_excess_s
-- over it (defaults in sql/session.sql). Unlike `stragglers` (far above the checkpoint's own p50),
-- this still finds the slow ranks when most of a checkpoint is slow.
create or replace view stall_ranks as
with
stalls as (
    select * from stalls
),

writes as (
    select * from stg_checkpoint_writes
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
        writes.*,
        split_part(writes.target, ':', 1) as target_host,
    from writes
    semi join (select job_id, step from stalls where is_stall) as s using (job_id, step)
),

final as (
    select
        stall_writes.job_id,
        stall_writes.step,
        stall_writes.rank,
        stall_writes.tier,
        stall_writes.node,
        node_leaves.leaf_switch,
        stall_writes.target,
        stall_writes.target_host,
        stall_writes.status,
        stall_writes.duration_s,
        normals.normal_rank_s,
        stall_writes.duration_s - normals.normal_rank_s as excess_s,
        stall_writes.open_s,
        stall_writes.write_s,
        stall_writes.fsync_s,
        stall_writes.close_s,
        normals.normal_open_s,
        normals.normal_write_s,
        normals.normal_fsync_s,
        normals.normal_close_s,
        (stall_writes.open_s - normals.normal_open_s)
            + (stall_writes.close_s - normals.normal_close_s) as metadata_excess_s,
        (stall_writes.write_s - normals.normal_write_s)
            + (stall_writes.fsync_s - normals.normal_fsync_s) as data_excess_s,
        stall_writes.duration_s >= settings.factor * normals.normal_rank_s
            and stall_writes.duration_s - normals.normal_rank_s >= settings.min_excess_s
            as is_slow,
    from stall_writes
    cross join settings
    left join normals using (job_id)
    left join node_leaves on stall_writes.node = node_leaves.node
)

select * from final;
