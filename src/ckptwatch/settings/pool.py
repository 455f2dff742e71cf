"""``[pool.prometheus]``: how a pool's own Prometheus series become ``pool_metrics`` rows.

A rule maps one Prometheus metric (and label matchers) to one name of the pool vocabulary
(``sql/staging/stg_pool_vocabulary.sql``, the one list: docs/formats.md, "Pool vocabulary"),
with templates for the target and the pool, and a scale to the vocabulary's unit::

    [pool.prometheus]
    preset = "lustrefs-exporter"          # or a list; ckptwatch.settings.pool_presets has them

    [[pool.prometheus.rules]]             # rules of your own, beside the presets'
    metric = "weka_stats"
    match = { category = "ops", stat = "WRITE_LATENCY" }   # exact, or "~regex" (full match)
    signal = "write_latency_ms"           # a vocabulary name; its qualifier may be a template
    target = "{host_name}"                # "{label}", "{node}" (the host), extract's groups
    pool = "{cluster}"
    scale = 0.001                         # value x scale is in the vocabulary's unit (µs -> ms)

Other keys: ``kind`` (counter | gauge: checked against the vocabulary), ``extract`` (label ->
regex whose named groups become template names), ``weight`` (a label whose number multiplies
the value: a histogram kept as labels), ``divide_by`` (a metric with the same labels at the same
time: value / its value), ``active`` (1 when the value is above 0, else 0), ``aggregate``
(write the unqualified name too, combined over the qualifiers), ``combine`` (sum | max | mean:
how rows of the same pool, target, name and time are combined; default from the vocabulary).
A rule of your own for a metric replaces the presets' rules for that metric.

Every problem is one :class:`ConfigError` line naming the file and the rule.
"""

from __future__ import annotations

import math
import re
import string
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ckptwatch.errors import ConfigError
from ckptwatch.settings.pool_presets import PRESETS

if TYPE_CHECKING:
    import duckdb

#: Keys a rule may have.
RULE_KEYS = frozenset({"metric", "match", "signal", "kind", "target", "pool", "scale",
                       "extract", "weight", "divide_by", "active", "aggregate", "combine"})
#: Keys of the ``[pool.prometheus]`` table.
TABLE_KEYS = frozenset({"preset", "rules"})
KINDS = ("counter", "gauge")
COMBINES = ("sum", "max", "mean")
#: The name of the host (the ``[prometheus] node_label`` value, as ``node_map`` names it) in
#: templates.
NODE_FIELD = "node"

_METRIC = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")
_LABEL = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*")


@dataclass(frozen=True)
class VocabularyName:
    """One base name of the pool vocabulary: its kind and how rows of it combine."""

    kind: str
    combine: str


@cache
def vocabulary(sql_root: Path) -> dict[str, VocabularyName]:
    """The pool vocabulary (``stg_pool_vocabulary``, read from ``sql_root``) by base name.
    Rows of one name at one time combine by sum (counters, counts, depths), max (a max or peak,
    an activity level) or mean (a mean latency, a percentage)."""
    import duckdb

    path = sql_root / "staging" / "stg_pool_vocabulary.sql"
    con = duckdb.connect()
    try:
        con.execute(path.read_text())
        rows = con.execute("select metric, kind, unit, max_of, peak_of "
                           "from stg_pool_vocabulary").fetchall()
    except (OSError, duckdb.Error) as exc:
        raise ConfigError(f"the pool vocabulary {path} cannot be read, so [pool.prometheus] "
                          f"rules cannot be checked: {exc}") from None
    finally:
        con.close()
    out = {}
    for metric, kind, unit, max_of, peak_of in rows:
        if kind == "counter":
            combine = "sum"
        elif max_of or peak_of or unit == "0..1":
            combine = "max"
        elif unit in ("ms", "%"):
            combine = "mean"
        else:
            combine = "sum"
        out[metric] = VocabularyName(kind, combine)
    return out


