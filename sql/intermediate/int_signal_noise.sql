-- int_signal_noise: each signal series' own noise, for evidence measured against it (robust
-- z-scores in ckptwatch.analysis.stalls). Grain: (host, family, signal), with signal named as
-- in stall_signals: the fabric families (pause, xmit_wait, cnp) summed over the host's NICs,
-- ports and counters; drive and pool signals per signal, over the host's drives. One more
-- signal per host: write_amplification, the NAND (OCP physical media) bytes over the host
-- bytes (SMART data units) written in each sampling interval of each drive, whatever the
-- sampling cadence (one 2-minute interval may span a whole checkpoint).
-- median_level: counters: median interval rate (summed over the host's series); gauges: median
-- value (averaged). mad_level: the median absolute deviation from that median, combined the
-- same way (a sum of MADs bounds the MAD of a sum). n_samples: intervals (or values) it rests
-- on; median_interval_s: the series' usual sampling interval. Over every sample the connection
-- sees (its days): median and MAD are robust to the stalls inside them.
create or replace view int_signal_noise as
with
-- Not materialised (samples, series_values): their readers (the medians, the deviations from
-- them, write amplification) would otherwise have DuckDB store every sample first (~21 M rows
-- of a 512-node day: gigabytes spilled under a 2 GB cap); each reader scans what it needs.
samples as not materialized (
    select * from int_signal_samples
),

series_values as not materialized (
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
        interval_s,
        case when kind = 'counter' then rate_per_s else value end as x,
    from samples
    where
        family <> 'traffic'
        and (kind = 'gauge' or (rate_per_s is not null and not reset))
),

series_medians as (
    select
        host,
        family,
        signal_group,
        device,
        port,
        signal,
        any_value(kind) as kind,
        count(x) as n_samples,
        median(interval_s) as median_interval_s,
        median(x) as median_x,
    from series_values
    group by host, family, signal_group, device, port, signal
),

series_noise as (
    select
        series_medians.host,
        series_medians.family,
        series_medians.signal_group,
        series_medians.device,
        series_medians.port,
        series_medians.signal,
        any_value(series_medians.kind) as kind,
        any_value(series_medians.n_samples) as n_samples,
        any_value(series_medians.median_interval_s) as median_interval_s,
        any_value(series_medians.median_x) as median_x,
        median(abs(series_values.x - series_medians.median_x)) as mad_x,
    -- The hash table on the medians (one row per series), not on the samples (sql/session.sql).
    from series_values
    inner join series_medians
        on series_medians.host = series_values.host
        and series_medians.signal = series_values.signal
        and series_medians.device is not distinct from series_values.device
        and series_medians.port is not distinct from series_values.port
    group by all
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

media_intervals as (
    select host, device, ts, delta as media_delta,
    from samples
    where signal = 'media_written_bytes' and kind = 'counter' and not reset
),

host_intervals as (
    select host, device, ts, delta as host_delta, interval_s,
    from samples
    where signal = 'host_written_bytes' and kind = 'counter' and not reset
),

wa_intervals as (
    select
        host_intervals.host,
        host_intervals.interval_s,
        media_intervals.media_delta / host_intervals.host_delta as wa,
    from host_intervals
    inner join media_intervals using (host, device, ts)
    where host_intervals.host_delta > 0 and media_intervals.media_delta >= 0
),

wa_medians as (
    select
        host,
        count(*) as n_samples,
        median(interval_s) as median_interval_s,
        median(wa) as median_level,
    from wa_intervals
    group by host
),

wa_noise as (
    select
        wa_medians.host,
        'gc' as family,
        'write_amplification' as signal,
        'ratio' as kind,
        any_value(wa_medians.n_samples) as n_samples,
        any_value(wa_medians.median_interval_s) as median_interval_s,
        any_value(wa_medians.median_level) as median_level,
        median(abs(wa_intervals.wa - wa_medians.median_level)) as mad_level,
    from wa_intervals
    inner join wa_medians using (host)
    group by wa_medians.host
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
