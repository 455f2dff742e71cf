-- int_signal_write_amplification(): each drive's write amplification on a common time base:
-- one row per interval (prev_ts, ts] between two instants of the drive's sparser counter, with
-- both counters' increases over exactly that interval. Grain: (host, device, ts).
-- Write amplification is the NAND (OCP physical media) bytes over the host (SMART data units)
-- bytes written. The two come from two commands (smartctl or nvme smart-log, and nvme ocp
-- smart-add-log), run at two moments (seconds apart), each on its own jittered cadence (30 s
-- to 15 min; one may be 10x denser): their samples never share a timestamp, so the two series
-- meet on common instants, never by an equal ts. The instants are the samples of the counter
-- with fewer samples (a tie: the host bytes); the other counter's cumulative value at each is
-- interpolated linearly between its readings just before and just after it (its own reading
-- when one falls on the instant). The denser counter is the one interpolated, so the error is
-- at most its own short interval's share of a burst. Two tools run seconds apart: nearly exact.
-- Two tools at one cadence but far apart in phase smear a burst over the neighbouring intervals
-- (each series has only its own samples to say when bytes were written).
-- At the series' ends the other counter may have a reading on one side of an instant only (the
-- day's first smartctl run seconds before the first OCP log): the instant then moves to that
-- reading when it lies inside the sparser counter's neighbouring interval, whose two readings
-- give the sparser counter's value there (interpolated, as the other's are), so that a stall
-- inside a drive's first interval has its ratio. Nothing is extrapolated.
-- An interval is left out when either counter restarted (reset, stg_counter_deltas) between the
-- readings it rests on. Deltas are never negative (the raw values rise between resets). wa: media
-- over host bytes (null when no host bytes were written).
-- Read by int_signal_noise (each host's median and MAD of wa) and stall_signals (the ratio over
-- a stall's window): a macro, so that ckptwatch.analysis.stalls pins it once per attribution
-- call (PINNED_SAMPLES). As-of joins rather than one window pass with first_value /
-- last_value over range frames: range frames over the interleaved series cost several times
-- more on a 512-node day's SMART samples.
create or replace macro int_signal_write_amplification() as table
with
samples as (
    select * from int_signal_samples
),

-- The two counters of each drive; drive_id: (host, device) as one integer, the key of the
-- as-of joins below (one integer is several times cheaper than two strings); ts_us: the
-- instant as an integer, to interpolate on.
drive_samples as (
    select
        hash(host, device) as drive_id,
        host,
        device,
        signal = 'media_written_bytes' as is_media,
        ts,
        epoch_us(ts) as ts_us,
        value,
        reset,
    from samples
    where kind = 'counter' and signal in ('media_written_bytes', 'host_written_bytes')
),

-- The sparser counter of each drive gives the instants (a tie: the host bytes).
drives as (
    select
        drive_id,
        count(*) filter (where is_media) < count(*) filter (where not is_media)
            as media_is_base,
    from drive_samples
    group by drive_id
),

sided as (
    select
        drive_samples.*,
        drive_samples.is_media = drives.media_is_base as is_base,
    from drive_samples
    inner join drives using (drive_id)
),

-- The sparser counter's readings with their neighbours (an instant at the series' ends moves
-- inside the neighbouring interval).
base as (
    select
        *,
        lag(ts_us) over drive as prev_base_ts_us,
        lag(value) over drive as prev_base_value,
        lead(ts_us) over drive as next_base_ts_us,
        lead(value) over drive as next_base_value,
    from sided
    where is_base
    window drive as (partition by drive_id order by ts_us)
),

other as (
    select drive_id, ts_us, value, reset, from sided where not is_base
),

other_resets as (
    select drive_id, ts_us, from other where reset
),

