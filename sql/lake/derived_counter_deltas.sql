-- derived_counter_deltas: the counter deltas materialised by ckptwatch.lake.derived. Not a raw
-- table: the rows of stg_counter_deltas, a day at a time, each series' prev carried across
-- days. Stored in two hive-partitioned parts per day (each with a zero-row schema part): the
-- per-sample columns keyed by series_id in LAKE/derived/counter_deltas, and each series' key
-- (source_table, host, device, port, pool, counter) once per day in LAKE/derived/counter_series;
-- joined here on (date, series_id). A sample's prev_ts, interval_s and rate_per_s are not
-- stored: its interval in microseconds (interval_us) is, and they are computed here by the
-- formulas stg_counter_deltas uses (interval_seconds, counter_rate: sql/session.sql), so the
-- rows are the same (storing them was a third of a day's Parquet encoding). Read through
-- int_signal_counter_deltas, and only when ckptwatch has checked that every day read is fresh
-- (variable counter_deltas_derived). The days read: lake_since / lake_until, as for the lake
-- tables. Every part of a layout has one schema (a day of another layout is stale, never read;
-- ckptwatch rewrites a schema part of another layout), so the parts are read without
-- union_by_name: binding then opens one footer, not every part's, before the scan reads them.
create or replace view derived_counter_deltas as
with
deltas as (
    select *
    from read_parquet(
        getvariable('lake') || '/derived/counter_deltas/*/*.parquet',
        hive_partitioning = true,
        hive_types = {'date': date}
    )
    where
        date >= coalesce(getvariable('lake_since'), date '0001-01-01')
        and date <= coalesce(getvariable('lake_until'), date '9999-12-31')
),

series as (
    select *
    from read_parquet(
        getvariable('lake') || '/derived/counter_series/*/*.parquet',
        hive_partitioning = true,
        hive_types = {'date': date}
    )
    where
        date >= coalesce(getvariable('lake_since'), date '0001-01-01')
        and date <= coalesce(getvariable('lake_until'), date '9999-12-31')
),

final as (
    select
        series.source_table,
        series.host,
        series.device,
        series.port,
        series.pool,
        series.counter,
        deltas.series_id,
        deltas.ts,
        deltas.ts - to_microseconds(deltas.interval_us) as prev_ts,
        interval_seconds(deltas.interval_us) as interval_s,
        deltas.value,
        deltas.prev_value,
        deltas.delta,
        counter_rate(deltas.delta, deltas.interval_us) as rate_per_s,
        deltas.reset,
        deltas.wrapped,
        deltas.saturated,
        deltas.invalid,
        deltas.date,
    from deltas
    inner join series
        on deltas.date = series.date
        and deltas.series_id = series.series_id
)

select * from final;