@dataclass(frozen=True)
class PoolRule:
    """One mapping rule, checked. Templates are ``str.format`` fields over the series' labels,
    ``{node}`` and ``extract``'s groups."""

    #: Where the rule was written: ``<file> [[pool.prometheus.rules]] #2`` or ``preset daos #3``.
    origin: str
    #: The metric name, or ``~regex`` (a full match; its named groups are template fields).
    metric: str
    signal: str
    target: str
    pool: str
    kind: str
    combine: str
    #: label -> exact value, or ``~regex`` (a full match); an absent label is "".
    match: tuple[tuple[str, str], ...] = ()
    scale: float = 1.0
    extract: tuple[tuple[str, str], ...] = ()
    weight: str | None = None
    divide_by: str | None = None
    active: bool = False
    aggregate: bool = False

    @property
    def metric_regex(self) -> re.Pattern[str] | None:
        """The compiled ``~regex`` of ``metric`` (None: an exact name)."""
        return re.compile(self.metric[1:]) if self.metric.startswith("~") else None

    @property
    def base(self) -> str:
        """The vocabulary name (the signal before its first dot)."""
        return self.signal.split(".", 1)[0]


@dataclass(frozen=True)
class PoolPrometheusSettings:
    """``[pool.prometheus]``: the presets chosen and the rules of one's own."""

    presets: tuple[str, ...] = ()
    rules: tuple[PoolRule, ...] = ()

    def effective_rules(self, sql_root: Path) -> tuple[PoolRule, ...]:
        """The presets' rules (those for a metric one's own rules map left out), then one's
        own."""
        own = {r.metric for r in self.rules}
        out = [r for name in self.presets for r in preset_rules(name, sql_root)
               if r.metric not in own]
        return (*out, *self.rules)


@dataclass(frozen=True)
class PoolSettings:
    """``[pool]``: the pool side's settings (its Prometheus mapping, its pools' write
    bandwidth)."""

    prometheus: PoolPrometheusSettings = PoolPrometheusSettings()
    #: ``[pool] write_bandwidth_gbs = {pool0 = 400.0}``: each pool's write bandwidth (GB/s),
    #: the capacity ``pool_demand`` judges demand against (none: estimated from the lake).
    write_bandwidth_gbs: Mapping[str, float] = field(default_factory=dict)

    def apply(self, con: duckdb.DuckDBPyConnection) -> None:
        """Hand the configured bandwidths to the SQL (the session variable
        ``pool_write_bandwidth``, sql/session.sql)."""
        con.execute("SET VARIABLE pool_write_bandwidth = cast(? as struct(pool varchar, "
                    "gbs double)[])",
                    [[{"pool": k, "gbs": v} for k, v in sorted(self.write_bandwidth_gbs.items())]]
                    ).fetchall()


@cache
def preset_rules(name: str, sql_root: Path) -> tuple[PoolRule, ...]:
    """The checked rules of the shipped preset ``name`` (``ckptwatch.settings.pool_presets``)."""
    preset = PRESETS[name]
    return tuple(parse_rule(f"preset {name}", i, data, sql_root)
                 for i, data in enumerate(preset.rules, start=1))


def pool_settings(where: str, data: Mapping[str, Any], sql_root: Path) -> PoolSettings:
    """The ``[pool]`` table: ``[pool.prometheus]`` checked (``where`` names the file)."""
    unknown = sorted(set(data) - {"prometheus", "write_bandwidth_gbs"})
    if unknown:
        raise ConfigError(f"{where}: unknown key [pool] {unknown[0]!r} (known: prometheus, "
                          "write_bandwidth_gbs)")
    table = data.get("prometheus", {})
    if not isinstance(table, Mapping):
        raise ConfigError(f"{where}: [pool.prometheus] must be a table")
    return PoolSettings(prometheus=pool_prometheus_settings(where, table, sql_root),
                        write_bandwidth_gbs=_bandwidths(where, data.get("write_bandwidth_gbs",
                                                                        {})))


