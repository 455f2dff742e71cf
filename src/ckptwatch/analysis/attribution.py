"""Attribute stalls to causes: interpretable rules, a scikit-learn model, and evidence.

Each cause in ``CAUSES`` gets a rule score in [0, 1] from physically meaningful features (see
``ckptwatch.analysis.stalls.FEATURE_DOCS``) and a *support* verdict: is there at least one
signal of that
cause on the slow ranks' hosts? A cause without support is never reported, whatever the model
says; a stall where no cause has support is ``unknown`` (an honest unknown beats a confident
wrong answer). When a trained model is available (``ckptwatch train-model``), each supported
cause's score is the mean of its rule score and the model's probability.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from ckptwatch.analysis.stalls import FEATURES

CAUSES = ("gc", "metadata", "fabric_pause")
UNKNOWN = "unknown"
LABELS = (*CAUSES, UNKNOWN)
#: Below this score a supported cause is still listed, but never as the top cause.
MIN_TOP_SCORE = 0.2
#: Pause / PortXmitWait on the slow ranks' NICs must be this many times its own baseline to
#: support fabric_pause (a pause storm that doubles a checkpoint pauses the link for a large
#: share of the time: far above the background of occasional pause frames).
FABRIC_SUPPORT_RATIO = 20.0


@dataclass
class CauseVerdict:
    """One cause of a stall: score, whether a signal supports it, and the evidence."""

    cause: str
    score: float
    supported: bool
    rule_score: float
    model_score: float | None = None
    evidence: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """JSON form: ``{cause, score, evidence}`` plus the parts of the score."""
        return {"cause": self.cause, "score": round(self.score, 3),
                "evidence": self.evidence, "supported": self.supported,
                "rule_score": round(self.rule_score, 3),
                "model_score": None if self.model_score is None else round(self.model_score, 3)}


def _clip(x: float) -> float:
    return float(min(1.0, max(0.0, x)))


def _k(x: float) -> str:
    """A rate for people: 41 k/s, 950 /s, 0.12 /s."""
    if x >= 1e6:
        return f"{x / 1e6:.1f} M/s"
    if x >= 1e3:
        return f"{x / 1e3:.1f} k/s"
    if x >= 10:
        return f"{x:.0f} /s"
    return f"{x:.2f} /s"


def _hosts(names: list[str], limit: int = 4) -> str:
    shown = ", ".join(names[:limit])
    return shown + (f" +{len(names) - limit}" if len(names) > limit else "")


def rule_verdicts(f: Mapping[str, Any]) -> list[CauseVerdict]:
    """Rule score, support and evidence of each cause for one stall's features."""
    data_side = 0.5 + 0.5 * (1.0 - f["metadata_share"])
    out = []

    # fabric_pause: pause frames / PortXmitWait on the slow ranks' NICs far above baseline.
    ratio = f["fabric_ratio_slow"]
    fab_support = ratio >= FABRIC_SUPPORT_RATIO
    fab_score = _clip(math.log10(max(ratio, 1.0)) / 3.0) * data_side
    ev = []
    if ratio > 1.5:
        hosts = f.get("fabric_hosts_elevated") or []
        leaves = f.get("slow_leaves") or []
        where = (f" of {leaves[0]}" if len(leaves) == 1 else "")
        base = f["fabric_base_slow"]
        shown = f["fabric_rate_slow"] / base if base > 0 else ratio
        ev.append(f"pause / PortXmitWait on {len(hosts)}/{len(f['slow_nodes'])} slow nodes"
                  f"{where} ({_hosts(hosts or f['slow_nodes'])}): {_k(f['fabric_rate_slow'])} vs "
                  f"{_k(f['fabric_base_slow'])} baseline (x{shown:.0f})")
        if f["fabric_ratio_contrast"] > 2 and f["fabric_ratio_contrast"] < ratio:
            ev.append(f"x{f['fabric_ratio_contrast']:.0f} more than on the checkpoint's other "
                      "nodes")
    if f["leaf_purity"] > 0.5 and f.get("top_leaf"):
        ev.append(f"slow ranks cluster on leaf {f['top_leaf']} (purity {f['leaf_purity']:.2f})")
    out.append(CauseVerdict("fabric_pause", fab_score, fab_support, fab_score, evidence=ev))

    # gc: the slow ranks' drives / targets collect garbage: gc_active, write amplification,
    # free blocks low, controller busy; time goes to write/fsync; slow ranks share a target.
    wa, drop, busy, gca = (f["wa_ratio_slow"], f["free_blocks_drop_slow"], f["busy_ratio_slow"],
                           f["gc_active_slow"])
    # Busy time alone is no GC evidence (any checkpoint write keeps a drive busy), nor is a
    # free-block dip without write amplification on ranks that do not share the target.
    gc_support = gca >= 0.3 or wa >= 1.8 or (drop >= 15.0 and (
        wa >= 1.3 or f["target_purity"] >= 0.5))
    strength = max(gca, _clip((wa - 1.0) / 3.0), _clip(drop / 30.0),
                   _clip(math.log10(max(busy, 1.0)) / 1.5))
    concentration = 0.5 + 0.5 * _clip(f["target_purity"])
    gc_score = strength * data_side * concentration
    ev = []
    targets = f.get("slow_targets") or []
    if gca > 0:
        ev.append(f"gc_active on the slow ranks' targets ({_hosts(targets)}): {gca:.2f} of the "
                  f"window (others {gca - f['gc_active_contrast']:.2f})")
    if wa > 1.2 and f.get("wa_detail"):
        d = f["wa_detail"]
        ev.append(f"write amplification on {d['host']}: {d['wa']:.2f} vs {d['base']:.2f} "
                  f"baseline (x{wa:.1f}, media vs host bytes written)")
    if drop >= 5:
        ev.append(f"free blocks {drop:.0f} percentage points below baseline on the slow ranks' "
                  "drives")
    if busy >= 2:
        ev.append(f"controller busy time x{busy:.1f} its baseline rate")
    if f["target_purity"] > 0.5 and f.get("top_target"):
        ev.append(f"slow ranks cluster on target {f['top_target']} "
                  f"(purity {f['target_purity']:.2f})")
    out.append(CauseVerdict("gc", gc_score, gc_support, gc_score, evidence=ev))

    # metadata: open/close time up across many ranks; pool metadata latency high.
    md = f["metadata_latency_ratio"]
    share = f["metadata_share"]
    md_support = md >= 3.0 or (share >= 0.7 and f["slow_frac"] >= 0.5 and f["has_phases"] > 0)
    md_score = max(_clip(math.log10(max(md, 1.0)) / 2.0) * (0.3 + 0.7 * share),
                   0.6 * share * f["slow_frac"] * f["has_phases"])
    ev = []
    if md > 1.5:
        ev.append(f"pool metadata latency {f['metadata_latency_ms']:.1f} ms vs "
                  f"{f['metadata_latency_base_ms']:.2f} ms baseline (x{md:.0f})")
    if f["has_phases"] and share >= 0.3:
        ev.append(f"{share:.0%} of the slow ranks' extra time in open/close, "
                  f"{f['slow_frac']:.0%} of ranks slow")
    out.append(CauseVerdict("metadata", md_score, md_support, md_score, evidence=ev))
    return out


