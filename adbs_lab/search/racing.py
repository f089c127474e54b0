"""--seeds auto on a sampled search: the configurations near the top race on the validation objective.

A sampled search (--num-samples N, Optuna's TPE) runs each sample on the screening seed 0, as without --seeds auto.
Once all N have ended, the `top` best on the validation objective (default 3, --race-top) are the contenders. They
run fresh seeds 1, 2, 3 (seed 0 chose them, so its values are biased upward for them: the winner's curse, and the
race never reads them), then looks like a grid's (adbs_lab/stats/looks.py: n0 = 3, batches of 2, up to --max-seeds
fresh seeds, α spent by O'Brien-Fleming-type Lan-DeMets spending). At each look the leader is the best mean over the
fresh seeds among the contenders still racing, and every other contender is compared with it, paired seed by seed
(`auto_seeds.differences`, the table's pairing) through `sequential.next_batch`: the open comparisons' contenders
and the leader run the next batch; a contender resolved against the leader (worse, or within ±δ) runs no more, unless
a later leader is one it is not resolved against. The race stops when every comparison with the leader is resolved
(the leader is resolved) or at the cap. This is racing as in F-race (Birattari, Stützle, Paquete & Varrentrapp
2002, "A racing algorithm for configuring metaheuristics", GECCO; irace, López-Ibáñez et al. 2016), with paired
t-intervals and α spending in place of Friedman tests.

The error control: each look's intervals are at α_k / m with m = top (top - 1) / 2, every pair of contenders, fixed
before any seed runs. Every interval of every pair at every look then covers its true difference together with
probability ≥ 1 - α (Bonferroni and the union bound over the looks, as docs/statistics.md argues for a grid), whichever
leader the data pick, so every verdict the race prints is true together with that probability: when the leader is
resolved, every other contender is worse than it, or within δ of it, with probability ≥ 1 - α. The guarantee is
conditional on the contenders: configurations not raced are not compared (the screening seed only ranked them).

`replay` is the whole rule, a pure function of the trials that ended (the searcher, adbs_lab/search/searcher.py, and
the summary, adbs_lab/driver/summarise.py, both call it), so --resume reaches the same verdicts.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence, TypeVar

from adbs_lab.search.auto_seeds import by_target, differences
from adbs_lab.stats.looks import Looks
from adbs_lab.stats.sequential import ALL_RESOLVED, CAP, next_batch
from adbs_lab.stats.verdicts import Label, Verdict

__all__ = ["DEFAULT_TOP", "SCREEN_SEED", "RACE_OF", "RESOLVING", "RacePlan", "RaceLook", "Race", "replay", "screened",
           "pairs_m", "look_line", "end_line", "start_text", "verdict_lines", "post_selection", "resolved"]

DEFAULT_TOP = 3
"""Contenders raced by default: with 3, m = 3 pairs, the family size of the ablation's table."""
SCREEN_SEED = 0
"""The seed every sample runs first; the race runs seeds 1, 2, ... (fresh)."""
RACE_OF = "race_of"
"""The user attribute of a race's Optuna trial, and the key of its Tune trials' config: the number of the screening
trial whose configuration it races (BaseEpochStopper never prunes such a trial: its seed is a paired value)."""
RESOLVING = (Label.WORSE, Label.WORSE_SMALL, Label.EQUIVALENT)
"""The verdicts against the leader that take a contender out of the race."""