def _bandwidths(where: str, data: Any) -> dict[str, float]:
    """``[pool] write_bandwidth_gbs``: pool name -> GB/s, each a positive finite number."""
    if not isinstance(data, Mapping):
        raise ConfigError(f"{where}: [pool] write_bandwidth_gbs must be a table of pool = GB/s "
                          "(e.g. write_bandwidth_gbs = { pool0 = 400 })")
    out: dict[str, float] = {}
    for pool, value in data.items():
        if isinstance(value, bool) or not isinstance(value, int | float) \
                or not math.isfinite(value) or value <= 0:
            raise ConfigError(f"{where}: [pool] write_bandwidth_gbs.{pool} must be a positive "
                              f"number of GB/s (got {value!r})")
        out[str(pool)] = float(value)
    return out


def pool_prometheus_settings(where: str, data: Mapping[str, Any],
                             sql_root: Path) -> PoolPrometheusSettings:
    """The ``[pool.prometheus]`` table, checked."""
    unknown = sorted(set(data) - TABLE_KEYS)
    if unknown:
        raise ConfigError(f"{where}: unknown key [pool.prometheus] {unknown[0]!r} (known: "
                          f"{', '.join(sorted(TABLE_KEYS))})")
    chosen = data.get("preset", [])
    names = [chosen] if isinstance(chosen, str) else chosen
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
        raise ConfigError(f"{where}: [pool.prometheus] preset must be a preset's name or a "
                          f"list of names (known: {', '.join(PRESETS)})")
    for name in names:
        if name not in PRESETS:
            raise ConfigError(f"{where}: [pool.prometheus] preset {name!r} is not a shipped "
                              f"preset (known: {', '.join(PRESETS)})")
    rules = data.get("rules", [])
    if not isinstance(rules, list):
        raise ConfigError(f"{where}: [pool.prometheus] rules must be an array of tables "
                          "([[pool.prometheus.rules]])")
    own = tuple(parse_rule(f"{where} [[pool.prometheus.rules]]", i, rule, sql_root)
                for i, rule in enumerate(rules, start=1))
    return PoolPrometheusSettings(presets=tuple(dict.fromkeys(names)), rules=own)


def parse_rule(where: str, index: int, data: Any, sql_root: Path) -> PoolRule:
    """One rule, checked; ``ConfigError`` naming ``where``, the rule's number and metric."""
    origin = f"{where} #{index}"
    if not isinstance(data, Mapping):
        raise ConfigError(f"{origin}: a rule must be a table (got {type(data).__name__})")
    metric = data.get("metric")
    if isinstance(metric, str) and metric:
        origin += f" (metric {metric})"

    def bad(problem: str) -> ConfigError:
        return ConfigError(f"{origin}: {problem}")

    unknown = sorted(set(data) - RULE_KEYS)
    if unknown:
        raise bad(f"unknown key {unknown[0]!r} (known: {', '.join(sorted(RULE_KEYS))})")
    for key in ("metric", "signal", "target", "pool"):
        if key not in data:
            raise bad(f"{key} is missing (a rule needs metric, signal, target and pool)")
        if not isinstance(data[key], str) or not data[key].strip():
            raise bad(f"{key} must be a non-empty string (got {data[key]!r})")
    assert isinstance(metric, str)
    if metric.startswith("~"):
        try:
            re.compile(metric[1:])
        except re.error as exc:
            raise bad(f"metric {metric!r} is not a regular expression: {exc}") from None
    elif not _METRIC.fullmatch(metric):
        raise bad(f"metric {metric!r} is not a Prometheus metric name (or \"~regex\")")
    names = vocabulary(sql_root)
    signal = data["signal"]
    base, dot, qualifier = signal.partition(".")
    if base not in names:
        raise bad(f"signal {signal!r}: {base!r} is not in the pool vocabulary (known: "
                  f"{', '.join(sorted(names))})")
    if dot and not qualifier:
        raise bad(f"signal {signal!r}: an empty qualifier after the dot")
    extract = _extract(data.get("extract", {}), bad)
    for key in ("signal", "target", "pool"):
        _template(data[key], key, bad)
    kind = data.get("kind", names[base].kind)
    if kind not in KINDS:
        raise bad(f"kind must be one of {', '.join(KINDS)} (got {kind!r})")
    if kind != names[base].kind:
        raise bad(f"kind {kind!r}, but {base} is a {names[base].kind} in the pool vocabulary")
    combine = data.get("combine", names[base].combine)
    if combine not in COMBINES:
        raise bad(f"combine must be one of {', '.join(COMBINES)} (got {combine!r})")
    scale = data.get("scale", 1.0)
    if isinstance(scale, bool) or not isinstance(scale, int | float) or not math.isfinite(
            scale) or scale == 0:
        raise bad(f"scale must be a finite non-zero number (got {scale!r})")
    values: dict[str, Any] = {}
    for key in ("weight", "divide_by"):
        if key in data:
            value = data[key]
            pattern = _LABEL if key == "weight" else _METRIC
            if not isinstance(value, str) or not pattern.fullmatch(value):
                what = "a label name" if key == "weight" else "a Prometheus metric name"
                raise bad(f"{key} must be {what} (got {value!r})")
            values[key] = value
    for key in ("active", "aggregate"):
        if key in data:
            if not isinstance(data[key], bool):
                raise bad(f"{key} must be true or false (got {data[key]!r})")
            values[key] = data[key]
    if values.get("aggregate") and not dot:
        raise bad(f"aggregate writes the unqualified name beside a qualified one: signal "
                  f"{signal!r} has no qualifier")
    return PoolRule(origin=origin, metric=metric, signal=signal, target=data["target"],
                    pool=data["pool"], kind=kind, combine=combine,
                    match=_matchers(data.get("match", {}), bad), scale=float(scale),
                    extract=extract, **values)


