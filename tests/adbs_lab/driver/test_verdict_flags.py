"""--reference, --resolve, --error-rate and --plan: the study typed once holds its comparisons, bad values are refused before
anything starts, and --plan prints a finished study's verdicts and seed plan and runs nothing (no Ray here)."""

from __future__ import annotations

import pandas as pd
import pytest

from adbs_lab.driver import options, preflight
from adbs_lab.driver.options import StudyInputError
from adbs_lab.driver.run import seed_plan
from adbs_lab.records import metrics_keys as K
from studies import ablation, alpha_sweep, boundary
from tests.helpers.recorded import write_record


def _opts(*flags: str) -> options.StudyOptions:
    return options.parse("t", argv=[*flags, "--gpus-per-trial", "0"])[0]


def test_the_ablation_compares_each_row_with_the_baseline_and_the_row_it_adds_one_change_to():
    p = preflight.study(*ablation.plan(_opts("--smoke"), ["finetune"]))
    assert p.reference == "baseline" and p.verdicts.delta == 1.0
    assert p.verdicts.pairs == (("adb", "baseline"), ("adb+ic", "baseline"), ("adb+ic", "adb"),
                             ("adb+ic -finetune", "baseline"), ("adb+ic -finetune", "adb+ic"))
    b = preflight.study(*boundary.plan(_opts("--smoke")))
    assert ("warmup=2", "released") in b.verdicts.pairs and ("released", "baseline") in b.verdicts.pairs


def test_alpha_sweep_compares_each_alpha_with_the_presets_unless_told_otherwise():
    p = preflight.study(*alpha_sweep.plan(_opts("--smoke")))
    own = f"alpha={p.base.alpha:.4g}"
    assert p.reference == own and p.verdicts.pairs == (("alpha=0.1", own),)
    q = preflight.study(*alpha_sweep.plan(_opts("--smoke", "--reference", "alpha=0.1", "--resolve", "0.5")))
    assert q.reference == "alpha=0.1" and q.verdicts.pairs == (("alpha=0.01", "alpha=0.1"),) and q.verdicts.delta == 0.5


@pytest.mark.parametrize("flags,says", [
    (("--resolve", "0"), "--resolve 0: δ is the smallest difference that matters"),
    (("--resolve", "nan"), "must be > 0"),
    (("--reference", "alpha=0.5"), "--reference 'alpha=0.5' is not a row of this study; its rows: 'alpha=0.01'"),
    (("--plan", "--resume"), "--plan reads a finished study and runs nothing: drop --resume"),
    (("--error-rate", "0.7"), "--error-rate 0.7: the family error rate must be > 0 and at most 0.5"),
    (("--error-rate", "0"), "--error-rate 0: the family error rate must be > 0 and at most 0.5"),
    (("--error-rate", "nan"), "--error-rate nan: the family error rate must be > 0"),
    # the value as given, not rounded by :g to the bound it exceeds ("--error-rate 0.5: ... at most 0.5")
    (("--error-rate", "0.5000001"), "--error-rate 0.5000001: the family error rate must be > 0 and at most 0.5"),
    (("--resolve", "100.0000001"), "--resolve 100.0000001: δ is the smallest difference"),
])
def test_bad_verdict_flags_are_refused_before_anything_starts(flags, says):
    with pytest.raises(StudyInputError, match=None) as e:
        preflight.study(*alpha_sweep.plan(_opts("--smoke", *flags)))
    assert says in str(e.value)


def _write_study(folder, values: dict[str, list[float]]) -> None:
    sessions, trials = [], []
    for lab, vals in values.items():
        for seed, v in enumerate(vals):
            tid = f"{lab}-{seed}"
            trials.append({"trial_id": tid, "label": lab, "seed": seed, "state": K.COMPLETE, "started_at": 0.0,
                           "finished_at": 40.0})
            sessions += [{"trial_id": tid, "label": lab, "seed": seed, "session": s, "test_acc": a,
                          "state": K.COMPLETE} for s, a in ((0, 80.0), (1, v))]
    folder.mkdir(parents=True)
    pd.DataFrame(sessions).to_parquet(folder / "sessions.parquet")
    pd.DataFrame(trials).to_parquet(folder / "trials.parquet")


