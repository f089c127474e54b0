"""Attack on --race-top's refusal (adbs_lab/driver/options.py: _check_seeds): it says what is wrong with the command
typed, not a rule the value already meets ('--race-top 2 ... is at least 2' when --seeds auto is what is missing)."""

from __future__ import annotations

import pytest

from adbs_lab.driver import options
from adbs_lab.driver.options import StudyInputError

SAMPLED = options.Defaults(pruner="none", pruner_when=(("num_samples", "median"),), sample_on_request=True,
                           seeds=(0, 1, 2), smoke_seeds=(0,), seeds_when=(("num_samples", (0,)),))


def _refusal(*flags: str) -> str:
    with pytest.raises(StudyInputError) as e:
        options.parse("t", SAMPLED, argv=["--smoke", *flags, "--gpus-per-trial", "0"])[0].check()
    return str(e.value)


def test_race_top_without_seeds_auto_names_the_missing_flag_only():
    said = _refusal("--num-samples", "3", "--race-top", "2")
    assert "--seeds auto" in said and "at least 2" not in said, said


def test_race_top_below_two_names_the_minimum_only():
    said = _refusal("--num-samples", "3", "--seeds", "auto", "--race-top", "1")
    assert "at least 2" in said and "pass --seeds auto too" not in said, said
