-- slow_hosts: one row per (job_id, node): over the job's checkpoint saves, how often the host's
-- ranks are among the slowest and by how much, with a significance figure, so that a host that
-- is consistently a few percent slow is named even when no checkpoint is a stall
-- (docs/slow-hosts.md).
-- Per checkpoint (job_id, step) with ranks on at least two named hosts (node 'unknown' is not a
-- host: its ranks count in the checkpoint's median, but it gets no row):
--   host duration = the median of the host's ranks' duration_s;
--   excess = host duration - the checkpoint's rank median (p50), in seconds and % of p50;
--   slowest = the host's slowest rank is at or above the checkpoint's rank p90 (top decile);
--   above / below = the host duration is above / below the checkpoint's median.
-- Over the job's checkpoints: n_slowest, the median excess, and p_value, a one-sided sign
-- test: the chance of the host being above the median at least n_above_median times out of
-- n_above_median + n_below_median (ties dropped) if every host were alike (each side 1/2).
-- is_slow: p_value <= slow_host_max_p_value, median_excess_pct >= slow_host_min_excess_pct and
-- n_checkpoints >= slow_host_min_checkpoints (defaults below; SET VARIABLE to override).
-- Contract: slow_hosts.contract.yml.
create or replace view slow_hosts as
with
writes as (
    select * from stg_checkpoint_writes
),

settings as (
    select
        cast(getvariable('slow_host_max_p_value') as double) as max_p_value,
        cast(getvariable('slow_host_min_excess_pct') as double) as min_excess_pct,
        cast(getvariable('slow_host_min_checkpoints') as bigint) as min_checkpoints,
),

checkpoints as (
    select
        job_id,
        step,
        median(duration_s) as p50_s,
        quantile_cont(duration_s, 0.9) as p90_s,
    from writes
    group by job_id, step
),

host_checkpoints as (
    select
        job_id,
        step,
        node,
        count(*) as n_ranks,
        median(duration_s) as host_s,
        max(duration_s) as host_max_s,
    from writes
    where node <> 'unknown'
    group by job_id, step, node
),

compared as (
    select
        host_checkpoints.*,
        count(*) over (partition by job_id, step) as n_hosts,
    from host_checkpoints
),

judged as (
    select
        compared.job_id,
        compared.step,
        compared.node,
        compared.n_ranks,
        compared.n_hosts,
        compared.host_s - checkpoints.p50_s as excess_s,
        100.0 * (compared.host_s - checkpoints.p50_s) / nullif(checkpoints.p50_s, 0)
            as excess_pct,
        compared.host_max_s >= checkpoints.p90_s as is_slowest,
        compared.host_s > checkpoints.p50_s as is_above,
        compared.host_s < checkpoints.p50_s as is_below,
    from compared
    inner join checkpoints using (job_id, step)
    where compared.n_hosts >= 2
),

per_host as (
    select
        job_id,
        node,
        count(*) as n_checkpoints,
        count(*) filter (where is_slowest) as n_slowest,
        count(*) filter (where is_above) as n_above_median,
        count(*) filter (where is_below) as n_below_median,
        median(excess_s) as median_excess_s,
        median(excess_pct) as median_excess_pct,
        max(excess_pct) as max_excess_pct,
        max(n_ranks) as n_ranks,
        max(n_hosts) as n_hosts,
    from judged
    group by job_id, node
),

sign_terms as (
    select
        per_host.job_id,
        per_host.node,
        exp(
            lgamma(n + 1) - lgamma(i + 1) - lgamma(n - i + 1) - n * ln(2)
        ) as probability,
    from per_host
    cross join lateral (
        select
            per_host.n_above_median + per_host.n_below_median as n,
        ) as trials
    cross join lateral (
        select unnest(range(per_host.n_above_median, trials.n + 1)) as i,
    ) as outcomes
),

sign_test as (
    select
        job_id,
        node,
        least(sum(probability), 1.0) as p_value,
    from sign_terms
    group by job_id, node
),

final as (
    select
        per_host.job_id,
        per_host.node,
        per_host.n_ranks,
        per_host.n_hosts,
        per_host.n_checkpoints,
        per_host.n_slowest,
        per_host.n_slowest / per_host.n_checkpoints as slowest_share,
        per_host.n_above_median,
        per_host.n_below_median,
        per_host.median_excess_s,
        per_host.median_excess_pct,
        per_host.max_excess_pct,
        sign_test.p_value,
        per_host.n_checkpoints >= settings.min_checkpoints
            and sign_test.p_value <= settings.max_p_value
            and coalesce(per_host.median_excess_pct >= settings.min_excess_pct, false)
            as is_slow,
    from per_host
    inner join sign_test using (job_id, node)
    cross join settings
)

select * from final;
