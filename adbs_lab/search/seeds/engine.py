"""The one sequential engine: the looks a study takes on the trials that ended, for the rows of a grid and for the
contenders of a race alike.

Every unit runs its first `first` seeds; once every seed below each unit's target has ended, the engine looks
(adbs_lab/stats/sequential.py: next_batch) at the comparisons its pair rule names, on the per-seed differences of
their values (adbs_lab/stats/verdicts.py: paired_differences, the tables' pairing), and either stops (every
comparison resolved, or the open ones at the cap) or raises the targets of the units of the open comparisons to the
next planned look. A trial that diverged, failed or was pruned has ended: its seed counts as run, its difference NaN
(left out and counted by the verdicts). The rule is a pure function of the trials that ended, so the searcher, a
resumed searcher and the summary take the same looks.

Two pair rules:
- `TablePairs`: the table's comparisons, fixed before any seed runs (the rows of --seeds auto);
- `LeaderPairs`: every other unit against the leader, the best mean over the seeds run among the units at the
  largest target with every one of those seeds finite (ties: the earlier unit), each pair read at the last look both
  have all the seeds of: a race (adbs_lab/search/seeds/race.py). A unit with a failed or diverged seed at the look
  cannot lead it (its mean would stand on fewer seeds than the look's); where no unit can, the study stops with no
  leader (NO_LEADER).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Mapping, Protocol, Sequence

from adbs_lab.search.seeds.policy import Look, Standing
from adbs_lab.stats.looks import Looks
from adbs_lab.stats.sequential import next_batch
from adbs_lab.stats.verdicts import MIN_PAIRS, Label, Verdict, paired_differences

__all__ = ["NO_LEADER", "PairRule", "TablePairs", "LeaderPairs", "replay"]

NO_LEADER = "no leader"
"""Why a study of a leader rule stopped when no unit had every seed of the look finite (`LeaderPairs.cannot_lead`)."""

Values = Mapping[str, Mapping[int, float]]
States = Mapping[str, Mapping[int, str]]


class PairRule(Protocol):
    """Which comparisons a look reads."""

    @property
    def sign(self) -> float:
        """+1, or -1 for an objective to minimise (the differences are sign x (unit - the one it is compared
        with))."""

    def pairs(self, units: Sequence[str], targets: Mapping[str, int],
              values: Values) -> tuple[dict[str, tuple[str, str]], str | None]:
        """({comparison: (unit, the unit it is compared with)}, the leader or None), `values` the seeds run."""

    def cut(self, pair: tuple[str, str], targets: Mapping[str, int]) -> int | None:
        """How many of the pair's differences the look reads (None: all)."""

    def size(self, targets: Mapping[str, int], leader: str | None) -> int:
        """A look's seeds, as its line names them."""

    def cannot_lead(self, units: Sequence[str], targets: Mapping[str, int],
                    values: Values) -> tuple[tuple[str, int, int], ...]:
        """(unit, finite seeds, the look's seeds) of each unit that could lead the look but for too few finite
        seeds; () for a rule without a leader."""


@dataclass(frozen=True)
class TablePairs:
    """The table's comparisons (row, reference), named `row vs reference`; a look's size is the largest row's."""

    table: tuple[tuple[str, str], ...]
    sign: float = 1.0

    def pairs(self, units: Sequence[str], targets: Mapping[str, int],
              values: Values) -> tuple[dict[str, tuple[str, str]], str | None]:
        return {f"{a} vs {b}": (a, b) for a, b in self.table}, None

    def cut(self, pair: tuple[str, str], targets: Mapping[str, int]) -> int | None:
        return None

    def size(self, targets: Mapping[str, int], leader: str | None) -> int:
        return max(targets.values(), default=0)

    def cannot_lead(self, units: Sequence[str], targets: Mapping[str, int],
                    values: Values) -> tuple[tuple[str, int, int], ...]:
        return ()


