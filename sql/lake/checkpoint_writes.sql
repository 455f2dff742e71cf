-- checkpoint_writes: every Parquet part of the lake table, hive-partitioned by date.
-- Set the lake first:  SET VARIABLE lake = 'data/lake';
create or replace view checkpoint_writes as
select *
from read_parquet(
    getvariable('lake') || '/checkpoint_writes/*/*.parquet',
    hive_partitioning = true,
    hive_types = {'date': date},
    union_by_name = true
);
