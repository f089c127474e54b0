"""The looks of --seeds auto and of a race, replayed from the trials that ended, are the ones the code of commit
0f7bd56 took: its outputs on 60 studies played to their end on random truths (targets, looks, verdicts, the missing
seeds, why it stopped), at a random point of each and at its end, recorded in data/engine_golden.json (floats
exactly), under the rule of too few pairs those studies ran by (adbs_lab/stats/verdicts.py: LEGACY_MIN_PAIRS). The
engine must take the looks it took before under the same rule, so these must not move: the seed policies
(adbs_lab/search/seeds/) take them here, through a small adapter from the recorded tables to the trials that
ended. One rule of the race changed since: a contender with a failed or diverged seed at a look cannot lead it
(adbs_lab/search/seeds/engine.py: LeaderPairs), so a race in which some look had such a contender may take other
looks; those races are checked against that rule instead (every leader had every seed of its look finite, and a race
with no leader stopped at the look where no contender had)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from adbs_lab.search.seeds.engine import NO_LEADER
from adbs_lab.search.seeds.policy import Ended
from adbs_lab.search.seeds.race import SampledRace, pairs_m
from adbs_lab.search.seeds.until_resolved import UntilResolved
from adbs_lab.stats.looks import Looks
from adbs_lab.stats.policy import VerdictPolicy
from adbs_lab.stats.verdicts import LEGACY_MIN_PAIRS

GOLDEN = json.loads((Path(__file__).parent / "data" / "engine_golden.json").read_text())


def _nan(x):
    """The recorded JSON's "nan" strings as floats."""
    if x == "nan":
        return math.nan
    if isinstance(x, dict):
        return {k: _nan(v) for k, v in x.items()}
    if isinstance(x, list):
        return [_nan(v) for v in x]
    return x


def _same(got, want) -> bool:
    if isinstance(want, float) and math.isnan(want):
        return isinstance(got, float) and math.isnan(got)
    if isinstance(want, dict):
        return isinstance(got, dict) and got.keys() == want.keys() and all(_same(got[k], want[k]) for k in want)
    if isinstance(want, (list, tuple)):
        return len(got) == len(want) and all(_same(g, w) for g, w in zip(got, want))
    return got == want


def _ints(d: dict) -> dict:
    """{unit: {seed: x}} with the seeds as ints again (JSON keys are strings)."""
    return {u: {int(s): v for s, v in seeds.items()} for u, seeds in d.items()}


def _ended(values: dict, states: dict) -> list[Ended]:
    """The recorded tables as the trials that ended, in the order they ended (a unit's seeds in its order)."""
    return [Ended(u, s, st, values.get(u, {}).get(s, math.nan)) for u, seeds in states.items() for s, st in seeds.items()]


def auto_out(case: dict) -> dict:
    looks = Looks(**case["looks"])
    policy = UntilResolved(VerdictPolicy(alpha=looks.alpha, delta=case["delta"], min_pairs=LEGACY_MIN_PAIRS,
                                         pairs=tuple(tuple(p) for p in case["pairs"]), looks=looks),
                           tuple(case["rows"]), ("row",))
    out = policy.standing(_ended(_ints(case["values"]), _ints(case["states"])))
    return json.loads(json.dumps({"targets": out.targets, "done": out.done, "reason": out.reason,
                                  "missing": out.missing, "looks": [_look(lk, race=False) for lk in out.looks]}))


def _look(lk, race: bool) -> dict:
    """A look as 0f7bd56 recorded it: auto_seeds.Look's fields; racing.RaceLook's, the leader second."""
    d = {"k": lk.k, "n": lk.n, "resolved": lk.resolved, "m": lk.m, "next": lk.next, "reason": lk.reason}
    return {"k": lk.k, "n": lk.n, "leader": lk.leader, **{k: d[k] for k in ("resolved", "m", "next", "reason")}} \
        if race else d


def race_out(case: dict) -> dict:
    plan = case["plan"]
    looks = Looks(**plan["looks"])
    top = min(plan["top"], plan["samples"])
    policy = SampledRace(VerdictPolicy(alpha=looks.alpha, delta=plan["delta"], looks=looks, m=pairs_m(top),
                                       min_pairs=LEGACY_MIN_PAIRS),
                         top, plan["samples"], ("alpha",), plan["sign"])
    screen = list(case["screen"].items())[:len(case["screen"]) - (not case["screened"])]  # one short: not screened
    ended = [Ended(lab, 0, "COMPLETE" if math.isfinite(v) else "FAILED", v) for lab, v in screen]
    r = policy.standing(ended + _ended(_ints(case["values"]), _ints(case["states"])))
    case["new_rule"] = _finite_leaders(r, _ints(case["values"])) if any(lk.cannot_lead for lk in r.looks) else None
    return json.loads(json.dumps({"screened": r.screened, "contenders": list(r.contenders), "targets": r.targets,
                                  "leader": r.leader, "done": r.done, "reason": r.reason, "missing": r.missing,
                                  "verdicts": {c: [v.estimate, v.lo, v.hi, v.n, v.n_left_out, v.level,
                                                   v.verdict.value, v.look, v.n_seeds] for c, v in r.verdicts.items()},
                                  "looks": [_look(lk, race=True) for lk in r.looks]}).replace("NaN", '"nan"'))


def _finite_leaders(r, values: dict) -> bool:
    """The race's rule of a leader: each look's leader has every seed of the look finite; a look without one
    stopped the race (NO_LEADER) with every contender at the look's seeds unable to lead."""
    for lk in r.looks:
        if lk.leader is None:
            if not (lk.reason == NO_LEADER and lk is r.looks[-1] and r.leader is None and lk.cannot_lead):
                return False
            continue
        finite = [v for s, v in values.get(lk.leader, {}).items() if s <= lk.n and math.isfinite(v)]
        if len(finite) < lk.n or lk.leader in {c for c, _, _ in lk.cannot_lead}:
            return False
    return True


@pytest.mark.parametrize("kind", ["auto", "race"])
def test_the_engine_takes_the_recorded_looks(kind):
    cases = _nan(GOLDEN[kind])
    assert len(cases) > 40 and sum(c["out"]["done"] for c in cases) > 25
    run = auto_out if kind == "auto" else race_out
    same = 0
    for i, case in enumerate(cases):
        case["screen"] = case.get("screen")
        got = _nan(run(case))
        if case.get("new_rule") is not None:  # a look had a contender that cannot lead: the rule changed there
            assert case["new_rule"], (kind, i, got)
            continue
        same += 1
        assert _same(got, case["out"]), (kind, i, got, case["out"])
    assert same >= (40 if kind == "auto" else 10), same
