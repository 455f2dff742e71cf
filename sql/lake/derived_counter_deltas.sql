-- derived_counter_deltas: the counter deltas materialised by ckptwatch.lake.derived (every part
-- of LAKE/derived/counter_deltas, hive-partitioned by date; a zero-row schema part is always
-- there). Not a raw table: the rows of stg_counter_deltas, a day at a time, each series' prev
-- carried across days. Read through int_signal_counter_deltas, and only when ckptwatch has
-- checked that every day read is fresh (variable counter_deltas_derived). The days read:
-- lake_since / lake_until, as for the lake tables.
create or replace view derived_counter_deltas as
select *
from read_parquet(
    getvariable('lake') || '/derived/counter_deltas/*/*.parquet',
    hive_partitioning = true,
    hive_types = {'date': date},
    union_by_name = true
)
where
    date >= coalesce(getvariable('lake_since'), date '0001-01-01')
    and date <= coalesce(getvariable('lake_until'), date '9999-12-31');
