"""Shadows of pruned trials, and the premise of pruning measured from the Optuna storage.

Among the trials the pruner decides to stop, at the moment it decides, a random share s (--shadow-share) runs on to the
end: a *shadow*. To Optuna it is PRUNED at that step, as it would be without shadows, so the sampler and the pruner
see the same study (the pruner compares with COMPLETE trials only; the sampler reads states, parameters and
intermediate values, and a finished trial takes no more reports). Whether a pruned trial is a shadow is a draw from
random.Random(f"{seed}/{number}") (seed: the study's --sampler-seed, number: its Optuna trial), so the same study
draws the same shadows, and a resumed one needs no random state.

What a shadow runs on to is kept in the Optuna storage, so every number here is read back from it (resume-safe):

- the Optuna trial's user attribute `shadow` (set before it is told PRUNED; a finished trial's attributes cannot be
  written): the Tune trial that runs on, its seed and the base epoch of the decision;
- the study's user attribute `shadow:<number>`: its base-epoch validation accuracies after the decision, and once it
  ends its objective and last-session novel accuracy;
- a completed configuration's user attribute `val_last_novel_acc:<seed>`, per seed, for the premise against novel
  accuracy.

The study's tables hold a shadow as PRUNED (trial_records.classify), its completed values in its row, marked
`shadow`; every table of results reads COMPLETE trials only. `premise` gathers the completed trials (weight 1) and
the shadows (weight 1/s) for adbs_lab/stats/premise.py, and `AutoPruner` (--pruner auto) prunes at a base epoch
only once the premise holds there.
"""

from __future__ import annotations

import json
import math
import random
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import optuna
from optuna.trial import FrozenTrial, TrialState

from adbs_lab.records.objectives import PRUNERS
from adbs_lab.stats import premise as pm

__all__ = ["SHADOW_ATTR", "RECORD_PREFIX", "NOVEL_KEY", "SHARE_ATTR", "SEED_ATTR", "chosen", "is_shadow", "record_key",
           "Samples", "samples", "acting_steps", "AutoPruner", "Premise", "measure", "premise_lines", "premise_metrics",
           "start_record", "follow", "make_pruner"]

SHADOW_ATTR = "shadow"
"""Optuna trial user attribute of a shadow: {"tune_trial", "seed", "step"}."""
RECORD_PREFIX = "shadow:"
"""Study user attribute `shadow:<number>`: what the shadow reported after the decision."""
NOVEL_KEY = "val_last_novel_acc"
"""The novel accuracy the premise is also measured against: last session, validation (summary/<this>)."""
ENDED_KEY = "ended_at"
"""A shadow's record: when its objective was recorded (POSIX seconds), the order the premise checks read."""
SHARE_ATTR, SEED_ATTR = "shadow_share", "shadow_seed"
"""Study user attributes: the share s and the seed of the draws, as the study ran them."""


def chosen(seed: int, number: int, share: float) -> bool:
    """Whether pruned Optuna trial `number` runs on as a shadow: a uniform draw from a generator seeded by the study's
    sampler seed and the trial's number (Python's Random seeds a str through SHA-512: the same on every machine)."""
    return share > 0 and random.Random(f"{seed}/{number}").random() < share


def is_shadow(trial: FrozenTrial, tune_trial: str) -> bool:
    """Whether Tune trial `tune_trial` is the shadow of Optuna trial `trial` (a PRUNED trial's other seeds are not)."""
    return (trial.user_attrs.get(SHADOW_ATTR) or {}).get("tune_trial") == tune_trial


def record_key(number: int) -> str:
    return f"{RECORD_PREFIX}{number}"


@dataclass
class Samples:
    """Completed configurations and shadows, as the premise weighs them."""

    curves: list[dict[int, float]] = field(default_factory=list)
    """Base-epoch validation accuracy by epoch."""
    objective: list[float] = field(default_factory=list)
    novel: list[float] = field(default_factory=list)
    weight: list[float] = field(default_factory=list)
    pruned: list[bool] = field(default_factory=list)
    ended: list[float] = field(default_factory=list)
    """When each ended (POSIX seconds): a completed trial when Optuna was told, a shadow when its objective was
    recorded (`follow`; a record from before that was kept: when it was pruned). `samples` orders by it."""

    def at(self, step: int) -> np.ndarray:
        return np.array([c.get(step, math.nan) for c in self.curves], dtype=float)

    def _append(self, curve: dict[int, float], objective: float, novel: float, weight: float, pruned: bool,
                ended: float) -> None:
        self.curves.append(curve)
        self.objective.append(objective)
        self.novel.append(novel)
        self.weight.append(weight)
        self.pruned.append(pruned)
        self.ended.append(ended)

    def in_end_order(self) -> "Samples":
        """The same samples in the order they ended (ties by the order read: Optuna's trial number)."""
        order = sorted(range(len(self.ended)), key=lambda i: (self.ended[i], i))
        return Samples(*([getattr(self, f)[i] for i in order] for f in
                         ("curves", "objective", "novel", "weight", "pruned", "ended")))


