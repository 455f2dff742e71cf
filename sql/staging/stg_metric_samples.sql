-- stg_metric_samples: SMART and pool readings in one long form with their kind, the shape the
-- counter deltas (stg_counter_deltas) and the attribution signals (int_signal_samples) read.
-- host = node for SMART, = target for pool telemetry; device / pool null where they do not apply.
-- smart_as_samples(smart_relation): rows of a relation of the caller with stg_nvme_smart's
-- columns (node, device, metric, ts, value, ...) under this long form's key columns, the rest
-- passed through: the one SMART mapping, read here and by stg_counter_samples (whose SMART rows
-- are not deduplicated yet: stg_nvme_smart_versions()).
create or replace macro smart_as_samples(smart_relation) as table
select
    'nvme_smart' as source_table,
    node as host,
    device,
    cast(null as varchar) as port,
    cast(null as varchar) as pool,
    * exclude (node, device),
from query_table(smart_relation);

create or replace view stg_metric_samples as
with
smart as (
    select * from stg_nvme_smart
),

pool as (
    select * from stg_pool_metrics
),

final as (
    select
        source_table,
        host,
        device,
        port,
        pool,
        metric,
        kind,
        ts,
        value,
    from smart_as_samples('smart')
    union all
    select
        'pool_metrics' as source_table,
        target as host,
        cast(null as varchar) as device,
        cast(null as varchar) as port,
        pool,
        metric,
        kind,
        ts,
        value,
    from pool
)

select * from final;
