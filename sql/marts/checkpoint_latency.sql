-- checkpoint_latency: one row per checkpoint (job_id, step): how long its ranks took, the
-- typical rank (p50) against the tail (p99, max), the barrier, the bandwidth and the phases.
-- Quantiles are exact (quantile_cont: linear interpolation between order statistics) over the
-- ranks of this one checkpoint. barrier_s = the slowest rank: a synchronous checkpoint holds
-- training until the last rank is done. Every rank counts, whatever its status (a rank that
-- errored or timed out still held the barrier); n_ranks_not_ok says how many did not finish ok.
-- Contract: checkpoint_latency.contract.yml.
create or replace view checkpoint_latency as
with
writes as (
    select * from stg_checkpoint_writes
),

jobs as (
    select * from stg_jobs
),

per_checkpoint as (
    select
        job_id,
        step,
        case when min(tier) = max(tier) then min(tier) else 'mixed' end as tier,
        count(*) as n_ranks,
        count(*) filter (where status <> 'ok') as n_ranks_not_ok,
        cast(sum(bytes) as bigint) as bytes,
        min(start_ts) as start_ts,
        max(end_ts) as end_ts,
        quantile_cont(duration_s, [0.5, 0.9, 0.99, 0.999]) as duration_quantiles,
        max(duration_s) as max_s,
        arg_max(rank, duration_s) as slowest_rank,
        median(open_s) as open_p50_s,
        median(write_s) as write_p50_s,
        median(fsync_s) as fsync_p50_s,
        median(close_s) as close_p50_s,
    from writes
    group by job_id, step
),

with_window as (
    select
        *,
        epoch(end_ts - start_ts) as window_s,
    from per_checkpoint
),

final as (
    select
        with_window.job_id,
        with_window.step,
        with_window.tier,
        with_window.n_ranks,
        jobs.n_ranks as n_ranks_expected,
        with_window.n_ranks_not_ok,
        with_window.bytes,
        with_window.start_ts,
        with_window.end_ts,
        with_window.window_s,
        with_window.duration_quantiles[1] as p50_s,
        with_window.duration_quantiles[2] as p90_s,
        with_window.duration_quantiles[3] as p99_s,
        with_window.duration_quantiles[4] as p999_s,
        with_window.max_s,
        with_window.max_s as barrier_s,
        with_window.duration_quantiles[3] / nullif(with_window.duration_quantiles[1], 0)
            as p99_over_p50,
        with_window.slowest_rank,
        with_window.bytes / nullif(with_window.window_s, 0) as effective_bandwidth_bytes_per_s,
        with_window.open_p50_s,
        with_window.write_p50_s,
        with_window.fsync_p50_s,
        with_window.close_p50_s,
    from with_window
    left join jobs using (job_id)
)

select * from final;
