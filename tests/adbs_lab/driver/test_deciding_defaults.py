"""The studies that compare rows decide at their defaults: without --seeds they add seeds until their comparisons are
resolved (adbs_lab/driver/options.py: Defaults.decide; adbs_lab/driver/preflight.py: deciding), by the design whose
power and error rates docs/statistics.md simulates (adbs_lab/stats/continuation.py: design): α 0.05 split 0.04 for
last-session accuracy and 0.01 for the secondary metrics, looks at 3, 5, 7 and the cap its family size needs, a
quarter of the primary's α kept for continuations up to twice the cap; this invocation pauses at the cap.
`--seeds 0 1 2` stays a fixed design, --smoke one seed, and a run that compares no rows its fixed list."""

from __future__ import annotations

import json
import math

import pytest

from adbs_lab.driver import options, preflight
from adbs_lab.records import metrics_keys as K
from adbs_lab.search.seeds.fixed import SeedList
from adbs_lab.search.seeds.policy import Ended
from adbs_lab.search.seeds.until_resolved import UntilResolved
from adbs_lab.stats.continuation import CAP_FOR_FAMILY, AlphaSplit, design
from adbs_lab.stats.looks import Looks, continuable
from adbs_lab.stats.policy import VerdictPolicy
from adbs_lab.stats.sequential import CAP, PAUSE
from studies import ablation, alpha_sweep, boundary, kshot_grid

STUDIES = {"ablation": ablation, "alpha_sweep": alpha_sweep, "boundary": boundary, "kshot_grid": kshot_grid}


def _opts(study, *flags: str) -> options.StudyOptions:
    opts, _ = options.parse(options.parser("t", study.DEFAULTS), argv=list(flags))
    return opts


@pytest.mark.parametrize("name", list(STUDIES))
def test_without_seeds_a_study_that_compares_rows_adds_seeds_by_the_deciding_design(tmp_path, name):
    study = STUDIES[name]
    opts = _opts(study, "--storage", str(tmp_path))
    p = preflight.study(*study.plan(opts))
    assert isinstance(p.seeding, UntilResolved) and opts.seeds_default
    m = len(p.verdicts.pairs or ())
    assert m >= 1 and p.verdicts.split == AlphaSplit() and p.verdicts.alpha == 0.05
    assert p.verdicts.looks == design(m) if m <= CAP_FOR_FAMILY[-1][0] else continuable(11, alpha=0.04)
    looks = p.verdicts.looks
    assert looks.alpha == 0.04 and looks.horizon == 2 * looks.max_seeds and looks.reserve == 0.25
    assert p.seeding.trials(p.n_configs) == (3 * p.n_configs, looks.max_seeds * p.n_configs)  # pauses at the cap
    line = p.seeding.start_line(p.n_configs)
    assert f"up to {looks.max_seeds} (looks at 3, 5, 7" in line and f"continuations up to {looks.horizon} seeds" in line
    assert "0.04 for last-session accuracy" in line, line


@pytest.mark.parametrize("flags, seeds", [(("--seeds", "0", "1", "2"), (0, 1, 2)), (("--smoke",), (0,)),
                                          (("--seeds", "4"), (4,))])
def test_a_seed_list_and_a_smoke_run_stay_fixed_designs(tmp_path, flags, seeds):
    opts = _opts(ablation, "--storage", str(tmp_path), *flags)
    p = preflight.study(*ablation.plan(opts))
    assert p.seeding == SeedList(seeds) and not opts.seeds_auto and not opts.seeds_default
    assert p.verdicts.split is None and p.verdicts.looks is None  # read as before: one look, all of α on the primary


def test_seeds_auto_typed_is_the_same_design_and_max_seeds_sets_its_cap(tmp_path):
    typed = preflight.study(*ablation.plan(_opts(ablation, "--storage", str(tmp_path), "--seeds", "auto")))
    default = preflight.study(*ablation.plan(_opts(ablation, "--storage", str(tmp_path))))
    assert typed.verdicts == default.verdicts and typed.fingerprint == default.fingerprint
    capped = preflight.study(*ablation.plan(_opts(ablation, "--storage", str(tmp_path), "--max-seeds", "5")))
    assert capped.verdicts.looks == continuable(cap=5, alpha=0.04) and capped.seeding.trials(3) == (9, 15)


def test_a_run_that_compares_no_rows_runs_the_fixed_list(tmp_path):
    opts = _opts(kshot_grid, "--storage", str(tmp_path))
    p = preflight.study(*kshot_grid.plan(opts, variants=["adb+ic"]))  # the paper's figures: no baseline, no verdicts
    assert p.seeding == SeedList((0, 1, 2)) and not p.verdicts.pairs
    with pytest.raises(options.StudyInputError, match="compares no rows"):  # asked for by name, it is refused
        preflight.study(*kshot_grid.plan(_opts(kshot_grid, "--storage", str(tmp_path), "--seeds", "auto"),
                                         variants=["adb+ic"]))


def test_a_sampled_search_keeps_its_one_seed_each():
    opts = _opts(alpha_sweep, "--num-samples", "4")
    assert opts.seeds == (0,) and not opts.seeds_auto and not opts.seeds_default


def test_the_help_states_the_caps_the_design_uses():
    text = options.parser("t", ablation.DEFAULTS).format_help()
    flat = " ".join(text.split())
    caps = dict(CAP_FOR_FAMILY)
    assert f"3 to {caps[3]} per row for up to 3 comparisons ({caps[12]} for up to 12, {caps[20]} for up to 20)" in flat
    assert "default: auto" in flat


