"""Score stall detection and attribution on generated scenarios, and train the model.

Scenarios come from ``ckptwatch.simulate.scenario`` with seeds the caller chooses: training uses one
range, ``evaluate`` must be given seeds never used for training (the CLI refuses overlaps with
the model's recorded training seeds). Each scenario goes through the real path: raw files ->
ingest -> SQL marts -> features -> attribution, and is scored against its ``labels.json``.
"""

from __future__ import annotations

import json
import shutil
import sys
import tempfile
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import polars as pl

from ckptwatch.analysis.attribution import (
    LABELS,
    MODEL_LABELS,
    NO_TELEMETRY,
    UNKNOWN,
    AttributionModel,
    attribute,
)
from ckptwatch.analysis.detection import DetectionSettings
from ckptwatch.analysis.stalls import stall_features
from ckptwatch.ingest.run import ingest
from ckptwatch.lake.query import connect
from ckptwatch.simulate.scenario import simulate

#: Scenario size for training and evaluation: bigger than the demo sample, still quick.
SCENARIO = {"nodes": 16, "hours": 6.0}

#: Scenario families of the varied simulator: what each changes (``SimulationConfig`` fields).
#: ``smart`` in a family draws a SMART interval of 1-5 minutes from the seed (each drive then
#: samples at 0.67-1.33x it, with jitter). The ``no_*`` families leave one telemetry family out:
#: each must give ``unknown`` or a lower score, never a confident wrong cause.
#: ``checkpoints_only``: checkpoint records (with phases) and jobs, no telemetry feed (day one
#: on a cluster): its stalls are ``no_telemetry`` unless the phases show a metadata stall.
#: The sampling families are ``base`` sampled as clusters sample (``SimulationConfig``):
#: ``smart_apart`` (each tool its own command and cadence: the OCP log seconds after the health
#: log, or 10x denser, or 2x sparser; devices spelled as the tools print them),
#: ``skewed_clocks`` (each node's and target's clock off by up to ±2 s), ``as_clusters`` (both,
#: SMART every 1-5 min, every tool format, two NICs per node).
FAMILIES: dict[str, dict[str, Any]] = {
    "base": {},
    "coarse_smart": {"smart": True},
    "local_wa_only": {"smart": True, "gc_evidence": "wa_only"},
    "weak": {"signal_strength": "weak"},
    "background": {"background_per_stall": 0.7},
    "burst": {"bursts_per_hour": 0.5, "jobs": 4, "fabric": "roce"},
    "no_topology": {"omit": ("topology",)},
    "no_phases": {"omit": ("phases",)},
    "no_ocp": {"omit": ("ocp",)},
    "no_pool": {"omit": ("pool",)},
    "checkpoints_only": {"omit": ("topology", "pool", "smart", "fabric")},
    "smart_apart": {"tool_clocks": "apart"},
    "skewed_clocks": {"clock_skew_s": 2.0},
    "as_clusters": {"smart": True, "tool_clocks": "apart", "clock_skew_s": 2.0,
                    "format_mix": "world", "nics_per_node": 2},
}
#: The families sampled as clusters sample, asked for by name (``varied`` keeps its seeds'
#: families): compare them with ``base`` and ``coarse_smart``, which sample every tool of a
#: host at one instant on one clock.
SAMPLING_FAMILIES = ("smart_apart", "skewed_clocks", "as_clusters")
#: What ``varied`` cycles through (the training and evaluation default; ``checkpoints_only``,
#: ``burst`` and ``SAMPLING_FAMILIES`` are asked for by name, so the seeds keep their families).
#: ``burst``: correlated checkpoint bursts that saturate the pool on a RoCE fabric (the incast's
#: pauses on every writer), four jobs of which at least two write to the pool.
VARIED = tuple(f for f in FAMILIES
               if f not in ("checkpoints_only", "burst") and f not in SAMPLING_FAMILIES)
#: Families with every telemetry family present: the headline figures.
COMPLETE_FAMILIES = ("base", "coarse_smart", "local_wa_only", "weak", "background", "burst",
                     *SAMPLING_FAMILIES)


def family_of(seed: int, families: tuple[str, ...]) -> str:
    """The family of ``seed`` when seeds cycle through ``families``."""
    return families[seed % len(families)]