def test_plan_prints_the_verdicts_and_where_the_design_would_stop_the_rest(tmp_path, capsys):
    _write_study(tmp_path / "ablation-smoke", {"baseline": [50, 54, 47], "adb": [51, 55.5, 47.5], "adb+ic": [56, 61, 52]})
    p = preflight.study(*ablation.plan(_opts("--smoke", "--storage", str(tmp_path), "--plan")))
    write_record(p)
    seed_plan(p)
    out = capsys.readouterr().out
    assert "adb+ic vs adb: +5.00 points in the last session" in out and out.count("Bonferroni over 3") == 3
    assert "adb vs baseline: stops at " in out.split("where the sequential design would stop")[1]
    assert "more trials, about" in out
    assert sorted(f.name for f in (tmp_path / "ablation-smoke").iterdir()) == ["sessions.parquet", "study.json",
                                                                               "trials.parquet"]


def test_plan_without_a_finished_run_says_so(tmp_path):
    p = preflight.study(*ablation.plan(_opts("--smoke", "--storage", str(tmp_path), "--plan", "--name", "x")))
    with pytest.raises(StudyInputError, match="holds no finished run of study ablation"):
        seed_plan(p)


def test_plan_of_a_seeds_auto_study_reads_its_verdicts_at_its_looks(tmp_path, capsys):
    """--plan of a --seeds auto study gives the verdicts its own table gave (at its planned looks), never a
    fixed-size reading of the same trials, and forecasts the unresolved ones at its own looks."""
    _write_study(tmp_path / "ablation-smoke", {"baseline": [50, 54, 47, 52, 49], "adb": [46.9, 51.1, 43.8, 49.2, 45.9],
                                         "adb+ic": [47.1, 51, 43.8, 49, 46]})
    p = preflight.study(*ablation.plan(_opts("--smoke", "--storage", str(tmp_path), "--plan", "--seeds", "auto",
                                             "--max-seeds", "5")))
    write_record(p)
    seed_plan(p)
    out = capsys.readouterr().out
    looks = len(p.verdicts.looks.sizes)  # 3, 5 to the cap, then a continuation's 7, 9, 10
    assert looks == 5 and out.count(f"α spent over {looks} looks") == 3 and "reached at look" in out
    from adbs_lab.results import tables

    sessions, trials = (pd.read_parquet(tmp_path / "ablation-smoke" / f) for f in ("sessions.parquet", "trials.parquet"))
    table = tables.paper_table(sessions, baseline="baseline", trials=trials, verdicts=p.verdicts)
    from adbs_lab.results import comparisons

    assert all(line in out for line in comparisons.sentences(table.attrs["comparisons"]))


def test_an_error_rate_that_is_no_number_is_refused_by_the_parser(capsys):
    with pytest.raises(SystemExit) as e:
        _opts("--error-rate", "five")
    assert e.value.code == 2
    assert "--error-rate: 'five' is not a number: the family error rate A is a number > 0 and at most 0.5" in \
        capsys.readouterr().err


def test_the_error_rate_is_the_familys_alpha_and_its_printed_level(tmp_path, capsys):
    """--error-rate 0.1: the policy's α, the level every family line prints (90%), the split the deciding design
    spends (0.08 + 0.02), and study.json's settings, which --resume compares (adbs_lab/driver/resume.py)."""
    def deciding(*flags: str) -> options.StudyOptions:  # ablation's own defaults: it adds seeds until resolved
        return options.parse(options.parser("t", ablation.DEFAULTS), argv=[*flags, "--storage", str(tmp_path)])[0]

    p = preflight.study(*ablation.plan(deciding("--error-rate", "0.1")))
    assert p.verdicts.alpha == 0.1 and p.verdicts.level_text == "90%" and p.verdicts.primary_alpha == pytest.approx(0.08)
    assert "α 0.1 for the family" in p.seeding.start_line(p.n_configs)
    default = preflight.study(*ablation.plan(deciding()))
    assert default.verdicts.alpha == 0.05 and default.fingerprint != p.fingerprint  # its looks are another plan's
    from adbs_lab.driver.resume import settings_now

    assert settings_now(p)["error_rate"] == 0.1 and settings_now(default)["error_rate"] == 0.05
    _write_study(tmp_path / "ablation-smoke", {"baseline": [50, 54, 47], "adb": [51, 55.5, 47.5], "adb+ic": [56, 61, 52]})
    q = preflight.study(*ablation.plan(_opts("--smoke", "--storage", str(tmp_path), "--plan", "--error-rate", "0.1")))
    write_record(q)
    seed_plan(q)
    out = capsys.readouterr().out
    assert "90% CI" in out and "95% CI" not in out
