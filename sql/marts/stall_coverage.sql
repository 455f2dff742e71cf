-- stall_coverage: for each stall (see stalls), which telemetry families reached the hosts of its
-- slow ranks during its window: what attribution can judge before it judges anything.
-- Grain: one row per stall. The ranks looked at: the stall's slow ranks (stall_ranks.is_slow),
-- or all its ranks when none is slow. Their nodes and their targets' hosts (a pool target, or
-- the node of a local device) are the hosts.
-- Families (the causes that need them: ckptwatch.analysis.attribution.NEEDS):
--   fabric        pause / PortXmitWait counters on a node (fabric_pause)
--   smart         SMART / OCP drive signals on a target host (gc: write amplification, busy
--                 time, free blocks)
--   pool          pool target signals on a target host: pool_gc (gc_active, free blocks: gc)
--                 and pool_metadata (metadata latency and operations: metadata)
--   topology      a known leaf switch for a node (no cause needs it: leaf evidence)
--   phases        open/write/fsync/close seconds in a rank's record, against the job's normal
--                 (metadata_excess_s of stall_ranks: metadata)
-- A series reached a stall when the time it spans (first_ts .. last_ts of int_signal_series(),
-- the per-series pass attribution pins already: no scan of the samples here) overlaps the
-- stall's window widened on both sides by coverage_tolerance_s (sql/session.sql) or by the
-- series' own median sampling interval, whichever is longer: tools keep their own clocks and
-- sample on their own cadence (SMART every few minutes), so no timestamp has to line up with
-- the checkpoint's. A series with a gap across the window still reaches it (its interval spans
-- the window, which stall_signals counts whole too).
-- telemetry / missing: the families present / absent, in the order above (pool: either part;
-- never missing when no rank looked at writes to the pool tier: local drives have no pool).
-- fabric_missing_nodes / fabric_missing_leaves: the nodes looked at that no fabric counter
-- reached, and their leaf switches: what evidence names when fabric_pause cannot be judged.
create or replace view stall_coverage as
with
stalls as (
    select * from stalls where is_stall
),

ranks as (
    select * from stall_ranks
),

series as (
    select * from int_signal_series()
),

-- At least the clock skew stall_signals tolerates (clock_skew_s): a series it counts has
-- reached the stall.
settings as (
    select
        cast(greatest(
            getvariable('coverage_tolerance_s'), getvariable('clock_skew_s')
        ) as double) as tolerance_s,
),

-- The slow ranks, or every rank of a stall without slow ranks.
looked_at as (
    select
        ranks.job_id,
        ranks.step,
        ranks.node,
        ranks.target_host,
        ranks.leaf_switch,
        ranks.metadata_excess_s,
        ranks.tier,
    from ranks
    qualify
        coalesce(ranks.is_slow, false)
        or not bool_or(coalesce(ranks.is_slow, false)) over (partition by ranks.job_id, ranks.step)
),

-- A striped record's targets are joined by commas; the metadata services of their pools
-- (int_pool_services(): an MDT, a DAOS pool service) carry their metadata telemetry.
looked_at_targets as (
    select distinct job_id, step, trim(unnest(string_split(target_host, ','))) as host,
    from looked_at
    where target_host is not null
),

pool_services as (
    select * from int_pool_services()
),

host_roles as (
    select distinct job_id, step, node as host, 'node' as role, leaf_switch,
    from looked_at
    union
    select job_id, step, host, 'target' as role, null as leaf_switch,
    from looked_at_targets
    where host <> ''
    union
    select looked_at_targets.job_id, looked_at_targets.step, services.host,
        'metadata_service' as role, null as leaf_switch,
    from looked_at_targets
    inner join pool_services as data_targets on looked_at_targets.host = data_targets.host
    inner join pool_services as services
        on data_targets.pool = services.pool
        and services.is_metadata_service
),

host_windows as (
    select
        host_roles.*,
        stalls.start_ts as window_start_ts,
        stalls.end_ts as window_end_ts,
    from host_roles
    inner join stalls using (job_id, step)
),

-- Per host and feed, the time its series span (a row per host and feed: a few per host).
feeds as (
    select
        host,
        case
            when family in ('pause', 'xmit_wait') then 'fabric'
            when source_table = 'nvme_smart' then 'smart'
            when family = 'metadata' then 'pool_metadata'
            else 'pool_gc'
        end as feed,
        min(first_ts) as first_ts,
        max(last_ts) as last_ts,
        max(median_interval_s) as interval_s,
    from series
    where
        family in ('pause', 'xmit_wait')
        or (source_table = 'nvme_smart' and family in ('gc', 'free_blocks'))
        or (source_table = 'pool_metrics' and family in ('gc', 'free_blocks', 'metadata'))
    group by all
),

