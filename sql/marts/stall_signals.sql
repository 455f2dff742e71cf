-- stall_signals: for each stall (see stalls), what every signal family did on each host the
-- checkpoint touched, during the checkpoint's window, against that series' own baseline.
-- Grain: (job_id, step, host, family, signal). Fabric families (pause, xmit_wait, cnp) are
-- summed over the host's NICs, ports and counters (frames/s, ticks/s); drive and pool signals
-- stay per signal (media_written_bytes, host_written_bytes, controller_busy_time_min,
-- gc_active, free_blocks_pct, metadata_latency_ms, …), summed over the host's drives; and
-- write_amplification, a ratio (below).
-- window level: each sampling interval weighed by the seconds it spends inside the window
-- (overlap_s of int_window_samples), never requiring a sample inside it (a 2-minute SMART
-- interval may span the whole checkpoint): counters: the overlap-weighted mean of the
-- intervals' rates; gauges: the overlap-weighted mean of the samples closing those intervals;
-- min and max over them. Where no interval overlaps by a positive time (a series' first sample,
-- an interval that only touches the window's edge), the unweighted form: the increase over the
-- intervals divided by their length, the mean of the samples.
-- baseline_level: the same series' median over all its samples (counters: median interval
-- rate; gauges: median value), summed like the window level: median_x of int_signal_series()
-- (int_signal_noise.sql), the one per-series pass int_signal_noise reads too. A counter's
-- reset intervals are left out of it, as int_signal_noise leaves them out (a reset interval's
-- rate is the restarted counter's value over the interval, not the series' rate; its rate is
-- not null: stg_counter_deltas gives it delta = the new value). A reset is rare (one interval
-- of one series on a 512-node day), so leaving it out moves no median; it keeps the two
-- baselines one definition.
-- write_amplification (family gc, kind ratio): per host, the NAND over the host bytes written
-- on its drives' common time base (int_signal_write_amplification(): the two tools sample at
-- their own moments, never paired by an equal ts), over its intervals begun before the end,
-- each weighed by its share inside the window (as the counters' rates are); baseline_level:
-- the host's median of it (int_signal_wa_noise(), as int_signal_noise's); level_min / level_max: the
-- lowest and highest interval ratio.
-- Host roles: is_rank_node (ran ranks), is_target (received writes: a pool target, or the node
-- of a local device '<node>:<device>'; a striped record's targets, joined by commas, each),
-- is_metadata_service (a metadata service of the pool of the ranks' targets:
-- int_pool_services(); no rank on it), is_slow_host (a slow rank of stall_ranks ran or wrote
-- there). Pool interval means (int_signal_samples): write_latency_ms (family write_latency),
-- queue_depth / queue_wait_ms / active_requests (family queue), metadata_latency_ms from the
-- pool's counters (family metadata), as gauges.
create or replace view stall_signals as
with
stalls as (
    select * from stalls where is_stall
),

ranks as (
    select * from stall_ranks
),

samples as (
    select * from int_signal_samples
),

node_leaves as (
    select * from int_node_leaves
),

-- A striped record names its targets joined by commas (fs-OST0001,fs-OST0002): the rank
-- wrote to each.
rank_targets as (
    select
        job_id,
        step,
        is_slow,
        trim(unnest(string_split(target_host, ','))) as host,
    from ranks
    where target_host is not null
),

pool_services as (
    select * from int_pool_services()
),

-- The metadata services (int_pool_services()) of the pools the ranks' targets belong to: where
-- a striped file system keeps its metadata (an MDT, a DAOS pool service), not a data target.
metadata_hosts as (
    select distinct
        rank_targets.job_id,
        rank_targets.step,
        services.host,
    from rank_targets
    inner join pool_services as data_targets on rank_targets.host = data_targets.host
    inner join pool_services as services
        on data_targets.pool = services.pool
        and services.is_metadata_service
),

rank_hosts as (
    select
        job_id, step, node as host, true as is_rank_node, false as is_target,
        false as is_metadata_service, 1 as n_ranks, is_slow,
    from ranks
    union all
    select
        job_id, step, host, false as is_rank_node, true as is_target,
        false as is_metadata_service, 1 as n_ranks, is_slow,
    from rank_targets
    where host <> ''
    union all
    select
        job_id, step, host, false as is_rank_node, false as is_target,
        true as is_metadata_service, 0 as n_ranks, false as is_slow,
    from metadata_hosts
),

host_roles as (
    select
        job_id,
        step,
        host,
        bool_or(is_rank_node) as is_rank_node,
        bool_or(is_target) as is_target,
        bool_or(is_metadata_service) as is_metadata_service,
        cast(sum(n_ranks) as bigint) as n_ranks,
        count(*) filter (where is_slow) as n_slow_ranks,
    from rank_hosts
    group by job_id, step, host
),

-- Every host's samples, not only the stalls' hosts: a semi join here has DuckDB build its hash
-- table on the ~20 M samples of a 512-node day (its estimate of them is far too low); the
-- window join below keeps the stalls' hosts.
series_samples as (
    select
        samples.*,
        case
            when samples.family in ('pause', 'xmit_wait', 'cnp') then samples.family
            else samples.signal
        end as signal_group,
    from samples
    where samples.family <> 'traffic'
),

baselines as (
    select host, device, port, signal, median_x,
    from int_signal_series()
),

stall_hosts as (
    select
        stalls.job_id,
        stalls.step,
        stalls.start_ts as window_start_ts,
        stalls.end_ts as window_end_ts,
        host_roles.host,
    from stalls
    inner join host_roles using (job_id, step)
),

-- The samples whose interval touches the checkpoint's window (int_window_samples), of which
-- this mart counts every interval that has begun before the window ends (a series' first
-- sample: inside [start_ts, end_ts)), whole: an interval ending at start_ts counts too.
-- Clock skew (clock_skew_s, sql/session.sql): a series none of whose intervals meets that rule
-- on the checkpoint's clock counts the intervals that meet it within the skew (begun before
-- end_ts + skew, ended at or after start_ts - skew), with no overlap weight: the unweighted
-- form below. So a telemetry host's clock a few seconds off hides no series (its last sample
-- 1 s before the window, its first 1 s after), and a series the window reaches itself counts
-- as before: the skew never adds samples to it.
reaching as (
    select
        *,
        outside_s = 0 and coalesce(prev_ts, ts) < window_end_ts as on_window_clock,
    from int_window_samples('stall_hosts', 'series_samples')
    where
        coalesce(prev_ts, ts)
        < window_end_ts + to_microseconds(
            cast(round(coalesce(getvariable('clock_skew_s'), 0) * 1e6) as bigint)
        )
),