def family_options(family: str, seed: int) -> dict[str, Any]:
    """``simulate`` options of ``family`` for ``seed``."""
    from ckptwatch.errors import UsageError

    if family not in FAMILIES:
        raise UsageError(f"unknown scenario family {family!r}; choose from "
                         f"{', '.join(FAMILIES)}")
    opts = dict(FAMILIES[family])
    if opts.pop("smart", False):
        opts["smart_interval_s"] = 60.0 + float((seed * 7919) % 241)  # 60-300 s
    return opts


def parse_families(text: str) -> tuple[str, ...]:
    """``varied`` (``VARIED``), ``base``, or a comma list of ``FAMILIES`` names."""
    from ckptwatch.errors import UsageError

    if text == "varied":
        return VARIED
    names = tuple(x.strip() for x in text.split(",") if x.strip())
    bad = [x for x in names if x not in FAMILIES]
    if bad or not names:
        raise UsageError(f"--families {text!r}: use varied, or names from "
                         f"{', '.join(FAMILIES)}")
    return names


@dataclass
class ScenarioResult:
    """Detected stalls of one scenario joined to the truth."""

    seed: int
    features: pl.DataFrame
    truth: dict[tuple[str, int], list[str]]
    family: str = "base"
    #: the scenario's ``--pool-format``
    pool_format: str = "csv"
    #: the true stalls whose primary cause is GC on pool targets (a pool that reports no GC,
    #: Lustre, cannot show it: ``EvalReport.per_pool_format`` counts how they were labelled)
    pool_gc: set[tuple[str, int]] = field(default_factory=set)

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
    return ScenarioResult(seed, features, truth, pool_format=str(opts.get("pool_format", "csv")),
                          pool_gc=pool_gc_stalls(labels))


def pool_gc_stalls(labels: dict[str, Any]) -> set[tuple[str, int]]:
    """The labelled stalls whose primary cause is GC on pool targets (its GC incident names
    targets, not local drives)."""
    on_targets = {inc["id"] for inc in labels["incidents"]
                  if inc["cause"] == "gc" and inc["scope"]["targets"]}
    return {(st["job_id"], int(st["step"])) for st in labels["stalls"]
            if st["causes"] and st["causes"][0] == "gc"
            and any(i in on_targets for i in st["incidents"])}


def scenarios(seeds: Iterable[int], *, progress: Callable[[str], None] | None = None,
              families: tuple[str, ...] = ("base",), pool_formats: tuple[str, ...] = ("csv",),
              **scenario: Any) -> list[ScenarioResult]:
    """Run every seed in a temporary directory (removed afterwards); seeds cycle through
    ``families`` (``family_of``); each seed once per pool format (``pool_formats``: the same
    day, its pool reported by another system)."""
    out = []
    i = 0
    with tempfile.TemporaryDirectory(prefix="ckptwatch-eval-") as tmp:
        for seed in seeds:
            family = family_of(seed, families)
            for fmt in pool_formats:
                i += 1
                if progress:
                    tag = family if pool_formats == ("csv",) else f"{family}, pool {fmt}"
                    progress(f"scenario {i}: seed {seed} ({tag})")
                opts = {**family_options(family, seed), **scenario}
                if fmt != "csv":
                    opts["pool_format"] = fmt
                res = run_scenario(seed, Path(tmp), **opts)
                res.family = family
                out.append(res)
                shutil.rmtree(Path(tmp) / f"raw-{seed}", ignore_errors=True)
                shutil.rmtree(Path(tmp) / f"lake-{seed}", ignore_errors=True)
    return out


def train_model(seeds: list[int], *, progress: Callable[[str], None] | None = None,
                families: tuple[str, ...] = ("base",), **scenario: Any) -> AttributionModel:
    """Fit the attribution model on the true stalls of these seeds' scenarios, and its score
    calibration (``AttributionModel.fit_calibration``) on the same stalls, out of fold."""
    frames, labels = [], []
    for res in scenarios(seeds, progress=progress, families=families, **scenario):
        keep = [lab is not None for lab in res.matched_labels()]
        if any(keep):
            frames.append(res.features.filter(pl.Series(keep)))
            labels += [lab for lab in res.matched_labels() if lab is not None]
    if not frames:
        from ckptwatch.errors import ModelError

        raise ModelError("the training scenarios produced no labelled stalls")
    features = pl.concat(frames, how="diagonal_relaxed")
    model = AttributionModel.train(features, labels, meta={
        "training_seeds": seeds, "scenario": {**SCENARIO, **scenario},
        "families": list(families),
        "labels": {lab: labels.count(lab) for lab in MODEL_LABELS}})
    model.fit_calibration(features, labels)
    return model


