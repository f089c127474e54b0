"""Study-specific flags: alpha_sweep's --grid turns pruning off, kshot_grid's sub-grids and its refusal of a pruner,
and the table's `sessions` column when rows ran different numbers of sessions (no Ray here)."""

from __future__ import annotations

import math
import os
import re
import runpy
import sys
from types import SimpleNamespace
from unittest import mock

import pandas as pd
import pytest
from tests.helpers.scripts import in_process

from adbs.config import from_dict
from adbs_lab import study
from adbs_lab.driver import options
from adbs_lab.results import tables
from adbs_lab.driver import launch
from adbs_lab.search.seeds.fixed import SeedList
from tests.helpers.run_facts import run_facts
from adbs_lab.stores.paths import REPO_ROOT


def _alpha_parser():
    p = options.parser("t", options.Defaults(pruner="median", pruner_when=(("grid", "none"),), num_samples=4))
    p.add_argument("--grid", action="store_true")
    return p


@pytest.mark.parametrize("argv,pruner", [([], "median"), (["--grid"], "none"),
                                          (["--grid", "--pruner", "median"], "median"),
                                          (["--pruner", "none"], "none")])
def test_grid_turns_the_default_pruner_off_and_an_explicit_pruner_wins(argv, pruner):
    assert options.parse(_alpha_parser(), argv=argv)[0].pruner == pruner


def _sweep_parser():  # alpha_sweep's defaults: a grid over seeds 0 1 2 unless --num-samples asks TPE to search
    p = options.parser("t", options.Defaults(pruner="none", pruner_when=(("num_samples", "auto"),),
                                             sample_on_request=True, seeds=(0, 1, 2), smoke_seeds=(0,),
                                             seeds_when=(("num_samples", (0,)),)))
    p.add_argument("--grid", action="store_true")
    return p


@pytest.mark.parametrize("argv,samples,pruner,seeds", [
    ([], None, "none", (0, 1, 2)),  # the default grid: every point, every seed, to the end
    (["--grid"], None, "none", (0, 1, 2)),
    (["--num-samples", "20"], 20, "auto", (0,)),  # a TPE search: one seed per sampled alpha, auto pruning
    (["--num-samples", "5", "--seeds", "3", "4", "--pruner", "none"], 5, "none", (3, 4)),  # typed flags win
    (["--smoke"], None, "none", (0,)),
])
def test_num_samples_selects_a_search_and_its_defaults(argv, samples, pruner, seeds):
    o = options.parse(_sweep_parser(), argv=argv)[0]
    assert (o.num_samples, o.pruner, o.seeds) == (samples, pruner, seeds)


def test_sweep_help_states_each_mode_default(capsys):
    with pytest.raises(SystemExit):
        _sweep_parser().parse_args(["--help"])
    out = " ".join(capsys.readouterr().out.split())
    assert "default 0 1 2; 0 with --num-samples" in out and "default: none; auto with --num-samples" in out


def test_a_study_without_pruning_hides_and_refuses_pruner(capsys):
    p = options.parser("t", options.Defaults(pruning=False))
    assert options.parse(p, argv=["--pruner", "none"])[0].pruner == "none"
    with pytest.raises(SystemExit):
        options.parse(options.parser("t", options.Defaults(pruning=False)), argv=["--pruner", "median"])
    err = capsys.readouterr().err
    assert "--pruner median: this study runs every trial to the end" in err and err.count("error:") == 1
    with pytest.raises(SystemExit):
        options.parser("t", options.Defaults(pruning=False)).parse_args(["--help"])
    assert "--pruner" not in capsys.readouterr().out


def _run(capsys, script: str, *args: str):
    """`python <script> <args>`, in this process: these end in argparse or in the input checks, before any Ray."""
    return in_process(capsys, [sys.executable, str(REPO_ROOT / script), *args])


def test_study_help_says_what_grid_runs_and_kshot_offers_no_pruner(capsys):
    a = " ".join(_run(capsys, "studies/alpha_sweep.py", "--help").stdout.split())
    assert "the paper's 5 alphas 0.01 0.02 0.05 0.08 0.1 instead of the default 4 (0.01 0.02 0.05 0.1)" in a
    assert "(default: none; auto with --num-samples;" in a and "up to 10 samples are a random search" in a
    assert "(default: auto, seeds until the table's comparisons are resolved, 3 to 8 per row" in a
    assert "0 1 2 where the run compares no rows; 0 with --smoke; 0 with --num-" in a  # argparse may wrap at a '-'
    both = _run(capsys, "studies/alpha_sweep.py", "--grid", "--num-samples", "3")
    assert both.returncode == 2 and "choose one" in both.stderr
    k = _run(capsys, "studies/kshot_grid.py", "--help").stdout
    assert "--pruner {" not in k and "--ways WAY" in k and "--shots SHOT" in k