def feature_matrix(features: pl.DataFrame) -> np.ndarray:
    """The model's input: ``FEATURES`` with ratios on a log scale."""
    cols = []
    for name in FEATURES:
        v = features[name].cast(pl.Float64).fill_null(0.0).to_numpy()
        if name.endswith("ratio_slow") or name in ("metadata_latency_ratio",
                                                   "fabric_ratio_contrast", "ratio_to_baseline"):
            v = np.log10(np.maximum(v, 1e-3))
        cols.append(v)
    return np.column_stack(cols) if cols else np.zeros((0, len(FEATURES)))


class AttributionModel:
    """A scikit-learn classifier over ``FEATURES`` (``LABELS`` as classes)."""

    def __init__(self, estimator: Any, meta: dict[str, Any]) -> None:
        self.estimator = estimator
        self.meta = meta

    @classmethod
    def train(cls, features: pl.DataFrame, labels: list[str], *, seed: int = 0,
              meta: dict[str, Any] | None = None) -> AttributionModel:
        """Fit on labelled stalls (labels from ``LABELS``)."""
        from sklearn.ensemble import GradientBoostingClassifier

        from ckptwatch.errors import ModelError

        causes = sorted(set(labels))
        if len(causes) < 2:
            only = causes[0] if causes else "none"
            raise ModelError(f"{len(labels)} labelled stall(s), of one cause ({only}): a model "
                             "needs stalls of at least two causes (use more seeds, or longer "
                             "or larger scenarios)")
        est = GradientBoostingClassifier(n_estimators=150, max_depth=3, learning_rate=0.1,
                                         subsample=0.9, random_state=seed)
        est.fit(feature_matrix(features), np.array(labels))
        return cls(est, {**(meta or {}), "features": list(FEATURES), "n_train": len(labels)})

    def probabilities(self, features: pl.DataFrame) -> list[dict[str, float]]:
        """Per stall: probability of each label."""
        if features.height == 0:
            return []
        proba = self.estimator.predict_proba(feature_matrix(features))
        classes = list(self.estimator.classes_)
        return [{c: float(p[classes.index(c)]) if c in classes else 0.0 for c in LABELS}
                for p in proba]

    def save(self, path: Path) -> None:
        """Write the model (joblib) next to a JSON card of how it was built."""
        import json

        import joblib

        path.parent.mkdir(parents=True, exist_ok=True)
        joblib.dump({"estimator": self.estimator, "meta": self.meta}, path)
        path.with_suffix(".json").write_text(json.dumps(self.meta, indent=2, default=str))

    @classmethod
    def load(cls, path: Path) -> AttributionModel:
        """Read a model written by ``save``; features must match this version's."""
        import joblib

        from ckptwatch.errors import ModelError

        blob = joblib.load(path)
        if blob.get("meta", {}).get("features") != list(FEATURES):
            raise ModelError(f"model {path} was built for other features; rebuild it with "
                                 "`ckptwatch train-model`")
        return cls(blob["estimator"], blob["meta"])


