"""``ethtool -S <iface>`` text (mlx5_core, bnxt_en, ice, i40e, e1000e, …).

Every statistic is kept under the driver's own name (bnxt's per-ring ``[N]: name`` lines keep
their ``[N]: `` prefix). Where the meaning is standard across drivers a canonical alias row is
added as well (``ALIASES``; the table is in docs/formats.md): per-priority PFC pause frames and
pause durations, global (802.3x) pause, port discards, CNP and ECN counters. All are cumulative.

The interface comes from the envelope's ``device``, else from a ``# ethtool -S eth0`` comment
line; the port column is the envelope's ``port`` or ``"1"`` (a netdev is one port).
"""

from __future__ import annotations

import functools
import itertools
import re
from collections.abc import Mapping
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
from ckptwatch.sources.textkv import iter_lines, shorten

SOURCE = "ethtool"
HEADER = "NIC statistics:"

_D = r"[._]"  # ethtool spells "port.rx_x"; node_exporter's sanitised names use "_"
#: (driver-name regex, canonical alias template). Full match on the driver's name; ``{p}`` is the
#: priority captured by the regex's named group ``p``. Sources: mlx5 counters documentation
#: (kernel Documentation/networking/device_drivers/ethernet/mellanox/mlx5/counters.rst), the
#: i40e/ice/bnxt_en ethtool string tables.
ALIASES: list[tuple[re.Pattern[str], str]] = [
    (re.compile(p), a) for p, a in [
        # mlx5_core
        (r"rx_prio(?P<p>\d)_pause", "pfc_rx_pause_frames_prio{p}"),
        (r"tx_prio(?P<p>\d)_pause", "pfc_tx_pause_frames_prio{p}"),
        (r"rx_prio(?P<p>\d)_pause_duration", "pfc_rx_pause_duration_us_prio{p}"),
        (r"tx_prio(?P<p>\d)_pause_duration", "pfc_tx_pause_duration_us_prio{p}"),
        (r"rx_global_pause", "pause_rx_frames"),
        (r"tx_global_pause", "pause_tx_frames"),
        (r"rx_global_pause_duration", "pause_rx_duration_us"),
        (r"tx_global_pause_duration", "pause_tx_duration_us"),
        (r"rx_pause_ctrl_phy", "pause_ctrl_rx_frames"),
        (r"tx_pause_ctrl_phy", "pause_ctrl_tx_frames"),
        (r"rx_discards_phy", "rx_discards"),
        (r"tx_discards_phy", "tx_discards"),
        (r"rx_prio(?P<p>\d)_discards", "rx_discards_prio{p}"),
        (r"rx_prio(?P<p>\d)_marked", "ecn_marked_prio{p}"),
        (r"rx_ecn_mark", "ecn_marked"),
        # mlx5 RDMA hw_counters (sysfs) for RoCE congestion control
        (r"np_cnp_sent", "cnp_sent"),
        (r"rp_cnp_handled", "cnp_handled"),
        (r"rp_cnp_ignored", "cnp_ignored"),
        (r"np_ecn_marked_roce_packets", "ecn_marked"),
        # i40e (port.*) and ice (*.nic): xoff frames are the pause requests
        (rf"(?:port{_D})?rx_priority_(?P<p>\d)_xoff(?:{_D}nic)?", "pfc_rx_pause_frames_prio{p}"),
        (rf"(?:port{_D})?tx_priority_(?P<p>\d)_xoff(?:{_D}nic)?", "pfc_tx_pause_frames_prio{p}"),
        (rf"(?:port{_D})?link_xoff_rx(?:{_D}nic)?", "pause_rx_frames"),
        (rf"(?:port{_D})?link_xoff_tx(?:{_D}nic)?", "pause_tx_frames"),
        (rf"port{_D}rx_dropped|rx_dropped{_D}nic", "rx_discards"),
        # bnxt_en
        (r"rx_pfc_ena_frames_pri(?P<p>\d)", "pfc_rx_pause_frames_prio{p}"),
        (r"tx_pfc_ena_frames_pri(?P<p>\d)", "pfc_tx_pause_frames_prio{p}"),
        (r"pfc_pri(?P<p>\d)_rx_duration_us", "pfc_rx_pause_duration_us_prio{p}"),
        (r"pfc_pri(?P<p>\d)_tx_duration_us", "pfc_tx_pause_duration_us_prio{p}"),
        (r"rx_pause_frames", "pause_rx_frames"),
        (r"tx_pause_frames", "pause_tx_frames"),
        (r"rx_stat_discard", "rx_discards"),
        (r"tx_stat_discard", "tx_discards"),
    ]
]

