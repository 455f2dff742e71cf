-- stg_nvme_smart: one row per (node, device, metric, ts): an NVMe SMART / vendor-log reading,
-- with its kind (counter: cumulative, see stg_metric_names; gauge: a level). Duplicate samples
-- (same key and ts, e.g. smartctl and nvme-cli run together, or a file ingested twice) collapse
-- to the most recently ingested one (ties: later source file). Deltas: stg_counter_deltas.
-- The rows before that dedup, each with its version (the higher wins: ingested later, then the
-- later source file by name; a null ingested_ts or source_file loses), are the table macro
-- stg_nvme_smart_versions(): stg_counter_deltas dedups the counters in its window pass instead
-- of sorting every sample here first (as stg_fabric_counter_versions() does for the fabric,
-- whose ties go by a hash of the file name). The files are ranked by name once (a row per
-- file), so the version is one integer, not a timestamp and a path.
-- nvme_drive(device): the drive a device name stands for, the key of a drive's series across
-- tools (docs/formats.md, "Device identity"): the NVMe controller's kernel name, whatever
-- spelling a tool printed. SMART and the vendor logs are per controller, so a namespace
-- (nvme0n1, nvme0n2), a partition (nvme0n1p2), a multipath path (nvme0c1n1: controller nvme1)
-- or the generic device (ng0n1) is its controller, with or without /dev/; nvme1 is another
-- drive. Any other name loses /dev/ and its directories (IOService:/…/NS_01@1 -> NS_01@1). The
-- parsers write these names already (ckptwatch.sources.smartctl.nvme_device_name, the same rule:
-- tests/sql/test_device_identity.py holds the two equal); here for lakes and writers that did not.
create or replace macro nvme_drive_text(device) as
    trim(device, chr(32) || chr(9) || chr(10) || chr(11) || chr(12) || chr(13));
create or replace macro nvme_drive_short(name) as
    case when starts_with(name, '/dev/') then name[6:] else name end;
-- The kernel's names of a controller's devices, each with the controller's number in a group:
-- a multipath path (its controller: the number after c), a generic device, a namespace or
-- partition of nvme<controller>, the controller itself.
create or replace macro nvme_drive_pattern() as
    'nvme[0-9]+c([0-9]+)n[0-9]+(?:p[0-9]+)?'
    || '|ng([0-9]+)n[0-9]+'
    || '|nvme([0-9]+)(?:n[0-9]+(?:p[0-9]+)?)?';
create or replace macro nvme_drive_of(name) as
    case
        when regexp_full_match(name, nvme_drive_pattern())
            then regexp_replace(name, '^(?:' || nvme_drive_pattern() || ')$', 'nvme\1\2\3')
        else coalesce(nullif(regexp_extract(rtrim(name, '/'), '[^/]*$'), ''), name)
    end;
-- A controller's name as the parsers write it (nvme0: nearly every stored row) passes after
-- one match, the rule's cheapest step (~80 ns a row; the whole rule costs ~1 us): the rule
-- gives it back unchanged anyway.
create or replace macro nvme_drive(device) as
    case
        when regexp_full_match(device, 'nvme[0-9]+') then device
        else nvme_drive_of(nvme_drive_short(nvme_drive_text(device)))
    end;

create or replace macro stg_nvme_smart_versions() as table
with
-- device: the drive (nvme_drive), so one drive's rows are one series whichever tool wrote them.
source as (
    select * replace (nvme_drive(device) as device)
    from nvme_smart
    where not ids_over_limit(greatest(
        length(node),
        length(device),
        length(metric),
        length(model),
        length(serial),
        length(firmware)
    ))  -- see int_lake_skipped_rows
),

files as (
    select
        source_file,
        row_number() over (order by source_file) as file_rank,
    from (select distinct source_file from nvme_smart where source_file is not null)
),

final as (
    select
        source.*,
        coalesce(epoch_us(source.ingested_ts)::hugeint, -4611686018427387904)
        * 18446744073709551616 + coalesce(files.file_rank, 0) as version,
    from source
    left join files on source.source_file = files.source_file
)

select * from final;

create or replace view stg_nvme_smart as
with
versioned as (
    select * from stg_nvme_smart_versions()
),

metric_names as (
    select * from stg_metric_names
),

deduplicated as (
    select *
    from versioned
    qualify row_number() over (
        partition by node, device, metric, ts
        order by version desc
    ) = 1
),

kinds as (
    select
        metric,
        kind,
    from metric_names
    where source_table = 'nvme_smart'
),

final as (
    select
        deduplicated.ts,
        deduplicated.node,
        deduplicated.device,
        deduplicated.metric,
        kinds.kind,
        deduplicated.value,
        deduplicated.source,
        deduplicated.model,
        deduplicated.serial,
        deduplicated.firmware,
    from deduplicated
    inner join kinds using (metric)
)

select * from final;
