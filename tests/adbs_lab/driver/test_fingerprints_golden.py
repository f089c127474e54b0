"""A study's fingerprint (study.json: what makes two runs the same study, which --resume checks) is the one the code
that started it recorded: recorded at commit 0f7bd56 for ten studies (fixed seed lists, --seeds auto's looks, a race,
a --name and a --set), each typed here as that commit's preflight typed it. A study started before a refactoring
continues with --resume only if its fingerprint did not move (a grid's --seeds auto: the fingerprint of the plan it
started with, which --resume looks for beside the new design's)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from adbs_lab.driver import options, preflight
from studies import ablation, alpha_sweep, boundary, knobs, kshot_grid

pytestmark = pytest.mark.slow  # ten preflights, each checking its configurations' data: about 20 s

RECORDED = json.loads((Path(__file__).parent / "data" / "fingerprints.json").read_text())
PLANS = {"ablation": ablation.plan, "alpha_sweep": alpha_sweep.plan, "boundary": boundary.plan, "knobs": knobs.plan,
         "kshot_grid": kshot_grid.plan}


@pytest.mark.parametrize("command", sorted(RECORDED))
def test_the_fingerprint_is_the_one_recorded(command, tmp_path):
    study, *flags = command.split()
    opts = options.parse("t", options.Defaults(sample_on_request=True),
                         argv=[*flags, "--gpus-per-trial", "0", "--storage", str(tmp_path)])[0]
    p = preflight.study(*PLANS[study](opts))
    if opts.seeds_auto and p.is_grid:
        # a grid's --seeds auto now runs the deciding design (a horizon, the split of α): a new study, a new
        # fingerprint; one started before is found by its old plan's, which --resume matches (preflight.preflight)
        assert p.fingerprint != RECORDED[command]
        p = preflight.study(*PLANS[study](opts), legacy=True)
    assert p.fingerprint == RECORDED[command]