_LINE = re.compile(r"^\s*(?P<name>(?:\[\d+\]:\s*)?[^:]*?\S)\s*:\s*(?P<value>\S.*?)?\s*$")
_VALUE = re.compile(r"-?\d+")
_IFACE_COMMENT = re.compile(r"^#\s*ethtool\s+(?:-S|--statistics)\s+(?P<iface>\S+)")


@functools.cache
def canonical_alias(name: str) -> str | None:
    """The cross-driver alias of a driver statistic name, or None (cached: a hot path)."""
    for pattern, template in ALIASES:
        m = pattern.fullmatch(name)
        if m:
            return template.format(**m.groupdict())
    return None


def _content_lines(text: str, limit: int | None = None) -> list[tuple[int, str]]:
    """The statistics' lines (not comments, not the header); only the first ``limit`` (None:
    all) are looked for."""
    return list(itertools.islice(((i, line) for i, line in iter_lines(text)
                                  if not line.lstrip().startswith("#")
                                  and line.strip() != HEADER), limit))


def detect(output: Any) -> bool:
    """``ethtool -S`` text: the ``NIC statistics:`` header (after optional ``#`` comments), or
    headerless ``name: integer`` lines that include rx/tx statistics."""
    if not isinstance(output, str):
        return False
    for _, line in iter_lines(output):
        if line.lstrip().startswith("#"):
            continue
        if line.strip() == HEADER:
            return True
        break
    lines = _content_lines(output, 200)
    if len(lines) < 3:
        return False
    for _, line in lines:
        m = _LINE.match(line)
        if not m or "/" in m.group("name") or not _VALUE.fullmatch(m.group("value") or ""):
            return False
    return any(re.search(r"(^|[^a-z])(rx|tx)", line) for _, line in lines)


def _interface(text: str, ctx: ToolContext) -> str:
    if ctx.device:
        return ctx.device
    for _, line in iter_lines(text):
        m = _IFACE_COMMENT.match(line.strip())
        if m:
            return m.group("iface")
    raise RecordError("ethtool -S output names no interface; give it in the envelope 'device' "
                      "or the file name (fabric/<node>/eth0.txt)")


@register_tool(SOURCE, detect, needs=(HEADER, "rx", "tx"))
def parse_ethtool(output: Any, ctx: ToolContext) -> dict[str, list[dict[str, Any]]]:
    """``ethtool -S`` text -> ``fabric_counters`` rows (driver names plus canonical aliases)."""
    if not isinstance(output, str):
        raise RecordError(f"ethtool -S output is not text (got {type(output).__name__})")
    counters: dict[str, float] = {}
    first_line: dict[str, int] = {}
    for i, line in _content_lines(output):
        m = _LINE.match(line)
        value_text = (m.group("value") or "") if m else ""
        if not m or not _VALUE.fullmatch(value_text):
            raise RecordError(f"ethtool -S line {i} is not 'name: integer': {shorten(line)!r}"
                              + (" (output truncated?)" if m and not value_text else ""))
        name, value = m.group("name"), float(int(value_text))
        if name in counters and counters[name] != value:
            raise RecordError(f"ethtool -S lists '{name}' twice with different values (line "
                              f"{first_line[name]}: {counters[name]:.0f}, line {i}: {value:.0f})")
        counters.setdefault(name, value)
        first_line.setdefault(name, i)
    if not counters:
        raise RecordError("ethtool -S output has no statistics (only the header?)")
    for name, value in list(counters.items()):
        alias = canonical_alias(name)
        if alias and alias not in counters:
            counters[alias] = value
    device, port = _interface(output, ctx), ctx.port or "1"
    rows = [
        {"ts": ctx.ts, "node": ctx.node, "device": device, "port": port, "counter": name,
         "value": value, "source": ctx.source}
        for name, value in counters.items()
    ]
    return {"fabric_counters": rows}


