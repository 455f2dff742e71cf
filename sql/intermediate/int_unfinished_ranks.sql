-- int_unfinished_ranks: one row per (job_id, step, rank) that began a checkpoint and never
-- finished it: a start marker in stg_checkpoint_starts and no record in stg_checkpoint_writes
-- (docs/concepts.md, "unfinished"). Where the rank was last seen: its node, the node's leaf
-- switch(es), the target it was writing to (target_host: the target up to ':', as in
-- stall_ranks) and when it started.
-- The rank-level lookup is the table macro int_unfinished_ranks_of(checkpoint_relation): the
-- unfinished ranks of the checkpoints (job_id, step) of a relation of the caller (a view or a
-- CTE: query_table) and of no other. It reads the markers and the record keys of those
-- checkpoints only, and applies staging's marker rule (stg_checkpoint_starts_of) to those
-- markers only. The view is the macro over every checkpoint that may have an unfinished rank
-- (below); checkpoint_latency proves most checkpoints finished from its own per-checkpoint
-- aggregates and asks the macro about the rest.
-- The lookup reads the keys of the lake view checkpoint_writes, not stg_checkpoint_writes: any
-- record of (job_id, step, rank) means the rank finished, whichever copy staging keeps, and
-- staging's duplicate check would cost a full pass over the writes even in a lake without
-- markers.
create or replace macro int_unfinished_ranks_of(checkpoint_relation) as table
with
chosen_checkpoints as (
    select distinct
        job_id,
        step,
    from query_table(checkpoint_relation)
),

chosen_markers as (
    select checkpoint_starts.*
    from checkpoint_starts
    semi join chosen_checkpoints using (job_id, step)
),

chosen_starts as (
    select * from stg_checkpoint_starts_of('chosen_markers')
),

chosen_writes as (
    select
        checkpoint_writes.job_id,
        checkpoint_writes.step,
        checkpoint_writes.rank,
    from checkpoint_writes
    semi join chosen_checkpoints using (job_id, step)
),

node_leaves as (
    select * from int_node_leaves
),

unfinished as (
    select chosen_starts.*
    from chosen_starts
    anti join chosen_writes using (job_id, step, rank)
),

final as (
    select
        unfinished.job_id,
        unfinished.step,
        unfinished.rank,
        unfinished.tier,
        unfinished.node,
        node_leaves.leaf_switch,
        unfinished.target,
        split_part(unfinished.target, ':', 1) as target_host,
        unfinished.start_ts,
    from unfinished
    left join node_leaves on unfinished.node = node_leaves.node
)

select * from final;

-- The view: which checkpoints may have an unfinished rank, from aggregates over the markers and
-- the writes, no rank-level hash join (that cost 1.7 s over 4 M ranks when every rank has a
-- marker): per checkpoint and block of 1024 ranks, a bitmap of the ranks that started and one
-- of those that finished; a start bit without its finish bit is an unfinished rank. Only the
-- checkpoints that have markers look at their writes. Negative ranks are not in the bitmaps:
-- their checkpoints always take the rank-level lookup. A marker that staging leaves out (a long
-- identifier) may make a checkpoint look open here: the lookup then finds no unfinished rank.
create or replace view int_unfinished_ranks as
with
raw_starts as (
    select job_id, step, rank from checkpoint_starts
),

-- Not materialised: DuckDB would otherwise scan and keep every write (4 M rows of a 512-node
-- day) even on a lake with no start markers, where nothing below reads them.
writes as not materialized (
    select job_id, step, rank from checkpoint_writes
),

start_blocks as (
    select
        job_id,
        step,
        rank // 1024 as block,
        bitstring_agg(rank % 1024, 0, 1023) as started_bits,
    from raw_starts
    where rank >= 0
    group by job_id, step, rank // 1024
),

marked_checkpoints as (
    select distinct
        job_id,
        step,
    from start_blocks
),

write_blocks as (
    select
        writes.job_id,
        writes.step,
        writes.rank // 1024 as block,
        bitstring_agg(writes.rank % 1024, 0, 1023) as finished_bits,
    from writes
    semi join marked_checkpoints using (job_id, step)
    where writes.rank >= 0 and writes.rank < 2147483647
    group by writes.job_id, writes.step, writes.rank // 1024
),

open_checkpoints as (
    select distinct
        start_blocks.job_id,
        start_blocks.step,
    from start_blocks
    left join write_blocks using (job_id, step, block)
    where write_blocks.finished_bits is null
        or bit_count(start_blocks.started_bits & write_blocks.finished_bits)
        < bit_count(start_blocks.started_bits)
    union
    select distinct
        job_id,
        step,
    from raw_starts
    where rank < 0
),

final as (
    select * from int_unfinished_ranks_of('open_checkpoints')
)

select * from final;
