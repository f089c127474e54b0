"""What a --seeds auto searcher held before the seed policies (adbs_lab/search/seeds/), kept so that a study an
earlier version started resumes: Ray Tune pickled the searcher (adbs_lab/search/searcher.py: StudySearch) with this
plan, by this module's path. adbs_lab/search/old_state.py turns it into the policy that takes its place
(adbs_lab/search/seeds/until_resolved.py: UntilResolved); nothing else reads it. It can go once no study started by
the code of commit 0f7bd56 or earlier is left to resume (resuming one then refuses in one line naming that code:
adbs_lab/driver/resume.py: moved_message)."""

from __future__ import annotations

from dataclasses import dataclass

from adbs_lab.stats.looks import Looks

__all__ = ["AutoPlan"]


@dataclass(frozen=True)
class AutoPlan:
    """The looks, rows and comparisons of a --seeds auto study, as its searcher pickled them."""

    looks: Looks
    rows: tuple[str, ...]
    pairs: tuple[tuple[str, str], ...]
    delta: float
    label_keys: tuple[str, ...]
