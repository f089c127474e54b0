"""--objectives NAME:max|min ...: what is refused (exit 2, one line, the same with --dry-run, nothing written), the
pruner it turns off, the Pareto front by hand, best_config.json on the front, the table's front column, and what
--resume may not change (no Ray here; studies/alpha_sweep.py end to end: tests/e2e/test_objectives_study.py)."""

from __future__ import annotations

import dataclasses
import json
import sys
from unittest import mock

import pandas as pd
import pytest
from tests.helpers.scripts import in_process

from adbs_lab.records import objectives
from adbs_lab.results import pareto
from adbs_lab.driver import options
from adbs_lab.records import trial_records
from adbs_lab.results import tables
from adbs_lab.records import metrics_keys as K
from adbs_lab.stores.paths import REPO_ROOT

BASE_NOVEL = ["val_last_base_acc:max", "val_last_novel_acc:max"]


def _sweep(capsys, tmp_path, *flags: str):
    """`python studies/alpha_sweep.py --smoke ... <flags>` in this process, on storage and a store in tmp_path."""
    return in_process(capsys, [sys.executable, str(REPO_ROOT / "studies" / "alpha_sweep.py"), "--smoke",
                               "--storage", str(tmp_path / "runs"), "--tracking-uri",
                               f"sqlite:///{tmp_path / 'mlflow.db'}", "--gpus-per-trial", "0", *flags])


@pytest.mark.parametrize("flags,fragment", [
    (["--objectives", "val_last_acc:max", "val_accuracy:max"],
     "--objectives val_accuracy:max: 'val_accuracy' is not a per-trial summary metric a search can target; valid "
     "objectives: val_avg_acc, val_last_acc, val_pd, val_last_base_acc, val_last_novel_acc"),
    (["--objectives", "test_last_novel_acc:max"],
     "test_last_novel_acc is measured on the test set, and test metrics never feed a search (they are reported only); "
     "search its validation twin, val_last_novel_acc:max"),
    (["--objectives", "novel_own_cos:max"], "novel_own_cos is measured on the test set"),
    (["--objectives", "val_pd:lowest"], "--objectives val_pd:lowest: the direction is max or min, not 'lowest'"),
    (["--objectives", "val_pd"], "--objectives val_pd: each objective is NAME:max or NAME:min"),
    (["--objectives", "val_pd:min", "val_pd:max"], "--objectives names val_pd twice"),
    (["--objectives", *BASE_NOVEL, "--pruner", "median"],
     "--pruner median with 2 --objectives: Optuna prunes single-objective studies only; drop --pruner"),
    (["--objectives", "val_pd:min", "--pruner", "hyperband"],
     "--pruner hyperband with --objectives val_pd:min: the pruner stops trials whose base-session validation "
     "accuracy lags"),
    (["--objectives", "val_last_novel_acc:max", "--pruner", "median"],  # the pruner's accuracy is no part of it
     "--pruner median with --objectives val_last_novel_acc:max: the pruner stops trials whose base-session validation "
     "accuracy lags, and that accuracy is part of val_avg_acc only"),
])
def test_refused_in_one_line_before_anything_starts_and_the_same_under_dry_run(flags, fragment, tmp_path, capsys):
    got = []
    for dry in ([], ["--dry-run"]):
        r = _sweep(capsys, tmp_path, "--num-samples", "2", *flags, *dry)
        assert r.returncode == 2 and fragment in r.stderr, r.stderr
        assert len(r.stderr.strip().splitlines()) == 1 and "Traceback" not in r.stderr
        assert ": started" not in r.stdout and "dry run" not in r.stdout
        got.append(r.stderr)
    assert got[0] == got[1]
    assert not (tmp_path / "runs" / "alpha_sweep").exists() and not (tmp_path / "mlflow.db").exists()


def test_a_dry_run_of_good_objectives_passes(tmp_path, capsys):
    r = _sweep(capsys, tmp_path, "--num-samples", "2", "--objectives", "val_last_acc:max", "val_pd:min", "--dry-run")
    assert r.returncode == 0 and "dry run: study alpha_sweep" in r.stdout, r.stderr


def _sweep_parser():  # alpha_sweep's defaults (studies/alpha_sweep.py)
    return options.parser("t", options.Defaults(pruner="none", pruner_when=(("num_samples", "median"),),
                                                sample_on_request=True, seeds=(0, 1, 2), smoke_seeds=(0,),
                                                seeds_when=(("num_samples", (0,)),)))


