"""A study's verdict policy: the one owner of its family guarantee (docs/statistics.md).

`VerdictPolicy` holds which comparisons make the family (`pairs`), which metric decides (`metric`: its last
session's value), which planned looks share α (`looks`; none: one look at the seeds run), the family's error rate α
(`alpha`: every verdict the study prints is true together with probability at least 1 - α) and δ (`delta`: each
interval is read against 0 and ±δ). Every table, sentence, report, look line, race and MLflow tag of a study reads
them here, and the level a line prints ("95%") is derived from α (`level_text`), never typed.

The study builds its policy once, in its preflight (adbs_lab/driver/preflight.py); a report reads the recorded one back from the
study's MLflow tags (`from_tags`). A rule the statistics add is a field of this class with its default (the value
that reproduces what studies did before it), recorded in the tag (`tags` writes every field) and read back with the
default where an older study's tag lacks it: e.g. the fewest finite pairs a verdict needs, or the split of α between
the primary and the secondary metrics (adbs_lab/stats/continuation.py: AlphaSplit). A field whose value `--resume`
may not change carries `metadata={"setting": <its study.json key and option>, "resume": "fixed"}`, and, where a
study's flag sets it, `"flag"`: the driver records and checks those (adbs_lab/driver/resume.py: settings_now,
RESUME_FIXED).

The defaults of α and δ and the one rule of each (`alpha_problem`, `delta_problem`) are in adbs_lab/stats/rules.py,
which the study's options and studies/report.py read without loading this module's scipy.
"""

from __future__ import annotations

import dataclasses
import json
import math
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

from adbs_lab.stats.continuation import AlphaSplit
from adbs_lab.stats.looks import Looks
from adbs_lab.stats.rules import DEFAULT_ALPHA, DEFAULT_DELTA, alpha_problem, delta_problem
from adbs_lab.stats.verdicts import LEGACY_MIN_PAIRS, MIN_PAIRS, Label

__all__ = ["SMOKE_BANNER", "DEFAULT_POLICY", "TAG", "PAIRS_TAG", "Pair", "VerdictPolicy", "combined"]

TAG = "adbs.verdicts"
"""The MLflow tag of a study's parent run that holds its policy (JSON, `tags`)."""
PAIRS_TAG = "adbs.comparisons"
"""The tag that holds the family's comparisons (JSON list of [row, reference]), apart from TAG: the list can be long,
and MLflow cuts a tag at 8,000 characters."""
OLD_DELTA_TAG, OLD_LOOKS_TAG = "adbs.resolve", "adbs.looks"
"""Where a study recorded before TAG existed kept δ and its looks (read by `from_tags`)."""
VERSION = 1

Pair = tuple[str, str]
"""(row, the row it is compared with): the difference is row - that row."""


