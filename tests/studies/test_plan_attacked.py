"""Adversarial checks on --plan, --reference, --resolve and --max-seeds: each test below failed before its fix.
Fast, no Ray: a finished study folder is written by hand, and --plan reads it."""

from __future__ import annotations

import pytest

from adbs_lab.driver import options, preflight
from adbs_lab.driver.options import StudyInputError
from adbs_lab.driver.run import run
from adbs_lab.results import comparisons as cmp
from adbs_lab.results.tables import paper_table
from adbs_lab.stats.policy import VerdictPolicy
from studies import ablation
from tests.helpers.frames import study_frames as _frames
from tests.helpers.recorded import write_record

BASE = [50.0, 54.0, 47.0, 52.0]
VALUES = {"baseline": BASE, "adb": [b + d for b, d in zip(BASE, [5.0, 5.1, 4.9, 1.0])],
          "adb+ic": [b + d for b, d in zip(BASE, [2.0, 0.5, 3.5, 2.5])]}
PAIRS = [("adb", "baseline"), ("adb+ic", "baseline"), ("adb+ic", "adb")]


def _plan_output(tmp_path, capsys, *flags: str) -> str:
    s, t = _frames(VALUES)
    folder = tmp_path / "ablation"
    folder.mkdir()
    s.to_parquet(folder / "sessions.parquet")
    t.to_parquet(folder / "trials.parquet")
    opts, extra = options.parse(ablation.__doc__, options.Defaults(seeds=(0, 1, 2), smoke_seeds=(0,)),
                                argv=["--plan", "--storage", str(tmp_path),
                                      "--tracking-uri", f"sqlite:///{tmp_path / 'mlflow.db'}", *flags])
    write_record(preflight.study(*ablation.plan(opts)))  # the run of this very command, finished
    run(*ablation.plan(opts))
    return capsys.readouterr().out


def test_plan_of_a_seeds_auto_study_reads_it_at_its_looks(tmp_path, capsys):
    """`ablation.py --plan --seeds auto --max-seeds 4` prints the verdicts of a fixed-size study (α/m over all
    seeds: 'adb vs baseline ... not resolved'), not the ones the --seeds auto study itself printed at its looks
    ('better', reached at look 1 of 2), and says they are all true together with probability ≥ 95%."""
    out = _plan_output(tmp_path, capsys, "--seeds", "auto", "--max-seeds", "4")
    s, t = _frames(VALUES)
    table = paper_table(s, baseline="baseline", trials=t,  # the design --seeds auto runs (preflight.deciding)
                        verdicts=preflight.deciding(VerdictPolicy(pairs=tuple(PAIRS)), cap=4))
    for line in cmp.sentences(table.attrs["comparisons"]):  # what the study printed (summarise passes looks)
        assert line in out, (line, out)


def test_reference_never_compares_a_pair_twice(tmp_path, capsys):
    """`--reference adb+ic` compares adb with adb+ic ('adb vs adb+ic', the reference) and adb+ic with adb (its
    parent): the same comparison twice, in opposite directions, in one family of 4 (Bonferroni over 4)."""
    out = _plan_output(tmp_path, capsys, "--reference", "adb+ic")
    assert not ("adb vs adb+ic:" in out and "adb+ic vs adb:" in out), out
    assert cmp.family(["baseline", "adb", "adb+ic"], "adb+ic", {"adb": "baseline", "adb+ic": "adb"}) \
        == [("baseline", "adb+ic"), ("adb", "adb+ic"), ("adb", "baseline")]


@pytest.mark.parametrize("argv", [["--seeds", "auto", "--max-seeds", "1000"], ["--resolve", "1e300"]])
def test_absurd_values_are_refused(argv):
    """--max-seeds 1000 is accepted (the planner itself stops at N_MAX = 100 seeds), and --max-seeds 1000000 hangs
    the check, even --dry-run, for hours: _check_seeds counts duplicates with tuple.count per seed, O(n²) (8000
    seeds: 1.3 s). --resolve 1e300 is accepted and gives 'equivalent within ±1e+300 points' to every comparison,
    though accuracy differences lie within ±100 points."""
    opts, _ = options.parse(ablation.__doc__, options.Defaults(seeds=(0, 1, 2)), argv=argv)
    with pytest.raises(StudyInputError):
        opts.check()
