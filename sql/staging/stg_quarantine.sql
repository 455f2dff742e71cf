-- stg_quarantine: one row per rejected record: which file, which line, why, and its raw text.
create or replace view stg_quarantine as
with
source as (
    select * from quarantine
),

final as (
    select
        source_file,
        "table" as lake_table,
        line,
        reason,
        raw,
        ingested_ts,
    from source
)

select * from final;
