"""What a seed policy is: the protocol the searcher, the preflight and the summary ask (`SeedPolicy`), and the one
vocabulary of its decisions: a trial that ended (`Ended`), one look (`Look`), where the seeds stand (`Standing`), a
new Optuna trial the searcher opens (`Opening`).

Three policies implement it: a fixed list of seeds (adbs_lab/search/seeds/fixed.py), looks over a grid's rows until
their comparisons are resolved (until_resolved.py), and a race of a sampled search's best (race.py). The searcher
(adbs_lab/search/searcher.py: StudySearch) asks the policy which seeds a configuration runs, hands them out, records
each trial that ends and tells Optuna a configuration's value when the policy is done with it; it names no policy.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar, Mapping, Protocol, Sequence

from adbs_lab.stats.verdicts import Verdict

__all__ = ["FINISHED", "Ended", "Look", "Standing", "Opening", "SeedPolicy", "by_target"]

FINISHED = "finished"
"""`SeedPolicy.opening`'s answer when the study runs no more trials (the searcher tells Ray Tune so)."""


@dataclass(frozen=True)
class Ended:
    """One trial that ended, as a policy reads it."""

    unit: str
    """What the policy decides over: a grid's row, or the configuration's label in a race."""
    seed: int
    state: str
    """How it ended (adbs_lab/records/metrics_keys.py: COMPLETE, PRUNED, DIVERGED, FAILED)."""
    value: float
    """The policy's value of it (NaN unless COMPLETE): the last session's test accuracy of a row, or a race's
    validation objective."""


@dataclass(frozen=True)
class Look:
    """One look, taken after a complete batch."""

    k: int
    n: int
    """Seeds of the largest row at this look, or of a race's leader (its fresh seeds)."""
    resolved: int
    """Comparisons resolved at this look or before."""
    m: int
    """Comparisons read at it."""
    next: dict[str, int]
    """{unit: the seeds it runs to} for the next batch; empty when the study stops here."""
    reason: str
    """adbs_lab/stats/sequential.py: ALL_RESOLVED, CAP, PAUSE or MORE."""
    leader: str | None = None
    """A race's leader at this look (every other contender is compared with it)."""
    cannot_lead: tuple[tuple[str, int, int], ...] = ()
    """(contender, finite seeds, the look's seeds) of each contender of a race that could not lead this look: fewer
    finite seeds than the look's (adbs_lab/search/seeds/engine.py: LeaderPairs)."""


@dataclass(frozen=True)
class Standing:
    """Where the seeds stand, replayed from the trials that ended: a pure function of them, so the searcher, a
    resumed searcher and the summary reach the same one."""

    targets: dict[str, int] = field(default_factory=dict)
    """{unit: the seeds it runs} as of the last look (the first batch before any)."""
    looks: tuple[Look, ...] = ()
    done: bool = False
    """The last look stopped the study: nothing more to run."""
    reason: str = ""
    """Why it stopped (ALL_RESOLVED, CAP or PAUSE); '' while it runs."""
    missing: dict[str, list[int]] = field(default_factory=dict)
    """{unit: seeds below its target that have not ended}: the rest of the batch under way."""
    verdicts: dict[str, Verdict] = field(default_factory=dict)
    """A race's verdicts against its leader, as of the last look."""
    leader: str | None = None
    contenders: tuple[str, ...] = ()
    """A race's contenders, best on the screening seed first."""
    screened: bool = True
    """A race: every screening trial has ended (the contenders are known)."""
    seed_of: tuple[int, ...] = ()
    """The seed numbers of the units' seeds in order (a race's fresh seeds 1, 2, ...; a grid's 0, 1, ...)."""

    def final(self, unit: str) -> bool:
        """Whether `unit` runs no more seeds: the study stopped, or the last look, taken after the unit's seeds had
        all ended, did not extend it (a comparison once resolved stays resolved)."""
        return self.done or (bool(self.looks) and unit not in self.missing and unit not in self.looks[-1].next)

    def seeds(self, unit: str) -> list[int]:
        """The seeds `unit` runs as of now (its target's first seed numbers)."""
        return list(self.seed_of[:self.targets.get(unit, 0)])


@dataclass(frozen=True)
class Opening:
    """A new Optuna trial the searcher opens: asked (Optuna samples it, or the grid gives the next point), or a copy
    of a configuration already screened (a race's contender)."""

    seeds: list[int]
    final: bool = False
    """True: Optuna is told its value when the policy's standing makes its unit final (a row of looks, a race's
    contender); False: once its seeds have ended (a seed list, a race's screening)."""