@dataclass(frozen=True)
class LeaderPairs:
    """Every other unit against the leader, named by the unit, each pair read at the last look both have all the
    seeds of (never an earlier look's seeds at a later look's level, so every interval read is one of the family's);
    a look's size is the leader's seeds. Only a unit with every seed of the look finite may lead it: a mean over the
    one finite seed of three (two failed or diverged) is no mean over the look's seeds, and as the best of several
    it would win by its noise; with none, there is no leader (pairs: {}, None)."""

    sign: float = 1.0

    def _racing(self, units: Sequence[str], targets: Mapping[str, int]) -> list[str]:
        most = max(targets.values())
        return [u for u in units if targets[u] == most]

    @staticmethod
    def _finite(u: str, values: Values) -> list[float]:
        return [v for v in values.get(u, {}).values() if math.isfinite(v)]

    def pairs(self, units: Sequence[str], targets: Mapping[str, int],
              values: Values) -> tuple[dict[str, tuple[str, str]], str | None]:
        racing = self._racing(units, targets)
        able = [u for u in racing if len(self._finite(u, values)) >= targets[u]]
        if not able:
            return {}, None

        def score(u: str) -> float:
            xs = [self.sign * v for v in self._finite(u, values)]
            return sum(xs) / len(xs)

        leader = max(able, key=lambda u: (score(u), -able.index(u)))  # ties: the earlier unit
        return {u: (u, leader) for u in units if u != leader}, leader

    def cut(self, pair: tuple[str, str], targets: Mapping[str, int]) -> int | None:
        return min(targets[pair[0]], targets[pair[1]])

    def size(self, targets: Mapping[str, int], leader: str | None) -> int:
        return targets[leader] if leader is not None else max(targets.values(), default=0)

    def cannot_lead(self, units: Sequence[str], targets: Mapping[str, int],
                    values: Values) -> tuple[tuple[str, int, int], ...]:
        return tuple((u, len(self._finite(u, values)), targets[u]) for u in self._racing(units, targets)
                     if len(self._finite(u, values)) < targets[u])


def replay(units: Sequence[str], first: int, values: Values, states: States, seed_at: Callable[[int], int],
           rule: PairRule, looks: Looks, delta: float, m: int | None = None, min_pairs: int = MIN_PAIRS,
           stop: int | None = None) -> Standing:
    """The looks taken on the trials that ended: `values` {unit: {seed: value}} of the complete ones, `states`
    {unit: {seed: how it ended}} of all of them; unit u's seeds are seed_at(0), seed_at(1), ... (a race's fresh
    seeds start at 1); `m`: the family's size when it holds comparisons the looks do not read (a race: every pair of
    its contenders), else the comparisons read; `stop`: the most seeds this invocation runs (sequential.next_batch)."""
    targets = {u: first for u in units}
    taken: list[Look] = []
    verdicts: dict[str, Verdict] = {}
    seed_of = tuple(seed_at(i) for i in range(looks.last))
    while True:
        missing = {u: [seed_at(i) for i in range(n) if seed_at(i) not in states.get(u, {})] for u, n in targets.items()}
        missing = {u: seeds for u, seeds in missing.items() if seeds}
        leader = taken[-1].leader if taken else None
        if missing:
            return Standing(dict(targets), tuple(taken), False, "", missing, verdicts, leader, seed_of=seed_of)
        window = {u: {seed_at(i) for i in range(targets.get(u, 0))} for u in units}
        seen_v = {u: {s: v for s, v in values.get(u, {}).items() if s in window[u]} for u in units}
        seen_s = {u: {s: v for s, v in states.get(u, {}).items() if s in window[u]} for u in units}
        pairs, leader = rule.pairs(units, targets, seen_v)
        unable = rule.cannot_lead(units, targets, seen_v)
        if leader is None and unable:  # a leader rule with no unit able to lead: nothing to compare with
            taken.append(Look(len(taken) + 1, rule.size(targets, None), 0, 0, {}, NO_LEADER, None, unable))
            return Standing(dict(targets), tuple(taken), True, NO_LEADER, {}, {}, None, seed_of=seed_of)
        diffs = {n: [rule.sign * d for d in paired_differences(p, seen_v, seen_s)][:rule.cut(p, targets)]
                 for n, p in pairs.items()}
        nb = next_batch(diffs, pairs, looks, delta, m, min_pairs, stop)
        verdicts = dict(nb.verdicts)
        resolved = sum(v.verdict is not Label.NOT_RESOLVED for v in nb.verdicts.values())
        taken.append(Look(len(taken) + 1, rule.size(targets, leader), resolved, len(pairs), dict(nb.seeds), nb.reason,
                          leader, unable))
        if nb.done:
            return Standing(dict(targets), tuple(taken), True, nb.reason, {}, verdicts, leader, seed_of=seed_of)
        targets.update({u: max(targets.get(u, 0), n) for u, n in nb.seeds.items()})
