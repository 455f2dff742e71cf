-- checkpoint_loads: every Parquet part of the lake table, hive-partitioned by date.
-- Set the lake first:  SET VARIABLE lake = 'data/lake';
-- Optionally only some days: SET VARIABLE lake_since / lake_until = DATE '…' (inclusive;
-- unset: every day). DuckDB then opens only those days' files: the nightly run reads the
-- report day and its lookback, however many days the lake keeps.
create or replace view checkpoint_loads as
select *
from read_parquet(
    getvariable('lake') || '/checkpoint_loads/*/*.parquet',
    hive_partitioning = true,
    hive_types = {'date': date},
    union_by_name = true
)
where
    date >= coalesce(getvariable('lake_since'), date '0001-01-01')
    and date <= coalesce(getvariable('lake_until'), date '9999-12-31');