def test_the_default_cap_of_each_family_size():
    for m, cap in [(1, 8), (3, 8), (4, 9), (12, 9), (13, 11), (20, 11)]:
        looks = preflight.deciding(VerdictPolicy(pairs=tuple((f"r{i}", "b") for i in range(m)))).looks
        assert looks is not None and looks.max_seeds == cap and looks.horizon == 2 * cap
    big = preflight.deciding(VerdictPolicy(pairs=tuple((f"r{i}", "b") for i in range(25)))).looks
    assert big == continuable(cap=11, alpha=0.04)  # beyond the simulated sizes: the largest simulated cap


def _ended(values: dict[str, list[float]]) -> list[Ended]:
    return [Ended(row, seed, K.COMPLETE, v) for row, vs in values.items() for seed, v in enumerate(vs)]


def _policy(pause: int | None = None) -> UntilResolved:
    verdicts = preflight.deciding(VerdictPolicy(pairs=(("a", "b"),)))
    return UntilResolved(verdicts, ("a", "b"), ("row",), pause)


def test_an_open_comparison_pauses_at_the_cap_and_says_more_seeds_would_help():
    diffs = [1.0 + x for x in (2.1, -1.7, 0.4, -2.6, 1.9, -0.8, 2.4, -1.2)]  # mean 1.06, SD 1.9: open at 8
    trials = _ended({"a": [50 + d for d in diffs], "b": [50.0] * 8})
    policy = _policy()
    s = policy.standing(trials)
    assert s.done and s.reason == PAUSE and max(s.targets.values()) == 8, s
    assert "pause: 8 seeds are this run's most" in policy.look_line(s.looks[-1])
    assert "more seeds would help them: the plan keeps looks for them up to 16 seeds" in policy.end_line(s)
    # the same trials read by an invocation that may go to the horizon: it asks for seeds 8 and 9 next
    further = _policy(pause=16).standing(trials)
    assert not further.done and further.missing == {"a": [8, 9], "b": [8, 9]}


def test_at_the_horizon_an_open_comparison_is_inconclusive():
    diffs = [1.0 + x for x in (2.1, -1.7, 0.4, -2.6, 1.9, -0.8, 2.4, -1.2, 1.5, -2.2, 0.9, -1.4, 2.6, -0.3, -1.9, 0.3)]
    policy = _policy(pause=16)
    s = policy.standing(_ended({"a": [50 + d for d in diffs], "b": [50.0] * 16}))
    assert s.done and s.reason == CAP and max(s.targets.values()) == 16
    assert "horizon of 16 seeds was reached" in policy.end_line(s) and "inconclusive" in policy.end_line(s)


def test_a_resolved_comparison_stops_before_the_cap():
    policy = _policy()
    s = policy.standing(_ended({"a": [60.0, 61.0, 60.5, 61.2, 60.1], "b": [50.0, 50.2, 50.9, 50.4, 50.3]}))
    assert s.done and s.reason == "all resolved" and max(s.targets.values()) <= 5


def test_a_study_started_by_the_plan_before_the_design_resumes_by_it(tmp_path):
    """A `--seeds auto` study started when its plan was one α and no horizon (cap 8) continues by that plan: its
    fingerprint is found and the legacy plan taken, not refused as "a different study"."""
    opts = _opts(ablation, "--storage", str(tmp_path), "--seeds", "auto", "--resume", "--tracking-uri",
                 f"sqlite:///{tmp_path / 'mlflow.db'}")
    plan = ablation.plan(opts)[0]
    new = preflight.study(plan, opts)
    old = preflight.study(plan, opts, legacy=True)
    assert old.fingerprint != new.fingerprint and old.verdicts.looks == Looks(alpha=0.05)
    assert old.verdicts.split is None
    folder = tmp_path / "ablation"
    folder.mkdir()
    (folder / "study.json").write_text(json.dumps({"fingerprint": old.fingerprint, "study": "ablation",
                                                   "command": "studies/ablation.py --seeds auto"}))
    with pytest.raises(options.StudyInputError) as e:
        preflight.preflight(plan, opts)
    assert "no interrupted study to continue" in str(e.value) and "different study" not in str(e.value)
    (folder / "study.json").write_text(json.dumps({"fingerprint": "0" * 16, "study": "ablation", "command": "x"}))
    with pytest.raises(options.StudyInputError, match="holds a different study"):
        preflight.preflight(plan, opts)


def test_the_design_is_what_the_simulations_measured():
    assert math.isclose(sum(design(3).alphas), 0.04) and design(3).sizes == (3, 5, 7, 8, 10, 12, 14, 16)


def test_a_new_run_of_the_same_study_under_another_name_says_it_repeats_its_seeds(tmp_path, capsys):
    first = preflight.study(*ablation.plan(_opts(ablation, "--storage", str(tmp_path))))
    first.where.local.mkdir(parents=True)
    (first.where.local / "study.json").write_text(json.dumps({"fingerprint": first.fingerprint}))
    other = preflight.study(*ablation.plan(_opts(ablation, "--storage", str(tmp_path), "--name", "again")))
    preflight.note_repeats(other)
    out = capsys.readouterr().out
    assert "note: ablation in " in out and "this run repeats those seeds, so its verdicts are a second family" in out
    assert "`--more-seeds` with that run's --name continues it" in out
    preflight.note_repeats(first)  # its own folder is not another run
    fixed = preflight.study(*ablation.plan(_opts(ablation, "--storage", str(tmp_path), "--seeds", "0", "1", "2")))
    preflight.note_repeats(fixed)  # another design: another fingerprint
    assert capsys.readouterr().out == ""
