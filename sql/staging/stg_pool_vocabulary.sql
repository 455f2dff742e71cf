-- stg_pool_vocabulary: one row per pool metric base name: the pool vocabulary, the one list of
-- the names pool_metrics rows carry (docs/formats.md, "Pool vocabulary"). A row's metric is
-- the base name, optionally followed by `.<qualifier>`: the operation kind for metadata
-- (metadata_ops_total.open), the background kind (background_active.scrub), the queue
-- (queue_depth_total.disk: the target's block-device queue; no qualifier: the service's request
-- queue) or a job (write_ops.job=1234: Lustre job_stats). The unqualified name is the sum over
-- the operations where the source gives them per operation. stg_metric_names reads the kind here by the
-- base name (text before the first dot); names outside this list keep the unit-suffix rule.
-- Cumulative pairs: a counter with per_metric is a sum whose interval mean is its increase over
-- the increase of per_metric (same pool, target, qualifier, time), times scale, in the unit of
-- the gauge named by mean_metric: int_pool_interval_means computes them.
-- max_of: a gauge that is the max over the source's own interval of the gauge it names.
-- peak_of: a gauge that is the highest value since the counters started (Lustre's max): it
-- gives the interval's max only when it rose, or the max since a clear (int_pool_interval_means).
-- Reads no lake table, so ckptwatch.ingest.run can run this file alone (the unused-names report).
create or replace view stg_pool_vocabulary as
with
vocabulary as (
    select *
    from (
        values
            ('write_bytes', 'counter', 'bytes', null, null, null, null, null,
                'bytes written to the target'),
            ('write_ops', 'counter', 'ops', null, null, null, null, null,
                'write operations completed'),
            ('write_latency_us_total', 'counter', 'us', 'write_ops', 'write_latency_ms', 0.001,
                null, null, 'cumulative write latency; interval mean = increase / write_ops increase'),
            ('write_latency_ms', 'gauge', 'ms', null, null, null, null, null,
                'mean write latency over the source''s own interval'),
            ('write_latency_max_ms', 'gauge', 'ms', null, null, null, 'write_latency_ms', null,
                'max write latency over the source''s own interval'),
            ('write_latency_peak_ms', 'gauge', 'ms', null, null, null, null, 'write_latency_ms',
                'max write latency since the counters started (Lustre max)'),
            ('metadata_ops_total', 'counter', 'ops', null, null, null, null, null,
                'metadata operations'),
            ('metadata_latency_us_total', 'counter', 'us', 'metadata_ops_total',
                'metadata_latency_ms', 0.001, null, null,
                'cumulative metadata latency; interval mean = increase / metadata_ops_total '
                || 'increase'),
            ('metadata_latency_ms', 'gauge', 'ms', null, null, null, null, null,
                'mean metadata latency over the source''s own interval'),
            ('metadata_latency_max_ms', 'gauge', 'ms', null, null, null, 'metadata_latency_ms',
                null,
                'max metadata latency over the source''s own interval'),
            ('metadata_latency_peak_ms', 'gauge', 'ms', null, null, null, null,
                'metadata_latency_ms',
                'max metadata latency since the counters started (Lustre max)'),
            ('metadata_ops', 'gauge', 'ops/s', null, null, null, null, null,
                'metadata operations per second'),
            ('queue_requests_total', 'counter', 'requests', null, null, null, null, null,
                'requests (I/Os) whose queue was sampled on arrival'),
            ('queue_depth_total', 'counter', 'requests', 'queue_requests_total', 'queue_depth',
                1.0, null, null, 'sum over requests of the queue depth each found'),
            ('queue_wait_us_total', 'counter', 'us', 'queue_requests_total', 'queue_wait_ms',
                0.001, null, null, 'sum over requests of the time each waited in the queue'),
            ('active_requests_total', 'counter', 'requests', 'queue_requests_total',
                'active_requests', 1.0, null, null,
                'sum over requests of the requests being served when each arrived'),
            ('queue_depth', 'gauge', 'requests', null, null, null, null, null,
                'requests waiting / in flight at the target'),
            ('queue_wait_ms', 'gauge', 'ms', null, null, null, null, null,
                'mean time a request waited in the queue'),
            ('active_requests', 'gauge', 'requests', null, null, null, null, null,
                'requests being served'),
            ('background_active', 'gauge', '0..1', null, null, null, null, null,
                'activity level of background work; the kind after the dot'),
            ('gc_active', 'gauge', '0..1', null, null, null, null, null,
                'garbage collection running (= background_active.gc)'),
            ('free_blocks_pct', 'gauge', '%', null, null, null, null, null,
                'free blocks on the target'),
    ) as vocabulary (metric, kind, unit, per_metric, mean_metric, scale, max_of, peak_of,
        meaning)
),

final as (
    select
        metric,
        kind,
        unit,
        per_metric,
        mean_metric,
        cast(scale as double) as scale,
        max_of,
        peak_of,
        meaning,
    from vocabulary
)

select * from final;
