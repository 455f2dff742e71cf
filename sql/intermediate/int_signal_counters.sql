-- int_signal_counters: variables, not a view, found in one scan of the metric names when the
-- views are built (from the lake as it is then):
--   int_signal_names     every metric that is an attribution signal (int_signal_catalog over
--                        stg_metric_names: its first matching rule) as one constant list of
--                        {source_table, signal, family, kind}: int_signal_families() reads it
--   int_signal_counters  the names of its counters
--   int_signal_gauges    the names of its gauges
-- int_signal_samples computes the deltas of these counters only
-- (stg_counter_deltas_of(int_signal_counters)): the filter runs in the Parquet scan, before the
-- dedup and the window, and a simulated 512-node day's attribution reads 24 M of its 37 M
-- counter rows. int_signal_gauge_samples() reads these gauges only: a filter on the name
-- passes through the SMART and pool dedup windows (metric is one of their partition keys) into
-- the scan, where a join with the catalog would only meet the rows after the windows (on a
-- day of many SMART tools, most gauge rows are no signal: the dedup would sort every one of
-- them). The name lists are only shortcuts: int_signal_samples
-- still keeps exactly the rows its joins with the catalog keep, and with a list unset (null)
-- it reads every metric of that kind.
set variable int_signal_names = (
    with
    metric_names as (
        select * from stg_metric_names
    ),

    catalog as (
        select * from int_signal_catalog
    ),

    signals as (
        select
            metric_names.source_table,
            metric_names.metric as signal,
            arg_min(catalog.family, catalog.rule_order) as family,
            any_value(metric_names.kind) as kind,
        from metric_names
        inner join catalog
            on metric_names.source_table = catalog.source_table
            and regexp_full_match(metric_names.metric, catalog.signal_pattern)
        group by metric_names.source_table, metric_names.metric
    )

    select
        coalesce(
            list({
                'source_table': source_table, 'signal': signal, 'family': family, 'kind': kind
            } order by source_table, signal),
            []
        )
    from signals
);

set variable int_signal_counters = list_sort(list_distinct(
    [s.signal for s in getvariable('int_signal_names') if s.kind = 'counter']
));

set variable int_signal_gauges = list_sort(list_distinct(
    [s.signal for s in getvariable('int_signal_names') if s.kind = 'gauge']
));
