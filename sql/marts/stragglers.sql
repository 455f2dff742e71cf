-- stragglers: one row per rank that took far longer than its checkpoint's p50: where it ran
-- (node, leaf switch), where it wrote (target), and which phase lost the time.
-- Straggler: duration_s >= straggler_factor * p50_s and duration_s - p50_s >=
-- straggler_min_excess_s (defaults in sql/session.sql; override per session with
-- SET VARIABLE straggler_factor = 3; and SET VARIABLE straggler_min_excess_s = 5;).
-- dominant_phase: the phase (open | write | fsync | close) furthest above its checkpoint median
-- (open/close: metadata; write/fsync: data path, drives, fabric). slowness_order 1 = the rank
-- that set the barrier.
-- Contract: stragglers.contract.yml.
create or replace view stragglers as
with
writes as (
    select * from stg_checkpoint_writes
),

checkpoints as (
    select * from checkpoint_latency
),

node_leaves as (
    select * from int_node_leaves
),

thresholds as (
    select
        cast(getvariable('straggler_factor') as double) as factor,
        cast(getvariable('straggler_min_excess_s') as double) as min_excess_s,
),

slow_ranks as (
    select
        writes.*,
        checkpoints.tier as checkpoint_tier,
        checkpoints.n_ranks as checkpoint_n_ranks,
        checkpoints.p50_s as checkpoint_p50_s,
        checkpoints.barrier_s as checkpoint_barrier_s,
        writes.open_s - checkpoints.open_p50_s as open_excess_s,
        writes.write_s - checkpoints.write_p50_s as write_excess_s,
        writes.fsync_s - checkpoints.fsync_p50_s as fsync_excess_s,
        writes.close_s - checkpoints.close_p50_s as close_excess_s,
    from writes
    inner join checkpoints using (job_id, step)
    cross join thresholds
    where
        writes.duration_s >= thresholds.factor * checkpoints.p50_s
        and writes.duration_s - checkpoints.p50_s >= thresholds.min_excess_s
),

ranked as (
    select
        *,
        row_number() over (
            partition by job_id, step order by duration_s desc, rank
        ) as slowness_order,
        greatest(open_excess_s, write_excess_s, fsync_excess_s, close_excess_s)
            as dominant_excess_s,
    from slow_ranks
),

final as (
    select
        ranked.job_id,
        ranked.step,
        ranked.checkpoint_tier as tier,
        ranked.rank,
        ranked.node,
        node_leaves.leaf_switch,
        ranked.target,
        ranked.status,
        ranked.start_ts,
        ranked.end_ts,
        ranked.duration_s,
        ranked.checkpoint_p50_s as p50_s,
        ranked.duration_s / nullif(ranked.checkpoint_p50_s, 0) as ratio_to_p50,
        ranked.duration_s - ranked.checkpoint_p50_s as excess_s,
        ranked.slowness_order,
        ranked.duration_s = ranked.checkpoint_barrier_s as is_barrier,
        ranked.checkpoint_n_ranks as n_ranks,
        ranked.open_s,
        ranked.write_s,
        ranked.fsync_s,
        ranked.close_s,
        case ranked.dominant_excess_s
            when ranked.open_excess_s then 'open'
            when ranked.write_excess_s then 'write'
            when ranked.fsync_excess_s then 'fsync'
            when ranked.close_excess_s then 'close'
        end as dominant_phase,
        ranked.dominant_excess_s,
    from ranked
    left join node_leaves on ranked.node = node_leaves.node
)

select * from final;
