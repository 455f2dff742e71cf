-- int_pool_jobs: one row per job id of the pool's per-job statistics (Lustre job_stats: the
-- `job=<id>` qualifier, int_pool_interval_means.job_id) that names a checkpoint job:
-- pool_job_id (as the pool printed it), job_id (the checkpoint records' and jobs' id) and
-- matched_by: 'id' (the same text) or 'key' (the same scheduler job id by the session's
-- pool_job_key_pattern / record_job_key_pattern, sql/session.sql; only where that key names
-- one checkpoint job and one pool job, so that job-10 of one naming and 10 of another never
-- meet a third job by accident). A pool job id that names no checkpoint job has no row.
create or replace view int_pool_jobs as
with
pool_jobs as (
    select distinct job_id as pool_job_id
    from int_pool_interval_means
    where job_id is not null
),

record_jobs as (
    select job_id from stg_checkpoint_writes
    union
    select job_id from stg_jobs
),

by_id as (
    select
        pool_jobs.pool_job_id,
        record_jobs.job_id,
        'id' as matched_by,
    from pool_jobs
    inner join record_jobs on pool_jobs.pool_job_id = record_jobs.job_id
),

pool_keys as (
    select
        regexp_extract(pool_job_id, getvariable('pool_job_key_pattern'), 1) as job_key,
        any_value(pool_job_id) as pool_job_id,
    from pool_jobs
    where pool_job_id not in (select pool_job_id from by_id)
    group by job_key
    having job_key <> '' and count(*) = 1
),

record_keys as (
    select
        regexp_extract(job_id, getvariable('record_job_key_pattern'), 1) as job_key,
        any_value(job_id) as job_id,
    from record_jobs
    group by job_key
    having job_key <> '' and count(*) = 1
),

by_key as (
    select
        pool_keys.pool_job_id,
        record_keys.job_id,
        'key' as matched_by,
    from pool_keys
    inner join record_keys using (job_key)
),

final as (
    select * from by_id
    union all
    select * from by_key
)

select * from final;
