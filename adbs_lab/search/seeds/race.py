"""--seeds auto on a sampled search: the configurations near the top race on the validation objective.

A sampled search (--num-samples N, Optuna's TPE) runs each sample on the screening seed 0, as without --seeds auto.
Once all N have ended, the `top` best on the validation objective (default 3, --race-top) are the contenders. They
run fresh seeds 1, 2, 3 (seed 0 chose them, so its values are biased upward for them: the winner's curse, and the
race never reads them), then looks like a grid's (adbs_lab/stats/looks.py: n0 = 3, batches of 2, up to --max-seeds
fresh seeds, α spent by O'Brien-Fleming-type Lan-DeMets spending). At each look the leader is the best mean over the
fresh seeds among the contenders still racing, and every other contender is compared with it, paired seed by seed
(adbs_lab/search/seeds/engine.py: LeaderPairs): the open comparisons' contenders and the leader run the next batch;
a contender resolved against the leader (worse, or within ±δ) runs no more, unless a later leader is one it is not
resolved against. The race stops when every comparison with the leader is resolved (the leader is resolved) or at
the cap. This is racing as in F-race (Birattari, Stützle, Paquete & Varrentrapp 2002, "A racing algorithm for
configuring metaheuristics", GECCO; irace, López-Ibáñez et al. 2016), with paired t-intervals and α spending in place
of Friedman tests.

The error control: each look's intervals are at α_k / m with m = top (top - 1) / 2, every pair of contenders, fixed
before any seed runs. Every interval of every pair at every look then covers its true difference together with
probability ≥ 1 - α (Bonferroni and the union bound over the looks, as docs/statistics.md argues for a grid),
whichever leader the data pick, so every verdict the race prints is true together with that probability: when the
leader is resolved, every other contender is worse than it, or within δ of it, with probability ≥ 1 - α. The
guarantee is conditional on the contenders: configurations not raced are not compared (the screening seed only ranked
them).

Each contender gets an Optuna trial of its own with the screening trial's parameters (a copy: the searcher enqueues
them, user attribute `race_of`, adbs_lab/records/tune_keys.py: RACE_OF), so every value Optuna is told covers exactly
the seeds of that trial: seed 0 for a screening trial, the fresh seeds for a contender's, told once the race leaves it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, ClassVar, Mapping, Sequence

from adbs_lab.records import metrics_keys as K
from adbs_lab.records.tune_keys import describe
from adbs_lab.search.seeds import engine
from adbs_lab.search.seeds.engine import NO_LEADER
from adbs_lab.search.seeds.policy import FINISHED, Ended, Look, Opening, Standing, by_target
from adbs_lab.search.seeds.until_resolved import looks_identity
from adbs_lab.stats.looks import Looks
from adbs_lab.stats.policy import VerdictPolicy
from adbs_lab.stats.sequential import ALL_RESOLVED, CAP
from adbs_lab.stats.verdicts import Label, Verdict, printed_ends, why_no_interval

__all__ = ["DEFAULT_TOP", "SCREEN_SEED", "RESOLVING", "pairs_m", "SampledRace", "screened", "resolved",
           "post_selection"]

DEFAULT_TOP = 3
"""Contenders raced by default: with 3, m = 3 pairs, the family size of the ablation's table."""
SCREEN_SEED = 0
"""The seed every sample runs first; the race runs seeds 1, 2, ... (fresh)."""
RESOLVING = (Label.WORSE, Label.WORSE_SMALL, Label.EQUIVALENT)
"""The verdicts against the leader that take a contender out of the race."""


