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

sample_buckets as (
    select
        *,
        epoch_us(coalesce(prev_ts, ts)) // 300000000 as sample_first_bucket,
        unnest(range(
            epoch_us(coalesce(prev_ts, ts)) // 300000000, epoch_us(ts) // 300000000 + 1
        )) as bucket,
    from sample_rows
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
