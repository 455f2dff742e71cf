-- int_window_samples: a table macro, not a view: the one join of checkpoint windows with signal
-- samples, which counter_windows and stall_signals both read (sql/README.md, "Signals during a
-- checkpoint window", says how each then counts the samples).
-- int_window_samples(window_relation, sample_relation): the names of two relations of the
-- caller (a view, or a CTE of the calling query: query_table):
--   windows: one row per (window, host), with host, window_start_ts, window_end_ts;
--   samples: rows of int_signal_samples (host, ts, prev_ts, …), possibly filtered or extended.
-- Every other column of either passes through (the samples' host is the windows' host).
-- One row per (window row, sample) whose sampling interval touches the window widened by the
-- clock skew, clock_skew_s (sql/session.sql) on each side: the interval (prev_ts, ts] (for a
-- series' first sample, no prev_ts: the instant ts) has ts >= window_start_ts - skew and
-- coalesce(prev_ts, ts) <= window_end_ts + skew. The window's host and the samples' host keep
-- their own clocks, a few seconds apart: a sample that closes 1 s before the window on one
-- clock may close inside it on the other. outside_s: the seconds by which the interval misses
-- the window itself (0: it touches [window_start_ts, window_end_ts]; at most the skew). Each
-- mart keeps the part of these pairs its own rule counts. overlap_s: the seconds the interval
-- spends inside the window itself (0 for a first sample, for an interval that only touches a
-- window's edge, and for one that misses it): the skew admits an interval, never weighs it.
-- Windows meet samples through 5-minute buckets (a join on host alone would pair every window
-- with every sample of its host). The bucket size sets only the speed, never which pairs come
-- out. Hash joins build on the windows (the right side, sql/session.sql): far fewer rows than
-- the samples.
-- A sample whose interval is at most one bucket long (nearly all: a series sampled at least
-- every 5 minutes) can touch a window's reach (the window widened by the skew: reach_start_ts,
-- reach_end_ts) only with ts in [reach_start_ts, reach_end_ts + 5 min] (ts >= reach start;
-- prev_ts <= reach end and ts - prev_ts <= 5 min): its ts lies in one of the reach's buckets
-- or the one after them. Each window lists those buckets, and such a sample joins on
-- the bucket of its ts alone: it meets each window once, in one row of its own. A longer
-- interval (a gap in a series) is unnested over every bucket it covers and meets a window in
-- their first shared bucket (the greater of the two first buckets, which lies in both ranges
-- wherever they touch). Before the join, only the samples near a window go on (near_samples:
-- one look-up of (host, bucket of ts) in the windows' buckets; long intervals all go on): the
-- stalls' windows are tiny against a day. Short intervals are not unnested: unnesting every
-- interval over the buckets it spans would feed the join a row per bucket crossed, for the
-- same pairs.
create or replace macro int_window_samples(window_relation, sample_relation) as table
with
window_rows as (
    select * from query_table(window_relation)
),

-- The window as far as another host's clock may place it: widened by the skew on each side.
reach_rows as (
    select
        *,
        window_start_ts - to_microseconds(skew_us) as reach_start_ts,
        window_end_ts + to_microseconds(skew_us) as reach_end_ts,
    from window_rows
    cross join (
        select cast(round(coalesce(getvariable('clock_skew_s'), 0) * 1e6) as bigint) as skew_us
    )
),

sample_rows as (
    select * from query_table(sample_relation)
),

-- A window's buckets (of its reach) and the one after them (where a short interval that
-- starts inside the reach closes).
window_buckets as (
    select
        *,
        epoch_us(reach_start_ts) // 300000000 as first_bucket,
        unnest(range(
            epoch_us(reach_start_ts) // 300000000, epoch_us(reach_end_ts) // 300000000 + 2
        )) as bucket,
    from reach_rows
),

near_buckets as (
    select distinct host, bucket from window_buckets
),

-- spans_buckets: the interval is longer than a bucket (a first sample has none).
near_samples as (
    select
        sample_rows.*,
        coalesce(epoch_us(sample_rows.ts) - epoch_us(sample_rows.prev_ts) > 300000000, false)
            as spans_buckets,
    from sample_rows
    left join near_buckets
        on sample_rows.host = near_buckets.host
        and epoch_us(sample_rows.ts) // 300000000 = near_buckets.bucket
    where near_buckets.bucket is not null or spans_buckets
),

-- Short intervals (and first samples): the bucket of ts, one row per sample. Long ones: every
-- bucket they cover, with the first (sample_first_bucket) to meet a window once.
sample_buckets as (
    select
        *,
        epoch_us(prev_ts) // 300000000 as sample_first_bucket,
        unnest(case
            when spans_buckets
                then range(epoch_us(prev_ts) // 300000000, epoch_us(ts) // 300000000 + 1)
            else [epoch_us(ts) // 300000000]
        end) as bucket,
    from near_samples
),

touching as (
    select
        window_buckets.* exclude (skew_us, reach_start_ts, reach_end_ts, first_bucket, bucket),
        sample_buckets.* exclude (host, spans_buckets, sample_first_bucket, bucket),
        case
            when sample_buckets.prev_ts is null then 0.0
            else greatest(epoch(
                least(sample_buckets.ts, window_buckets.window_end_ts)
                - greatest(sample_buckets.prev_ts, window_buckets.window_start_ts)
            ), 0.0)
        end as overlap_s,
        greatest(
            epoch_us(window_buckets.window_start_ts) - epoch_us(sample_buckets.ts),
            epoch_us(coalesce(sample_buckets.prev_ts, sample_buckets.ts))
            - epoch_us(window_buckets.window_end_ts),
            0
        ) / 1000000.0 as outside_s,
    from sample_buckets
    inner join window_buckets
        on sample_buckets.host = window_buckets.host
        and sample_buckets.bucket = window_buckets.bucket
    where
        (
            not sample_buckets.spans_buckets
            or window_buckets.bucket
            = greatest(window_buckets.first_bucket, sample_buckets.sample_first_bucket)
        )
        and sample_buckets.ts >= window_buckets.reach_start_ts
        and coalesce(sample_buckets.prev_ts, sample_buckets.ts) <= window_buckets.reach_end_ts
)

select * from touching;
