"""studies/knobs.py --full-space: the full SPACE on the CPU presets, where every sample trains its own base session,
and so the auto pruner by default (the CPU space keeps the pruner off: cached base sessions replay one curve)."""

from studies import knobs, times
from search_spaces import knobs as spaces


def test_full_space_searches_every_knob_on_the_cpu_and_prunes_by_default():
    opts, full = knobs.parse(["--full-space"])
    assert full and opts.pruner == "auto"
    plan, _ = knobs.plan(opts, full)
    assert plan.space is spaces.SPACE and plan.space_source.endswith(":SPACE")
    # every sample trains its own base session: the start line's estimate is an alpha_sweep trial's, not a cached one's
    assert plan.est_trial_s == times.trial_s("alpha_sweep") > knobs.plan(knobs.parse([])[0])[0].est_trial_s


def test_without_it_the_cpu_space_and_no_pruner_and_a_given_pruner_wins():
    opts, full = knobs.parse([])
    assert not full and opts.pruner == "none"
    assert knobs.plan(opts, full)[0].space is spaces.CPU_SPACE
    assert knobs.parse(["--full-space", "--pruner", "median"])[0].pruner == "median"
