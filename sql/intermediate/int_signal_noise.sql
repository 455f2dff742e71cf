-- int_signal_noise: each signal series' own noise, for evidence measured against it (robust
-- z-scores in ckptwatch.analysis.stalls). Grain: (host, family, signal), with signal named as
-- in stall_signals: the fabric families (pause, xmit_wait, cnp) summed over the host's NICs,
-- ports and counters; drive and pool signals per signal, over the host's drives. One more
-- signal per host: write_amplification, the NAND (OCP physical media) bytes over the host
-- bytes (SMART data units) written in each interval of each drive's common time base
-- (int_signal_write_amplification(): the two tools sample at their own moments and cadences),
-- whatever the sampling cadence (one 2-minute interval may span a whole checkpoint); its
-- median and MAD per host: int_signal_wa_noise().
-- median_level: counters: median interval rate (summed over the host's series); gauges: median
-- value (averaged). mad_level: the median absolute deviation from that median, combined the
-- same way (a sum of MADs bounds the MAD of a sum). n_samples: intervals (or values) it rests
-- on; median_interval_s: the series' usual sampling interval. Over every sample the connection
-- sees (its days): median and MAD are robust to the stalls inside them.
--
-- int_signal_series(): a table macro beside the view, the one per-series statistics pass that
-- this view and stall_signals (its baseline_level) both read. Grain: one row per series
-- (host, family, signal_group, device, port, signal); kind; n_samples (the values x it rests
-- on); median_interval_s; median_x (counters: the median interval rate, gauges: the median
-- value); mad_x (the median of |x - median_x|); source_table (the lake table of its samples: a
-- series' host, device and port are of one table); pool (a pool series' pool); first_ts, last_ts: the time it spans (the
-- start of its first counted interval, its last sample), which stall_coverage reads. x is a
-- counter's rate_per_s over its intervals that are no reset (a reset interval's rate is the
-- restarted counter's value over the interval: not the series' rate), a gauge's value. One
-- scan of the samples: each series' values are gathered once, and its median and MAD are both
-- taken of that list (the same median as the aggregate's: the list's values are the values).
-- A macro, not a view, so that ckptwatch.lake.seam.pinned_views can have both readers
-- read one computed table.
create or replace macro int_signal_series() as table
with
samples as (
    select * from int_signal_samples
),

series_values as (
    select
        host,
        family,
        case
            when family in ('pause', 'xmit_wait', 'cnp') then family
            else signal
        end as signal_group,
        device,
        port,
        signal,
        kind,
        source_table,
        pool,
        ts,
        prev_ts,
        interval_s,
        case when kind = 'counter' then rate_per_s else value end as x,
    from samples
    where
        family <> 'traffic'
        and (kind = 'gauge' or (rate_per_s is not null and not reset))
),

series_lists as (
    select
        host,
        family,
        signal_group,
        device,
        port,
        signal,
        any_value(kind) as kind,
        any_value(source_table) as source_table,
        any_value(pool) as pool,
        count(x) as n_samples,
        median(interval_s) as median_interval_s,
        min(coalesce(prev_ts, ts)) as first_ts,
        max(ts) as last_ts,
        list(x) filter (where x is not null) as xs,
    from series_values
    group by host, family, signal_group, device, port, signal
),

series_medians as (
    select
        * exclude (xs),
        list_aggregate(xs, 'median') as median_x,
        xs,
    from series_lists
),

final as (
    select
        * exclude (xs),
        list_aggregate(list_transform(xs, lambda v: abs(v - median_x)), 'median') as mad_x,
    from series_medians
)

select * from final;

-- int_pool_services(): one row per (pool, host) of the pool telemetry int_signal_series() holds:
-- is_metadata_service when the host carries metadata signals and nothing of the data path (no
-- writes, GC or background work: only metadata and queue series): a Lustre MDT (fs-MDT0000),
-- an MDS, a DAOS pool service. A target that carries both (the long CSV's targets) is a data
-- target, whose metadata series attribution reads as before. The one rule: stall_signals and
-- stall_coverage look for a stall's metadata evidence on the metadata services of its data
-- targets' pools, besides its data targets.
create or replace macro int_pool_services() as table
with
series as (
    select * from int_signal_series()
    where source_table = 'pool_metrics' and pool is not null
),

final as (
    select
        pool,
        host,
        bool_or(family = 'metadata') and bool_and(family in ('metadata', 'queue'))
            as is_metadata_service,
    from series
    group by pool, host
)

select * from final;

create or replace view int_signal_noise as
with
series_noise as (
    select * from int_signal_series()
),

per_group as (
    select
        host,
        family,
        signal_group as signal,
        any_value(kind) as kind,
        cast(min(n_samples) as bigint) as n_samples,
        median(median_interval_s) as median_interval_s,
        case when any_value(kind) = 'counter' then sum(median_x) else avg(median_x) end
            as median_level,
        case when any_value(kind) = 'counter' then sum(mad_x) else avg(mad_x) end as mad_level,
    from series_noise
    group by host, family, signal_group
),

-- Each drive's intervals on its common time base (both counters' increases over one span).
wa_intervals as (
    select * from int_signal_write_amplification()
),

wa_noise as (
    select
        host,
        'gc' as family,
        'write_amplification' as signal,
        'ratio' as kind,
        n_samples,
        median_interval_s,
        median_level,
        mad_level,
    from int_signal_wa_noise('wa_intervals')
),

final as (
    select * from per_group
    union all
    select
        host,
        family,
        signal,
        kind,
        cast(n_samples as bigint) as n_samples,
        median_interval_s,
        median_level,
        mad_level,
    from wa_noise
)

select * from final;