@pytest.mark.parametrize("argv,pruner", [
    (["--num-samples", "4"], "median"),  # the study's default search, as before
    (["--num-samples", "4", "--objectives", *BASE_NOVEL], "none"),  # several objectives: Optuna cannot prune
    (["--num-samples", "4", "--objectives", "val_pd:min"], "none"),  # a minimised objective: pruning would invert
    # one objective the pruner's base-session accuracy is no intermediate of: pruning would rank another metric
    (["--num-samples", "4", "--objectives", "val_last_novel_acc:max"], "none"),
    (["--num-samples", "4", "--objectives", "d_cs:max"], "none"),
    (["--num-samples", "4", "--objectives", "val_avg_acc:max"], "median"),  # its first term: as the default
    (["--num-samples", "4", "--objectives", *BASE_NOVEL, "--pruner", "none"], "none"),
])
def test_several_objectives_turn_the_default_pruner_off(argv, pruner):
    o = options.parse(_sweep_parser(), argv=argv)[0]
    o.check()
    assert o.pruner == pruner and isinstance(o.objectives, tuple)


def test_help_names_the_flag_and_its_default(capsys):
    with pytest.raises(SystemExit):
        _sweep_parser().parse_args(["--help"])
    out = " ".join(capsys.readouterr().out.split())
    assert "--objectives NAME:max|min [NAME:max|min ...]" in out and "(default: val_avg_acc:max)" in out
    assert "none with --objectives other than val_avg_acc:max" in out


def test_the_front_by_hand_ties_do_not_dominate_and_directions_count():
    rows = [[60, 10], [50, 30], [40, 30], [50, 30], [70, 5], [float("nan"), 99]]
    # (40, 30) is beaten by (50, 30); the two (50, 30) tie and both stay; NaN is never on the front
    assert pareto.front(rows, ["max", "max"]) == [0, 1, 3, 4]
    # maximise the first, minimise the second: (70, 5) beats (60, 10) and both (50, 30); (40, 30) is beaten too
    assert pareto.front(rows, ["max", "min"]) == [4]


def test_the_front_is_every_row_no_other_row_beats_on_random_rows_with_ties_and_non_finite_values():
    """`front` (best first, each row against the front so far) against the definition, every pair compared."""
    import math
    import random

    def beats(a, b):
        return all(x >= y for x, y in zip(a, b)) and any(x > y for x, y in zip(a, b))

    rng = random.Random(0)
    for _ in range(200):
        k = rng.randint(1, 3)
        directions = [rng.choice(["max", "min"]) for _ in range(k)]
        rows = [[rng.choice([math.nan, math.inf, -math.inf]) if rng.random() < 0.05 else float(rng.randint(0, 5))
                 for _ in range(k)] for _ in range(rng.randint(0, 60))]
        signed = [[v if d == "max" else -v for v, d in zip(r, directions)] for r in rows]
        ok = [all(math.isfinite(v) for v in r) for r in rows]
        want = [i for i, r in enumerate(signed) if ok[i] and not any(ok[j] and beats(o, r) for j, o in enumerate(signed))]
        assert pareto.front(rows, directions) == want


def _trials() -> pd.DataFrame:
    """Complete trials of four configurations, two seeds each; d is dominated by b on both objectives, and c ties
    with b on base accuracy but is worse on novel accuracy."""
    rows = []
    for lab, alpha, base, novel in (("a", 0.01, [70, 72], [10, 12]), ("b", 0.02, [60, 62], [30, 32]),
                                    ("c", 0.03, [60, 62], [20, 22]), ("d", 0.05, [50, 50], [20, 20]),
                                    ("e", 0.08, [40, 40], [50, 50])):
        for seed, (b, n) in enumerate(zip(base, novel)):
            rows.append({"trial_id": f"{lab}{seed}", "state": K.COMPLETE, "label": lab, "alpha": alpha,
                         "seed": seed, "val_avg_acc": 90 - b, "val_last_base_acc": b, "val_last_novel_acc": n,
                         **{c: None for c in trial_records.CONFIG_COLUMNS if c not in ("alpha", "seed")}})
    rows.append({"trial_id": "p0", "state": K.PRUNED, "label": "p", "alpha": 0.09, "seed": 0})
    return pd.DataFrame(rows)


def test_pareto_json_lists_the_front_best_on_the_first_objective_first():
    objs = objectives.parse(BASE_NOVEL)
    rec = pareto.pareto_record(_trials(), objs)
    assert rec["objectives"] == BASE_NOVEL and rec["configurations"] == 5
    assert [p["config_label"] for p in rec["front"]] == ["a", "b", "e"]
    assert rec["front"][1] == {"config_label": "b", "params": {"alpha": 0.02},
                               "values": {"val_last_base_acc": 61.0, "val_last_novel_acc": 31.0}, "seeds": 2,
                               "seed_states": {"complete": 2}}
    assert rec["not_ranked"] == []  # p: pruned before any seed completed, counted under pruning