def _split_lines(lines: pl.DataFrame) -> pl.DataFrame:
    """``lines`` (column ``line``, plain text) with ``name`` and ``value`` as ``_LINE`` reads
    them (null where it does not match). A line ``name: integer`` with one colon and a name
    not starting with ``[`` is read by splitting it at the colon (``_LINE`` reads it the same:
    the text either side, trimmed); the regex runs only on the other lines."""
    parts = pl.col("line").str.split_exact(":", 1)
    lines = lines.with_columns(
        parts.struct.field("field_0").str.strip_chars().alias("name"),
        parts.struct.field("field_1").str.strip_chars().alias("value"))
    simple = (pl.col("value").str.contains(_BULK_VALUE).fill_null(False)
              & (pl.col("name") != "") & ~pl.col("name").str.starts_with("["))
    hard = lines.filter(~simple)
    if not hard.height:
        return lines
    hard = hard.drop("name", "value").with_columns(
        pl.col("line").str.extract_groups(_LINE.pattern).alias("__m")).unnest("__m")
    return pl.concat([lines.filter(simple), hard.select(lines.columns)]).sort("__pos")


#: A statistic's value as the bulk path reads it: at most 300 digits (a longer one may not fit
#: a float, which ``parse_ethtool`` reports); anything else is declined to ``parse_ethtool``.
_BULK_VALUE = r"^-?[0-9]{1,300}$"


@register_bulk(SOURCE)
def parse_ethtool_bulk(env: pl.DataFrame) -> tuple[dict[str, pl.DataFrame], pl.Series]:
    """``parse_ethtool`` over many envelopes at once (see ``base.BulkParser``).

    Declined, for ``parse_ethtool`` to handle one by one: text that is not plain ASCII, no
    envelope ``device``, a line that is not ``name: integer``, a name listed twice, no
    statistics at all.
    """
    plain = env.select(plain_output(env) & (pl.col("device") != "")
                       .fill_null(False)).to_series()
    take = env.filter(plain)
    lines = take.select(
        "__env", "device", pl.col("port").fill_null("").alias("port"),
        pl.col("output").str.split("\n").alias("line"),
    ).explode("line").with_columns(pl.col("line").str.strip_chars().alias("__s"))
    lines = lines.filter((pl.col("__s") != "") & ~pl.col("__s").str.starts_with("#")
                         & (pl.col("__s") != HEADER)).drop("__s").with_row_index("__pos")
    if not lines.height:  # no statistics at all: parse_ethtool says so
        return {}, env["__env"]
    lines = _split_lines(lines)
    names = lines["name"].drop_nulls().unique().to_list()
    lines = lines.with_columns(pl.col("name").replace_strict(
        names, list(range(len(names))), default=None, return_dtype=pl.Int64).alias("__code"))
    ok_line = pl.col("name").is_not_null() & pl.col("value").str.contains(_BULK_VALUE) \
        .fill_null(False)
    bad_env = lines.filter(~ok_line)["__env"].unique()
    pairs = lines.select(pl.col("__env") * (len(names) + 1) + pl.col("__code").fill_null(-1)) \
        .to_series()  # a Series: its n_unique hashes integers, not rows
    if pairs.n_unique() != pairs.len():  # a name listed twice: parse_ethtool judges it
        bad_env = pl.concat([bad_env, lines.filter(pairs.is_duplicated())["__env"]])
    good = lines.filter(~pl.col("__env").is_in(bad_env.implode()))
    declined = pl.concat([env.filter(~plain)["__env"], bad_env,
                          take.filter(~pl.col("__env").is_in(good["__env"].implode()))["__env"]]
                         ).unique()
    # Canonical aliases: after an envelope's statistics, in their order, each alias once and
    # only when the driver does not print that name itself.
    alias_of = [canonical_alias(n) for n in names]
    code_of = {n: k for k, n in enumerate(names)}
    alias_ids = {a: k for k, a in enumerate(dict.fromkeys(a for a in alias_of if a))}
    width = len(names) + len(alias_ids) + 1
    last = pl.col("__env").ne_missing(pl.col("__env").shift(-1))
    good = good.select(
        "__env", "device", pl.when(pl.col("port") != "").then(pl.col("port"))
        .otherwise(pl.lit("1")).alias("port"),
        pl.col("name").alias("counter"),
        int_text_as_float(pl.col("value")).alias("value"),
        pl.col("__pos").cast(pl.Int64).alias("__idx"), "__code",
        pl.when(last).then(pl.col("__pos")).backward_fill().cast(pl.Int64).alias("__end"),
    )
    rows = good.drop("__code", "__end")
    if alias_ids:
        def lookup(values: list[Any]) -> pl.Expr:
            return pl.lit(pl.Series(values, dtype=pl.Int64)).gather(pl.col("__code"))
        # the alias as a name code (-1: not a name the driver prints) and as an alias id
        as_name = lookup([code_of.get(a, -1) if a else None for a in alias_of])
        as_alias = lookup([alias_ids[a] if a else None for a in alias_of])
        printed = good.select(pl.col("__env") * width + pl.col("__code")).to_series()
        alias_rows = good.with_columns(
            pl.lit(pl.Series(alias_of, dtype=pl.String)).gather(pl.col("__code"))
            .alias("__alias"), as_name.alias("__acode"), as_alias.alias("__aid"),
        ).filter(pl.col("__alias").is_not_null() & ~(
            (pl.col("__acode") >= 0)
            & (pl.col("__env") * width + pl.col("__acode")).is_in(printed.implode())))
        alias_rows = alias_rows.filter(  # two statistics with one alias: the first gives it
            (pl.col("__env") * width + pl.col("__aid")).is_first_distinct())
        if alias_rows.height:
            ranked = alias_rows.with_columns(
                pl.int_range(pl.len(), dtype=pl.Int64).alias("__k"))
            first_k = pl.when(pl.col("__env").ne_missing(pl.col("__env").shift(1))) \
                .then(pl.col("__k")).forward_fill()
            alias_rows = ranked.select(
                "__env", "device", "port", pl.col("__alias").alias("counter"), "value",
                # after the envelope's last statistic, in the order of their sources
                (pl.col("__end") * width + 1 + pl.col("__k") - first_k).alias("__idx"))
            rows = pl.concat([rows.with_columns(pl.col("__idx") * width), alias_rows]) \
                .sort("__idx")
    return {"fabric_counters": rows}, declined


