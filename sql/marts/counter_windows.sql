-- counter_windows: one row per (checkpoint, host, series of an attribution signal): what the
-- fabric, the drives and the pool did while the checkpoint ran, ready for attribution.
-- Window: the checkpoint's [start_ts, end_ts] (first rank start to last rank end). Hosts: the
-- nodes that ran its ranks and the targets they wrote to (int_checkpoint_hosts). Signals: the
-- series int_signal_catalog names (family pause | xmit_wait | cnp | traffic | gc | free_blocks
-- | metadata). Each sample closes a sampling interval (prev_ts, ts]; an interval counts for the
-- part of it that overlaps the window (overlap_s), and a counter's increase is spread evenly
-- over its interval. So, per series:
--   counter: increase = sum(delta * overlap_s / interval_s) (null when any overlapping interval
--            is saturated: unknown, not zero); rate_per_s = increase / covered_s;
--            rate_max_per_s = the highest rate of an overlapping interval
--   gauge:   value_avg = time-weighted mean over the overlap; value_min / value_max
--   level:   rate_per_s for a counter, value_avg for a gauge; baseline_level = its median over
--            the job's checkpoints (same host and series); level_vs_baseline = level / baseline
-- coverage = covered_s / window_s: how much of the window the samples describe (1.0 = all of
-- it). Coarse sampling (sample_interval_max_s much longer than window_s) dilutes short spikes.
-- Contract: counter_windows.contract.yml.
create or replace view counter_windows as
with
checkpoints as (
    select * from checkpoint_latency
),

checkpoint_hosts as (
    select * from int_checkpoint_hosts
),

samples as (
    select * from int_signal_samples
),

topology as (
    select * from stg_topology
),

node_leaves as (
    select * from int_node_leaves
),

windows as (
    select
        checkpoints.job_id,
        checkpoints.step,
        checkpoints.tier,
        checkpoints.start_ts as window_start_ts,
        checkpoints.end_ts as window_end_ts,
        checkpoints.window_s,
        checkpoint_hosts.host,
        checkpoint_hosts.is_rank_node,
        checkpoint_hosts.is_target,
        checkpoint_hosts.n_ranks_on_node,
        checkpoint_hosts.n_ranks_to_target,
    from checkpoints
    inner join checkpoint_hosts using (job_id, step)
),

-- The samples whose interval touches the window (int_window_samples), of which this mart
-- counts an interval that overlaps the window (prev_ts < end, ts > start) and a series' first
-- sample (no interval) inside it: the window on the checkpoint's own clock (outside_s = 0; the
-- clock skew's reach is attribution's, stall_signals).
overlapping as (
    select *
    from int_window_samples('windows', 'samples')
    where
        outside_s = 0
        and (prev_ts is null or (prev_ts < window_end_ts and ts > window_start_ts))
),

-- Grouped by the window's key (job_id, step, host: windows has one row per them, and the
-- window's other columns follow from it: any_value) and the series' columns: ten keys, not
-- eighteen, since a group-by's cost grows with its key (a large day has millions of pairs).
per_series as (
    select
        job_id,
        step,
        host,
        source_table,
        family,
        signal,
        kind,
        device,
        port,
        pool,
        any_value(tier) as tier,
        any_value(window_start_ts) as window_start_ts,
        any_value(window_end_ts) as window_end_ts,
        any_value(window_s) as window_s,
        any_value(is_rank_node) as is_rank_node,
        any_value(is_target) as is_target,
        any_value(n_ranks_on_node) as n_ranks_on_node,
        any_value(n_ranks_to_target) as n_ranks_to_target,
        count(*) as n_samples,
        sum(overlap_s) as covered_s,
        max(interval_s) as sample_interval_max_s,
        sum(delta * overlap_s / interval_s) as known_increase,
        max(rate_per_s) filter (where overlap_s > 0) as rate_max_per_s,
        sum(value * overlap_s) as value_seconds,
        avg(value) as value_mean,
        min(value) as value_min,
        max(value) as value_max,
        bool_or(reset) as any_reset,
        bool_or(saturated) as any_saturated,
    from overlapping
    group by job_id, step, host, source_table, family, signal, kind, device, port, pool
),

measured as (
    select
        *,
        case
            when kind = 'counter' and not any_saturated then known_increase
        end as increase,
        case
            when kind = 'counter' and not any_saturated
                then known_increase / nullif(covered_s, 0)
        end as window_rate_per_s,
        case
            when kind = 'gauge'
                then coalesce(value_seconds / nullif(covered_s, 0), value_mean)
        end as value_avg,
    from per_series
),

with_level as (
    select
        measured.*,
        coalesce(topology.leaf_switch, node_leaves.leaf_switch) as leaf_switch,
        case
            when measured.kind = 'counter' then measured.window_rate_per_s
            else measured.value_avg
        end as level,
    from measured
    left join topology
        on measured.source_table = 'fabric_counters'
        and measured.host = topology.node
        and measured.device = topology.nic
        and measured.port = topology.port
    left join node_leaves
        on measured.host = node_leaves.node
),

-- The partition names family too, though a (source_table, signal) has one family (the first
-- matching catalog rule): so a filter on family (stall_features' history of pause and
-- xmit_wait) reaches below the window, to the samples, instead of being applied after
-- every family's windows were computed.
with_baseline as (
    select
        *,
        median(level) over (
            partition by job_id, source_table, host, device, port, pool, family, signal
        ) as baseline_level,
    from with_level
),

final as (
    select
        job_id,
        step,
        tier,
        window_start_ts,
        window_end_ts,
        window_s,
        family,
        signal,
        kind,
        source_table,
        host,
        device,
        port,
        pool,
        leaf_switch,
        is_rank_node,
        is_target,
        n_ranks_on_node,
        n_ranks_to_target,
        n_samples,
        covered_s,
        covered_s / nullif(window_s, 0) as coverage,
        sample_interval_max_s,
        increase,
        window_rate_per_s as rate_per_s,
        rate_max_per_s,
        value_avg,
        case when kind = 'gauge' then value_min end as value_min,
        case when kind = 'gauge' then value_max end as value_max,
        any_reset,
        any_saturated,
        level,
        baseline_level,
        level / nullif(baseline_level, 0) as level_vs_baseline,
    from with_baseline
)

select * from final;

-- counter_window_fabric_levels(): per checkpoint and host, the level of the pause and xmit_wait
-- families summed over the host's series (counter_windows' level): the history a stall's
-- fabric level is judged against on the same host (ckptwatch.analysis.stalls: a node that
-- always pauses more while checkpointing is not singled out by doing so again). A macro, so
-- that ckptwatch.lake.signalstats can store a day's rows once and the stall step pin them.
create or replace macro counter_window_fabric_levels() as table
select
    job_id,
    step,
    host,
    family,
    sum(level) as level,
from counter_windows
where family in ('pause', 'xmit_wait')
group by job_id, step, host, family;
