-- stg_metric_names: one row per (source_table, metric): every counter / metric name present in
-- fabric_counters, nvme_smart and pool_metrics, its kind and, for counters, its limits.
-- kind: counter: cumulative (deltas in stg_counter_deltas); gauge: a level that passes through.
-- Every fabric counter is cumulative. A pool metric whose base name (the text before the first
-- dot: write_ops.job=1234 -> write_ops) is in the pool vocabulary (stg_pool_vocabulary) has the
-- vocabulary's kind (write_ops: counter); for any other SMART or pool metric the unit suffix of
-- the whole name decides (units live in names: host_written_bytes, write_bytes, power_on_hours,
-- controller_busy_time_min, …); a name that matches no counter suffix is a gauge
-- (temperature_c, free_blocks_pct, gc_active, metadata_latency_ms, critical_warning, and the
-- pool's metadata_ops, which the pool format reports as operations per second; a cumulative
-- count would be metadata_ops_total).
-- Counter limits, the one place they are listed (stg_counter_deltas applies them): saturate_at,
-- the value a counter stops at instead of wrapping (a sample exactly there is saturated: its
-- interval's increase is unknown); wrap_at, the modulus it wraps at (a drop of more than
-- wrap_at / 2 is a wrap, a smaller drop a reset); null: none; limits_reason: which rule and why.
-- The first matching rule (lowest rule_order; name_pattern: regular expression, full match)
-- wins; a name no rule matches (every SMART and pool metric) has neither, so every drop of it is
-- a reset. saturate_at is matched exactly, not as a floor: perfquery -x, sysfs counters_ext and
-- node_exporter give 64-bit values under the legacy names (port_xmit_data, …), which pass the
-- legacy ceiling without stopping there. The 4-bit legacy counters (local_link_integrity_errors,
-- excessive_buffer_overrun_errors) get no ceiling: a 64-bit one resting at 15 is too likely.
create or replace view stg_metric_names as
with
fabric as (
    select * from fabric_counters
),

smart as (
    select * from nvme_smart
),

pool as (
    select * from pool_metrics
),

pool_vocabulary as (
    select * from stg_pool_vocabulary
),

counter_suffixes as (
    select *
    from (
        values
            ('_bytes', 'bytes moved since power-on or reset'),
            ('_commands', 'commands completed'),
            ('_count', 'events counted'),
            ('_total', 'events counted (Prometheus style)'),
            ('_events', 'events counted'),
            ('_errors', 'errors counted'),
            ('_entries', 'log entries counted'),
            ('_shutdowns', 'shutdowns counted'),
            ('_cycles', 'power cycles counted'),
            ('_hours', 'hours accumulated'),
            ('_min', 'minutes accumulated (busy time, time over temperature)'),
    ) as counter_suffixes (name_suffix, meaning)
),

counter_limits as (
    select *
    from (
        values
            (1, 'fabric_counters', 'port_(xmit|rcv)_(data|packets)|port_xmit_wait',
                2 ** 32 - 1, null,
                'legacy IBA PortCounters (sysfs counters/, perfquery without -x): 32 bits, '
                || 'stop at 2^32-1'),
            (2, 'fabric_counters', 'port_(xmit|rcv)_bytes', 4 * (2 ** 32 - 1), null,
                'bytes derived from the 32-bit word counters (words x 4)'),
            (3, 'fabric_counters',
                'symbol_error|port_rcv_errors|port_rcv_remote_physical_errors'
                || '|port_rcv_switch_relay_errors|port_xmit_discards|VL15_dropped',
                2 ** 16 - 1, null, 'legacy IBA PortCounters: 16 bits, stop at 2^16-1'),
            (4, 'fabric_counters',
                'link_error_recovery|link_downed|port_(xmit|rcv)_constraint_errors',
                2 ** 8 - 1, null, 'legacy IBA PortCounters: 8 bits, stop at 2^8-1'),
            (5, 'fabric_counters',
                'rx_(write|read|atomic)_requests|out_of_buffer|out_of_sequence'
                || '|duplicate_request|rnr_nak_retry_err|packet_seq_err|implied_nak_seq_err'
                || '|local_ack_timeout_err|resp_local_length_error|(resp|req)_cqe_error'
                || '|req_remote_invalid_request|(req|resp)_remote_access_errors'
                || '|(resp|req)_cqe_flush_error|roce_adp_retrans(_to)?'
                || '|roce_slow_restart(_cnps|_trans)?|rx_out_of_buffer|rx_if_down_packets',
                null, 2 ** 32,
                'mlx5 queue counters (RDMA hw_counters, ethtool rx_out_of_buffer): the '
                || 'driver reads a 32-bit register, so the value wraps at 2^32'),
            (9, 'fabric_counters', '.*', 2 ** 32 - 1, 2 ** 64,
                'any other fabric counter: 64 bits, wraps at 2^64; a value of exactly 2^32-1 '
                || 'is a 32-bit counter stuck at its maximum'),
    ) as counter_limits (rule_order, source_table, name_pattern, saturate_at, wrap_at, reason)
),

names as (
    select distinct 'fabric_counters' as source_table, counter as metric from fabric
    union all
    select distinct 'nvme_smart' as source_table, metric from smart
    union all
    select distinct 'pool_metrics' as source_table, metric from pool
),

by_suffix as (
    select
        names.source_table,
        names.metric,
        case
            when names.source_table = 'fabric_counters' then 'counter'
            when count(counter_suffixes.name_suffix) > 0 then 'counter'
            else 'gauge'
        end as kind,
    from names
    left join counter_suffixes on ends_with(names.metric, counter_suffixes.name_suffix)
    group by names.source_table, names.metric
),

kinds as (
    select
        by_suffix.source_table,
        by_suffix.metric,
        coalesce(pool_vocabulary.kind, by_suffix.kind) as kind,
    from by_suffix
    left join pool_vocabulary
        on by_suffix.source_table = 'pool_metrics'
        and split_part(by_suffix.metric, '.', 1) = pool_vocabulary.metric
),

limits as (
    select
        names.source_table,
        names.metric,
        cast(counter_limits.saturate_at as double) as saturate_at,
        cast(counter_limits.wrap_at as double) as wrap_at,
        counter_limits.reason as limits_reason,
    from names
    inner join counter_limits
        on names.source_table = counter_limits.source_table
        and regexp_full_match(names.metric, counter_limits.name_pattern)
    qualify row_number() over (
        partition by names.source_table, names.metric
        order by counter_limits.rule_order
    ) = 1
),

final as (
    select
        kinds.source_table,
        kinds.metric,
        kinds.kind,
        limits.saturate_at,
        limits.wrap_at,
        limits.limits_reason,
    from kinds
    left join limits using (source_table, metric)
)

select * from final;
