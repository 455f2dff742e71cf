-- int_signal_counters: variables, not a view: the names of the metrics that are attribution
-- signals (int_signal_catalog over stg_metric_names), each kind as one constant list, found in
-- one scan of the names: int_signal_counters (the counters) and int_signal_gauges (the gauges).
-- int_signal_samples computes the deltas of these counters only
-- (stg_counter_deltas_of(int_signal_counters)): the filter runs in the Parquet scan, before the
-- dedup and the window, and a simulated 512-node day's attribution reads 24 M of its 37 M
-- counter rows. int_signal_gauge_samples() reads these gauges only: a filter on the name
-- passes through the SMART and pool dedup windows (metric is one of their partition keys) into
-- the scan, where a join with the catalog would only meet the rows after the windows (a
-- world-mix 512-node day: 1.1 M of 5.5 M gauge rows, 13.8 M SMART rows through the dedup;
-- 5.8 s and 2.2 GB -> 0.9 s and 0.4 GB). They are only shortcuts: int_signal_samples still
-- keeps exactly the rows its joins with the catalog keep, and with a variable unset (null) it
-- reads every metric of that kind. Set when the views are built, from the lake as it is then.
set variable int_signal_names = (
    select {
        'counters': coalesce(
            list(distinct metric_names.metric) filter (where metric_names.kind = 'counter'), []
        ),
        'gauges': coalesce(
            list(distinct metric_names.metric) filter (where metric_names.kind = 'gauge'), []
        ),
    }
    from stg_metric_names as metric_names
    inner join int_signal_catalog as catalog
        on metric_names.source_table = catalog.source_table
        and regexp_full_match(metric_names.metric, catalog.signal_pattern)
);

set variable int_signal_counters = getvariable('int_signal_names').counters;

set variable int_signal_gauges = getvariable('int_signal_names').gauges;
