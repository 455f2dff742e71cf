-- stg_jobs: one row per job_id; the most recently ingested metadata wins.
create or replace view stg_jobs as
with
source as (
    select * from jobs
),

ranked as (
    select
        *,
        row_number() over (
            partition by job_id order by ingested_ts desc, source_file desc
        ) as dup_rank,
    from source
),

final as (
    select
        job_id,
        n_ranks,
        checkpoint_timeout_s,
        checkpoint_interval_s,
        step_time_s,
        gpus_per_node,
    from ranked
    where dup_rank = 1
)

select * from final;
