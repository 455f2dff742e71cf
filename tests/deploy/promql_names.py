"""The metric names a PromQL expression reads, and the names ckptwatch's metrics and rules
define: lets the rule and dashboard tests check that every expression reads something real."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

from ckptwatch.flows.nightly_metrics import METRICS as NIGHTLY_METRICS
from ckptwatch.live.metrics import METRICS

PROJECT_ROOT = Path(__file__).resolve().parents[2]
DEPLOY = PROJECT_ROOT / "deploy"
RULES_FILE = DEPLOY / "prometheus" / "ckptwatch-rules.yml"
#: The nightly's rules: a file of their own (a site may run the watcher or the nightly alone).
NIGHTLY_RULES_FILE = DEPLOY / "prometheus" / "ckptwatch-nightly-rules.yml"
RULES_FILES = (RULES_FILE, NIGHTLY_RULES_FILE)

_STRING = re.compile(r'"(?:\\.|[^"\\])*"' + r"|'(?:\\.|[^'\\])*'" + r"|`[^`]*`")
_MATCHERS = re.compile(r"\{[^{}]*\}")
_RANGE = re.compile(r"\[[^\]]*\]")
#: by (...), without (...), on (...), ignoring (...), group_left/right (...): label lists.
_LABEL_LIST = re.compile(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^()]*\)")
_IDENT = re.compile(r"[A-Za-z_:][A-Za-z0-9_:]*")
_KEYWORDS = {"and", "or", "unless", "bool", "offset", "by", "without", "on", "ignoring",
             "group_left", "group_right", "inf", "nan", "Inf", "NaN"}
#: Grafana's label_values(metric, label): the label is not a metric.
_LABEL_VALUES = re.compile(r"label_values\(\s*([^,()]+?)\s*(?:,\s*[A-Za-z_]\w*\s*)?\)")


def metric_names(expr: str) -> set[str]:
    """Every metric (or recording rule) name ``expr`` selects; functions and labels left out."""
    text = _LABEL_VALUES.sub(r"\1", expr)
    text = _STRING.sub(" ", text)
    while _MATCHERS.search(text):
        text = _MATCHERS.sub(" ", text)
    text = _RANGE.sub(" ", _LABEL_LIST.sub(" ", text))
    text = re.sub(r"\$\{?\w+\}?", " ", text)  # Grafana variables outside selectors
    # numbers and durations (0.7, 5m, 1e+3) are no names
    text = re.sub(r"(?<![A-Za-z0-9_:])\d[\w.]*(?:[eE][+-]?\d+)?", " ", text)
    names = set()
    for m in _IDENT.finditer(text):
        after = text[m.end():].lstrip()
        if m.group() in _KEYWORDS or after.startswith("("):  # a keyword or a function call
            continue
        names.add(m.group())
    return names


def exported_names() -> set[str]:
    """The series names the watcher and the nightly expose (a histogram's _bucket, _sum and
    _count)."""
    out = set()
    for name, (kind, _, _) in (METRICS | NIGHTLY_METRICS).items():
        out |= {f"{name}_bucket", f"{name}_sum", f"{name}_count"} if kind == "histogram" \
            else {name}
    return out


def rules(path: Path = RULES_FILE) -> list[dict[str, object]]:
    """Every rule of a rule file (default: deploy/prometheus/ckptwatch-rules.yml)."""
    data = yaml.safe_load(path.read_text())
    return [rule for group in data["groups"] for rule in group["rules"]]


def recorded_names() -> set[str]:
    """The series the recording rules of every rule file define."""
    return {str(r["record"]) for path in RULES_FILES for r in rules(path) if "record" in r}