class SeedPolicy(Protocol):
    """Which seeds a study's configurations run (module docstring)."""

    chooses: ClassVar[bool]
    """Whether the policy itself chooses a configuration by verdicts (a race's leader), so that a study without a
    table's comparisons still names a best (adbs_lab/results/best.py: withheld)."""

    # what the preflight, the start line, the dry run and the tracker ask
    def checked_seeds(self) -> list[int]:
        """The seeds the preflight checks configurations on (the most any configuration may run)."""

    def trials(self, n_configs: int) -> tuple[int, int]:
        """(fewest, most) trials of `n_configs` configurations."""

    def identity(self) -> str | None:
        """The policy's part of the study's fingerprint (None: a seed list's, which has none)."""

    def size_text(self, n_configs: int, dry: bool = False) -> str:
        """"12 trials (4 configurations x 3 seeds)", or the range a policy's looks may run (`dry`: as the dry run
        says it)."""

    def start_line(self, n_configs: int) -> str | None:
        """The line under the study's start line (the looks planned), or None."""

    def description(self, n_configs: int) -> str:
        """The seeds sentence of the MLflow parent run's description."""

    def params(self) -> dict[str, str]:
        """The parent run's study.* params of the policy."""

    # what the searcher asks
    def opening(self, standing: Standing, opened: int) -> Opening | str | None:
        """A new trial to ask (Opening), FINISHED, or None (wait: a batch under way must end first); `opened`: the
        configurations asked so far (copies not counted)."""

    def adopted(self, copy: bool) -> Opening:
        """The seeds and kind of a trial a killed driver left behind (adbs_lab/search/orphans.py) that records no
        seeds of its own: a copy (a race's contender) or an asked one."""

    def label(self, params: Mapping[str, Any]) -> str | None:
        """The unit a configuration's trials record under (None: the policy records nothing)."""

    def value(self, state: str, result: Mapping[str, Any] | None, values: Sequence[float] | None) -> float:
        """A trial's value for the policy; `values`: its objectives' (None unless complete)."""

    def standing(self, ended: Sequence[Ended]) -> Standing:
        """Where the seeds stand after `ended` (records in the order they ended)."""

    def wanted(self, standing: Standing) -> dict[str, list[int]]:
        """{unit: the seeds it runs as of now}; a unit without a configuration of its own is opened as a copy."""

    copies: bool
    """Whether a unit the standing names without a configuration of its own runs as a copy of its screened one."""

    def look_line(self, look: Look) -> str:
        """The line a look prints as it happens."""

    # what the summary asks
    def end_line(self, standing: Standing) -> str | None:
        """Why the seeds stopped (or that the study stopped before its next look), or None."""

    def unfinished(self, standing: Standing, interrupted: int, not_started: int) -> int:
        """Trials left to run when the study ended: `interrupted` began and did not end, `not_started` of its most
        never began."""

    def verdict_lines(self, standing: Standing, objective: str) -> list[str] | None:
        """The policy's own verdicts, one sentence each (a race's against its leader), or None where the table's
        verdicts are the study's."""

    def notes(self, standing: Standing, objective: str) -> list[str]:
        """Lines above the study's tables (a race's verdicts and its leader's post-selection figures)."""

    def chosen(self, standing: Standing) -> dict[str, Any] | None:
        """best_config.json's keys of the configuration the policy chose (a race's leader), or None where the table
        ranks them; `standing.leader` names it."""


class TableDecides:
    """What a seed policy whose study's table makes the verdicts and ranks the configurations says of its own: no
    verdicts, no notes, no chosen configuration (a seed list, --seeds auto on a grid; a race chooses its leader)."""

    chooses: ClassVar[bool] = False

    def verdict_lines(self, standing: Standing, objective: str) -> list[str] | None:
        return None  # no verdicts of its own: the table's are the study's

    def notes(self, standing: Standing, objective: str) -> list[str]:
        return []

    def chosen(self, standing: Standing) -> dict[str, Any] | None:
        return None  # the table ranks the configurations (best_config.json)


def by_target(nxt: Mapping[str, int]) -> list[tuple[int, list[str]]]:
    """The next batch {unit: seeds it runs to} grouped by that target, smallest first (units in their given order):
    what a look line names after "next:"."""
    groups: dict[int, list[str]] = {}
    for unit, n in nxt.items():
        groups.setdefault(n, []).append(unit)
    return sorted(groups.items())