-- Each instant with the other counter's last reading at or before it and first at or after it
-- (as-of joins; at a series' ends one of them may be missing).
bracketed as (
    select
        base.drive_id,
        base.host,
        base.device,
        base.is_media,
        base.ts,
        base.ts_us,
        base.value,
        base.reset,
        base.prev_base_ts_us,
        base.prev_base_value,
        base.next_base_ts_us,
        base.next_base_value,
        before.ts_us as before_ts_us,
        before.value as before_value,
        after.ts_us as after_ts_us,
        after.value as after_value,
    from base
    asof left join other as before
        on base.drive_id = before.drive_id
        and base.ts_us >= before.ts_us
    asof left join other as after
        on base.drive_id = after.drive_id
        and base.ts_us <= after.ts_us
),

-- The instants and the other counter's readings each rests on: inside both series, the
-- sparser counter's reading and the other's on both sides; at the start, the other's first
-- reading when it comes before the sparser counter's second (the sparser one interpolated
-- there); at the end, likewise the other's last reading after the sparser one's last but one.
rested as (
    select
        drive_id,
        host,
        device,
        is_media,
        ts,
        ts_us as reading_ts_us,
        case
            when before_ts_us is null then after_ts_us
            when after_ts_us is null then before_ts_us
            else ts_us
        end as instant_us,
        case
            when before_ts_us is null then value + (next_base_value - value)
                * (after_ts_us - ts_us) / (next_base_ts_us - ts_us)
            when after_ts_us is null then prev_base_value + (value - prev_base_value)
                * (before_ts_us - prev_base_ts_us) / (ts_us - prev_base_ts_us)
            else value
        end as value,
        reset,
        coalesce(before_ts_us, after_ts_us) as before_ts_us,
        coalesce(before_value, after_value) as before_value,
        coalesce(after_ts_us, before_ts_us) as after_ts_us,
        coalesce(after_value, before_value) as after_value,
    from bracketed
    where
        (before_ts_us is not null and after_ts_us is not null)
        or (before_ts_us is null and after_ts_us is not null
            and after_ts_us < next_base_ts_us)
        or (after_ts_us is null and before_ts_us is not null
            and before_ts_us > prev_base_ts_us)
),

placed as (
    select
        drive_id,
        host,
        device,
        is_media,
        ts + to_microseconds(instant_us - reading_ts_us) as ts,
        instant_us as ts_us,
        value,
        reset,
        before_ts_us,
        before_value,
        after_ts_us,
        after_value,
    from rested
),

-- The other counter's last restart up to the reading after the instant.
with_restarts as (
    select
        placed.*,
        other_resets.ts_us as other_reset_ts_us,
    from placed
    asof left join other_resets
        on placed.drive_id = other_resets.drive_id
        and placed.after_ts_us >= other_resets.ts_us
),

instants as (
    select
        *,
        case
            when after_ts_us = before_ts_us then before_value
            else before_value + (after_value - before_value)
                * (ts_us - before_ts_us) / (after_ts_us - before_ts_us)
        end as other_value,
    from with_restarts
),

intervals as (
    select
        *,
        lag(ts) over drive as prev_ts,
        lag(ts_us) over drive as prev_ts_us,
        lag(value) over drive as prev_value,
        lag(other_value) over drive as prev_other_value,
        lag(before_ts_us) over drive as prev_before_ts_us,
    from instants
    window drive as (partition by drive_id order by ts_us)
),

-- Consecutive instants are consecutive samples of the sparser counter: it restarted in the
-- interval when its closing sample says so (reset); the other counter, when its last restart
-- up to the reading after the interval's end lies after the reading before its start.
deltas as (
    select
        host,
        device,
        prev_ts,
        ts,
        interval_seconds(ts_us - prev_ts_us) as interval_s,
        case when is_media then value - prev_value else other_value - prev_other_value end
            as media_delta,
        case when is_media then other_value - prev_other_value else value - prev_value end
            as host_delta,
    from intervals
    where
        prev_ts is not null
        and not reset
        and (other_reset_ts_us is null or other_reset_ts_us <= prev_before_ts_us)
),

final as (
    select
        *,
        media_delta / nullif(host_delta, 0) as wa,
    from deltas
)

select * from final;

-- int_signal_wa_noise(wa_relation): per host, the median and MAD of its drives' interval ratios
-- (the intervals with host bytes written), over a relation of the caller holding rows of
-- int_signal_write_amplification() (query_table: a CTE of the calling query, so that a query
-- reading the intervals twice computes them once). n_samples: the intervals it rests on;
-- median_interval_s: their usual length (the sparser tool's cadence). The one definition of the
-- write amplification noise: int_signal_noise (every host) and stall_signals (its
-- baseline_level) read it. One pass: each host's ratios gathered once, median and MAD of that
-- list (as int_signal_series()).
create or replace macro int_signal_wa_noise(wa_relation) as table
with
intervals as (
    select
        host,
        interval_s,
        wa,
    from query_table(wa_relation)
    where host_delta > 0 and media_delta >= 0
),

host_lists as (
    select
        host,
        count(*) as n_samples,
        median(interval_s) as median_interval_s,
        list(wa) as was,
    from intervals
    group by host
),

host_medians as (
    select
        *,
        list_aggregate(was, 'median') as median_level,
    from host_lists
),

final as (
    select
        host,
        n_samples,
        median_interval_s,
        median_level,
        list_aggregate(list_transform(was, lambda v: abs(v - median_level)), 'median')
            as mad_level,
    from host_medians
)

select * from final;