@dataclass(frozen=True)
class VerdictPolicy:
    """What a study's verdicts guarantee and how they read (module docstring)."""

    alpha: float = field(default=DEFAULT_ALPHA, metadata={"setting": "error_rate", "resume": "fixed", "flag": "--error-rate"})
    """The family error rate: every verdict the study prints (its table's, its looks', its race's) is true together
    with probability at least 1 - alpha."""
    delta: float = field(default=DEFAULT_DELTA, metadata={"setting": "resolve", "resume": "fixed", "flag": "--resolve"})
    """δ in accuracy points: each interval is read against 0 and ±δ."""
    pairs: tuple[Pair, ...] | None = field(default=None, metadata={"setting": "comparisons", "resume": "fixed"})
    """The family: (row, the row it is compared with), in the table's order. None: each row against its reference
    (a study recorded before its comparisons were)."""
    looks: Looks | None = None
    """The planned looks that share alpha (--seeds auto, a race); None: one look at the seeds run. Their own alpha is
    this policy's."""
    m: int | None = None
    """The family's size where it holds comparisons not in `pairs` (a race: every pair of its contenders); None: the
    comparisons a table makes."""
    metric: str = "test_acc"
    """The deciding metric: its last session's value is what a comparison reads."""
    smoke: bool = False
    """A --smoke run's: its numbers come from a tiny model trained for seconds, so its verdicts are printed under
    SMOKE_BANNER, never under the family's guarantee (`guarantee`)."""
    min_pairs: int = MIN_PAIRS
    """The fewest finite pairs a verdict or a plan is read from, with the spread check (adbs_lab/stats/verdicts.py:
    MIN_PAIRS, no_spread); LEGACY_MIN_PAIRS: the rule of a study recorded before it (2 pairs, no spread check), which
    a report of that study reads it by (`from_tags`), so its verdicts read as it printed them. A study resumed by this
    code takes this code's rule: it withholds verdicts the old one gave, which never adds an error."""
    split: AlphaSplit | None = None
    """The split of `alpha` between the primary metric (`metric`, which alone decides when seeds stop) and the
    secondary metrics read beside it (adbs_lab/stats/continuation.py: AlphaSplit); `looks` then spend the primary's
    share. None: the primary metric has all of alpha and no secondary metric is read (a study recorded before the
    split, or one of fixed seeds)."""

    def __post_init__(self) -> None:
        for problem in (alpha_problem(self.alpha), delta_problem(self.delta)):
            if problem:
                raise ValueError(f"{self}: {problem}")
        if self.split is not None and not math.isclose(self.split.alpha, self.alpha, rel_tol=1e-12):
            raise ValueError(f"the split {self.split} sums to {self.split.alpha}, the policy's family error rate is "
                             f"{self.alpha}: the shares split the family's alpha")
        if self.looks is not None and self.looks.alpha != self.primary_alpha:
            raise ValueError(f"looks spend alpha={self.looks.alpha}, the policy's primary metric has {self.primary_alpha}"
                             f" of the family's {self.alpha}: one alpha for the family")
        if self.min_pairs not in (LEGACY_MIN_PAIRS, MIN_PAIRS):
            raise ValueError(f"min_pairs is {MIN_PAIRS} (or {LEGACY_MIN_PAIRS}: a study recorded before that rule), "
                             f"not {self.min_pairs}")
        if self.m is not None and self.m < 1:
            raise ValueError(f"a family holds at least one comparison, not m={self.m}")

    @property
    def primary_alpha(self) -> float:
        """The primary metric's share of alpha: what its looks (or its one look) spend."""
        return self.alpha if self.split is None else self.split.primary_alpha

    def secondary_looks(self, n_seeds: int) -> Looks | None:
        """The plan a secondary metric's intervals are read by, at the secondaries' share of alpha (each interval at
        α_k / (m · n_secondaries): AlphaSplit.secondary_m): the primary's looks at that share, or one look at the
        `n_seeds` run; None where no secondary metric is read (no split, or a split without secondaries)."""
        if self.split is None or self.split.n_secondaries == 0:
            return None
        if self.looks is None:
            return Looks.fixed(max(n_seeds, 1), self.split.secondary_alpha)
        return self.split.secondary(self.looks)

    def split_text(self, m: int) -> str:
        """The split of alpha as a note says it once, for a family of m comparisons (none without a split)."""
        s = self.split
        if s is None:
            return ""
        cs = f"{m} comparison{'s' * (m != 1)}"
        if self.looks is None:
            each, each_secondary = f"{s.primary_alpha:g} / {m}", f"{s.secondary_alpha:g} / {s.secondary_m(m)}"
        else:
            each = f"α_k / {m}, α_k the share of {s.primary_alpha:g} its look spends"
            each_secondary = (f"α_k / {s.secondary_m(m)}, α_k the share of {s.secondary_alpha:g} at the look where its "
                              f"comparison's deciding metric stopped")
        return (f"α = {self.alpha:g} split {s.primary_alpha:g} to the deciding metric (Bonferroni over {cs}: each "
                f"interval at {each}) and {s.secondary_alpha:g} over {s.n_secondaries} secondary metrics × {cs} "
                f"(Bonferroni: each interval at {each_secondary})")

    @property
    def level(self) -> float:
        """The family's confidence: every interval of the family covers together with at least this probability."""
        return 1.0 - self.alpha

    @property
    def level_text(self) -> str:
        """The level as the printed lines say it: "95%", "90%", "97.5%": to 4 decimals, rounded down (round(, 6):g
        printed α = 1e-7 as "at least 100%": the lines claim at least this level, never more than 1 - α)."""
        return f"{math.floor(100 * self.level * 1e4 + 1e-7) / 1e4:g}%"

    def guarantee(self) -> str:
        """What the verdicts' heading says they are: all true together with probability at least the level, or, for
        a smoke run, SMOKE_BANNER."""
        return SMOKE_BANNER if self.smoke else f"all true together with probability at least {self.level_text}"

    def wording(self, verdict: Label) -> str:
        """The verdict with δ written as the study's number of points: "equivalent within ±1 point"."""
        unit = "point" if self.delta == 1 else "points"
        return verdict.value.replace("δ", f"{self.delta:g} {unit}")

    def at_looks(self, looks: Looks | None) -> VerdictPolicy:
        """This policy read at planned `looks` (given any alpha: they spend this policy's primary share)."""
        return dataclasses.replace(self, looks=None if looks is None else dataclasses.replace(looks,
                                                                                            alpha=self.primary_alpha))

    def with_delta(self, delta: float) -> VerdictPolicy:
        return dataclasses.replace(self, delta=delta)

    def with_pairs(self, pairs: Sequence[Pair] | None, m: int | None = None) -> VerdictPolicy:
        return dataclasses.replace(self, pairs=None if pairs is None else tuple((str(a), str(b)) for a, b in pairs),
                                   m=m)

    def tags(self) -> dict[str, str]:
        """The study's MLflow tags of this policy: TAG (every field but the pairs) and PAIRS_TAG."""
        record = {"version": VERSION, **{f.name: getattr(self, f.name) for f in dataclasses.fields(self)
                                         if f.name != "pairs"}}
        record["looks"] = None if self.looks is None else dataclasses.asdict(self.looks)
        record["split"] = None if self.split is None else dataclasses.asdict(self.split)
        return {TAG: json.dumps(record), PAIRS_TAG: json.dumps([list(p) for p in self.pairs or ()])[:7500]}

    @classmethod
    def from_tags(cls, tags: Mapping[str, str]) -> VerdictPolicy:
        """The policy a study recorded (`tags`). A study recorded before TAG: δ from adbs.resolve, its looks from
        adbs.looks, alpha 0.05 (what every study ran at then); a value it lacks or cannot be read: the default."""
        pairs = _pairs(tags.get(PAIRS_TAG))
        try:
            record = json.loads(tags[TAG])
            if not isinstance(record, dict):
                raise ValueError(record)
        except (KeyError, ValueError, TypeError):
            record = _old(tags)
        known = {f.name for f in dataclasses.fields(cls)} - {"pairs"}
        values: dict[str, Any] = {"min_pairs": LEGACY_MIN_PAIRS,  # a record from before the rule: it read by the old
                                  **{k: v for k, v in record.items() if k in known}}
        try:
            looks = values.pop("looks", None)
            values["looks"] = None if looks is None else Looks(**looks)
            split = values.pop("split", None)
            values["split"] = None if split is None else AlphaSplit(**split)
            return cls(pairs=pairs, **values)
        except (TypeError, ValueError):  # a record this code cannot read: the defaults, with what it can
            return cls(pairs=pairs)


