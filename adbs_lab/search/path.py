"""The greedy ablation path from configuration A to configuration B (studies/ablation_path.py), as pure logic over
an `evaluate` callback: the study's callback runs Ray Tune trials, the tests' a known function of the config.

- **Differences**: the config fields where A and B differ (`differences`; the fields that only say where and how a
  trial runs, `IGNORED`, never count).
- **A step** starts from the current configuration and makes one candidate per remaining difference (the current
  configuration with that one field set to B's value). The candidates **race** on the validation objective over
  the selection seeds, in the planned looks of adbs_lab/stats/looks.py (n0 seeds, then batches, up to the cap;
  O'Brien-Fleming-type α spending): at each look the leader is the best mean over the seeds run, and every other
  candidate is compared with it by the paired t-interval of candidate - leader (adbs_lab/stats/intervals.py:
  `paired_t`) at α_k / m, m = every pair of the step's candidates (Bonferroni over pairs, as the race of a sampled
  search: adbs_lab/search/seeds/race.py, `pairs_m`, since the leader is chosen by the data). A candidate whose interval
  lies below 0 (verdict worse, or worse by less than δ) is dropped and runs no more seeds; the step ends when one
  candidate is left or at the cap, and its leader is the step's change. This is racing as in F-race (Birattari,
  Stützle, Paquete & Varrentrapp 2002, GECCO) with paired t-intervals, greedy forward selection over the
  differences as in ablation analysis (Fawcett & Hoos 2016, "Analysing differences between algorithm
  configurations through ablation", Journal of Heuristics 22:431). A step with one candidate left runs nothing.
- **Confirmation** (`confirm`): every configuration of the path runs on confirmation seeds, and each step's Δ
  (step - the step before, paired by seed) gets its interval and verdict at α / d (Bonferroni over the d steps):
  those seeds chose nothing, so the Δ is unbiased. Where the confirmation seeds include seeds that chose the step or
  one before it (the configuration its Δ is measured against won its race on them) the Δ is labelled
  post-selection.
- `evaluate(tag, {label: config}, seeds) -> {label: {seed: value}}` runs every label on every seed (a value NaN
  when the trial did not complete); `Memo` wraps it so a (config, seed) measured once is never run again.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from adbs_lab.search.seeds.race import pairs_m
from adbs_lab.stats.looks import Looks
from adbs_lab.stats.verdicts import Label, Verdict, bonferroni, decisive_t, family_verdicts, label

__all__ = ["IGNORED", "DROPPING", "Evaluate", "Memo", "end", "RaceLook", "Step", "Confirmed", "differences", "change_label",
           "race", "greedy", "confirm", "confirm_note", "trial_counts", "runs_saved"]

IGNORED = ("seed", "split_seed", "device", "threads", "num_workers", "data_on_device", "eval_batch_size",
           "keep_embeddings", "data_root", "amp", "fast_step")
"""Fields that say where and how a trial runs, not what it computes (the seeds are the study's), never a difference."""
DROPPING = (Label.WORSE, Label.WORSE_SMALL)
"""The verdicts against the leader that drop a candidate: its interval lies below 0."""

Evaluate = Callable[[str, dict[str, dict[str, Any]], list[int]], dict[str, dict[int, float]]]


def differences(a: Mapping[str, Any], b: Mapping[str, Any], ignored: Sequence[str] = IGNORED) -> list[str]:
    """The fields where A and B differ, in A's field order (a field missing from one side counts)."""
    keys = list(a) + [k for k in b if k not in a]
    return [k for k in keys if k not in ignored and a.get(k) != b.get(k)]


def end(a: Mapping[str, Any], b: Mapping[str, Any]) -> dict[str, Any]:
    """Where the path ends: A with B's value of every difference (B itself, up to the IGNORED fields)."""
    return {**a, **{f: b.get(f) for f in differences(a, b)}}


def change_label(field: str, value: Any) -> str:
    """`alpha=0.01`: a change as the table names it (floats to 4 significant digits)."""
    shown = f"{value:.4g}" if isinstance(value, float) else value
    return f"{field}={shown}"


class Memo:
    """`evaluate` that never runs a (config, seed) it has measured (same config and seed give the same value on the
    CPU: the platform is deterministic), counting the trials it asked for."""

    def __init__(self, evaluate: Evaluate):
        self.evaluate = evaluate
        self.known: dict[tuple[str, int], float] = {}
        self.trials = 0
        self.pending: dict[str, dict[str, Any]] = {}

    def prefetch(self, configs: dict[str, dict[str, Any]]) -> None:
        """Run `configs` beside the rows of the next call, on its seeds (one Tune run instead of two, where the
        caller knows it will want them on those seeds: the confirmation on the selection seeds)."""
        self.pending.update(configs)

    @staticmethod
    def key(config: Mapping[str, Any]) -> str:
        return json.dumps(sorted(config.items()), default=str)

    def __call__(self, tag: str, configs: dict[str, dict[str, Any]], seeds: list[int]) -> dict[str, dict[int, float]]:
        need = {lab: [s for s in seeds if (self.key(c), s) not in self.known] for lab, c in configs.items()}
        rows = {lab: configs[lab] for lab, s in need.items() if s}
        if rows:  # the grid runs every row on every seed any row needs
            run_seeds = sorted({s for lab in rows for s in need[lab]})
            rows.update({lab: c for lab, c in self.pending.items() if lab not in rows
                         and any((self.key(c), s) not in self.known for s in run_seeds)})
            self.pending = {}
            got = self.evaluate(tag, rows, run_seeds)
            self.trials += len(rows) * len(run_seeds)
            for lab, c in rows.items():
                for s in run_seeds:
                    self.known[(self.key(c), s)] = float(got.get(lab, {}).get(s, math.nan))
        return {lab: {s: self.known[(self.key(c), s)] for s in seeds} for lab, c in configs.items()}


@dataclass(frozen=True)
class RaceLook:
    """One look of a step's race."""

    k: int
    n: int
    """Seeds run by the candidates still racing."""
    leader: str
    means: dict[str, float]
    """{candidate racing at this look: its mean over the n seeds}."""
    verdicts: dict[str, Verdict]
    """{candidate: its verdict against the leader at this look}."""
    dropped: tuple[str, ...]


@dataclass(frozen=True)
class Step:
    """One step of the path: the change it made and how the race chose it."""

    k: int
    field: str
    value: Any
    change: str
    config: dict[str, Any]
    """The configuration after this step."""
    candidates: tuple[str, ...]
    looks: tuple[RaceLook, ...]
    runs: int
    """Trials the race ran."""
    full: int
    """Trials without racing: every candidate on every selection seed (0 for a step with one candidate)."""
    seeds: tuple[int, ...]
    """The selection seeds the chosen change ran."""


@dataclass(frozen=True)
class Confirmed:
    """A step's Δ on the confirmation seeds: the chosen configuration - the one before it."""

    step: int
    change: str
    mean: float
    """The step's configuration's mean objective over the confirmation seeds."""
    verdict: Verdict
    post_selection: bool
    """The confirmation seeds include seeds that chose this step or one before it (so the Δ is biased: optimistic
    where they chose this step, pessimistic where they chose the configuration it is measured against)."""


def _mean(xs: Sequence[float]) -> float:
    ok = [x for x in xs if math.isfinite(x)]
    return sum(ok) / len(ok) if ok else -math.inf


def race(tag: str, candidates: dict[str, dict[str, Any]], evaluate: Evaluate, seeds: Sequence[int], looks: Looks,
         delta: float) -> tuple[str, tuple[RaceLook, ...], int]:
    """(the leader, the looks, trials run) of one step's race over `seeds` in `looks.sizes` (module docstring)."""
    names = list(candidates)
    if len(names) == 1:
        return names[0], (), 0
    m = pairs_m(len(names))
    racing, taken, runs, done = list(names), [], 0, 0
    values: dict[str, dict[int, float]] = {c: {} for c in names}
    for k, (size, alpha_k) in enumerate(zip(looks.sizes, looks.alphas), start=1):
        new = list(seeds[done:size])
        got = evaluate(f"{tag}l{k}", {c: candidates[c] for c in racing}, new)
        runs += len(racing) * len(new)
        for c in racing:
            values[c].update(got[c])
        done = size
        upto = list(seeds[:size])
        means = {c: _mean([values[c][s] for s in upto]) for c in racing}
        leader = max(racing, key=lambda c: (means[c], -names.index(c)))  # ties: the earlier difference
        a = bonferroni(alpha_k, m)
        said = {}
        for c in racing:
            if c == leader:
                continue
            est, lo, hi, n, left = decisive_t(np.array([values[c][s] - values[leader][s] for s in upto]), a)
            said[c] = Verdict(float(est), float(lo), float(hi), int(n), int(left), 1.0 - a,
                              label(float(lo), float(hi), delta), k, size)
        dropped = tuple(c for c, v in said.items() if v.verdict in DROPPING)
        taken.append(RaceLook(k, size, leader, means, said, dropped))
        racing = [c for c in racing if c not in dropped]
        if len(racing) == 1:
            break
    return taken[-1].leader, tuple(taken), runs


def greedy(a: Mapping[str, Any], b: Mapping[str, Any], evaluate: Evaluate, seeds: Sequence[int], looks: Looks,
           delta: float, on_step: Callable[[Step], None] | None = None) -> list[Step]:
    """The greedy path from A to B: each step applies the remaining difference whose candidate wins its race."""
    if looks.max_seeds != len(seeds):
        raise ValueError(f"the looks reach {looks.max_seeds} seeds, the selection seeds are {len(seeds)}")
    current, remaining = dict(a), differences(a, b)
    steps: list[Step] = []
    while remaining:
        k = len(steps) + 1
        cands = {change_label(f, b.get(f)): {**current, f: b.get(f)} for f in remaining}
        field_of = dict(zip(cands, remaining))
        leader, taken, runs = race(f"s{k}", cands, evaluate, seeds, looks, delta)
        f = field_of[leader]
        n = taken[-1].n if taken else 0
        step = Step(k, f, b.get(f), leader, cands[leader], tuple(cands), taken, runs,
                    len(cands) * len(seeds) if len(cands) > 1 else 0, tuple(seeds[:n]))
        steps.append(step)
        if on_step is not None:
            on_step(step)
        current, remaining = cands[leader], [r for r in remaining if r != f]
    return steps


def confirm(a: Mapping[str, Any], steps: Sequence[Step], evaluate: Evaluate, seeds: Sequence[int], alpha: float,
            delta: float) -> tuple[float, list[Confirmed]]:
    """(A's mean, each step's Δ on `seeds`): every configuration of the path on the same seeds, each step against the
    one before it, paired; the intervals at α / d (Bonferroni over the d steps: `family_verdicts`)."""
    rows = {"from": dict(a), **{f"step {s.k}": s.config for s in steps}}
    got = evaluate("confirm", rows, list(seeds))
    names = list(rows)
    diffs = {names[i]: [got[names[i]][s] - got[names[i - 1]][s] for s in seeds] for i in range(1, len(names))}
    verdicts = family_verdicts(diffs, alpha=alpha, delta=delta) if diffs else {}
    # Step k's Δ compares its configuration with step k-1's, and the seeds that chose either (every step up to k:
    # each configuration is the sum of those choices) are biased for both: the one before won its race on them too
    chose = [set().union(*(set(t.seeds) for t in steps[:i + 1])) for i in range(len(steps))]
    out = [Confirmed(s.k, s.change, _mean([got[f"step {s.k}"][x] for x in seeds]), verdicts[f"step {s.k}"],
                     bool(set(seeds) & chose[i])) for i, s in enumerate(steps)]
    return _mean([got["from"][x] for x in seeds]), out


def confirm_note(seeds: Sequence[int], confirm: Sequence[int]) -> str | None:
    """What the path says before it runs when the confirmation seeds include selection seeds (`confirm` marks the
    Δs of the steps they chose post-selection), or None."""
    shared = [s for s in confirm if s in seeds]
    if not shared:
        return None
    which = ("are the selection seeds" if len(shared) == len(confirm) else
             f"include selection seeds ({' '.join(map(str, shared))})")
    return (f"the confirmation seeds ({' '.join(map(str, confirm))}) {which}: a step's Δ on seeds that chose it, or "
            "chose the configuration it is measured against, is biased and marked post-selection; pass "
            "--confirm-seeds outside --seeds for unbiased Δs")


def trial_counts(d: int, looks: Looks, confirm_seeds: int) -> tuple[int, int]:
    """(fewest, most) trials of a path over d differences: step j races d - j + 1 candidates (a step with one runs
    nothing), on n0 seeds at the fewest and every selection seed at the most (= without racing); the confirmation
    runs the d + 1 configurations of the path on its seeds (fewer where it reuses a measured trial)."""
    cands = sum(c for c in range(2, d + 1))
    conf = (d + 1) * confirm_seeds if d else 0
    return cands * looks.n0 + conf, cands * looks.max_seeds + conf


def runs_saved(steps: Sequence[Step]) -> int:
    """Trials racing saved: each step's candidates on every selection seed, less what its race ran."""
    return sum(s.full - s.runs for s in steps)
