"""--more-seeds: a finished study whose comparisons were left open at its pause takes the planned looks after it.

A study that decides (adbs_lab/search/seeds/until_resolved.py, the design of adbs_lab/stats/continuation.py) plans
its looks up to a horizon before its first seed runs, with a share of its error rate kept for the looks after its
cap, and pauses at the cap. Coming back with more seeds continues that plan: the same folder, MLflow parent run and
Optuna study, the next unused seeds, up to the next pause (continuation.pauses: the cap, the midpoint, the horizon),
each look at the α_k the plan fixed for it. So every verdict the study and its continuations print is one of the
plan's intervals, and all of them are true together with probability at least 1 - α (docs/statistics.md,
"Continuing a study"). A new run over the same seeds under another name would read those seeds' intervals at the full
α again: it is a second family, which the guarantee does not cover together with the first.

Refused before anything starts: a study whose plan has no looks after its cap (a seed list, a --seeds auto study
started before plans had a horizon), one at its horizon ("inconclusive at the horizon": no α is left for more
seeds), one whose comparisons were all resolved, and one whose last run was interrupted (--resume finishes it
first). The pause each run took is recorded in study.json (`PAUSE_KEY`), so the next continuation takes the next.
"""

from __future__ import annotations

import dataclasses

from adbs_lab.driver.options import StudyInputError
from adbs_lab.driver.prepared import Study
from adbs_lab.driver.resume import json_object
from adbs_lab.search.seeds.until_resolved import UntilResolved
from adbs_lab.stats.continuation import next_pause, pauses
from adbs_lab.stats.sequential import PAUSE
from adbs_lab.stats.verdicts import Label

__all__ = ["PAUSE_KEY", "continued", "paused_at", "resumed"]

PAUSE_KEY = "pause"
"""study.json: the seeds per row the study's last run paused at (absent: its cap, or a study without looks)."""


def paused_at(p: Study) -> int:
    """The pause the study's last run took (study.json), its cap where none is recorded (a study started before the
    record); StudyInputError where the record is not one of the plan's pauses (a hand-edited study.json), which would
    replay the study at another pause than its trials ran to."""
    assert isinstance(p.seeding, UntilResolved)
    held = json_object(p.where.read_text("study.json"), p.where.display("study.json"))
    if PAUSE_KEY not in held:
        return p.seeding.looks.max_seeds
    got, allowed = held[PAUSE_KEY], pauses(p.seeding.looks)
    if isinstance(got, bool) or not isinstance(got, int) or got not in allowed:
        raise StudyInputError(f"{p.where.display('study.json')}: its {PAUSE_KEY!r} is {got!r}, not one of the plan's "
                              f"pauses ({', '.join(map(str, allowed))} seeds a row): the study records there where its "
                              "last run stopped adding seeds; restore the value it wrote (the largest number of seeds a "
                              "row of an open comparison ran, if that is one of them)")
    return got


def resumed(p: Study) -> Study:
    """A study resumed (--resume, or --more-seeds before it takes the next pause) at the pause its last run took, as
    study.json records it: an interrupted continuation finishes the looks it had begun."""
    if not isinstance(p.seeding, UntilResolved) or p.seeding.looks.horizon is None:
        return p
    seeding = dataclasses.replace(p.seeding, pause=paused_at(p))
    return dataclasses.replace(p, seeding=seeding, total=seeding.trials(p.n_configs)[1])


def continued(p: Study, standing_of) -> Study:
    """The study `p` (its preflight, as --resume types it) continued to its next pause; StudyInputError when there
    is nothing to continue (module docstring). `standing_of(p)`: the standing of the study's recorded trials under
    `p`'s seed policy, or None where its tables cannot be read here (an object store: the run reads them)."""
    seeding = p.seeding
    if not isinstance(seeding, UntilResolved) or seeding.looks.horizon is None:
        raise StudyInputError(
            f"--more-seeds: the study in {p.where} has no planned looks after its last seeds (a seed list, or a "
            "--seeds auto study started before plans kept looks for continuations), so more seeds would read its "
            "comparisons at an error rate it has already spent; start a new study with --name NAME")
    if p.where.remote:
        raise StudyInputError(f"--more-seeds: the study is in an object store ({p.where}); a continuation reopens "
                              "Ray Tune's saved experiment in place, which needs a local or shared folder as "
                              "--storage: copy the study's folder to one and continue it there")
    before = seeding.stop  # `resumed`: the pause of its last run
    standing = standing_of(p)
    if standing is not None and not standing.done:
        raise StudyInputError(f"--more-seeds: the last run of the study in {p.where} stopped before its seeds reached "
                              f"{before} per row; finish it first with --resume (the same command with --resume "
                              "instead of --more-seeds)")
    if standing is not None and standing.reason != PAUSE:
        open_ = standing.looks[-1].m - standing.looks[-1].resolved if standing.looks else 0
        why = (f"every comparison was resolved at {max(standing.targets.values(), default=0)} seeds" if not open_ else
               f"{open_} comparison{'s' * (open_ != 1)} reached the plan's last look ({seeding.looks.last} seeds) "
               "inconclusive: its error rate is spent")
        raise StudyInputError(f"--more-seeds: nothing to continue in {p.where}: {why}")
    nxt = next_pause(seeding.looks, before)
    if nxt is None:
        raise StudyInputError(f"--more-seeds: the study in {p.where} is at its horizon of {seeding.looks.last} seeds: "
                              "its open comparisons are inconclusive at the horizon (the plan has no error rate left "
                              "for more seeds)")
    more = dataclasses.replace(seeding, pause=nxt)
    total = more.trials(p.n_configs)[1]
    if standing is not None:  # at most: the trials run, and the rows of the open comparisons to the next pause
        pairs = dict(zip((f"{a} vs {b}" for a, b in seeding.verdicts.pairs or ()), seeding.verdicts.pairs or ()))
        rows = {row for name, v in standing.verdicts.items() if v.verdict is Label.NOT_RESOLVED
                for row in pairs.get(name, ())}
        total = min(total, sum(standing.targets.values()) + len(rows) * (nxt - before))
    return dataclasses.replace(p, seeding=more, total=total)
