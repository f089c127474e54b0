"""A fixed list of seeds (--seeds 0 1 2, every study's default): each configuration runs every seed of the list, one
Tune trial each, and Optuna is told the mean over them once they have all ended; Ray Tune's num_samples (the
configurations times the seeds) ends the study."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from adbs_lab.search.seeds.policy import Ended, Look, Opening, Standing, TableDecides

__all__ = ["SeedList"]


@dataclass(frozen=True)
class SeedList(TableDecides):
    """Every configuration over `seeds` (adbs_lab/search/seeds/policy.py: SeedPolicy)."""

    seeds: tuple[int, ...]

    def checked_seeds(self) -> list[int]:
        return list(self.seeds)

    def trials(self, n_configs: int) -> tuple[int, int]:
        return n_configs * len(self.seeds), n_configs * len(self.seeds)

    def identity(self) -> str | None:
        return None  # a study of a seed list keeps the fingerprint it had before seed policies existed

    def size_text(self, n_configs: int, dry: bool = False) -> str:
        total = self.trials(n_configs)[1]
        if dry:
            return f"{n_configs} configuration(s) x {len(self.seeds)} seed(s) = {total} trials"
        return f"{total} trials ({n_configs} configurations x {len(self.seeds)} seeds)"

    def start_line(self, n_configs: int) -> str | None:
        return None

    def description(self, n_configs: int) -> str:
        return f"{self.trials(n_configs)[1]} trials over seeds {', '.join(map(str, self.seeds))}"

    def params(self) -> dict[str, str]:
        return {}

    def opening(self, standing: Standing, opened: int) -> Opening | str | None:
        return Opening(list(self.seeds))

    def adopted(self, copy: bool) -> Opening:
        return Opening(list(self.seeds))

    copies = False
    """No configuration is a copy of another."""

    def label(self, params: Mapping[str, Any]) -> str | None:
        return None

    def value(self, state: str, result: Mapping[str, Any] | None, values: Sequence[float] | None) -> float:
        return math.nan

    def standing(self, ended: Sequence[Ended]) -> Standing:
        return Standing()

    def wanted(self, standing: Standing) -> dict[str, list[int]]:
        return {}

    def look_line(self, look: Look) -> str:
        raise AssertionError("a seed list takes no looks")

    def end_line(self, standing: Standing) -> str | None:
        return None

    def unfinished(self, standing: Standing, interrupted: int, not_started: int) -> int:
        return interrupted + not_started
