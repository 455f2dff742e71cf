-- checkpoint_latency: one row per checkpoint (job_id, step): how long its ranks took, the
-- typical rank (p50) against the tail (p99, max), the barrier, the bandwidth and the phases.
-- Quantiles are exact (quantile_cont: linear interpolation between order statistics) over the
-- ranks of this one checkpoint that finished. barrier_s = the slowest rank: a synchronous
-- checkpoint holds training until the last rank is done. Every finished rank counts, whatever
-- its status (a rank that errored or timed out still held the barrier); n_ranks_not_ok says
-- how many did not finish ok.
-- Unfinished ranks (docs/concepts.md): n_started counts the ranks with a start marker,
-- n_unfinished those of them with no record (int_unfinished_ranks_of: the rows of
-- int_unfinished_ranks, looked up only for the checkpoints that per-checkpoint aggregates do not
-- prove finished, see candidate_checkpoints; n_started likewise comes from staging's blocks of
-- markers, its rows read only where staging merges or drops markers). A checkpoint with markers
-- and no finished rank is here too (n_ranks 0, rank quantiles null): it is the one that killed
-- the job. The data end is the latest time the lake's checkpoint data reaches: the latest
-- end_ts of a record or start_ts of a marker, over every job of the lake (or of the days read),
-- the latest telemetry sample (nvme_smart, fabric_counters, pool_metrics), or the latest ingest
-- of a marker: a rank without a record when its marker was ingested had
-- not finished by then (the recorder appends each record as its rank finishes). A job killed
-- at its timeout writes nothing after it: without the ingest time, its hung checkpoint would
-- look open only until its last finished rank.
-- timed_out (docs/concepts.md), for the first of these reasons (timeout_reason) that holds:
--   'status': a rank's record says it timed out (n_timed_out of them: status 'timeout', the
--     canonical value of every accepted spelling, lake.schema.STATUS_SPELLINGS);
--   'unfinished': unfinished ranks were still open at the job's timeout, that is the data
--     reaches start_ts + checkpoint_timeout_s (a job without metadata has no timeout: open at
--     the data end);
--   'barrier': the barrier reached the job's checkpoint_timeout_s.
-- For a checkpoint with unfinished ranks the barrier is a lower bound
-- (barrier_is_lower_bound): the slowest finished rank, or how long the checkpoint stayed open,
-- whichever is longer; open until start_ts + the timeout when it timed out, else until the
-- data end. end_ts is then where that known window ends and slowest_rank the unfinished rank
-- that started first. Checkpoints without markers are as they were: the starts side is a small
-- join at the checkpoint grain.
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
        min(tier) as tier_min,
        max(tier) as tier_max,
        count(*) as n_ranks,
        count(*) filter (where status <> 'ok') as n_ranks_not_ok,
        count(*) filter (where status = 'timeout') as n_timed_out,
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
        cast(min(rank) as bigint) as rank_min,
        cast(max(rank) as bigint) as rank_max,
    from writes
    group by job_id, step
),

-- The markers, a checkpoint at a time, from staging's blocks (stg_checkpoint_start_blocks_of):
-- where no block needs staging's exact path, the markers are the staged rows as they are.
marker_blocks as (
    select * from stg_checkpoint_start_blocks_of('checkpoint_starts')
),

marked_checkpoints as (
    select
        job_id,
        step,
        bool_or(needs_exact_path) as needs_exact_path,
        cast(sum(n_markers) as bigint) as n_markers,
        min(rank_min) as rank_min,
        max(rank_max) as rank_max,
        min(start_ts) as start_ts,
        max(ingested_ts) as ingested_ts,
    from marker_blocks
    group by job_id, step
),

exact_markers as (
    select checkpoint_starts.*
    from checkpoint_starts
    semi join (
        select job_id, step from marked_checkpoints where needs_exact_path
    ) using (job_id, step)
),

started as (
    select
        job_id,
        step,
        n_markers as n_started,
        start_ts,
        ingested_ts,
    from marked_checkpoints
    where not needs_exact_path
    union all
    select
        job_id,
        step,
        count(*) as n_started,
        min(start_ts) as start_ts,
        max(ingested_ts) as ingested_ts,
    from stg_checkpoint_starts_of('exact_markers')
    group by job_id, step
),

-- A checkpoint has no unfinished rank when its staged records' ranks are one run (as many
-- ranks as from the lowest to the highest: staging keeps one record per rank) that covers
-- every marker's rank: each started rank has a record. Only the others (markers but no record,
-- a gap in the records, a marker outside them) look up their ranks one by one.
candidate_checkpoints as (
    select
        marked_checkpoints.job_id,
        marked_checkpoints.step,
    from marked_checkpoints
    left join per_checkpoint using (job_id, step)
    where per_checkpoint.n_ranks is null
        or per_checkpoint.n_ranks <> per_checkpoint.rank_max - per_checkpoint.rank_min + 1
        or marked_checkpoints.rank_min < per_checkpoint.rank_min
        or marked_checkpoints.rank_max > per_checkpoint.rank_max
),

