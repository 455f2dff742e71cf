-- stg_fabric_counters: one row per (node, device, port, counter, ts): a cumulative fabric
-- counter sample (InfiniBand, RoCE/Ethernet). Exact duplicate samples (same key and ts, e.g. an
-- overlapping file ingested twice) collapse to one; if they disagree, the most recently
-- ingested value wins (two files of one ingest run: the pick is fixed by a hash of the file
-- name, not its order: a single-integer key keeps this 35 M-row step cheap).
-- The samples before that dedup, each with its version (the higher wins), are the table macro
-- stg_fabric_counter_versions(): stg_counter_deltas dedups them in its window pass instead of
-- grouping first (one pass over a 512-node day's 35 M samples, not a group-by then a window).
-- Deltas and rates: stg_counter_deltas.
create or replace macro stg_fabric_counter_versions() as table
with
source as (
    select * from fabric_counters
    where not ids_over_limit(greatest(
        length(node),
        length(device),
        length(port),
        length(counter)
    ))  -- see int_lake_skipped_rows
),

final as (
    select
        *,
        epoch_us(ingested_ts)::hugeint * 18446744073709551616 + hash(source_file) as version,
    from source
)

select * from final;

create or replace view stg_fabric_counters as
with
versioned as (
    select * from stg_fabric_counter_versions()
),

deduplicated as (
    select
        node,
        device,
        port,
        counter,
        ts,
        arg_max(value, version) as value,
        arg_max(source, version) as source,
    from versioned
    group by node, device, port, counter, ts
),

final as (
    select
        ts,
        node,
        device,
        port,
        counter,
        value,
        source,
    from deduplicated
)

select * from final;