@pytest.mark.parametrize("flags,fragment", [
    (["--ways", "7"], "argument --ways: invalid choice: 7 (choose from 5, 10)"),
    (["--shots", "2"], "argument --shots: invalid choice: 2 (choose from 1, 5, 10, 15, 20, 50)"),
    (["--pruner", "median"], "--pruner median: this study runs every trial to the end"),
    (["--set", "ways=5"], ("--set ways=5: this study sweeps ways itself (ways 5, 10; search_spaces/kshot_grid.py:GRID "
                           "variant=baseline adb+ic), so every trial sets it and the flag would be overridden")),
    (["--set", "ways=5"], "Drop the flag; to run part of its grid, --ways 5; "),
])
def test_kshot_grid_refuses_bad_sub_grids_in_one_line(flags, fragment, tmp_path, capsys):
    r = _run(capsys, "studies/kshot_grid.py", *flags, "--storage", str(tmp_path), "--gpus-per-trial", "0")
    assert r.returncode == 2 and fragment in r.stderr, r.stderr
    assert "Ray" not in r.stdout and not (tmp_path / "kshot_grid").exists()


def test_kshot_sub_grid_plan(tmp_path):
    """--ways 5 --shots 5 1 5: the plan holds those cells only, in the order typed, duplicates dropped."""
    seen = {}
    argv = ["kshot_grid.py", "--ways", "5", "--shots", "5", "1", "5"]
    with mock.patch.object(sys, "argv", argv), mock.patch.object(study, "main", lambda plan, opts: seen.update(
            plan=plan, opts=opts)):
        runpy.run_path(str(REPO_ROOT / "studies" / "kshot_grid.py"), run_name="__main__")
    plan = seen["plan"]
    # every cell runs the baseline beside ADBS (--variants), the variant last in the row's label
    assert plan.space == {"ways": [5], "shots": [5, 1], "variant": ["baseline", "adb+ic"]}
    assert plan.space_source == "search_spaces/kshot_grid.py:GRID ways=5 shots=5 1 variant=baseline adb+ic"
    _, configs, _ = study.validate(plan, seen["opts"].replace(gpus_per_trial=0.0, storage=str(tmp_path)))
    assert sorted({(c.ways, c.shots, c.variant) for c in configs}) == [
        (5, 1, "adb+ic"), (5, 1, "baseline"), (5, 5, "adb+ic"), (5, 5, "baseline")]


def _sessions(rows):
    out = []
    for label, n_sessions, acc in rows:
        for s in range(n_sessions + 1):
            out.append({"label": label, "trial_id": label, "state": "COMPLETE", "session": s, "test_acc": acc - s})
    return pd.DataFrame(out)


def test_table_marks_rows_averaging_different_numbers_of_sessions():
    table = tables.paper_table(_sessions([("ways=5 shots=1", 8, 80.0), ("ways=10 shots=1", 4, 80.0)]))
    assert list(table["sessions"]) == [8, 4] and list(table.columns[:3]) == ["config", "seeds", "sessions"]
    assert math.isclose(table.loc[0, "avg"][0], 76.0) and math.isclose(table.loc[1, "avg"][0], 78.0)
    text = tables.format_table(table)
    assert text.splitlines()[0].split()[:3] == ["config", "seeds", "sessions"] and tables.SESSIONS_NOTE in text
    assert tables.SESSIONS_NOTE in tables.format_table(table, markdown=True)
    from adbs_lab.results.renderings import to_csv, to_latex

    assert "sessions" in to_csv(table).splitlines()[0] and "Sessions" in to_latex(table)
    same = tables.paper_table(_sessions([("a", 2, 80.0), ("b", 2, 70.0)]))  # one number: no column, no note
    assert "sessions" not in same and tables.SESSIONS_NOTE not in tables.format_table(same)


