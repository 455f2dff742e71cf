"""InfiniBand / RoCE port counters from sysfs (``/sys/class/infiniband/<hca>/ports/<n>/…``).

Canonical IB counter names are the sysfs file names (``port_xmit_wait``, ``symbol_error``, …);
perfquery and Prometheus map onto them. ``port_xmit_data`` / ``port_rcv_data`` count 4-byte
words (IBA: "octets divided by 4"); they are kept as the tool reports them and also emitted in
bytes as ``port_xmit_bytes`` / ``port_rcv_bytes`` (= words x 4). ``counters_ext/*_64`` (mlx4)
are the 64-bit versions of the same counters and win over the legacy 32-bit files.
``hw_counters/*`` (mlx5 and others) keep their driver names; the RoCE congestion counters also
get the cross-driver aliases (``cnp_sent``, ``cnp_handled``, ``ecn_marked``).

Accepted shapes of one snapshot (all read by ``parse_sysfs_ib``):

* text from ``grep -H . /sys/class/infiniband/*/ports/*/counters/* …`` (``path:value`` lines);
* a JSON object ``{path: value}`` (paths absolute or relative; nested objects are flattened);
* a directory tree copied from sysfs, read with ``read_sysfs_tree`` into the object above.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import polars as pl

from ckptwatch.errors import RecordError
from ckptwatch.sources.base import (
    ToolContext,
    int_text_as_float,
    plain_output,
    register_bulk,
    register_tool,
)
from ckptwatch.sources.ethtool import canonical_alias
from ckptwatch.sources.textkv import iter_lines, parse_int, shorten

SOURCE = "sysfs-ib"

#: Word counters (4 octets per unit) and the byte counters derived from them.
WORD_COUNTERS = {"port_xmit_data": "port_xmit_bytes", "port_rcv_data": "port_rcv_bytes"}
COUNTER_GROUPS = ("counters", "counters_ext", "hw_counters")
_NO_PMA = re.compile(r"N/A\b.*", re.IGNORECASE)
_PATH = re.compile(r"(?:^|/)(?:ports/\d+/)?(?:counters|counters_ext|hw_counters)/[^/]+$")


def with_bytes(counters: dict[str, float]) -> dict[str, float]:
    """``counters`` plus ``port_xmit_bytes`` / ``port_rcv_bytes`` derived from the word counts."""
    out = dict(counters)
    for words, byte_name in WORD_COUNTERS.items():
        if words in counters:
            out[byte_name] = counters[words] * 4
    return out


def ext_name(name: str) -> str:
    """``counters_ext`` file name -> canonical: ``port_xmit_data_64`` -> ``port_xmit_data``,
    ``port_unicast_xmit_packets`` -> ``unicast_xmit_packets``."""
    base = name[:-3] if name.endswith("_64") else name
    m = re.fullmatch(r"port_((?:uni|multi)cast_(?:xmit|rcv)_packets)", base)
    return m.group(1) if m else base


def flatten(doc: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """Nested ``{dir: {file: value}}`` -> ``{"dir/file": value}``."""
    flat: dict[str, Any] = {}
    for key, value in doc.items():
        path = f"{prefix}/{key}" if prefix else str(key)
        if isinstance(value, dict):
            flat.update(flatten(value, path))
        else:
            flat[path] = value
    return flat


def read_sysfs_tree(root: Path) -> dict[str, str]:
    """Counter files under a copied sysfs tree -> ``{relative posix path: file content}``."""
    out: dict[str, str] = {}
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root).as_posix()
        if path.is_file() and _PATH.search(rel):
            out[rel] = path.read_text(errors="replace").strip()
    return out


def _locate(path: str, ctx: ToolContext) -> tuple[str, str, str, str] | None:
    """(device, port, group, name) of a counter path; None when it is not a counter file."""
    parts = [p for p in path.strip().split("/") if p]
    idx = next((i for i in range(len(parts) - 1, -1, -1) if parts[i] in COUNTER_GROUPS), None)
    if idx is None or idx != len(parts) - 2:
        return None
    group, name = parts[idx], parts[idx + 1]
    port = ctx.port
    device = ctx.device
    if idx >= 2 and parts[idx - 2] == "ports":
        port = parts[idx - 1]
        if idx >= 3:
            device = parts[idx - 3]
    if not device or not port:
        raise RecordError(f"sysfs path '{shorten(path)}' does not say which HCA/port; use paths "
                          "like <hca>/ports/<n>/counters/<name> or give device and port in the "
                          "envelope")
    return device, port, group, name


def detect(output: Any) -> bool:
    """A sysfs counter snapshot: ``path:value`` text or ``{path: value}`` with counter paths."""
    if isinstance(output, dict):
        keys = list(flatten(output))
        return bool(keys) and any(_PATH.search(k) for k in keys[:50])
    if isinstance(output, str):
        for _, line in list(iter_lines(output))[:5]:
            path, sep, _ = line.partition(":")
            if sep and _PATH.search(path.strip()):
                return True
    return False


@register_tool(SOURCE, detect, needs=("counters/", "counters_ext/"))
def parse_sysfs_ib(output: Any, ctx: ToolContext) -> dict[str, list[dict[str, Any]]]:
    """A sysfs ``counters/`` + ``hw_counters/`` snapshot -> ``fabric_counters`` rows."""
    items: list[tuple[str, Any, str]] = []
    if isinstance(output, dict):
        items = [(k, v, f"key '{shorten(k)}'") for k, v in flatten(output).items()]
    elif isinstance(output, str):
        for i, line in iter_lines(output):
            path, sep, value = line.partition(":")
            if not sep:
                raise RecordError(f"sysfs snapshot line {i} is not 'path:value': "
                                  f"{shorten(line)!r}")
            items.append((path, value, f"line {i}"))
    else:
        raise RecordError(f"sysfs snapshot is neither text nor a JSON object "
                          f"(got {type(output).__name__})")
    legacy: dict[tuple[str, str], dict[str, float]] = {}
    ext: dict[tuple[str, str], dict[str, float]] = {}
    hw: dict[tuple[str, str], dict[str, float]] = {}
    no_pma = 0
    for path, raw, where in items:
        loc = _locate(path, ctx)
        if loc is None:
            continue
        device, port, group, name = loc
        text = str(raw).strip()
        if _NO_PMA.fullmatch(text):
            no_pma += 1
            continue
        number = parse_int(text)
        if number is None:
            raise RecordError(f"sysfs {where} ({group}/{name}): not an integer: {shorten(text)!r}")
        target = {"counters": legacy, "counters_ext": ext, "hw_counters": hw}[group]
        target.setdefault((device, port), {})[ext_name(name) if group == "counters_ext"
                                              else name] = float(number)
    rows: list[dict[str, Any]] = []
    for key in sorted({*legacy, *ext, *hw}):
        counters = with_bytes({**legacy.get(key, {}), **ext.get(key, {})})
        for hw_name, hw_value in hw.get(key, {}).items():
            counters[hw_name] = hw_value
            alias = canonical_alias(hw_name)
            if alias and alias not in counters:
                counters[alias] = hw_value
        device, port = key
        rows.extend(
            {"ts": ctx.ts, "node": ctx.node, "device": device, "port": port, "counter": cname,
             "value": cvalue, "source": ctx.source}
            for cname, cvalue in counters.items()
        )
    if not rows:
        if no_pma:
            raise RecordError(f"sysfs snapshot has no readable counter: all {no_pma} counter "
                              "files read 'N/A (no PMA)' (the HCA has no performance management "
                              "agent)")
        raise RecordError("sysfs snapshot has no <hca>/ports/<n>/counters/* or hw_counters/* "
                          "entries")
    return {"fabric_counters": rows}


#: A ``path:value`` line's path as the bulk path reads it: ``…/<hca>/ports/<n>/<group>/<name>``
#: (device and port from the path, as ``_locate`` takes them); other paths are declined.
_BULK_PATH = (r"(?:^|/)(?P<device>[^/]+)/+ports/+(?P<port>[^/]+)/+"
              r"(?P<group>counters|counters_ext|hw_counters)/+(?P<name>[^/]+)/*$")
#: A counter value the bulk path reads (hex, grouped digits and longer numbers are declined).
_BULK_VALUE = r"^[+-]?[0-9]{1,300}$"


def _bulk_paths(paths: pl.Series) -> pl.DataFrame:
    """What ``_locate`` makes of each distinct path (a snapshot repeats its paths from one
    sample to the next): ``device``, ``port``, ``group``, ``counter`` (the name, after
    ``ext_name``; null: a path the bulk path does not read), ``__alias`` (an
    ``hw_counters`` name's ``canonical_alias``), and integer ids: ``__pr`` (the port's place
    in sorted order), ``__gid`` (the file: port, group, counter), ``__cid`` and ``__aid``
    (the port's counter and alias names, one id space)."""
    out = paths.unique().to_frame("__path").with_columns(
        pl.col("__path").str.extract_groups(_BULK_PATH).alias("__p")).unnest("__p")
    out = out.with_columns(pl.when(~pl.col("name").is_in(list(COUNTER_GROUPS)))
                           .then(pl.col("name")).alias("name"))
    names = out["name"].drop_nulls().unique().to_list()
    out = out.with_columns(pl.when(pl.col("group") == "counters_ext").then(
        pl.col("name").replace_strict(names, [ext_name(n) for n in names], default=None,
                                      return_dtype=pl.String))
        .otherwise(pl.col("name")).alias("counter")).drop("name")
    hw = out.filter(pl.col("group") == "hw_counters")["counter"].drop_nulls().unique().to_list()
    out = out.with_columns(pl.when(pl.col("group") == "hw_counters").then(
        pl.col("counter").replace_strict(hw, [canonical_alias(n) for n in hw], default=None,
                                         return_dtype=pl.String)).alias("__alias"))
    ports = out.filter(pl.col("counter").is_not_null()).select("device", "port").unique() \
        .sort("device", "port").with_row_index("__pr")
    files = out.select("device", "port", "group", "counter").unique().with_row_index("__gid")
    ids = pl.concat([out.select("device", "port", pl.col("counter").alias("__n")),
                     out.select("device", "port", pl.col("__alias").alias("__n"))]) \
        .drop_nulls().unique().with_row_index("__nid")
    id_cols = ["device", "port", "__n"]
    return out.join(ports, on=["device", "port"], how="left").join(
        files, on=["device", "port", "group", "counter"], how="left", nulls_equal=True,
    ).join(ids.rename({"__nid": "__cid"}), left_on=["device", "port", "counter"],
           right_on=id_cols, how="left").join(
        ids.rename({"__nid": "__aid"}), left_on=["device", "port", "__alias"],
        right_on=id_cols, how="left").with_columns(
        pl.col("__pr", "__gid", "__cid", "__aid").cast(pl.Int64))


@register_bulk(SOURCE)
def parse_sysfs_ib_bulk(env: pl.DataFrame) -> tuple[dict[str, pl.DataFrame], pl.Series]:
    """``parse_sysfs_ib`` over many ``path:value`` text envelopes at once (see
    ``base.BulkParser``).

    Declined, for ``parse_sysfs_ib`` to handle one by one: text that is not plain ASCII, a
    line that is not ``<hca>/ports/<n>/<group>/<name>:integer`` (or ``N/A``), a file listed
    twice for a port, a byte counter (``port_xmit_bytes``) as a file, an ``hw_counters`` name
    or its alias that another counter of the port already has, no counter at all.
    """
    plain = env.select(plain_output(env)).to_series()
    take = env.filter(plain)
    lines = take.select("__env", pl.col("output").str.split("\n").alias("__s")).explode("__s")
    lines = lines.filter(pl.col("__s").str.strip_chars() != "").with_row_index("__pos")
    if not lines.height:  # nothing at all: parse_sysfs_ib says so
        return {}, env["__env"]
    kv = pl.col("__s").str.split_exact(":", 1)
    lines = lines.select(
        "__env", pl.col("__pos").cast(pl.Int64),
        kv.struct.field("field_0").str.strip_chars().alias("__path"),
        kv.struct.field("field_1").str.strip_chars().alias("__v"))
    lines = lines.join(_bulk_paths(lines["__path"]), on="__path", how="left",
                       maintain_order="left")
    no_pma = pl.col("__v").str.contains(r"(?i)^N/A\b")
    ok = (pl.col("counter").is_not_null() & pl.col("__v").is_not_null()
          & (pl.col("__v").str.contains(_BULK_VALUE) | no_pma))
    bad = [lines.filter(~ok.fill_null(False))["__env"]]
    lines = lines.filter(ok & ~no_pma).with_columns(
        int_text_as_float(pl.col("__v")).alias("value"))
    width = lines.select(pl.sum_horizontal(  # above every id
        pl.col("__gid", "__cid", "__aid").max().fill_null(0)) + 3).item()
    # a file twice (after ``ext_name``) for a port; a byte counter as a file
    bad += [lines.filter((pl.col("__env") * width + pl.col("__gid")).is_duplicated())["__env"],
            lines.filter(pl.col("counter").is_in(list(WORD_COUNTERS.values())))["__env"]]
    # ``counters_ext`` wins over ``counters`` in place; its other counters follow
    legacy = lines.filter(pl.col("group") == "counters")
    ext = lines.filter(pl.col("group") == "counters_ext")
    keys = ["__env", "__cid"]
    legacy = legacy.join(ext.select(*keys, pl.col("value").alias("__ext")), on=keys,
                         how="left", maintain_order="left").with_columns(
        pl.coalesce("__ext", "value").alias("value"), pl.lit(0).alias("__seg"))
    ext = ext.join(legacy.select(keys), on=keys, how="anti", maintain_order="left") \
        .with_columns(pl.lit(1).alias("__seg"))
    cols = ["__env", "__pr", "__cid", "device", "port", "counter", "value", "__pos", "__seg"]
    counters = pl.concat([legacy.select(cols), ext.select(cols)])
    # ``with_bytes``: each port's byte counts after its counters, in WORD_COUNTERS order
    words = [counters.filter(pl.col("counter") == w).with_columns(
        pl.lit(b).alias("counter"), pl.col("value") * 4,
        pl.lit(k, dtype=pl.Int64).alias("__pos"), pl.lit(2).alias("__seg"))
        for k, (w, b) in enumerate(WORD_COUNTERS.items())]
    hw = lines.filter(pl.col("group") == "hw_counters")
    aliases = hw.filter(pl.col("__alias").is_not_null()).with_columns(
        pl.col("__alias").alias("counter"), pl.col("__aid").alias("__cid"),
        pl.lit(4).alias("__seg"))
    hw = hw.with_columns(pl.lit(3).alias("__seg"))
    # an hw_counters name or alias another counter of the port has: parse_sysfs_ib orders it
    taken = pl.concat([counters.select(keys), hw.select(keys), aliases.select(keys)])
    bad.append(taken.filter((pl.col("__env") * width + pl.col("__cid")).is_duplicated())
               ["__env"])
    bad_env = pl.concat(bad).unique()
    rows = pl.concat([counters, *words, hw.select(cols), aliases.select(cols)])
    rows = rows.filter(~pl.col("__env").is_in(bad_env.implode()))
    declined = pl.concat([env.filter(~plain)["__env"], bad_env,
                          take.filter(~pl.col("__env").is_in(rows["__env"].implode()))["__env"]]
                         ).unique()
    # ports in sorted order; in a port its counters, byte counts, then each hw counter and
    # its alias
    hw_first = pl.when(pl.col("__seg") >= 3).then(pl.col("__pos")).otherwise(-1)
    rows = rows.sort("__env", "__pr", hw_first, "__seg", "__pos").select(
        "__env", pl.int_range(pl.len(), dtype=pl.Int64).alias("__idx"),
        "device", "port", "counter", "value")
    return {"fabric_counters": rows}, declined