SMOKE_BANNER = ("smoke run: verdicts not meaningful (--smoke trains a tiny model for seconds to check the pipeline; "
                "run the study without --smoke for results)")
"""The heading of a smoke run's verdicts, in place of the family's guarantee."""

DEFAULT_POLICY = VerdictPolicy()
"""The policy of a study told nothing else (the default of the functions that take one)."""


def _pairs(text: str | None) -> tuple[Pair, ...] | None:
    try:
        return tuple((str(a), str(b)) for a, b in json.loads(text or ""))
    except (ValueError, TypeError):
        return None


def _old(tags: Mapping[str, str]) -> dict[str, Any]:
    """The policy of a study recorded before TAG, from its tags adbs.resolve and adbs.looks."""
    out: dict[str, Any] = {}
    try:
        out["delta"] = float(tags[OLD_DELTA_TAG])
    except (KeyError, ValueError):
        pass
    try:
        looks = json.loads(tags[OLD_LOOKS_TAG])
        Looks(**looks)
        out["looks"], out["alpha"] = looks, looks.get("alpha", DEFAULT_ALPHA)
    except (KeyError, ValueError, TypeError):
        pass
    return out


def combined(policies: Sequence[VerdictPolicy]) -> VerdictPolicy:
    """The policy of one table over several studies (studies/report.py A B): the smallest alpha and the smallest δ
    of theirs, one look at the seeds run (their looks are each study's own); the split of the study with that alpha
    where every study has one (its secondary metrics read beside the table's), else none, as before the split; the
    caller gives the pairs."""
    least = min(policies, key=lambda p: p.alpha, default=None)
    split = least.split if least is not None and all(p.split is not None for p in policies) else None
    return VerdictPolicy(alpha=DEFAULT_ALPHA if least is None else least.alpha,
                         delta=min((p.delta for p in policies), default=DEFAULT_DELTA),
                         smoke=any(p.smoke for p in policies),  # a smoke run among them: not meaningful together
                         split=split)