@pytest.mark.parametrize("argv,cpu_estimate", [([], True), (["--smoke"], True), (["--dataset", "cifar100"], False),
                                               (["--preset", "mini_imagenet"], False)])
def test_the_start_line_estimates_cpu_time_only_for_the_cpu_presets(argv, cpu_estimate, capsys):
    """--dataset cifar100 keeps --preset at its default (cpu) but picks the cifar100 preset: no CPU estimate."""
    opts, _ = options.parse(options.parser("t"), argv=argv)
    plan = study.Plan(name="t", space={}, space_source="tests", est_trial_s=40, est_smoke_trial_s=35)
    prepared = SimpleNamespace(plan=plan, **run_facts(opts, plan), total=4, n_configs=4, base=from_dict({}), base_values={},
                               seeding=SeedList(tuple(opts.seeds)), pruner="none", where="runs/t-smoke", no_best=None)
    launch.print_start(prepared, 2)
    out = capsys.readouterr().out
    assert ("on this CPU roughly" in out) == cpu_estimate
    assert ("a time estimate follows the first measured base epoch" in out) != cpu_estimate


# -- one grammar: a flag means the same in python -m adbs.run and in a study (adbs/config/cli.py) -------------------------

SAME_FLAGS = [
    ["--base-epochs", "3", "--host", "savc", "--savc.queue-size", "64", "--milestones", "2", "3"],
    ["--set", "base_epochs=3", "--host", "savc", "--set", "savc.queue_size=64", "--set", "milestones=2,3"],
    ["--preset", "smoke", "--alpha", "0.05", "--set", "alpha=0.02", "--abs-margin", "false"],  # later wins; old names
    ["--dataset", "cifar100", "--data-root", "/d", "--batch-size", "32"],  # picks the cifar100 preset in both
    ["--config", "{file}", "--shots", "1"],  # preset < file < flags
]


@pytest.mark.parametrize("argv", SAME_FLAGS)
def test_a_flag_resolves_to_the_same_config_in_adbs_run_and_a_study(argv, tmp_path):
    from adbs.run import build_parser, config_of

    file = tmp_path / "c.yaml"
    file.write_text("host: alice\nshots: 10\nalice:\n  mix_times: 2\n")
    argv = [a.replace("{file}", str(file)) for a in argv]
    run = config_of(build_parser().parse_args(argv)).to_dict()
    opts, _ = options.parse(options.parser("t"), argv=argv)
    assert from_dict(opts.base_config()).to_dict() == run


@pytest.mark.slow
def test_a_field_flag_is_its_set_pair_and_fails_the_same_way():
    from adbs.config import ConfigError
    from adbs.run import build_parser, config_of

    flags = options.parse("t", argv=SAME_FLAGS[0])[0]
    pairs = options.parse("t", argv=SAME_FLAGS[1])[0]
    assert flags.overrides == pairs.overrides == (("base_epochs", "3"), ("savc.queue_size", "64"),
                                                  ("milestones", "2,3"))
    for argv, message in ((["--set", "alhpa=1"], "unknown config key 'alhpa' (did you mean alpha?)"),
                          (["--base-epochs", "many"], "base_epochs must be an int"),
                          (["--host", "alice", "--savc.queue-size", "8"], "option of host savc, but host is alice")):
        with pytest.raises(ConfigError, match=re.escape(message)):
            config_of(build_parser().parse_args(argv))
        with pytest.raises(ConfigError, match=re.escape(message)):
            options.parse("t", argv=argv)[0].base_config()


def test_the_start_lines_estimate_follows_the_base_epochs(capsys):
    """A trial's time on the CPU presets is mostly its base session: --base-epochs 16 doubles the preset's 8."""
    opts, _ = options.parse(options.parser("t"), argv=[])

    def minutes(base):
        p = SimpleNamespace(plan=study.Plan(name="t", space={}, space_source="tests", est_trial_s=60,
                                            est_smoke_trial_s=35), **run_facts(opts), total=4, n_configs=4, base=from_dict(base),
                            seeding=SeedList(tuple(opts.seeds)), pruner="none",
                            base_values=base, no_best=None)
        launch.print_start(p, 2, load=load)
        span = capsys.readouterr().out.split("roughly ")[1].split(" min")[0].split(" to ")
        return float(span[-1]) if len(span) == 1 else tuple(map(float, span))

    load = 0.0
    assert minutes({"base_epochs": 16}) == pytest.approx(2 * minutes({}))
    idle = minutes({})
    load = 3.0  # three busy cores beside two trials on this machine's CPUs: each trial gets a smaller share
    low, high = launch.load_range(3.0, os.cpu_count() or 1, 2)
    assert minutes({}) == pytest.approx((idle * low, idle * high), rel=0.05)
    assert launch.load_factor(3.0, 2, 2) == pytest.approx(2.5 ** 0.5) and launch.load_factor(0.0, 16, 2) == 1.0


