-- stg_jobs: one row per job_id; the most recently ingested metadata wins (ties: later file).
create or replace view stg_jobs as
with
source as (
    select * from jobs
    where not ids_over_limit(greatest(length(job_id)))  -- see int_lake_skipped_rows
),

latest as (
    select *
    from source
    qualify row_number() over (
        partition by job_id
        order by ingested_ts desc, source_file desc
    ) = 1
),

final as (
    select
        job_id,
        n_ranks,
        checkpoint_timeout_s,
        checkpoint_interval_s,
        step_time_s,
        gpus_per_node,
        source_file,
        ingested_ts,
    from latest
)

select * from final;
