"""A --smoke run's verdicts are printed under "smoke run: verdicts not meaningful", never under the family's
guarantee (adbs_lab/stats/policy.py: VerdictPolicy.smoke, SMOKE_BANNER): its numbers come from a tiny model trained
for seconds. The policy records it, so studies/report.py's reading of a smoke study says the same, and a table
across studies with a smoke one among them too."""

from __future__ import annotations

import pytest

from adbs_lab.driver import options, preflight
from adbs_lab.results import comparisons as cmp
from adbs_lab.stats.policy import SMOKE_BANNER, VerdictPolicy, combined
from studies import ablation, alpha_sweep
from tests.helpers.frames import study_frames

GUARANTEE = "all true together with probability at least 95%"


def _opts(*flags: str) -> options.StudyOptions:
    opts, _ = options.parse(options.parser("t"), argv=list(flags))
    return opts


@pytest.mark.parametrize("study, flags", [(ablation, ()), (ablation, ("--seeds", "auto", "--max-seeds", "4")),
                                          (alpha_sweep, ())])
def test_a_smoke_run_carries_it_in_its_verdict_policy_and_a_real_one_does_not(tmp_path, study, flags):
    for smoke in (True, False):
        argv = [*(["--smoke"] if smoke else []), "--storage", str(tmp_path), *flags]
        p = preflight.study(*study.plan(_opts(*argv)))
        assert p.verdicts.smoke is smoke and (p.verdicts.guarantee() == SMOKE_BANNER) is smoke
        assert (GUARANTEE in p.verdicts.guarantee()) is not smoke


@pytest.mark.parametrize("smoke", [True, False])
def test_the_tables_verdicts_open_under_the_smoke_banner_or_the_guarantee(smoke):
    s, t = study_frames({"baseline": [50, 54, 47], "adb": [46, 51, 44], "adb+ic": [47, 51.5, 44.2]})
    compared = cmp.compare_rows(s, [("adb", "baseline"), ("adb+ic", "baseline")], trials=t,
                                policy=VerdictPolicy(smoke=smoke))
    head = cmp.opening(compared)[0]
    assert (SMOKE_BANNER in head) is smoke and (GUARANTEE in head) is not smoke, head


def test_the_recorded_policy_and_a_table_across_studies_keep_it():
    smoke = VerdictPolicy(smoke=True, pairs=(("a", "b"),))
    assert VerdictPolicy.from_tags(smoke.tags()).smoke and not VerdictPolicy.from_tags({}).smoke
    from adbs_lab.stats.looks import Looks

    raced = smoke.at_looks(Looks(max_seeds=3)).with_pairs((), m=1)  # a race's policy, as preflight.seed_policy makes it
    assert raced.smoke and raced.guarantee() == SMOKE_BANNER
    assert combined([VerdictPolicy(), smoke]).smoke and not combined([VerdictPolicy(), VerdictPolicy()]).smoke
