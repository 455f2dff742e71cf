-- int_signal_catalog: which telemetry series are attribution signals, and of which family.
-- The one place signal names are listed: a pattern (regular expression, full match) over the
-- canonical counter / metric names of one lake table. Families: pause (PFC / link pause frames),
-- xmit_wait (InfiniBand PortXmitWait), cnp (congestion notifications, ECN marks), traffic
-- (bytes moved), gc (drive / target garbage collection: media vs host writes, busy time,
-- gc_active, background_active.<kind>), free_blocks, metadata. The first matching rule (lowest
-- rule_order) wins. Two more families are no raw metric of a table but interval means of the
-- pool (int_pool_interval_means, added by int_signal_samples): write_latency (write_latency_ms)
-- and queue (queue_depth, queue_wait_ms, active_requests).
-- Whether a series is a counter or a gauge is not decided here (see stg_metric_names).
create or replace view int_signal_catalog as
with
rules as (
    select *
    from (
        values
            (1, 'fabric_counters', '(rx|tx)_prio[0-7]_pause', 'pause',
                'PFC pause frames per priority (ethtool -S, mlx5 names)'),
            (2, 'fabric_counters', 'pfc_(rx|tx)_pause_frames_prio[0-7]', 'pause',
                'PFC pause frames per priority (alias names)'),
            (3, 'fabric_counters', '(rx|tx)_pause(_ctrl_phy|_frames)?', 'pause',
                'link-level (global) pause frames'),
            (4, 'fabric_counters', 'pause_ctrl_(rx|tx)_frames', 'pause',
                'link-level (global) pause frames (alias names)'),
            (5, 'fabric_counters', 'port_xmit_wait', 'xmit_wait',
                'InfiniBand PortXmitWait: ticks a port had data but could not send'),
            (6, 'fabric_counters', '.*(cnp|ecn_marked).*', 'cnp',
                'RoCE congestion notification packets and ECN-marked packets'),
            (7, 'fabric_counters', '(port_(xmit|rcv)_(bytes|data))|((rx|tx)_bytes(_phy)?)',
                'traffic', 'bytes sent / received on the port'),
            (10, 'nvme_smart', 'media_written_bytes', 'gc',
                'NAND (physical media) bytes written: over host bytes = write amplification'),
            (11, 'nvme_smart', 'host_written_bytes', 'gc',
                'host bytes written: the denominator of write amplification'),
            (12, 'nvme_smart', 'controller_busy_time_min', 'gc',
                'minutes the controller was busy with I/O'),
            (13, 'nvme_smart', '.*free_blocks.*', 'free_blocks', 'free NAND blocks left'),
            (20, 'pool_metrics', 'gc_active', 'gc', 'pool target garbage collection running'),
            (21, 'pool_metrics', '.*free_blocks.*', 'free_blocks', 'free blocks on the target'),
            (22, 'pool_metrics', 'metadata_.*', 'metadata',
                'metadata service latency and operations'),
            (23, 'pool_metrics', 'write_bytes', 'traffic', 'bytes written to the target'),
            (24, 'pool_metrics', 'background_active([.].+)?', 'gc',
                'background work on the target, its kind after the dot (gc, aggregation, '
                || 'compaction, scrub, rebuild, restripe): GC-like when on the slow ranks'' '
                || 'targets only'),
    ) as rules (rule_order, source_table, signal_pattern, family, description)
),

final as (
    select
        rule_order,
        source_table,
        signal_pattern,
        family,
        description,
    from rules
)

select * from final;