def test_the_start_lines_range_runs_from_the_square_root_to_the_plain_share_ratio(capsys, monkeypatch):
    """Studies at load average 7-41 took 3.8-6.4x what the square-root model said: Ray runs the trials at nice 15
    (launch.RAY_NICENESS), so busy CPUs slow them more than their load share; the line gives the range up to the
    plain ratio of the shares and says it can be longer still while the trials are niced."""
    assert launch.load_range(3.0, 2, 2) == pytest.approx((2.5 ** 0.5, 2.5))
    assert launch.load_range(41.0, 2, 2) == pytest.approx((21.5 ** 0.5, 21.5))
    assert launch.load_range(0.0, 16, 2) == (1.0, 1.0)
    opts, _ = options.parse(options.parser("t"), argv=[])
    p = SimpleNamespace(plan=study.Plan(name="t", space={}, space_source="tests", est_trial_s=60), **run_facts(opts), total=4,
                        n_configs=4, base=from_dict({}), seeding=SeedList(tuple(opts.seeds)))
    monkeypatch.delenv("RAY_worker_niceness", raising=False)
    text = launch.estimate_text(p, 2, load=41.0)
    assert "x4.6 to x21.5 the time measured at 0" in text and "Ray runs the trials at nice 15" in text
    monkeypatch.setenv("RAY_worker_niceness", "0")
    assert "nice" not in launch.estimate_text(p, 2, load=41.0)
    assert "roughly" in launch.estimate_text(p, 2, load=0.0) and "nice" not in launch.estimate_text(p, 2, load=0.0)


@pytest.mark.parametrize("script", ["alpha_sweep.py", "ablation.py", "kshot_grid.py", "boundary.py", "hosts.py"])
@pytest.mark.parametrize("flags,fragment", [
    (["--seeds", "100000000000000000000000"], "seed=100000000000000000000000 is out of range"),
    (["--set", "synthetic_seed=-1"], "synthetic_seed=-1 is out of range; allowed: >= 0"),
    (["--set", "threads=100000000000000000000000"], "threads=100000000000000000000000 is out of range"),
])
def test_every_study_dry_run_refuses_values_torch_or_numpy_refuse(tmp_path, capsys, script, flags, fragment):
    r = in_process(capsys, [sys.executable, str(REPO_ROOT / "studies" / script), "--smoke", "--storage",
                            str(tmp_path / "runs"), "--tracking-uri", f"sqlite:///{tmp_path / 'mlflow.db'}", *flags,
                            "--dry-run"])
    assert r.returncode == 2 and fragment in r.stderr, r.stderr
    assert "Traceback" not in r.stderr and len(r.stderr.strip().splitlines()) == 1


STUDY_SCRIPTS = ("ablation", "alpha_sweep", "boundary", "hosts", "knobs", "kshot_grid")
_REFUSE_ALL = """
import runpy, sys
for script in sys.argv[1:]:
    sys.argv = [script, "--bogus"]
    try:
        runpy.run_path(script, run_name="__main__")
    except SystemExit as e:
        assert e.code == 2, (script, e.code)
print(sorted(m for m in ("ray", "mlflow", "pandas") if m in sys.modules))
"""


@pytest.mark.slow
def test_a_refused_flag_ends_before_ray_mlflow_and_pandas_are_imported():
    """argparse refuses an unknown flag before the driver's heavy imports (Ray, MLflow, pandas: 3-6 s on a busy
    machine): a fresh process running every study script with --bogus has imported none of them."""
    import subprocess

    scripts = [str(REPO_ROOT / "studies" / f"{s}.py") for s in STUDY_SCRIPTS]
    out = subprocess.run([sys.executable, "-c", _REFUSE_ALL, *scripts], capture_output=True, text=True,
                         cwd=REPO_ROOT, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().splitlines()[-1] == "[]"