def test_best_config_is_the_fronts_best_on_the_first_objective():
    objs = objectives.parse(["val_last_novel_acc:max", "val_last_base_acc:max"])
    best = tables.best_config(_trials(), objs)
    assert best["config_label"] == "e" and best["objective"] == "summary/val_last_novel_acc"
    assert best["objectives"] == {"val_last_novel_acc": 50.0, "val_last_base_acc": 40.0}
    assert tables.best_config(_trials(), objectives.parse(BASE_NOVEL))["config_label"] == "a"
    low = tables.best_config(_trials(), objectives.parse(["val_last_novel_acc:min", "val_last_base_acc:max"]))
    assert low["config_label"] == "a" and low["direction"] == "min"
    # b and c tie on base accuracy (61) and b beats c on novel accuracy: of the two, only b is on the front, so b is
    # chosen although c comes first in label order (where the first of a tie would win)
    tie = _trials()
    tie = tie[tie["label"].isin(["b", "c"])].replace({"label": {"c": "a-c"}})
    assert tables.best_config(tie, objectives.parse(BASE_NOVEL))["config_label"] == "b"
    # without --objectives: val_avg_acc, maximised, as before (here 90 - base: e)
    plain = tables.best_config(_trials())
    assert plain["config_label"] == "e" and plain["objective"] == K.OBJECTIVE and "objectives" not in plain


def test_the_table_marks_the_front_in_a_column_of_its_own():
    trials = _trials()
    sessions = pd.DataFrame([{"trial_id": t.trial_id, "state": t.state, "label": t.label, "seed": t.seed,
                              "session": s, "test_acc": 50.0 - s, "test_base_acc": 50.0, "test_novel_acc": 20.0,
                              "test_hmean": 28.0} for t in trials.itertuples() for s in (0, 1)])
    front = pareto.front_labels(trials, objectives.parse(BASE_NOVEL))
    table = tables.paper_table(sessions, trials=trials, front=front)
    assert dict(zip(table["config"], table["front"])) == {"a": "*", "b": "*", "c": "", "d": "", "e": "*"}
    text = tables.format_table(table)
    assert text.splitlines()[0].split()[-1] == "front" and tables.FRONT_NOTE in text
    assert "front" not in tables.paper_table(sessions, trials=trials)  # a single-objective study: no column


def test_resume_may_not_change_the_objectives(tmp_path):
    """The interrupted study's Optuna directions are fixed: --resume with other objectives is refused, one line;
    a study.json from before the flag optimised the default objective."""
    from adbs_lab.driver import preflight, resume
    from studies import alpha_sweep

    opts = options.StudyOptions(smoke=True, num_samples=2, storage=str(tmp_path / "runs"),
                                tracking_uri=f"sqlite:///{tmp_path / 'mlflow.db'}", gpus_per_trial=0,
                                objectives=tuple(BASE_NOVEL))
    plan = alpha_sweep.plan(opts)[0]
    p = preflight.preflight(plan, opts)
    p.where.local.mkdir(parents=True)
    # one maximised objective brings the study's default pruner back (median): the objectives are named as what
    # changed, not the pruner the user never typed
    for held, now, pruner, msg in (
            (BASE_NOVEL, ("val_last_base_acc:max",), "median", "--objectives val_last_base_acc:max differs from the "
             "study's --objectives val_last_base_acc:max val_last_novel_acc:max"),
            (None, tuple(BASE_NOVEL), "none", "--objectives val_last_base_acc:max val_last_novel_acc:max differs "
             "from the study's --objectives val_avg_acc:max"),
            (BASE_NOVEL, tuple(BASE_NOVEL), "none", None),
            (None, ("val_avg_acc:max",), "none", None)):
        settings = {"pruner": "none", "sampler_seed": 0, **({"objectives": held} if held is not None else {})}
        (p.where.local / "study.json").write_text(json.dumps({"fingerprint": p.fingerprint, "settings": settings}))
        # this run's study as the preflight types it (Study is frozen; the option checks, which refuse some of
        # these pairs, are not what is tested)
        p = dataclasses.replace(p, run=dataclasses.replace(p.run, resume=True),
                                objectives=objectives.effective(now), pruner=pruner)
        # Tune's saved state is stubbed (the private helpers that read it, and Tune's own check): what is tested
        # is the comparison of the objectives, not Tune
        with mock.patch("ray.tune.Tuner.can_restore", return_value=True), \
                mock.patch.object(resume, "_driver_file_exists", return_value=True), \
                mock.patch.object(resume, "_damaged_tune_state", return_value=None), \
                mock.patch("adbs_lab.stores.sqlite_kind.optuna_studies", return_value=[p.folder]):
            if msg is None:
                assert resume.check_resume(p) == settings
                continue
            with pytest.raises(options.StudyInputError, match="a study cannot change it midway") as e:
                resume.check_resume(p)
            assert msg in str(e.value) and "\n" not in str(e.value)