#: Score bins of the reliability table.
RELIABILITY_BINS = (0.0, 0.2, 0.4, 0.6, 0.8, 1.0001)


@dataclass
class EvalReport:
    """Detection and attribution scores over a set of scenarios."""

    seeds: list[int]
    true_positives: int = 0
    false_positives: int = 0
    false_negatives: int = 0
    truth: list[str] = field(default_factory=list)
    predicted: list[str] = field(default_factory=list)
    #: Per attributed stall: the top cause's score and the scenario family.
    scores: list[float] = field(default_factory=list)
    families: list[str] = field(default_factory=list)
    mistakes: list[dict[str, Any]] = field(default_factory=list)
    #: Per family: detection counts [true, false, missed].
    detection_by_family: dict[str, list[int]] = field(default_factory=dict)
    #: Per attributed stall: the scenario's pool format, and whether its primary cause is GC
    #: on pool targets (empty: every stall ``csv``, none such).
    pool_formats: list[str] = field(default_factory=list)
    pool_gc: list[bool] = field(default_factory=list)
    #: Per attributed stall: every true cause, primary first (empty: the primary alone).
    true_causes: list[list[str]] = field(default_factory=list)
    #: Per pool format: detection counts [true, false, missed].
    detection_by_format: dict[str, list[int]] = field(default_factory=dict)

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

        if not self.truth:  # no attributed stall (e.g. no family with every feed): all zero
            zero = [0.0] * len(LABELS)
            return pl.DataFrame({"cause": list(LABELS), "precision": zero, "recall": zero,
                                 "f1": zero, "support": [0] * len(LABELS)})
        p, r, f, s = precision_recall_fscore_support(self.truth, self.predicted,
                                                     labels=list(LABELS), zero_division=0)
        return pl.DataFrame({"cause": list(LABELS), "precision": p, "recall": r, "f1": f,
                             "support": s})

    @property
    def macro_f1(self) -> float:
        """Mean F1 over the causes present in the truth."""
        pc = self.per_cause().filter(pl.col("support") > 0)
        return float(pc["f1"].mean()) if pc.height else 0.0  # type: ignore[arg-type]

    def _formats(self) -> list[str]:
        """Per attributed stall: its pool format (``csv`` where none was recorded)."""
        return (self.pool_formats if len(self.pool_formats) == len(self.truth)
                else ["csv"] * len(self.truth))

    def _pool_gc(self) -> list[bool]:
        return self.pool_gc if len(self.pool_gc) == len(self.truth) else [False] * len(
            self.truth)

    def _causes(self) -> list[list[str]]:
        return (self.true_causes if len(self.true_causes) == len(self.truth)
                else [[t] for t in self.truth])

    def _keep(self, rows: Callable[[str, str, bool], bool],
              detection: dict[str, list[int]]) -> EvalReport:
        """The attributed stalls for which ``rows(family, pool format, pool gc)`` holds, with
        the detection counts ``detection`` (by family)."""
        sub = EvalReport(seeds=self.seeds)
        for fam, (tp, fp, fn) in detection.items():
            sub.true_positives += tp
            sub.false_positives += fp
            sub.false_negatives += fn
            sub.detection_by_family[fam] = [tp, fp, fn]
        for t, p, sc, fam, fmt, gc, causes in zip(self.truth, self.predicted, self.scores,
                                                  self.families, self._formats(),
                                                  self._pool_gc(), self._causes(), strict=True):
            if rows(fam, fmt, gc):
                sub.truth.append(t)
                sub.predicted.append(p)
                sub.scores.append(sc)
                sub.families.append(fam)
                sub.pool_formats.append(fmt)
                sub.pool_gc.append(gc)
                sub.true_causes.append(causes)
        return sub

    def subset(self, families: Iterable[str]) -> EvalReport:
        """The report restricted to scenarios of these families."""
        keep = set(families)
        return self._keep(lambda fam, _fmt, _gc: fam in keep,
                          {f: c for f, c in self.detection_by_family.items() if f in keep})

    def of_pool_format(self, fmt: str, *, without_pool_gc: bool = False) -> EvalReport:
        """The report restricted to scenarios of pool format ``fmt`` (``without_pool_gc``:
        and to the stalls whose primary cause is not GC on pool targets)."""
        detection = self.detection_by_format.get(fmt)
        if detection is None and fmt == "csv" and not self.detection_by_format:
            detection = [self.true_positives, self.false_positives, self.false_negatives]
        return self._keep(lambda _fam, f, gc: f == fmt and not (without_pool_gc and gc),
                          {fmt: detection or [0, 0, 0]})

    def per_pool_format(self) -> pl.DataFrame:
        """Per pool format: stalls, detection precision/recall, macro-F1 and each cause's F1,
        how many stalls were labelled unknown and no_telemetry, the share given a wrong cause;
        the stalls of GC on pool targets (``pool_gc``) and how many of them were labelled
        unknown or no_telemetry (``pool_gc_honest``) or a cause that is none of their true
        causes (``pool_gc_wrong``), and the macro-F1 without them (a pool that reports no GC
        cannot show them)."""
        rows = []
        for fmt in dict.fromkeys([*self.detection_by_format, *self._formats()]):
            sub = self.of_pool_format(fmt)
            f1 = {r["cause"]: r["f1"] for r in sub.per_cause().to_dicts()}
            gc = [(p, c) for p, g, c in zip(sub.predicted, sub._pool_gc(), sub._causes(),
                                            strict=True) if g]
            rows.append({
                "pool_format": fmt, "stalls": sub.true_positives + sub.false_negatives,
                "precision": sub.precision, "recall": sub.recall, "macro_f1": sub.macro_f1,
                **{f"f1_{c}": f1.get(c, 0.0) for c in MODEL_LABELS},
                "unknown": sub.predicted.count(UNKNOWN),
                "no_telemetry": sub.predicted.count(NO_TELEMETRY),
                "wrong_cause": sub.wrong_cause_rate,
                "pool_gc": len(gc),
                "pool_gc_honest": sum(p in (UNKNOWN, NO_TELEMETRY) for p, _ in gc),
                "pool_gc_wrong": sum(p not in (UNKNOWN, NO_TELEMETRY, *c) for p, c in gc),
                "macro_f1_without_pool_gc": self.of_pool_format(
                    fmt, without_pool_gc=True).macro_f1})
        schema = {"pool_format": pl.Utf8, "stalls": pl.Int64, "precision": pl.Float64,
                  "recall": pl.Float64, "macro_f1": pl.Float64,
                  **{f"f1_{c}": pl.Float64 for c in MODEL_LABELS}, "unknown": pl.Int64,
                  "no_telemetry": pl.Int64, "wrong_cause": pl.Float64, "pool_gc": pl.Int64,
                  "pool_gc_honest": pl.Int64, "pool_gc_wrong": pl.Int64,
                  "macro_f1_without_pool_gc": pl.Float64}
        return pl.DataFrame(rows, schema=schema)

    @property
    def wrong_cause_rate(self) -> float:
        """Stalls given a cause (not ``unknown`` nor ``no_telemetry``) that is not their true
        primary cause."""
        wrong = sum(1 for t, p in zip(self.truth, self.predicted, strict=True)
                    if p not in (UNKNOWN, NO_TELEMETRY) and p != t)
        return wrong / len(self.truth) if self.truth else 0.0

    def per_family(self) -> pl.DataFrame:
        """Per scenario family: stalls, detection precision/recall, macro-F1, accuracy, the
        share given a wrong cause, the shares left unknown and labelled no_telemetry, the mean
        top score."""
        rows = []
        for fam in dict.fromkeys([*self.detection_by_family, *self.families]):
            sub = self.subset([fam])
            n = len(sub.truth)
            rows.append({
                "family": fam, "stalls": sub.true_positives + sub.false_negatives,
                "precision": sub.precision, "recall": sub.recall, "macro_f1": sub.macro_f1,
                "accuracy": (sum(t == p for t, p in zip(sub.truth, sub.predicted, strict=True))
                             / n if n else 0.0),
                "wrong_cause": sub.wrong_cause_rate,
                "unknown": sub.predicted.count(UNKNOWN) / n if n else 0.0,
                "no_telemetry": sub.predicted.count(NO_TELEMETRY) / n if n else 0.0,
                "mean_score": sum(sub.scores) / n if n else 0.0})
        return pl.DataFrame(rows, schema={"family": pl.Utf8, "stalls": pl.Int64,
                                          "precision": pl.Float64, "recall": pl.Float64,
                                          "macro_f1": pl.Float64, "accuracy": pl.Float64,
                                          "wrong_cause": pl.Float64, "unknown": pl.Float64,
                                          "no_telemetry": pl.Float64,
                                          "mean_score": pl.Float64})

    def reliability(self) -> pl.DataFrame:
        """Score bins of the top cause -> how often it was the true cause, and how many."""
        rows = []
        for lo, hi in zip(RELIABILITY_BINS, RELIABILITY_BINS[1:], strict=False):
            inside = [(sc, t == p) for sc, t, p in zip(self.scores, self.truth, self.predicted,
                                                        strict=True) if lo <= sc < hi]
            rows.append({"score_bin": f"{lo:.1f}-{min(hi, 1.0):.1f}", "n": len(inside),
                         "mean_score": (sum(x for x, _ in inside) / len(inside)
                                        if inside else None),
                         "accuracy": (sum(ok for _, ok in inside) / len(inside)
                                      if inside else None)})
        return pl.DataFrame(rows, schema={"score_bin": pl.Utf8, "n": pl.Int64,
                                          "mean_score": pl.Float64, "accuracy": pl.Float64})

    def confusion(self) -> pl.DataFrame:
        """Rows: true primary cause; columns: predicted top cause."""
        from sklearn.metrics import confusion_matrix

        if not self.truth:
            return pl.DataFrame({"true \\ predicted": list(LABELS),
                                 **{lab: [0] * len(LABELS) for lab in LABELS}})
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
                                "confusion": self.confusion().to_dicts(),
                                "wrong_cause_rate": self.wrong_cause_rate},
                "complete_families": {
                    "families": [f for f in COMPLETE_FAMILIES if f in self.detection_by_family],
                    "macro_f1": self.subset(COMPLETE_FAMILIES).macro_f1,
                    "precision": self.subset(COMPLETE_FAMILIES).precision,
                    "recall": self.subset(COMPLETE_FAMILIES).recall},
                "per_family": self.per_family().to_dicts(),
                "per_pool_format": self.per_pool_format().to_dicts(),
                "reliability": self.reliability().to_dicts(),
                "mistakes": self.mistakes}