#: mlx5_core's order for the port counters the renderer always prints (ConnectX, kernel 5.x).
_MLX5_BASE = [
    "rx_packets", "rx_bytes", "tx_packets", "tx_bytes", "rx_out_of_buffer", "rx_ecn_mark",
    "rx_vport_unicast_packets", "rx_vport_unicast_bytes", "tx_vport_unicast_packets",
    "tx_vport_unicast_bytes", "rx_packets_phy", "tx_packets_phy", "rx_bytes_phy",
    "tx_bytes_phy", "rx_pause_ctrl_phy", "tx_pause_ctrl_phy", "rx_discards_phy",
    "tx_discards_phy", "rx_global_pause", "rx_global_pause_duration", "tx_global_pause",
    "tx_global_pause_duration", "rx_global_pause_transition",
]
_MLX5_PRIO = ["rx_prio{p}_bytes", "rx_prio{p}_packets", "rx_prio{p}_discards", "tx_prio{p}_bytes",
              "tx_prio{p}_packets", "rx_prio{p}_pause", "rx_prio{p}_pause_duration",
              "tx_prio{p}_pause", "tx_prio{p}_pause_duration", "rx_prio{p}_pause_transition"]


def mlx5_name(name: str) -> str:
    """The mlx5_core statistic behind a canonical alias (identity for driver names)."""
    if name in {"cnp_sent", "cnp_handled", "cnp_ignored"}:
        raise ValueError(f"{name} is an RDMA hw_counter (sysfs), not an ethtool -S statistic")
    for pattern, template in ALIASES[:15]:  # the mlx5_core rows
        m = re.fullmatch(template.replace("{p}", r"(?P<p>\d)"), name)
        if m:
            return pattern.pattern.replace(r"(?P<p>\d)", m.groupdict().get("p") or "")
    return name


def render_ethtool_s(driver: str, counters: Mapping[str, int], *,
                     only_given: bool = False) -> str:
    """Realistic ``ethtool -S`` text for an mlx5_core port from statistic values.

    ``counters`` keys are mlx5 statistic names (``rx_prio3_pause``) or canonical aliases
    (``pfc_rx_pause_frames_prio3``), translated to mlx5 names. The usual port counters and all
    eight priorities print (0 when not given) in mlx5_core's order; extra names follow.
    ``only_given`` prints just the given statistics, in that order (compact samples, as a
    collector that filters ``ethtool -S`` would keep). Modelled on the ethq mlx5_core and
    bpf-list ConnectX fixtures.
    """
    if driver != "mlx5_core":
        raise ValueError(f"render_ethtool_s renders mlx5_core naming only, not {driver!r}")
    values = {mlx5_name(k): int(v) for k, v in counters.items()}
    if only_given:
        return HEADER + "\n" + "".join(f"     {k}: {v}\n" for k, v in values.items())
    names = list(_MLX5_BASE) + [t.format(p=p) for p in range(8) for t in _MLX5_PRIO]
    names += sorted(set(values) - set(names))
    lines = [HEADER] + [f"     {name}: {values.get(name, 0)}" for name in names]
    return "\n".join(lines) + "\n"
