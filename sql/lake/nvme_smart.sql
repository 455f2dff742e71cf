-- nvme_smart: every Parquet part of the lake table, hive-partitioned by date.
-- Set the lake first:  SET VARIABLE lake = 'data/lake';
create or replace view nvme_smart as
select *
from read_parquet(
    getvariable('lake') || '/nvme_smart/*/*.parquet',
    hive_partitioning = true,
    hive_types = {'date': date},
    union_by_name = true
);