def evaluate(seeds: list[int], model: AttributionModel | None, *,
             progress: Callable[[str], None] | None = None,
             families: tuple[str, ...] = ("base",), pool_formats: tuple[str, ...] = ("csv",),
             **scenario: Any) -> EvalReport:
    """Detection precision/recall, per-cause, per-family and per-pool-format scores and the
    reliability of the scores on these seeds' scenarios (seeds cycle through ``families``;
    each seed once per pool format)."""
    report = EvalReport(seeds=list(seeds))
    for res in scenarios(seeds, progress=progress, families=families,
                         pool_formats=pool_formats, **scenario):
        detected = {(j, int(s)) for j, s in zip(res.features["job_id"], res.features["step"],
                                               strict=True)} if res.features.height else set()
        counts = [len(detected & set(res.truth)), len(detected - set(res.truth)),
                  len(set(res.truth) - detected)]
        report.true_positives += counts[0]
        report.false_positives += counts[1]
        report.false_negatives += counts[2]
        fam = report.detection_by_family.setdefault(res.family, [0, 0, 0])
        report.detection_by_family[res.family] = [a + b for a, b in zip(fam, counts,
                                                                         strict=True)]
        by_fmt = report.detection_by_format.setdefault(res.pool_format, [0, 0, 0])
        report.detection_by_format[res.pool_format] = [a + b for a, b in zip(by_fmt, counts,
                                                                             strict=True)]
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
            report.scores.append(vs[0].score if vs else 0.0)
            report.families.append(res.family)
            report.pool_formats.append(res.pool_format)
            report.pool_gc.append((row["job_id"], int(row["step"])) in res.pool_gc)
            report.true_causes.append(res.truth[(row["job_id"], int(row["step"]))])
            if top != truth:
                report.mistakes.append({"seed": res.seed, "family": res.family,
                                        "pool_format": res.pool_format,
                                        "job_id": row["job_id"],
                                        "step": row["step"], "truth": res.truth[
                                            (row["job_id"], int(row["step"]))],
                                        "predicted": [(v.cause, round(v.score, 2))
                                                      for v in vs]})
    return report


def stderr_progress(msg: str) -> None:
    """Progress lines on stderr."""
    print(f"  {msg}", file=sys.stderr, flush=True)