def _matchers(value: Any, bad: Any) -> tuple[tuple[str, str], ...]:
    if not isinstance(value, Mapping):
        raise bad("match must be a table of label = value (or \"~regex\")")
    out = []
    for label, want in sorted(value.items()):
        if not _LABEL.fullmatch(str(label)):
            raise bad(f"match: {label!r} is not a label name")
        if not isinstance(want, str):
            raise bad(f"match: {label} must be a string (got {want!r})")
        if want.startswith("~"):
            try:
                re.compile(want[1:])
            except re.error as exc:
                raise bad(f"match: {label} = {want!r} is not a regular expression: {exc}") \
                    from None
        out.append((str(label), want))
    return tuple(out)


def _extract(value: Any, bad: Any) -> tuple[tuple[str, str], ...]:
    if not isinstance(value, Mapping):
        raise bad("extract must be a table of label = regex with named groups")
    out = []
    for label, rx in sorted(value.items()):
        if not _LABEL.fullmatch(str(label)) or not isinstance(rx, str):
            raise bad(f"extract: {label!r} = {rx!r} must be a label name = a regex string")
        try:
            groups = re.compile(rx).groupindex
        except re.error as exc:
            raise bad(f"extract: {label} = {rx!r} is not a regular expression: {exc}") \
                from None
        if not groups:
            raise bad(f"extract: {label} = {rx!r} has no named group ((?P<name>...))")
        out.append((str(label), rx))
    return tuple(out)


def template_fields(text: str) -> list[str]:
    """The names ``text`` refers to (``{name}``); ValueError for any other format syntax."""
    out = []
    for _, name, spec, conversion in string.Formatter().parse(text):
        if name is None:
            continue
        if not _LABEL.fullmatch(name) or spec or conversion:
            raise ValueError(f"{{{name}{'!' + conversion if conversion else ''}"
                             f"{':' + spec if spec else ''}}} is not a {{label}} field")
        out.append(name)
    return out


def _template(text: str, key: str, bad: Any) -> None:
    try:
        template_fields(text)
    except ValueError as exc:
        raise bad(f"{key} {text!r}: {exc} (write {{{{ and }}}} for braces)") from None


def render(text: str, values: Mapping[str, str]) -> str | None:
    """``text`` with its fields filled from ``values``; None when one is missing or empty."""
    names = template_fields(text)
    if any(not values.get(n) for n in names):
        return None
    return text.format_map({n: values[n] for n in names})


def rule_lines(rules: Sequence[PoolRule]) -> list[str]:
    """One line per rule (``ckptwatch config show`` and notes)."""
    return [f"{r.origin}: {r.metric}{dict(r.match) or ''} -> {r.signal}" for r in rules]
