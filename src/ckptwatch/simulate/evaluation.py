"""Score stall detection and attribution on generated scenarios, and train the model.

Scenarios come from ``ckptwatch.simulate.scenario`` with seeds the caller chooses: training uses one
range, ``evaluate`` must be given seeds never used for training (the CLI refuses overlaps with
the model's recorded training seeds). Each scenario goes through the real path: raw files ->
ingest -> SQL marts -> features -> attribution, and is scored against its ``labels.json``.
"""

from __future__ import annotations

import json
import sys
import tempfile
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import polars as pl

from ckptwatch.analysis.attribution import LABELS, UNKNOWN, AttributionModel, attribute
from ckptwatch.analysis.detection import DetectionSettings
from ckptwatch.analysis.stalls import stall_features
from ckptwatch.ingest.run import ingest
from ckptwatch.lake.query import connect
from ckptwatch.simulate.scenario import simulate

#: Scenario size for training and evaluation: bigger than the demo sample, still quick.
SCENARIO = {"nodes": 16, "hours": 6.0}


@dataclass
class ScenarioResult:
    """Detected stalls of one scenario joined to the truth."""

    seed: int
    features: pl.DataFrame
    truth: dict[tuple[str, int], list[str]]

    def matched_labels(self) -> list[str | None]:
        """Per detected stall: the true primary cause, or None when it is not a true stall."""
        out: list[str | None] = []
        for job, step in zip(self.features["job_id"], self.features["step"], strict=True):
            causes = self.truth.get((job, int(step)))
            out.append(causes[0] if causes else None)
        return out


def run_scenario(seed: int, workdir: Path, settings: DetectionSettings | None = None,
                 **scenario: Any) -> ScenarioResult:
    """Simulate, ingest and featurise one scenario."""
    opts = {**SCENARIO, **scenario}
    raw, lake = workdir / f"raw-{seed}", workdir / f"lake-{seed}"
    simulate(raw, seed, overwrite=True, **opts)
    ingest(raw, lake)
    con = connect(lake)
    (settings or DetectionSettings()).apply(con)
    features = stall_features(con)
    con.close()
    labels = json.loads((raw / "labels.json").read_text())
    truth = {(s["job_id"], int(s["step"])): list(s["causes"]) for s in labels["stalls"]}
    return ScenarioResult(seed, features, truth)


def scenarios(seeds: Iterable[int], *, progress: Callable[[str], None] | None = None,
              **scenario: Any) -> list[ScenarioResult]:
    """Run every seed in a temporary directory (removed afterwards)."""
    out = []
    with tempfile.TemporaryDirectory(prefix="ckptwatch-eval-") as tmp:
        for i, seed in enumerate(seeds, start=1):
            if progress:
                progress(f"scenario {i}: seed {seed}")
            out.append(run_scenario(seed, Path(tmp), **scenario))
    return out


def train_model(seeds: list[int], *, progress: Callable[[str], None] | None = None,
                **scenario: Any) -> AttributionModel:
    """Fit the attribution model on the true stalls of these seeds' scenarios."""
    frames, labels = [], []
    for res in scenarios(seeds, progress=progress, **scenario):
        keep = [lab is not None for lab in res.matched_labels()]
        if any(keep):
            frames.append(res.features.filter(pl.Series(keep)))
            labels += [lab for lab in res.matched_labels() if lab is not None]
    if not frames:
        from ckptwatch.errors import ModelError

        raise ModelError("the training scenarios produced no labelled stalls")
    features = pl.concat(frames, how="diagonal_relaxed")
    return AttributionModel.train(features, labels, meta={
        "training_seeds": seeds, "scenario": {**SCENARIO, **scenario},
        "labels": {lab: labels.count(lab) for lab in LABELS}})


@dataclass
class EvalReport:
    """Detection and attribution scores over a set of scenarios."""

    seeds: list[int]
    true_positives: int = 0
    false_positives: int = 0
    false_negatives: int = 0
    truth: list[str] = field(default_factory=list)
    predicted: list[str] = field(default_factory=list)
    mistakes: list[dict[str, Any]] = field(default_factory=list)

    @property
    def precision(self) -> float:
        """Detected stalls that are true stalls."""
        d = self.true_positives + self.false_positives
        return self.true_positives / d if d else 1.0

    @property
    def recall(self) -> float:
        """True stalls that were detected."""
        d = self.true_positives + self.false_negatives
        return self.true_positives / d if d else 1.0

    def per_cause(self) -> pl.DataFrame:
        """Precision, recall, F1 and support of each cause (top cause vs true primary)."""
        from sklearn.metrics import precision_recall_fscore_support

        p, r, f, s = precision_recall_fscore_support(self.truth, self.predicted,
                                                     labels=list(LABELS), zero_division=0)
        return pl.DataFrame({"cause": list(LABELS), "precision": p, "recall": r, "f1": f,
                             "support": s})

    @property
    def macro_f1(self) -> float:
        """Mean F1 over the causes present in the truth."""
        pc = self.per_cause().filter(pl.col("support") > 0)
        return float(pc["f1"].mean()) if pc.height else 0.0  # type: ignore[arg-type]

    def confusion(self) -> pl.DataFrame:
        """Rows: true primary cause; columns: predicted top cause."""
        from sklearn.metrics import confusion_matrix

        m = confusion_matrix(self.truth, self.predicted, labels=list(LABELS))
        return pl.DataFrame({"true \\ predicted": list(LABELS),
                             **{lab: m[:, i] for i, lab in enumerate(LABELS)}})

    def to_dict(self) -> dict[str, Any]:
        """JSON form."""
        return {"seeds": self.seeds,
                "detection": {"precision": self.precision, "recall": self.recall,
                              "true_positives": self.true_positives,
                              "false_positives": self.false_positives,
                              "false_negatives": self.false_negatives},
                "attribution": {"macro_f1": self.macro_f1,
                                "per_cause": self.per_cause().to_dicts(),
                                "confusion": self.confusion().to_dicts()},
                "mistakes": self.mistakes}


def evaluate(seeds: list[int], model: AttributionModel | None, *,
             progress: Callable[[str], None] | None = None, **scenario: Any) -> EvalReport:
    """Detection precision/recall and per-cause scores on these seeds' scenarios."""
    report = EvalReport(seeds=list(seeds))
    for res in scenarios(seeds, progress=progress, **scenario):
        detected = {(j, int(s)) for j, s in zip(res.features["job_id"], res.features["step"],
                                               strict=True)} if res.features.height else set()
        report.true_positives += len(detected & set(res.truth))
        report.false_positives += len(detected - set(res.truth))
        report.false_negatives += len(set(res.truth) - detected)
        if res.features.height == 0:
            continue
        verdicts = attribute(res.features, model)
        for row, vs, truth in zip(res.features.iter_rows(named=True), verdicts,
                                  res.matched_labels(), strict=True):
            if truth is None:
                continue
            top = vs[0].cause if vs else UNKNOWN
            report.truth.append(truth)
            report.predicted.append(top)
            if top != truth:
                report.mistakes.append({"seed": res.seed, "job_id": row["job_id"],
                                        "step": row["step"], "truth": res.truth[
                                            (row["job_id"], int(row["step"]))],
                                        "predicted": [(v.cause, round(v.score, 2))
                                                      for v in vs]})
    return report


def stderr_progress(msg: str) -> None:
    """Progress lines on stderr."""
    print(f"  {msg}", file=sys.stderr, flush=True)