reached as (
    select
        host_windows.job_id,
        host_windows.step,
        host_windows.host,
        host_windows.role,
        any_value(host_windows.leaf_switch) as leaf_switch,
        coalesce(bool_or(feeds.feed = 'fabric'), false) and host_windows.role = 'node'
            as fabric,
        coalesce(bool_or(feeds.feed = 'smart'), false) and host_windows.role = 'target'
            as smart,
        coalesce(bool_or(feeds.feed = 'pool_gc'), false) and host_windows.role = 'target'
            as pool_gc,
        coalesce(bool_or(feeds.feed = 'pool_metadata'), false)
        and host_windows.role in ('target', 'metadata_service') as pool_metadata,
    from host_windows
    cross join settings
    left join feeds
        on host_windows.host = feeds.host
        and feeds.first_ts - to_seconds(greatest(settings.tolerance_s, coalesce(
            feeds.interval_s, 0))) <= host_windows.window_end_ts
        and feeds.last_ts + to_seconds(greatest(settings.tolerance_s, coalesce(
            feeds.interval_s, 0))) >= host_windows.window_start_ts
    group by host_windows.job_id, host_windows.step, host_windows.host, host_windows.role
),

per_host as (
    select
        job_id,
        step,
        count(*) filter (where role = 'node') as n_nodes,
        count(*) filter (where role = 'target') as n_targets,
        count(*) filter (where fabric) as n_fabric_nodes,
        count(*) filter (where smart) as n_smart_targets,
        count(*) filter (where pool_gc) as n_pool_gc_targets,
        count(*) filter (where pool_metadata) as n_pool_metadata_targets,
        count(*) filter (where role = 'node' and leaf_switch is not null) as n_topology_nodes,
        coalesce(
            list(host order by host) filter (where role = 'node' and not fabric), []
        ) as fabric_missing_nodes,
        coalesce(list_sort(list_distinct(flatten(
            list(string_split(leaf_switch, ',')) filter (
                where role = 'node' and not fabric and leaf_switch is not null
            )
        ))), []) as fabric_missing_leaves,
    from reached
    group by job_id, step
),

per_rank as (
    select
        job_id,
        step,
        count(*) as n_ranks,
        count(metadata_excess_s) as n_phase_ranks,
        bool_or(tier = 'pool') as writes_to_pool,
    from looked_at
    group by job_id, step
),

judged as (
    select
        stalls.job_id,
        stalls.step,
        coalesce(per_rank.n_ranks, 0) as n_ranks,
        coalesce(per_host.n_nodes, 0) as n_nodes,
        coalesce(per_host.n_targets, 0) as n_targets,
        coalesce(per_host.n_fabric_nodes, 0) as n_fabric_nodes,
        coalesce(per_host.n_smart_targets, 0) as n_smart_targets,
        coalesce(per_host.n_pool_gc_targets, 0) as n_pool_gc_targets,
        coalesce(per_host.n_pool_metadata_targets, 0) as n_pool_metadata_targets,
        coalesce(per_host.n_topology_nodes, 0) as n_topology_nodes,
        coalesce(per_rank.n_phase_ranks, 0) as n_phase_ranks,
        coalesce(per_rank.writes_to_pool, false) as writes_to_pool,
        coalesce(per_host.fabric_missing_nodes, []) as fabric_missing_nodes,
        coalesce(per_host.fabric_missing_leaves, []) as fabric_missing_leaves,
    from stalls
    left join per_host using (job_id, step)
    left join per_rank using (job_id, step)
),

flags as (
    select
        *,
        n_fabric_nodes > 0 as has_fabric,
        n_smart_targets > 0 as has_smart,
        n_pool_gc_targets > 0 as has_pool_gc,
        n_pool_metadata_targets > 0 as has_pool_metadata,
        n_pool_gc_targets + n_pool_metadata_targets > 0 as has_pool,
        n_topology_nodes > 0 as has_topology,
        n_phase_ranks > 0 as has_phases,
    from judged
),

final as (
    select
        job_id,
        step,
        n_ranks,
        n_nodes,
        n_targets,
        n_fabric_nodes,
        n_smart_targets,
        n_pool_gc_targets,
        n_pool_metadata_targets,
        n_topology_nodes,
        n_phase_ranks,
        writes_to_pool,
        has_fabric,
        has_smart,
        has_pool_gc,
        has_pool_metadata,
        has_pool,
        has_topology,
        has_phases,
        list_filter([
            case when has_fabric then 'fabric' end,
            case when has_smart then 'smart' end,
            case when has_pool then 'pool' end,
            case when has_topology then 'topology' end,
            case when has_phases then 'phases' end,
        ], lambda family: family is not null) as telemetry,
        list_filter([
            case when not has_fabric then 'fabric' end,
            case when not has_smart then 'smart' end,
            case when not has_pool and writes_to_pool then 'pool' end,
            case when not has_topology then 'topology' end,
            case when not has_phases then 'phases' end,
        ], lambda family: family is not null) as missing,
        fabric_missing_nodes,
        fabric_missing_leaves,
    from flags
)

select * from final;
