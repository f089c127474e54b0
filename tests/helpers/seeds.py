"""The seed policies (adbs_lab/search/seeds/) built from the few numbers a test names, and their standing from
tables of values and states as a study's records hold them: {unit: {seed: value}} of the complete trials and
{unit: {seed: how it ended}} of all that ended."""

from __future__ import annotations

import math

from adbs_lab.records import metrics_keys as K
from adbs_lab.search.seeds.policy import Ended, Standing
from adbs_lab.search.seeds.race import SCREEN_SEED, SampledRace, pairs_m
from adbs_lab.search.seeds.until_resolved import UntilResolved
from adbs_lab.stats.looks import Looks
from adbs_lab.stats.policy import VerdictPolicy


def until_resolved(looks: Looks, rows, pairs, delta: float = 1.0, label_keys=("row",)) -> UntilResolved:
    return UntilResolved(VerdictPolicy(alpha=looks.alpha, delta=delta, pairs=tuple(pairs), looks=looks), tuple(rows),
                         tuple(label_keys))


def race(looks: Looks, top: int, samples: int, delta: float = 1.0, label_keys=("alpha",), sign: float = 1.0,
         m: int | None = None) -> SampledRace:
    """A race of the best `top` of `samples` (m: the family's size, every pair of the contenders unless given)."""
    top = min(top, samples)
    return SampledRace(VerdictPolicy(alpha=looks.alpha, delta=delta, looks=looks, m=m or pairs_m(top)), top, samples,
                       tuple(label_keys), sign)


def ended(values: dict, states: dict) -> list[Ended]:
    """The trials that ended, a unit's seeds in the order of `states`; a seed with a value completed."""
    return [Ended(u, s, K.COMPLETE, values[u][s]) if s in values.get(u, {}) else
            Ended(u, s, str(st).upper() if str(st).upper() != K.COMPLETE else K.FAILED, math.nan)
            for u, seeds in states.items() for s, st in seeds.items()]


def auto_standing(rows, values: dict, states: dict, pairs, looks: Looks, delta: float = 1.0) -> Standing:
    """--seeds auto's standing on a grid's rows after the trials `values` and `states` name."""
    return until_resolved(looks, rows, pairs, delta).standing(ended(values, states))


def race_standing(screen: dict[str, float], screened: bool, values: dict, states: dict,
                  policy: SampledRace) -> Standing:
    """A race's standing: `screen` {label: its screening seed's value}, `screened` whether every screening trial has
    ended (the test names it; its records are padded to the samples with NaN ones, which change no label's best)."""
    records = [Ended(lab, SCREEN_SEED, K.COMPLETE if math.isfinite(v) else K.FAILED, v) for lab, v in screen.items()]
    if screened:
        pad = next(iter(screen), "")
        records += [Ended(pad, SCREEN_SEED, K.FAILED, math.nan)] * max(0, policy.samples - len(records))
    else:
        records = records[:policy.samples - 1]
    return policy.standing(records + ended(values, states))
