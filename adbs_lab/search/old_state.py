"""A searcher pickled by earlier code, as this code holds it: every default an old StudySearch state lacks, in one
place (StudySearch.__setstate__ calls `upgrade`), so a study an earlier version started resumes where its
fingerprint says it is the same study.

Before the seed policies (adbs_lab/search/seeds/) a searcher held its mode in three fields: `_seeds` (a seed list),
`_auto` (adbs_lab/search/auto_seeds.py: AutoPlan, --seeds auto on a grid) or `_race` (adbs_lab/search/racing.py:
RacePlan), and what its looks read in mode-shaped records (`_auto_ended`, `_race_screen`, `_race_screen_ids`,
`_race_ended`, `_race_number`, `_looks_said`). `upgrade` makes the policy of that mode and the one record of the
trials that ended (`_record`, by Tune trial id), so the policy's standing is the looks the old searcher took (the
same engine: tests/adbs_lab/search/test_seed_engine_golden.py); the configurations' records (`_groups`) keep their
shape and gain the keys the generic searcher reads (`seeds`, `row`, `told`, `final`). A searcher from before
--objectives searched the default objective."""

from __future__ import annotations

import math
from typing import Any

from adbs_lab.records import metrics_keys as K
from adbs_lab.records.objectives import DEFAULT
from adbs_lab.records.tune_keys import RACE_OF
from adbs_lab.search.seeds.fixed import SeedList
from adbs_lab.search.seeds.policy import Ended, SeedPolicy
from adbs_lab.search.seeds.race import SampledRace, pairs_m
from adbs_lab.search.seeds.until_resolved import UntilResolved
from adbs_lab.stats.policy import VerdictPolicy

__all__ = ["OLD_KEYS", "upgrade"]

OLD_KEYS = ("_seeds", "_auto", "_race", "_open", "_auto_ended", "_looks_said", "_race_screen", "_race_screen_ids",
            "_race_ended", "_race_number")
"""The fields of a searcher pickled before the seed policies (the code of commit 0f7bd56 and earlier)."""


def upgrade(state: dict[str, Any]) -> dict[str, Any]:
    """`state` (a StudySearch's pickled __dict__) as this code's StudySearch holds it; unchanged when it is one."""
    if "_policy" in state:
        return state
    s = {k: v for k, v in state.items() if k not in OLD_KEYS}
    s.setdefault("_objectives", DEFAULT)
    auto, race = state.get("_auto"), state.get("_race")
    policy = _policy(state)
    groups: dict[int, dict[str, Any]] = s.setdefault("_groups", {})
    handed: dict[int, list[int]] = {}
    for tid, n in state.get("_number", {}).items():
        if tid in state.get("_seed_of", {}):
            handed.setdefault(n, []).append(state["_seed_of"][tid])
    for n, g in groups.items():
        g.setdefault("seeds", handed.get(n, []) + list(g.get("seeds_left", [])))
        g.setdefault("row", None)
        g.setdefault("told", False)
        g["final"] = auto is not None or g.get(RACE_OF) is not None
    s["_policy"] = policy
    s["_by_unit"] = ({g["row"]: n for n, g in sorted(groups.items())} if auto is not None else
                     dict(state.get("_race_number", {})))
    s["_record"] = _records(state, groups) if auto is not None or race is not None else {}
    s["_said"] = int(state.get("_looks_said", 0))
    s.setdefault("_seed_of", {})
    return s


def _policy(state: dict[str, Any]) -> SeedPolicy:
    auto, race = state.get("_auto"), state.get("_race")
    if auto is not None:
        return UntilResolved(VerdictPolicy(alpha=auto.looks.alpha, delta=auto.delta, pairs=tuple(auto.pairs),
                                           looks=auto.looks), tuple(auto.rows), tuple(auto.label_keys))
    if race is not None:
        top = min(race.top, race.samples)
        return SampledRace(VerdictPolicy(alpha=race.looks.alpha, delta=race.delta, looks=race.looks, m=pairs_m(top)),
                           race.top, race.samples, tuple(race.label_keys), race.sign)
    return SeedList(tuple(state.get("_seeds", [])))


def _records(state: dict[str, Any], groups: dict[int, dict[str, Any]]) -> dict[str, Ended]:
    """The old searcher's records of the trials that ended, as one record by Tune trial id (in the order its looks
    read them): --seeds auto's (row, seed) -> (state, last test accuracy); a race's screening trials (their values
    are the objectives the searcher kept with the configuration) and its contenders' fresh seeds."""
    number, seed_of = state.get("_number", {}), state.get("_seed_of", {})
    tid_of = {(groups[n]["row"], seed_of[tid], groups[n].get(RACE_OF) is None): tid
              for tid, n in number.items() if tid in seed_of and n in groups}
    out: dict[str, Ended] = {}
    screen = state.get("_race_screen", {})
    for tid in sorted(state.get("_race_screen_ids", ())):
        g = groups[number[tid]]
        member = g["members"].get(tid)
        st = member[0] if member else state.get("_ended", {}).get(tid, K.FAILED)
        values = member[1] if member else None
        # a trial told through `ended` kept no values: its label's best stands in (the screen keeps the best anyway)
        value = (values[0] if values else screen.get(g["row"], math.nan)) if st == K.COMPLETE else math.nan
        out[tid] = Ended(g["row"], seed_of.get(tid, 0), st, value)
    for ended, screening in ((state.get("_auto_ended", {}), True), (state.get("_race_ended", {}), False)):
        for row, seeds in ended.items():
            for seed, (st, value) in seeds.items():
                out[tid_of.get((row, seed, screening), f"{row}@{seed}")] = Ended(row, seed, st, value)
    return out
