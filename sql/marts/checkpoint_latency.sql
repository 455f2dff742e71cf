-- checkpoint_latency: one row per (job_id, step): how long the ranks took, p50 vs the tail.
-- Exact quantiles (quantile_cont) over the ranks of one checkpoint; barrier_s is the slowest rank.
create or replace view checkpoint_latency as
with
writes as (
    select * from stg_checkpoint_writes
),

per_checkpoint as (
    select
        job_id,
        step,
        any_value(tier) as tier,
        count(*) as n_ranks,
        sum(bytes) as bytes,
        min(start_ts) as start_ts,
        max(end_ts) as end_ts,
        quantile_cont(duration_s, 0.5) as p50_s,
        quantile_cont(duration_s, 0.9) as p90_s,
        quantile_cont(duration_s, 0.99) as p99_s,
        quantile_cont(duration_s, 0.999) as p999_s,
        max(duration_s) as max_s,
        median(open_s) as open_p50_s,
        median(write_s) as write_p50_s,
        median(fsync_s) as fsync_p50_s,
        median(close_s) as close_p50_s,
    from writes
    group by job_id, step
),

final as (
    select
        *,
        max_s as barrier_s,
        bytes / nullif(epoch(end_ts - start_ts), 0) as effective_bandwidth_bytes_per_s,
    from per_checkpoint
)

select * from final;