def _ended(t: FrozenTrial) -> float:
    return t.datetime_complete.timestamp() if t.datetime_complete is not None else math.inf


def samples(study: optuna.Study) -> Samples:
    """The completed trials (value = the objective, mean over seeds; base accuracy = what the pruner saw, the first
    seed's report) and the shadows that ended (weight 1/s), read from the storage, in trial-number order
    (`Samples.in_end_order` for the order they ended)."""
    attrs = study.user_attrs
    share = float(attrs.get(SHARE_ATTR) or 0)
    out = Samples()
    for t in study.get_trials(deepcopy=False, states=(TrialState.COMPLETE, TrialState.PRUNED)):
        if t.state == TrialState.COMPLETE:
            if t.values is None or not math.isfinite(t.values[0]):
                continue
            novel = [float(v) for k, v in t.user_attrs.items() if k.startswith(NOVEL_KEY + ":")]
            out._append({int(k): float(v) for k, v in t.intermediate_values.items()}, float(t.values[0]),
                        float(np.mean(novel)) if novel else math.nan, 1.0, False, _ended(t))
            continue
        rec = attrs.get(record_key(t.number))
        if share <= 0 or not rec or rec.get("objective") is None:
            continue
        curve = {int(k): float(v) for k, v in t.intermediate_values.items()}
        curve.update({int(k): float(v) for k, v in (rec.get("curve") or {}).items()})
        out._append(curve, float(rec["objective"]), float(rec["novel"]) if rec.get("novel") is not None else math.nan,
                    1.0 / share, True, float(rec.get(ENDED_KEY, _ended(t))))
    return out


