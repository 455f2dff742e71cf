"""The pool side of ``ckptwatch pull prometheus``: which series the ``[pool.prometheus]`` rules
(``ckptwatch.settings.pool``) map, and a chunk's samples of them as ``pool_metrics`` rows.

Discovery asks Prometheus for the metric names of the presets' families (``lustre_*``,
``engine_*``, ``gpfs_*``, ``weka_*``, ``vast_*``) and of the rules, whether or not a preset is
chosen: a name no rule maps is named in the pull's notes, not silently left behind; then for the
series of the names the rules map (and their ``divide_by`` metrics), per host. The samples are
read by ``pull.prometheus``' chunked query path, with the SMART and fabric series.

A sample becomes a row per rule that matches it: ``value x scale`` (times the ``weight``
label's number; over the ``divide_by`` series' value at the same time; 1/0 for ``active``),
the signal, target and pool rendered from the labels, ``{node}`` and ``extract``'s groups.
Rows of one (pool, target, metric, time) are combined (the rule's ``combine``: sum over
sizes, classes or contexts, max of maxima); a rule with ``aggregate`` adds the unqualified name,
combined over its qualifiers (never over ``.job=`` ones).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from ckptwatch.pull.promapi import PrometheusAPI
from ckptwatch.settings.pool import NODE_FIELD, PoolRule, render, template_fields
from ckptwatch.settings.pool_presets import PRESETS

#: (host label value, metric, labels without ``__name__``, value text, epoch seconds)
Sample = tuple[str, str, dict[str, str], str, float]
#: Names listed in one note at most.
NOTE_NAMES = 50


@dataclass
class PoolPlan:
    """What discovery found: the series to read per host, and what no rule maps."""

    rules: tuple[PoolRule, ...]
    #: host label value -> metric -> series (the mapped metrics and their divisors).
    per_host: dict[str, dict[str, int]] = field(default_factory=dict)
    #: Pool-looking metric names no rule maps -> series.
    unmapped: dict[str, int] = field(default_factory=dict)
    #: Mapped metric names -> their series no rule's matchers select.
    unmatched: dict[str, int] = field(default_factory=dict)

    @property
    def series(self) -> int:
        return sum(sum(m.values()) for m in self.per_host.values())

    @property
    def metrics(self) -> set[str]:
        return {m for per in self.per_host.values() for m in per}


def rules_for(rules: Sequence[PoolRule], metric: str) -> list[tuple[PoolRule, dict[str, str]]]:
    """The rules whose metric is ``metric`` (an exact name, or a ``~regex`` full match), each
    with the regex's named groups."""
    out: list[tuple[PoolRule, dict[str, str]]] = []
    for rule in rules:
        rx = rule.metric_regex
        if rx is None:
            if rule.metric == metric:
                out.append((rule, {}))
        else:
            m = rx.fullmatch(metric)
            if m:
                out.append((rule, {k: v for k, v in m.groupdict().items() if v is not None}))
    return out


def matches(rule: PoolRule, labels: dict[str, str]) -> bool:
    """True when ``labels`` pass the rule's matchers (an absent label is "")."""
    for label, want in rule.match:
        got = labels.get(label, "")
        if want.startswith("~"):
            if not re.fullmatch(want[1:], got):
                return False
        elif got != want:
            return False
    return True


def _names_selector(rules: Sequence[PoolRule]) -> str:
    """The ``__name__`` regex of the presets' families and every rule's metric and divisor."""
    parts = [p.family for p in PRESETS.values()]
    for r in rules:
        parts.append(r.metric[1:] if r.metric.startswith("~") else re.escape(r.metric))
        if r.divide_by:
            parts.append(re.escape(r.divide_by))
    alternatives = "|".join(dict.fromkeys(parts))
    return '{__name__=~' + _promql_string(alternatives) + '}'