def attribute_one(f: Mapping[str, Any], proba: Mapping[str, float] | None = None) -> list[
        CauseVerdict]:
    """Ranked causes of one stall (``unknown`` first when nothing supports a cause)."""
    verdicts = rule_verdicts(f)
    for v in verdicts:
        if proba is not None:
            v.model_score = proba.get(v.cause, 0.0)
            v.score = 0.5 * v.rule_score + 0.5 * v.model_score
        if not v.supported:
            v.score = 0.0
    ranked = sorted((v for v in verdicts if v.supported), key=lambda v: -v.score)
    if not ranked or ranked[0].score < MIN_TOP_SCORE:
        p_unknown = proba.get(UNKNOWN) if proba else None
        top = 1.0 - (ranked[0].score if ranked else 0.0)
        unknown = CauseVerdict(UNKNOWN, top if p_unknown is None else 0.5 * (top + p_unknown),
                               True, top, p_unknown,
                               ["no signal of gc, metadata or a fabric pause stands out on the "
                                "slow ranks' hosts during the window"])
        ranked = [unknown, *ranked]
    return ranked


def attribute(features: pl.DataFrame, model: AttributionModel | None = None) -> list[
        list[CauseVerdict]]:
    """Ranked causes for every stall row of ``features``."""
    probas: list[dict[str, float] | None] = (
        list(model.probabilities(features)) if model is not None else [None] * features.height)
    return [attribute_one(row, p) for row, p in zip(features.iter_rows(named=True), probas,
                                                    strict=True)]


def load_default_model(path: Path | None = None) -> AttributionModel | None:
    """The model at ``path`` (default ``config.model_path()``), or None when none was built."""
    from ckptwatch.settings import model_path

    p = path or model_path()
    return AttributionModel.load(p) if p.exists() else None