unfinished_ranks as (
    select * from int_unfinished_ranks_of('candidate_checkpoints')
),

unfinished as (
    select
        job_id,
        step,
        min(tier) as tier_min,
        max(tier) as tier_max,
        count(*) as n_unfinished,
        first(rank order by start_ts, rank) as first_open_rank,
    from unfinished_ranks
    group by job_id, step
),

-- The telemetry's latest sample counts too: a job killed at its timeout writes nothing more,
-- but the fabric, the drives and the pool keep reporting. One max over each table's ts column.
data_end as (
    select
        greatest(
            (select max(end_ts) from per_checkpoint),
            (select max(start_ts) from started),
            (select max(ingested_ts) from started),
            (select max(ts) from nvme_smart),
            (select max(ts) from fabric_counters),
            (select max(ts) from pool_metrics)
        ) as data_end_ts,
),

combined as (
    select
        job_id,
        step,
        least(per_checkpoint.tier_min, unfinished.tier_min) as tier_min,
        greatest(per_checkpoint.tier_max, unfinished.tier_max) as tier_max,
        coalesce(per_checkpoint.n_ranks, 0) as n_ranks,
        coalesce(per_checkpoint.n_ranks_not_ok, 0) as n_ranks_not_ok,
        coalesce(per_checkpoint.n_timed_out, 0) as n_timed_out,
        coalesce(started.n_started, 0) as n_started,
        coalesce(unfinished.n_unfinished, 0) as n_unfinished,
        coalesce(per_checkpoint.bytes, 0) as bytes,
        least(per_checkpoint.start_ts, started.start_ts) as start_ts,
        per_checkpoint.end_ts as finished_end_ts,
        per_checkpoint.duration_quantiles,
        per_checkpoint.max_s,
        coalesce(unfinished.first_open_rank, per_checkpoint.slowest_rank) as slowest_rank,
        per_checkpoint.open_p50_s,
        per_checkpoint.write_p50_s,
        per_checkpoint.fsync_p50_s,
        per_checkpoint.close_p50_s,
    from per_checkpoint
    full outer join unfinished using (job_id, step)
    left join started using (job_id, step)
),

judged as (
    select
        combined.*,
        jobs.n_ranks as n_ranks_expected,
        jobs.checkpoint_timeout_s,
        combined.n_unfinished > 0
            and (
                jobs.checkpoint_timeout_s is null
                or data_end.data_end_ts
                >= combined.start_ts + to_seconds(jobs.checkpoint_timeout_s)
            ) as open_at_timeout,
        case
            when combined.n_unfinished = 0 then null
            when jobs.checkpoint_timeout_s is not null
                and data_end.data_end_ts
                >= combined.start_ts + to_seconds(jobs.checkpoint_timeout_s)
                then combined.start_ts + to_seconds(jobs.checkpoint_timeout_s)
            else data_end.data_end_ts
        end as open_until_ts,
    from combined
    cross join data_end
    left join jobs using (job_id)
),

with_window as (
    select
        *,
        case
            when open_until_ts is null then finished_end_ts
            else greatest(finished_end_ts, open_until_ts)
        end as end_ts,
        case
            when open_until_ts is null then max_s
            else greatest(max_s, epoch(open_until_ts - start_ts))
        end as barrier_s,
    from judged
),

reasoned as (
    select
        *,
        case
            when n_timed_out > 0 then 'status'
            when open_at_timeout then 'unfinished'
            when barrier_s >= checkpoint_timeout_s then 'barrier'
        end as timeout_reason,
    from with_window
),

final as (
    select
        job_id,
        step,
        case when tier_min = tier_max then tier_min else 'mixed' end as tier,
        n_ranks,
        n_ranks_expected,
        n_ranks_not_ok,
        n_started,
        n_unfinished,
        bytes,
        start_ts,
        end_ts,
        epoch(end_ts - start_ts) as window_s,
        duration_quantiles[1] as p50_s,
        duration_quantiles[2] as p90_s,
        duration_quantiles[3] as p99_s,
        duration_quantiles[4] as p999_s,
        max_s,
        barrier_s,
        n_unfinished > 0 as barrier_is_lower_bound,
        timeout_reason is not null as timed_out,
        n_timed_out,
        timeout_reason,
        duration_quantiles[3] / nullif(duration_quantiles[1], 0) as p99_over_p50,
        slowest_rank,
        bytes / nullif(epoch(end_ts - start_ts), 0) as effective_bandwidth_bytes_per_s,
        open_p50_s,
        write_p50_s,
        fsync_p50_s,
        close_p50_s,
    from reasoned
)

select * from final;