def pairs_m(top: int) -> int:
    """The family's size: every pair of `top` contenders (at least 1)."""
    return max(1, top * (top - 1) // 2)


@dataclass(frozen=True)
class RacePlan:
    """What the searcher of a raced sampled study needs (adbs_lab/driver/launch.py builds it)."""

    looks: Looks
    """The looks over the fresh seeds (n0 = 3, batches of 2, the cap --max-seeds)."""
    top: int
    """Contenders: the best `top` of the samples on the screening seed."""
    samples: int
    """--num-samples: the screening trials."""
    delta: float
    """δ (--resolve), in points of the validation objective."""
    label_keys: tuple[str, ...]
    """The keys a configuration's label names (tune_keys.describe)."""
    sign: float = 1.0
    """+1 to maximise the objective, -1 to minimise it (the race maximises sign x value)."""

    @property
    def m(self) -> int:
        return pairs_m(min(self.top, self.samples))


@dataclass(frozen=True)
class RaceLook:
    """One look of the race, after a complete batch."""

    k: int
    n: int
    """Fresh seeds of the leader."""
    leader: str
    resolved: int
    """Comparisons with the leader resolved."""
    m: int
    """Comparisons with the leader (contenders - 1)."""
    next: dict[str, int]
    reason: str


@dataclass(frozen=True)
class Race:
    """Where the race stands, replayed from the trials that ended."""

    screened: bool
    """Every screening trial has ended (the contenders are known)."""
    contenders: tuple[str, ...] = ()
    """The best `top` on the screening seed, best first."""
    targets: dict[str, int] = field(default_factory=dict)
    """{contender: fresh seeds it runs, 1 .. target}."""
    looks: tuple[RaceLook, ...] = ()
    verdicts: dict[str, Verdict] = field(default_factory=dict)
    """{contender: its verdict against the leader} as of the last look."""
    leader: str | None = None
    done: bool = False
    reason: str = ""
    missing: dict[str, list[int]] = field(default_factory=dict)
    """{contender: fresh seeds below its target that have not ended}."""

    def final(self, row: str) -> bool:
        """Whether contender `row` runs no more seeds (the race stopped, or the last look gave it none)."""
        return self.done or (bool(self.looks) and row not in self.missing and row not in self.looks[-1].next)

    def seeds_of(self, row: str) -> list[int]:
        """The fresh seeds `row` runs as of now."""
        return list(range(SCREEN_SEED + 1, SCREEN_SEED + 1 + self.targets.get(row, 0)))


def resolved(race: Race) -> bool:
    """The leader is resolved: the race stopped with every other contender resolved against it (worse, or within
    ±δ); a single contender is resolved trivially."""
    return race.done and race.leader is not None and all(v.verdict in RESOLVING for v in race.verdicts.values())


def screened(screen: dict[str, float], label: str, value: float, sign: float) -> None:
    """Keep a screening trial's value in `screen` {label: value}. Two samples of one configuration (a categorical
    space can draw it twice) are one label: the better value stands, whichever ended first, so the searcher and the
    summary, which read the trials in different orders, rank alike."""
    prev = screen.get(label)
    if prev is None or not math.isfinite(prev) or (math.isfinite(value) and sign * value > sign * prev):
        screen[label] = value


def _contenders(screen: Mapping[str, float], plan: RacePlan) -> tuple[str, ...]:
    """The best `top` configurations on the screening seed (finite values only), best first; ties by label."""
    ok = [(-plan.sign * v, lab) for lab, v in screen.items() if math.isfinite(v)]
    return tuple(lab for _, lab in sorted(ok)[:plan.top])


V = TypeVar("V")


def _fresh(d: Mapping[int, V], n: int) -> dict[int, V]:
    return {s: v for s, v in d.items() if SCREEN_SEED < s <= SCREEN_SEED + n}


def _leader(contenders: Sequence[str], targets: Mapping[str, int], values: Mapping[str, Mapping[int, float]],
            sign: float) -> str:
    """The best mean over the fresh seeds among the contenders still racing (those at the largest target); ties:
    the earlier contender. A contender without a finite value ranks last."""
    most = max(targets.values())
    racing = [c for c in contenders if targets[c] == most]

    def score(c: str) -> float:
        xs = [sign * v for v in _fresh(values.get(c, {}), most).values() if math.isfinite(v)]
        return sum(xs) / len(xs) if xs else -math.inf

    return max(racing, key=lambda c: (score(c), -racing.index(c)))


def replay(screen: Mapping[str, float], screened: bool, values: Mapping[str, Mapping[int, float]],
           states: Mapping[str, Mapping[int, str]], plan: RacePlan) -> Race:
    """The race on the trials that ended: `screen` {label: its screening seed's objective value} of the screening
    trials that ended (NaN: not complete), `screened` whether all have; `values` {label: {seed: objective}} of the
    complete trials, `states` {label: {seed: how it ended}} of every trial that ended."""
    if not screened:
        return Race(False)
    contenders = _contenders(screen, plan)
    if len(contenders) < 2:  # nothing to race: the one configuration is the leader
        return Race(True, contenders, {}, (), {}, contenders[0] if contenders else None, True, ALL_RESOLVED)
    targets = {c: plan.looks.n0 for c in contenders}
    taken: list[RaceLook] = []
    verdicts: dict[str, Verdict] = {}
    while True:
        missing = {c: [s for s in range(SCREEN_SEED + 1, SCREEN_SEED + 1 + n) if s not in states.get(c, {})]
                   for c, n in targets.items()}
        missing = {c: s for c, s in missing.items() if s}
        if missing:
            return Race(True, contenders, dict(targets), tuple(taken), verdicts,
                        taken[-1].leader if taken else None, False, "", missing)
        seen_v = {c: _fresh(values.get(c, {}), targets[c]) for c in contenders}
        seen_s = {c: _fresh(states.get(c, {}), targets[c]) for c in contenders}
        leader = _leader(contenders, targets, seen_v, plan.sign)
        pairs = {c: (c, leader) for c in contenders if c != leader}
        # a pair is read at the last look both have all the seeds of (never an earlier look's seeds at a later
        # look's level), so every interval read is one of the family's: a pair at a look, at α_k / m
        diffs = {c: [plan.sign * d for d in differences(pair, seen_v, seen_s)][:min(targets[c], targets[leader])]
                 for c, pair in pairs.items()}
        nb = next_batch(diffs, pairs, plan.looks, plan.delta, plan.m)
        verdicts = dict(nb.verdicts)
        n_resolved = sum(v.verdict is not Label.NOT_RESOLVED for v in nb.verdicts.values())
        taken.append(RaceLook(len(taken) + 1, targets[leader], leader, n_resolved, len(pairs), dict(nb.seeds),
                              nb.reason))
        if nb.done:
            return Race(True, contenders, dict(targets), tuple(taken), verdicts, leader, True, nb.reason)
        targets.update({c: max(targets[c], n) for c, n in nb.seeds.items()})


def start_text(plan: RacePlan) -> str:
    return (f"--seeds auto (a race): {plan.samples} samples on seed {SCREEN_SEED}, then the best "
            f"{min(plan.top, plan.samples)} on "
            f"the validation objective race on fresh seeds from {SCREEN_SEED + 1} (looks at "
            f"{', '.join(map(str, plan.looks.sizes))} fresh seeds; docs/statistics.md)")


def look_line(look: RaceLook, plan: RacePlan) -> str:
    """"race look 1 of at most 2 at 3 fresh seeds: leader a; 1 of 2 resolved against it; next: a, b to 5 seeds"."""
    head = (f"race look {look.k} of at most {len(plan.looks.sizes)} at {look.n} fresh seeds: leader {look.leader}; "
            f"{look.resolved} of {look.m} contenders resolved against it")
    if look.reason == ALL_RESOLVED:
        return f"{head}; stop: the leader is resolved"
    if look.reason == CAP:
        return f"{head}; stop: the cap of {plan.looks.max_seeds} fresh seeds is reached, {look.m - look.resolved} unresolved"
    nxt = "; ".join(f"{', '.join(sorted(rows))} to {n} fresh seeds" for n, rows in by_target(look.next))
    return f"{head}; next: {nxt}"


def end_line(race: Race, plan: RacePlan) -> str:
    """Why the race stopped, or that it did not reach its next look."""
    if not race.screened:
        return "--seeds auto: stopped before the race (the screening trials did not all end); --resume continues it"
    if not race.done:
        left = sum(len(s) for s in race.missing.values())
        return (f"--seeds auto: stopped before race look {len(race.looks) + 1} ({left} trial{'s' * (left != 1)} of "
                "the batch did not end); --resume continues it")
    extra = sum(race.targets.values())
    if not race.looks:
        return f"--seeds auto: no race ({len(race.contenders)} configuration completed its screening seed)"
    last = race.looks[-1]
    others = "the other contender" if last.m == 1 else f"the other {last.m} contenders"
    why = (f"the leader {race.leader} is resolved against {others} at look {last.k} "
           f"({last.n} fresh seeds)" if race.reason == ALL_RESOLVED else
           f"the cap of {plan.looks.max_seeds} fresh seeds was reached with {last.m - last.resolved} of {last.m} "
           f"contenders unresolved against the leader {race.leader}")
    return f"--seeds auto: race stopped after look {last.k}: {why}; {plan.samples} + {extra} trials in all"


def verdict_lines(race: Race, plan: RacePlan, objective: str) -> list[str]:
    """One sentence per contender against the leader: the interval, its level, n and the look that reached it
    (the wording of the table's verdicts, adbs_lab/results/comparisons.py)."""
    from adbs_lab.stats.verdicts import wording

    out = []
    for c, v in race.verdicts.items():
        ci = (f"95% CI {_ends(v, plan.delta)}" if math.isfinite(v.lo) else "n < 2: no interval")
        when = f"reached at look {v.look} of {len(plan.looks.sizes)}" if v.verdict is not Label.NOT_RESOLVED \
            else f"look {v.look} of {len(plan.looks.sizes)}"
        left = f", {v.n_left_out} left out" if v.n_left_out else ""
        signed = " (signed: + is better)" if plan.sign < 0 else ""
        out.append(f"{c} vs {race.leader} (race leader): {v.estimate:+.2f} points of {objective}{signed} on fresh "
                   f"seeds ({ci}, {'Bonferroni over ' + str(plan.m) + ' pairs of contenders' if plan.m > 1 else 'one pair'}, α "
                   f"spent over {len(plan.looks.sizes)} looks; paired, n={v.n}{left}, {when}, {v.n_seeds} seeds): "
                   f"{wording(v.verdict, plan.delta)}")
    return out


def _ends(v: Verdict, delta: float) -> str:
    """The interval's ends as printed (adbs_lab/stats/verdicts.py: printed_ends, the table's rule), so no verdict
    stands beside a printed interval that says otherwise."""
    from adbs_lab.stats.verdicts import printed_ends

    lo, hi, _ = printed_ends(v, delta)
    return f"{lo} to {hi}"


def post_selection(race: Race) -> dict[str, Any] | None:
    """best_config.json's record of the leader's test figures: every seed it ran chose it (seed 0 put it among the
    contenders, the fresh seeds made it the leader), so its test accuracy on them is post-selection."""
    if race.leader is None:
        return None
    return {"seeds": [SCREEN_SEED] + race.seeds_of(race.leader), "test_figures": "post-selection",
            "why": "every seed of the chosen configuration took part in choosing it (the screening seed made it a "
                   "contender, the race's seeds its leader); its test accuracy on them is optimistic: confirm it on "
                   "fresh seeds (--seeds with other numbers) for an unbiased figure"}