def pairs_m(top: int) -> int:
    """The family's size: every pair of `top` contenders (at least 1)."""
    return max(1, top * (top - 1) // 2)


def screened(screen: dict[str, float], label: str, value: float, sign: float) -> None:
    """Keep a screening trial's value in `screen` {label: value}. Two samples of one configuration (a categorical
    space can draw it twice) are one label: the better value stands, whichever ended first, so the searcher and the
    summary, which read the trials in different orders, rank alike."""
    prev = screen.get(label)
    if prev is None or not math.isfinite(prev) or (math.isfinite(value) and sign * value > sign * prev):
        screen[label] = value


@dataclass(frozen=True)
class SampledRace:
    """The race of a sampled search's best (module docstring)."""

    chooses: ClassVar[bool] = True

    verdicts: VerdictPolicy
    """α, δ, the looks over the fresh seeds (`looks`, never None here) and m = pairs_m(top) (`m`)."""
    top: int
    """Contenders: the best `top` of the samples on the screening seed (at most the samples)."""
    samples: int
    """--num-samples: the screening trials."""
    label_keys: tuple[str, ...]
    """The keys a configuration's label names (tune_keys.describe)."""
    sign: float = 1.0
    """+1 to maximise the objective, -1 to minimise it (the race maximises sign x value)."""

    @property
    def looks(self) -> Looks:
        assert self.verdicts.looks is not None, "a race's policy has its looks"
        return self.verdicts.looks

    def checked_seeds(self) -> list[int]:
        return [SCREEN_SEED]

    def trials(self, n_configs: int) -> tuple[int, int]:
        return n_configs, n_configs + self.top * self.looks.max_seeds

    def identity(self) -> str | None:
        """The fingerprint's part: the repr of the plan the searcher of a race held when it was a RacePlan."""
        return (f"RacePlan(looks={looks_identity(self.looks)}, top={self.top!r}, samples={self.samples!r}, "
                f"delta={self.verdicts.delta!r}, label_keys={self.label_keys!r}, sign={self.sign!r})")

    def size_text(self, n_configs: int, dry: bool = False) -> str:
        return (f"{n_configs} to {self.trials(n_configs)[1]} trials ({n_configs} samples on seed 0, then the best "
                f"{self.top} race on up to {self.looks.max_seeds} fresh seeds, --seeds auto)")

    def start_line(self, n_configs: int) -> str | None:
        return (f"--seeds auto (a race): {self.samples} samples on seed {SCREEN_SEED}, then the best "
                f"{min(self.top, self.samples)} on the validation objective race on fresh seeds from {SCREEN_SEED + 1} "
                f"(looks at {', '.join(map(str, self.looks.sizes))} fresh seeds; docs/statistics.md); a line per look "
                "as it happens")

    def description(self, n_configs: int) -> str:
        return (f"seed 0, then the best {self.top} race on fresh seeds up to {self.looks.max_seeds} (--seeds auto: "
                f"{n_configs} to {self.trials(n_configs)[1]} trials)")

    def params(self) -> dict[str, str]:
        return {}

    def opening(self, standing: Standing, opened: int) -> Opening | str | None:
        if opened < self.samples:
            return Opening([SCREEN_SEED])
        if standing.done:
            return FINISHED
        return None  # the screening or the race's batch under way must end before the next look

    def adopted(self, copy: bool) -> Opening:
        return Opening([], final=True) if copy else Opening([SCREEN_SEED])

    copies = True
    """A contender runs as a copy of its screening trial."""

    def label(self, params: Mapping[str, Any]) -> str | None:
        return describe(dict(params), list(self.label_keys))

    def value(self, state: str, result: Mapping[str, Any] | None, values: Sequence[float] | None) -> float:
        return values[0] if state == K.COMPLETE and values else math.nan

    def standing(self, ended: Sequence[Ended]) -> Standing:
        screen: dict[str, float] = {}
        values: dict[str, dict[int, float]] = {}
        states: dict[str, dict[int, str]] = {}
        for e in ended:
            if e.seed == SCREEN_SEED:
                screened(screen, e.unit, e.value, self.sign)
                continue
            states.setdefault(e.unit, {})[e.seed] = e.state
            if e.state == K.COMPLETE:
                values.setdefault(e.unit, {})[e.seed] = e.value
        if sum(e.seed == SCREEN_SEED for e in ended) < self.samples:
            return Standing(screened=False)
        ok = [(-self.sign * v, lab) for lab, v in screen.items() if math.isfinite(v)]
        contenders = tuple(lab for _, lab in sorted(ok)[:self.top])  # ties by label
        if len(contenders) < 2:  # nothing to race: the one configuration is the leader
            return Standing(done=True, reason=ALL_RESOLVED, leader=contenders[0] if contenders else None,
                            contenders=contenders)
        s = engine.replay(contenders, self.looks.n0, values, states, lambda i: SCREEN_SEED + 1 + i,
                          engine.LeaderPairs(self.sign), self.looks, self.verdicts.delta, self.verdicts.m,
                          self.verdicts.min_pairs)
        return Standing(s.targets, s.looks, s.done, s.reason, s.missing, s.verdicts, s.leader, contenders,
                        seed_of=s.seed_of)

    def wanted(self, standing: Standing) -> dict[str, list[int]]:
        return {c: standing.seeds(c) for c in standing.contenders} if standing.screened else {}

    def look_line(self, look: Look) -> str:
        """"race look 1 of at most 2 at 3 fresh seeds: leader a; 1 of 2 resolved against it; next: a, b to 5", with
        each contender that could not lead for a failed or diverged seed ("c: 1 of 3 seeds finite, cannot lead at
        this look"), or "no leader" where none could."""
        where = f"race look {look.k} of at most {len(self.looks.sizes)} at {look.n} fresh seeds"
        unable = "; ".join(f"{c}: {f} of {n} seeds finite, cannot lead at this look" for c, f, n in look.cannot_lead)
        if look.reason == NO_LEADER:
            return (f"{where}: no leader ({unable}); stop: no contender has all {look.n} fresh seeds of the look "
                    "finite, so none is chosen")
        head = (f"{where}: leader {look.leader}{f' ({unable})' if unable else ''}; "
                f"{look.resolved} of {look.m} contenders resolved against it")
        if look.reason == ALL_RESOLVED:
            return f"{head}; stop: the leader is resolved"
        if look.reason == CAP:
            return (f"{head}; stop: the cap of {self.looks.max_seeds} fresh seeds is reached, {look.m - look.resolved} "
                    "unresolved")
        nxt = "; ".join(f"{', '.join(sorted(rows))} to {n} fresh seeds" for n, rows in by_target(look.next))
        return f"{head}; next: {nxt}"

    def end_line(self, standing: Standing) -> str | None:
        """Why the race stopped, or that it did not reach its next look."""
        if not standing.screened:
            return "--seeds auto: stopped before the race (the screening trials did not all end); --resume continues it"
        if not standing.done:
            left = sum(len(s) for s in standing.missing.values())
            return (f"--seeds auto: stopped before race look {len(standing.looks) + 1} ({left} trial{'s' * (left != 1)} "
                    "of the batch did not end); --resume continues it")
        if not standing.looks:
            return f"--seeds auto: no race ({len(standing.contenders)} configuration completed its screening seed)"
        last = standing.looks[-1]
        if standing.reason == NO_LEADER:
            return (f"--seeds auto: race stopped after look {last.k} with no leader: no contender has all {last.n} "
                    f"fresh seeds of the look finite (failed or diverged seeds), so none is chosen; {self.samples} + "
                    f"{sum(standing.targets.values())} trials in all")
        others = "the other contender" if last.m == 1 else f"the other {last.m} contenders"
        why = (f"the leader {standing.leader} is resolved against {others} at look {last.k} ({last.n} fresh seeds)"
               if standing.reason == ALL_RESOLVED else
               f"the cap of {self.looks.max_seeds} fresh seeds was reached with {last.m - last.resolved} of {last.m} "
               f"contenders unresolved against the leader {standing.leader}")
        return (f"--seeds auto: race stopped after look {last.k}: {why}; {self.samples} + "
                f"{sum(standing.targets.values())} trials in all")

    def unfinished(self, standing: Standing, interrupted: int, not_started: int) -> int:
        """A race ends when its searcher says so: anything short of that is unfinished."""
        return 0 if standing.done else max(1, sum(len(s) for s in standing.missing.values()))

    def verdict_lines(self, standing: Standing, objective: str) -> list[str] | None:
        """One sentence per contender against the leader: the interval, its level, n and the look that reached it
        (the wording of the table's verdicts, adbs_lab/results/comparisons.py)."""
        policy, k = self.verdicts, len(self.looks.sizes)
        m = policy.m or 1
        out = []
        for c, v in standing.verdicts.items():
            ci = f"{policy.level_text} CI {_ends(v, policy.delta)}" if math.isfinite(v.lo) else why_no_interval(v)
            when = f"reached at look {v.look} of {k}" if v.verdict is not Label.NOT_RESOLVED else f"look {v.look} of {k}"
            left = f", {v.n_left_out} left out" if v.n_left_out else ""
            signed = " (signed: + is better)" if self.sign < 0 else ""
            family = f"Bonferroni over {m} pairs of contenders" if m > 1 else "one pair"
            out.append(f"{c} vs {standing.leader} (race leader): {v.estimate:+.2f} points of {objective}{signed} on "
                       f"fresh seeds ({ci}, {family}, α spent over {k} looks; paired, n={v.n}{left}, {when}, "
                       f"{v.n_seeds} seeds): {policy.wording(v.verdict)}")
        return out

    def notes(self, standing: Standing, objective: str) -> list[str]:
        """The lines above a raced search's tables: each verdict against the leader, and the leader's test figures
        marked post-selection."""
        if standing.leader is None:
            return []
        seeds = (post_selection(standing) or {}).get("seeds", [])
        return [*(self.verdict_lines(standing, objective) or []),
                f"post-selection: the test figures of {standing.leader} (the race's leader) are over seeds "
                f"{', '.join(map(str, seeds))}, every one of which chose it on validation, so they are optimistic; "
                "run it on fresh seeds to confirm them (best_config.json: test_post_selection)"]

    def chosen(self, standing: Standing) -> dict[str, Any]:
        """best_config.json's race keys beside the leader's figures (adbs_lab/driver/summarise.py: the leader, not
        the best mean over all samples: a sample that ran only seed 0 is not ranked against the fresh seeds); {}
        without a leader (no configuration completed its screening seed): none is chosen; a race that stopped with
        no leader (no contender had every seed of a look finite) says so in `why`.

        `validation_post_selection` marks the leader's validation mean over the fresh seeds (`mean_over_seeds`) as
        the test figures are marked: the leader is the best of several noisy means on those seeds, so its mean is
        biased upward (the expected maximum of k means, e.g. 0.846 standard errors above the truth for 3 equal
        contenders: tests/adbs_lab/search/test_race_leader.py)."""
        if standing.reason == NO_LEADER:
            return {"config_label": None, "why": "the race has no leader: no contender had all "
                    f"{standing.looks[-1].n} fresh seeds of look {standing.looks[-1].k} finite (failed or diverged "
                    "seeds)"}
        if standing.leader is None:
            return {}
        open_ = [c for c, v in standing.verdicts.items() if v.verdict not in RESOLVING]
        verdicts = {c: {"verdict": v.verdict.value, "estimate": v.estimate, "lo": v.lo, "hi": v.hi, "n": v.n,
                        "look": v.look, "n_seeds": v.n_seeds} for c, v in standing.verdicts.items()}
        return {"resolved_by_verdicts": resolved(standing), **({"indistinguishable_from": open_} if open_ else {}),
                "race": {"contenders": list(standing.contenders), "leader": standing.leader,
                         "verdicts_against_leader": verdicts, "not_raced": self.samples - len(standing.contenders),
                         "fresh_seeds": standing.targets.get(standing.leader, 0), "done": standing.done,
                         "why": standing.reason},
                "test_post_selection": post_selection(standing),
                "validation_post_selection": {
                    "seeds": standing.seeds(standing.leader), "mean_over_seeds": "post-selection",
                    "why": "the race chose the leader as the best mean over these seeds, so its mean over them is "
                           "biased upward (the best of several noisy means)"}}


def resolved(standing: Standing) -> bool:
    """The leader is resolved: the race stopped with every other contender resolved against it (worse, or within
    ±δ); a single contender is resolved trivially."""
    return (standing.done and standing.leader is not None
            and all(v.verdict in RESOLVING for v in standing.verdicts.values()))


def _ends(v: Verdict, delta: float) -> str:
    """The interval's ends as printed (adbs_lab/stats/verdicts.py: printed_ends, the table's rule), so no verdict
    stands beside a printed interval that says otherwise."""
    lo, hi, _ = printed_ends(v, delta)
    return f"{lo} to {hi}"


def post_selection(standing: Standing) -> dict[str, Any] | None:
    """best_config.json's record of the leader's test figures: every seed it ran chose it (seed 0 put it among the
    contenders, the fresh seeds made it the leader), so its test accuracy on them is post-selection."""
    if standing.leader is None:
        return None
    fresh = list(range(SCREEN_SEED + 1, SCREEN_SEED + 1 + standing.targets.get(standing.leader, 0)))
    return {"seeds": [SCREEN_SEED] + fresh, "test_figures": "post-selection",
            "why": "every seed of the chosen configuration took part in choosing it (the screening seed made it a "
                   "contender, the race's seeds its leader); its test accuracy on them is optimistic: confirm it on "
                   "fresh seeds (--seeds with other numbers) for an unbiased figure"}