def acting_steps(pruner: str, base_epochs: int) -> list[int]:
    """The base epochs at which `pruner` (`make_pruner`) may stop a trial: median and auto
    from their warm-up (a quarter of the base epochs) on, halving and hyperband at their rungs (1, 3, 9, ...)."""
    if pruner in ("median", "auto"):
        return list(range(max(1, base_epochs // 4), base_epochs + 1))
    if pruner in ("halving", "hyperband"):
        return [3**k for k in range(0, 32) if 3**k <= base_epochs]
    return []


class AutoPruner(optuna.pruners.BasePruner):
    """--pruner auto: `inner` (the median pruner) prunes at a base epoch only once the premise has held there at one
    of its checks (adbs_lab/stats/premise.py: premise_checks): Spearman's rho between that epoch's base validation
    accuracy and the objective over the first 10, 20 and 40 completed trials and shadows to end, each check's
    lower bound at least `lower` at its share of the error, on an effective n of at least premise.PREMISE_MIN_N.
    Until a check holds every trial runs on; once one has, it prunes there for the rest of the study. Its state is
    the study's storage (each check is over the trials that ended first, fixed once they have): nothing of its own
    to save or restore."""

    def __init__(self, inner: optuna.pruners.BasePruner, lower: float = pm.PREMISE_LOWER) -> None:
        self._inner = inner
        self._lower = lower

    def holds(self, study: optuna.Study, step: int) -> pm.Check | None:
        """The check at `step` that switched pruning on there, or None (off so far)."""
        s = samples(study).in_end_order()
        return pm.switched_on(pm.premise_checks(s.at(step), s.objective, s.weight, self._lower))

    def prune(self, study: optuna.Study, trial: FrozenTrial) -> bool:
        step = trial.last_step
        if step is None or self.holds(study, step) is None:
            return False
        return self._inner.prune(study, trial)


@dataclass(frozen=True)
class Premise:
    """The premise measured at the study's end."""

    steps: list[int]
    objective: dict[int, pm.Correlation]
    novel: dict[int, pm.Correlation]
    regret: pm.Regret | None
    shadows: int
    complete: int
    share: float
    switched: dict[int, int] = field(default_factory=dict)
    """--pruner auto: {base epoch: the trials of the check that switched pruning on there} (AutoPruner's rule)."""


def measure(study: optuna.Study, pruner: str, base_epochs: int) -> Premise:
    s = samples(study)
    steps = acting_steps(pruner, base_epochs)
    obj = {k: pm.correlation(s.at(k), s.objective, s.weight) for k in steps}
    nov = {k: pm.correlation(s.at(k), s.novel, s.weight) for k in steps}
    ordered = s.in_end_order()
    on = {k: pm.switched_on(pm.premise_checks(ordered.at(k), ordered.objective, ordered.weight)) for k in steps}
    return Premise(steps, obj, nov, pm.pruning_regret(s.objective, s.weight, s.pruned), sum(s.pruned),
                   len(s.pruned) - sum(s.pruned), float(study.user_attrs.get(SHARE_ATTR) or 0),
                   {k: c.at for k, c in on.items() if c is not None})


def _shown(steps: list[int], most: int = 6) -> list[int]:
    """At most `most` epochs for the printed table, evenly spread, the first and last among them."""
    if len(steps) <= most:
        return steps
    idx = sorted({round(i * (len(steps) - 1) / (most - 1)) for i in range(most)})
    return [steps[i] for i in idx]


def premise_lines(p: Premise, pruner: str) -> list[str]:
    """The premise as the study prints it at its end and report.md holds it."""
    lines = [f"pruning premise (--pruner {pruner}): does base-session validation accuracy at a base epoch rank trials "
             f"as the objective does? {p.complete} completed trials and {p.shadows} shadow{'s' * (p.shadows != 1)} "
             "(pruned trials run on, "
             f"share {p.share:g}, each weighted {1 / p.share if p.share else 0:g}); weighted Spearman rho, 95% "
             "Fisher-z interval with Bonett-Wright variance on Kish's effective n:"]
    for k in _shown(p.steps):
        lines.append(pm.correlation_line(k, p.objective[k], "the objective"))
    if any(p.novel[k].n for k in p.steps):
        lines += [pm.correlation_line(k, p.novel[k], "last-session novel accuracy") for k in _shown(p.steps)]
    else:
        lines.append(f"  last-session novel accuracy ({NOVEL_KEY}): not reported by these trials")
    lines.append(pm.regret_line(p.regret))
    if pruner == "auto":
        held = ", ".join(f"{k} (at {c} trials)" for k, c in p.switched.items())
        lines.append(f"  --pruner auto: checked at the first {', '.join(map(str, pm.CHECKS))} trials to end (lower "
                     f"bound >= {pm.PREMISE_LOWER:g} at {pm.check_level():.2%} each: the 2.5% error split over "
                     f"{len(pm.CHECKS)} checks; effective n >= {pm.PREMISE_MIN_N}); "
                     + (f"it held at base epochs {held}, which pruned from then on; before that, and at every other "
                        "epoch, trials ran to the end" if held else
                        "it held at no base epoch: it pruned nothing, every trial ran to the end"))
    return lines


def premise_metrics(p: Premise) -> tuple[dict[str, list[tuple[int, float]]], dict[str, float], str]:
    """({metric: [(epoch, value)]}, {metric: value}, a JSON tag) for the parent MLflow run."""
    stepped: dict[str, list[tuple[int, float]]] = {}
    for name, table in (("objective", p.objective), ("novel", p.novel)):
        for k in p.steps:
            c = table[k]
            for part, v in (("rho", c.r), ("low", c.low), ("high", c.high), ("n_eff", c.n_eff)):
                if math.isfinite(v):
                    stepped.setdefault(f"premise/{name}_{part}", []).append((k, float(v)))
    flat: dict[str, float] = {"premise/shadows": float(p.shadows), "premise/complete": float(p.complete)}
    if p.regret is not None:
        flat.update({"premise/regret": p.regret.share, "premise/regret_low": p.regret.low,
                     "premise/regret_high": p.regret.high})
    tag = json.dumps({"share": p.share, "shadows": p.shadows, "complete": p.complete,
                      "method": "weighted Spearman (IPW 1/s), Fisher z with Bonett-Wright variance, Kish n; "
                                "regret: Clopper-Pearson"})
    return stepped, flat, tag


def start_record(storage: optuna.storages.BaseStorage, study_id: int, trial_id: int, number: int, *, tune_trial: str,
                 seed: Any, step: int, value: float) -> None:
    """A shadow begins: its trial's attribute (before PRUNED is told), and its study record."""
    storage.set_trial_user_attr(trial_id, SHADOW_ATTR, {"tune_trial": tune_trial, "seed": seed, "step": step})
    storage.set_study_user_attr(study_id, record_key(number), {"tune_trial": tune_trial, "seed": seed, "step": step,
                                                               "curve": {str(step): value}})


def follow(storage: optuna.storages.BaseStorage, study_id: int, number: int, *, step: int | None = None,
           value: float | None = None, objective: float | None = None, novel: float | None = None) -> None:
    """A shadow reported a base epoch (`step`, `value`) or its end (`objective`, `novel`)."""
    rec = dict(storage.get_study_user_attrs(study_id).get(record_key(number)) or {})
    if step is not None and value is not None:
        rec["curve"] = {**(rec.get("curve") or {}), str(step): value}
    if objective is not None:
        rec["objective"], rec["novel"], rec[ENDED_KEY] = objective, novel, time.time()
    storage.set_study_user_attr(study_id, record_key(number), rec)


def make_pruner(name: str, base_epochs: int) -> optuna.pruners.BasePruner | None:
    """median (warm-up a quarter of the base epochs), auto (the median pruner at a base epoch only once base
    accuracy there predicts the objective: `AutoPruner`), halving, hyperband, none."""
    if name == "auto":
        return AutoPruner(optuna.pruners.MedianPruner(n_startup_trials=2, n_warmup_steps=base_epochs // 4))
    if name == "median":
        return optuna.pruners.MedianPruner(n_startup_trials=2, n_warmup_steps=base_epochs // 4)
    if name == "halving":
        return optuna.pruners.SuccessiveHalvingPruner(min_resource=1, reduction_factor=3)
    if name == "hyperband":
        return optuna.pruners.HyperbandPruner(min_resource=1, max_resource=base_epochs, reduction_factor=3)
    if name == "none":
        return None
    raise ValueError(f"unknown pruner {name!r}; valid choices: {', '.join(PRUNERS)}")