in_window as (
    select * exclude (on_window_clock)
    from reaching
    qualify
        on_window_clock
        or not bool_or(on_window_clock) over (
            partition by job_id, step, host, family, device, port, signal
        )
),

per_series as (
    select
        in_window.job_id,
        in_window.step,
        in_window.host,
        in_window.family,
        in_window.signal_group,
        in_window.device,
        in_window.port,
        in_window.signal,
        any_value(in_window.kind) as kind,
        count(*) as n_samples,
        coalesce(
            sum(in_window.rate_per_s * in_window.overlap_s)
            / nullif(sum(in_window.overlap_s) filter (where in_window.rate_per_s is not null), 0),
            sum(in_window.delta) / nullif(sum(in_window.interval_s), 0)
        ) as window_rate_per_s,
        coalesce(
            sum(in_window.value * in_window.overlap_s)
            / nullif(sum(in_window.overlap_s) filter (where in_window.value is not null), 0),
            avg(in_window.value)
        ) as window_value,
        min(in_window.value) as window_min,
        max(in_window.value) as window_max,
        max(in_window.interval_s) as sample_interval_max_s,
        bool_or(in_window.saturated) as any_saturated,
        bool_or(in_window.reset) as any_reset,
    from in_window
    group by all
),

counter_groups as (
    select
        per_series.job_id,
        per_series.step,
        per_series.host,
        per_series.family,
        per_series.signal_group as signal,
        any_value(per_series.kind) as kind,
        count(*) as n_series,
        cast(sum(per_series.n_samples) as bigint) as n_samples,
        max(per_series.sample_interval_max_s) as sample_interval_max_s,
        case
            when any_value(per_series.kind) = 'counter' then sum(per_series.window_rate_per_s)
            else avg(per_series.window_value)
        end as level,
        min(per_series.window_min) as level_min,
        max(per_series.window_max) as level_max,
        case
            when any_value(per_series.kind) = 'counter' then sum(baselines.median_x)
            else avg(baselines.median_x)
        end as baseline_level,
        bool_or(per_series.any_saturated) as any_saturated,
        bool_or(per_series.any_reset) as any_reset,
    from per_series
    left join baselines
        on per_series.host = baselines.host
        and per_series.signal = baselines.signal
        and per_series.device is not distinct from baselines.device
        and per_series.port is not distinct from baselines.port
    group by all
),

