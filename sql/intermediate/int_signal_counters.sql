-- int_signal_counters: a variable, not a view: the names of the counters that are attribution
-- signals (int_signal_catalog over stg_metric_names), as one constant list. int_signal_samples
-- computes the deltas of these counters only (stg_counter_deltas_of(int_signal_counters)): the
-- filter runs in the Parquet scan, before the dedup and the window, and a simulated 512-node
-- day's attribution reads 24 M of its 37 M counter rows. It is only a shortcut:
-- int_signal_samples still keeps exactly the rows its join with the catalog keeps, and with the
-- variable unset (null) it computes every counter. Set when the views are built, from the lake
-- as it is then.
set variable int_signal_counters = (
    select coalesce(list(distinct metric_names.metric), [])
    from stg_metric_names as metric_names
    inner join int_signal_catalog as catalog
        on metric_names.source_table = catalog.source_table
        and regexp_full_match(metric_names.metric, catalog.signal_pattern)
    where metric_names.kind = 'counter'
);