def _promql_string(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def discover(api: PrometheusAPI, rules: Sequence[PoolRule], start: float, end: float,
             node_label: str) -> tuple[PoolPlan, int]:
    """The plan of ``rules`` over ``[start, end]``, and the queries it took."""
    plan = PoolPlan(tuple(rules))
    names = sorted(api.label_values("__name__", _names_selector(rules), start, end))
    queries = 1
    divisors = {r.divide_by for r in rules if r.divide_by}
    mapped = [n for n in names if rules_for(rules, n)]
    for name in names:
        if name not in mapped and name not in divisors:
            plan.unmapped[name] = 0
    wanted = sorted({*mapped, *(d for d in divisors if d in names)})
    if plan.unmapped:
        selector = "{__name__=~" + _promql_string(
            "|".join(re.escape(n) for n in plan.unmapped)) + "}"
        for labels in api.series(selector, start, end):
            name = labels.get("__name__", "")
            if name in plan.unmapped:
                plan.unmapped[name] += 1
        queries += 1
    if not wanted:
        return plan, queries
    selector = "{__name__=~" + _promql_string("|".join(re.escape(n) for n in wanted)) + "}"
    found = api.series(selector, start, end)
    queries += 1
    for labels in found:
        name = labels.pop("__name__", "")
        host = labels.get(node_label, "")
        if name in divisors and name not in mapped:
            plan.per_host.setdefault(host, {}).setdefault(name, 0)
            plan.per_host[host][name] += 1
            continue
        if not any(matches(r, labels) for r, _ in rules_for(rules, name)):
            plan.unmatched[name] = plan.unmatched.get(name, 0) + 1
            continue
        plan.per_host.setdefault(host, {}).setdefault(name, 0)
        plan.per_host[host][name] += 1
    return plan, queries


def plan_notes(plan: PoolPlan, presets: Sequence[str]) -> list[str]:
    """The notes that name what no rule maps."""
    out = []
    if plan.unmapped:
        hint = []
        for p in PRESETS.values():
            if p.name not in presets and any(re.fullmatch(p.family, n) for n in plan.unmapped):
                hint.append(p.name)
        shown = ", ".join(f"{n} ({k})" for n, k in list(sorted(plan.unmapped.items()))[
            :NOTE_NAMES])
        more = len(plan.unmapped) - NOTE_NAMES
        out.append(f"pool metrics no [pool.prometheus] rule maps, not pulled: {shown}"
                   + (f" and {more} more" if more > 0 else "")
                   + (f" (preset {' / '.join(repr(h) for h in hint)} maps some: "
                      "[pool.prometheus] preset)" if hint else ""))
    if plan.unmatched:
        shown = ", ".join(f"{n} ({k} series)" for n, k in sorted(plan.unmatched.items()))
        out.append(f"pool series whose labels no rule's match selects, not pulled: {shown}")
    return out


# -- samples -> rows ----------------------------------------------------------------------


@dataclass
class Mapped:
    """A chunk's rows and why samples gave none (rule origin + problem -> samples)."""

    rows: list[dict[str, Any]] = field(default_factory=list)
    skipped: dict[str, int] = field(default_factory=dict)


def _fields(rule: PoolRule, labels: dict[str, str], groups: dict[str, str],
            node: str) -> dict[str, str] | str:
    """The template values of one series, or why there are none."""
    values = {**labels, NODE_FIELD: node, **groups}
    for label, rx in rule.extract:
        m = re.fullmatch(rx, labels.get(label, ""))
        if m is None:
            return f"label {label}={labels.get(label, '')!r} does not match extract {rx!r}"
        values.update({k: v for k, v in m.groupdict().items() if v is not None})
    return values


def map_samples(samples: Iterable[Sample], rules: Sequence[PoolRule],
                namer: Callable[[str], str]) -> Mapped:
    """``pool_metrics`` rows of ``samples`` under ``rules`` (combined per key, with the
    aggregates), and the counts of the samples that gave none, by rule and reason."""
    out = Mapped()
    by_series: dict[tuple[str, tuple[tuple[str, str], ...], float], float] = {}
    listed = list(samples)
    for _, metric, labels, text, ts in listed:
        by_series[(metric, tuple(sorted(labels.items())), ts)] = _number(text)
    parts: dict[tuple[str, str, str, float], tuple[str, list[float]]] = {}
    aggregates: dict[tuple[str, str, str, float], tuple[str, list[float]]] = {}
    nodes: dict[str, str] = {}

    def skip(rule: PoolRule, why: str) -> None:
        key = f"{rule.origin}: {why}"
        out.skipped[key] = out.skipped.get(key, 0) + 1

    for host, metric, labels, value_text, ts in listed:
        node = nodes.get(host)
        if node is None:
            node = nodes[host] = namer(host) if host else ""
        for rule, groups in rules_for(rules, metric):
            if not matches(rule, labels):
                continue
            names = _fields(rule, labels, groups, node)
            if isinstance(names, str):
                skip(rule, names)
                continue
            signal, target, pool = (render(t, names) for t in (rule.signal, rule.target,
                                                               rule.pool))
            if signal is None or target is None or pool is None:
                missing = sorted(n for t in (rule.signal, rule.target, rule.pool)
                                 for n in template_fields(t) if not names.get(n))
                skip(rule, f"series without {', '.join(dict.fromkeys(missing))}")
                continue
            value = _number(value_text)
            if rule.weight is not None:
                weight = _number(labels.get(rule.weight, ""))
                if not math.isfinite(weight):
                    skip(rule, f"label {rule.weight} is not a number")
                    continue
                value *= weight
            if rule.divide_by is not None:
                divisor = by_series.get((rule.divide_by, tuple(sorted(labels.items())), ts))
                if divisor is None:
                    skip(rule, f"no {rule.divide_by} sample with the same labels and time")
                    continue
                if divisor == 0:
                    continue  # nothing in the interval: no mean (as the counters' rule)
                value /= divisor
            value = (1.0 if value > 0 else 0.0) if rule.active else value * rule.scale
            if not math.isfinite(value):
                skip(rule, f"value {value_text!r} is not a finite number")
                continue
            key = (pool, target, signal, ts)
            parts.setdefault(key, (rule.combine, []))[1].append(value)
            base, dot, qualifier = signal.partition(".")
            if rule.aggregate and dot and not qualifier.startswith("job="):
                aggregates.setdefault((pool, target, base, ts), (rule.combine, []))[1].append(
                    value)
    for (pool, target, metric, ts), (how, found) in (*parts.items(), *aggregates.items()):
        out.rows.append({"ts": datetime.fromtimestamp(ts, tz=UTC), "pool": pool,
                         "target": target, "metric": metric, "value": _combine(how, found)})
    return out


def _combine(how: str, values: list[float]) -> float:
    if how == "max":
        return max(values)
    if how == "mean":
        return sum(values) / len(values)
    return math.fsum(values)


def _number(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        return math.nan
