-- pool_metrics: every Parquet part of the lake table, hive-partitioned by date.
-- Set the lake first:  SET VARIABLE lake = 'data/lake';
create or replace view pool_metrics as
select *
from read_parquet(
    getvariable('lake') || '/pool_metrics/*/*.parquet',
    hive_partitioning = true,
    hive_types = {'date': date},
    union_by_name = true
);
