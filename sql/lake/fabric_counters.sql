-- fabric_counters: every Parquet part of the lake table, hive-partitioned by date.
-- Set the lake first:  SET VARIABLE lake = 'data/lake';
create or replace view fabric_counters as
select *
from read_parquet(
    getvariable('lake') || '/fabric_counters/*/*.parquet',
    hive_partitioning = true,
    hive_types = {'date': date},
    union_by_name = true
);
