-- postmortem_signals: one row per (panel, host, ts): the signals the stall post-mortem plots
-- (ckptwatch.report.postmortem.SIGNAL_PANELS), from int_signal_samples. Panels: pause and
-- xmit_wait (counter rates over the sampling interval that ends at ts, frames/s and ticks/s,
-- summed over the host's NICs, ports and counters, as in stall_signals), gc_active (fraction),
-- free_blocks (%) and metadata_latency (ms) (gauges: the sample's value, averaged over the
-- host's drives or series). The post-mortem selects its window with
-- `where ts >= $t0 and ts <= $t1`.
create or replace view postmortem_signals as
with
samples as (
    select * from int_signal_samples
),

panels as (
    select
        case
            when family in ('pause', 'xmit_wait') then family
            when signal = 'gc_active' then 'gc_active'
            when family = 'free_blocks' then 'free_blocks'
            when signal = 'metadata_latency_ms' then 'metadata_latency'
        end as panel,
        host,
        ts,
        kind,
        case when kind = 'counter' then rate_per_s else value end as v,
    from samples
),

final as (
    select
        panel,
        host,
        ts,
        case when any_value(kind) = 'counter' then sum(v) else avg(v) end as value,
    from panels
    where panel is not null and v is not null
    group by panel, host, ts
)

select * from final;