wa_intervals as (
    select * from int_signal_write_amplification()
),

wa_baselines as (
    select host, median_level,
    from int_signal_wa_noise('wa_intervals')
),

wa_in_window as (
    select *
    from int_window_samples('stall_hosts', 'wa_intervals')
    where prev_ts < window_end_ts and outside_s = 0  -- the window itself, not the skew's reach
),

-- overlap_s / interval_s: the interval's share inside the window; where none overlaps by a
-- positive time (an interval touching the window's edge), the plain ratio of the increases.
wa_groups as (
    select
        wa_in_window.job_id,
        wa_in_window.step,
        wa_in_window.host,
        'gc' as family,
        'write_amplification' as signal,
        'ratio' as kind,
        count(distinct wa_in_window.device) as n_series,
        count(*) as n_samples,
        max(wa_in_window.interval_s) as sample_interval_max_s,
        coalesce(
            sum(wa_in_window.media_delta * wa_in_window.overlap_s / wa_in_window.interval_s)
            / nullif(
                sum(wa_in_window.host_delta * wa_in_window.overlap_s / wa_in_window.interval_s),
                0
            ),
            sum(wa_in_window.media_delta) / nullif(sum(wa_in_window.host_delta), 0)
        ) as level,
        min(wa_in_window.wa) as level_min,
        max(wa_in_window.wa) as level_max,
        any_value(wa_baselines.median_level) as baseline_level,
        false as any_saturated,
        false as any_reset,
    from wa_in_window
    left join wa_baselines on wa_in_window.host = wa_baselines.host
    group by wa_in_window.job_id, wa_in_window.step, wa_in_window.host
),

per_group as (
    select * from counter_groups
    union all by name
    select * from wa_groups
),

final as (
    select
        per_group.job_id,
        per_group.step,
        per_group.host,
        host_roles.is_rank_node,
        host_roles.is_target,
        host_roles.is_metadata_service,
        host_roles.n_ranks,
        host_roles.n_slow_ranks,
        host_roles.n_slow_ranks > 0 as is_slow_host,
        node_leaves.leaf_switch,
        per_group.family,
        per_group.signal,
        per_group.kind,
        per_group.n_series,
        per_group.n_samples,
        per_group.sample_interval_max_s,
        per_group.level,
        per_group.level_min,
        per_group.level_max,
        per_group.baseline_level,
        per_group.level / nullif(per_group.baseline_level, 0) as level_vs_baseline,
        per_group.any_saturated,
        per_group.any_reset,
    from per_group
    inner join host_roles using (job_id, step, host)
    left join node_leaves on per_group.host = node_leaves.node
)

select * from final;
