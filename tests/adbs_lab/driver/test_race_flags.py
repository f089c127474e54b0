"""--seeds auto on a sampled search (a race, adbs_lab/search/seeds/race.py) as the study typed once holds it, its trial
count, and the combinations refused with one line and exit 2 before anything starts (no Ray here)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from adbs.exits import REFUSED
from adbs_lab.driver import options, preflight
from adbs_lab.driver.options import StudyInputError
from adbs_lab.search.seeds.fixed import SeedList
from adbs_lab.search.seeds.race import SampledRace
from studies import alpha_sweep
from tests.helpers.scripts import in_process

REPO = Path(__file__).resolve().parents[3]


SAMPLED = options.Defaults(pruner="none", pruner_when=(("num_samples", "median"),), sample_on_request=True,
                           seeds=(0, 1, 2), smoke_seeds=(0,), seeds_when=(("num_samples", (0,)),))
"""studies/alpha_sweep.py's defaults: --num-samples on request, one seed per sample."""


def _opts(*flags: str) -> options.StudyOptions:
    return options.parse("t", SAMPLED, argv=[*flags, "--gpus-per-trial", "0"])[0]


def test_a_sampled_search_with_seeds_auto_races_its_best_three_up_to_the_cap():
    p = preflight.study(*alpha_sweep.plan(_opts("--smoke", "--num-samples", "4", "--seeds", "auto",
                                                "--max-seeds", "6")))
    race = p.seeding
    assert isinstance(race, SampledRace) and race.checked_seeds() == [0]
    assert (race.top, race.samples, race.verdicts.m, race.looks.sizes, race.label_keys) == (3, 4, 3, (3, 5, 6),
                                                                                             ("alpha",))
    assert p.total == 4 + 3 * 6 and p.n_configs == 4
    two = preflight.study(*alpha_sweep.plan(_opts("--smoke", "--num-samples", "4", "--seeds", "auto",
                                                  "--race-top", "2")))
    assert isinstance(two.seeding, SampledRace) and two.seeding.top == 2 and two.seeding.verdicts.m == 1
    assert two.total == 4 + 2 * 8


def test_a_sampled_search_without_seeds_auto_is_as_before():
    p = preflight.study(*alpha_sweep.plan(_opts("--smoke", "--num-samples", "4")))
    raced = preflight.study(*alpha_sweep.plan(_opts("--smoke", "--num-samples", "4", "--seeds", "auto")))
    assert p.seeding == SeedList((0,)) and p.total == 4
    assert p.fingerprint != raced.fingerprint  # --resume never continues one as the other


@pytest.mark.parametrize("flags,says", [
    (("--num-samples", "1", "--seeds", "auto"), "--num-samples 1 gives the race one configuration"),
    (("--num-samples", "3", "--seeds", "auto", "--objectives", "val_last_base_acc:max", "val_last_novel_acc:max"),
     "a race ranks configurations on one"),
    (("--num-samples", "3", "--race-top", "2"), "--race-top 2: it sizes the race of --seeds auto"),
    (("--num-samples", "3", "--seeds", "auto", "--race-top", "1"), "is at least 2"),
    (("--seeds", "auto", "--race-top", "2"), "--race-top 2: this run of alpha_sweep is a grid"),
])
def test_bad_race_combinations_are_refused_before_anything_starts(flags, says):
    with pytest.raises(StudyInputError) as e:
        preflight.study(*alpha_sweep.plan(_opts("--smoke", *flags)))
    assert says in str(e.value)


def test_a_refused_race_exits_2_with_one_line(capsys, tmp_path):
    r = in_process(capsys, [sys.executable, str(REPO / "studies" / "alpha_sweep.py"), "--smoke", "--num-samples", "1",
                            "--seeds", "auto", "--dry-run", "--storage", str(tmp_path)], cwd=REPO)
    assert r.returncode == REFUSED and r.stderr.strip().count("\n") == 0, r.stderr
    assert "--num-samples 1 gives the race one configuration" in r.stderr
