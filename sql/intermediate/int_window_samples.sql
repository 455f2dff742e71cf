-- int_window_samples: a table macro, not a view: the one join of checkpoint windows with signal
-- samples, which counter_windows and stall_signals both read (sql/README.md, "Signals during a
-- checkpoint window", says how each then counts the samples).
-- int_window_samples(window_relation, sample_relation): the names of two relations of the
-- caller (a view, or a CTE of the calling query: query_table):
--   windows: one row per (window, host), with host, window_start_ts, window_end_ts;
--   samples: rows of int_signal_samples (host, ts, prev_ts, …), possibly filtered or extended.
-- Every other column of either passes through (the samples' host is the windows' host).
-- One row per (window row, sample) whose sampling interval touches the window: the interval
-- (prev_ts, ts] (for a series' first sample, no prev_ts: the instant ts) has
-- ts >= window_start_ts and coalesce(prev_ts, ts) <= window_end_ts. Each mart keeps the part
-- of these pairs its own overlap rule counts. overlap_s: the seconds the interval spends inside
-- the window (0 for a first sample, and for an interval that only touches a window's edge).
-- Windows meet samples through 5-minute buckets (a join on host alone would pair every window
-- with every sample of its host); each pair meets once, in its first shared bucket. The bucket
-- size sets only the speed, never which pairs come out. Hash joins build on the windows (the
-- right side, sql/session.sql): far fewer rows than the samples.
-- Only the samples near a window are bucketed (near_samples): a sample whose interval lies in
-- one bucket, or in two, can share one with a window only where its closing bucket (of ts) is a
-- window's bucket on its host or the one after it: one look-up of (host, bucket) per sample,
-- in a table of a few thousand rows (the stalls' windows are tiny against a day). Intervals
-- longer than a bucket (rare: a gap in a series) are all bucketed. The pairs are the same as
-- bucketing every sample: a pair shares a bucket, and a sample left out shares none. On the
-- 512-node bench day 1.6 M of its 21 M samples go on (the unnest of every sample, 25 M rows,
-- was the largest operator of stall_signals: 15 s of its 58 CPU s; now 4 s).
create or replace macro int_window_samples(window_relation, sample_relation) as table
with
window_rows as (
    select * from query_table(window_relation)
),

sample_rows as (
    select * from query_table(sample_relation)
),

window_buckets as (
    select
        *,
        epoch_us(window_start_ts) // 300000000 as first_bucket,
        unnest(range(
            epoch_us(window_start_ts) // 300000000, epoch_us(window_end_ts) // 300000000 + 1
        )) as bucket,
    from window_rows
),

-- (host, bucket) where a sample's closing bucket (of ts) can meet a window: a window's bucket
-- (an interval within one bucket) or the one after it (an interval over two buckets).
near_buckets as (
    select distinct host, bucket + shift as bucket,
    from window_buckets, (values (0), (1)) as shifts (shift)
),

-- An interval over more than two buckets is longer than one bucket (5 minutes): those all go on.
near_samples as (
    select sample_rows.*,
    from sample_rows
    left join near_buckets
        on sample_rows.host = near_buckets.host
        and epoch_us(sample_rows.ts) // 300000000 = near_buckets.bucket
    where
        near_buckets.bucket is not null
        or epoch_us(sample_rows.ts) - epoch_us(sample_rows.prev_ts) > 300000000
),

sample_buckets as (
    select
        *,
        epoch_us(coalesce(prev_ts, ts)) // 300000000 as sample_first_bucket,
        unnest(range(
            epoch_us(coalesce(prev_ts, ts)) // 300000000, epoch_us(ts) // 300000000 + 1
        )) as bucket,
    from near_samples
),

touching as (
    select
        window_buckets.* exclude (first_bucket, bucket),
        sample_buckets.* exclude (host, sample_first_bucket, bucket),
        case
            when sample_buckets.prev_ts is null then 0.0
            else epoch(
                least(sample_buckets.ts, window_buckets.window_end_ts)
                - greatest(sample_buckets.prev_ts, window_buckets.window_start_ts)
            )
        end as overlap_s,
    from sample_buckets
    inner join window_buckets
        on sample_buckets.host = window_buckets.host
        and sample_buckets.bucket = window_buckets.bucket
    where
        window_buckets.bucket
        = greatest(window_buckets.first_bucket, sample_buckets.sample_first_bucket)
        and sample_buckets.ts >= window_buckets.window_start_ts
        and coalesce(sample_buckets.prev_ts, sample_buckets.ts) <= window_buckets.window_end_ts
)

select * from touching;
