"""Every value a search space may hold (None, bools, ints, floats, texts, several types in one categorical) reaches
every reader as it ran: the importance analysis, the paper table, the Pareto front, best_config.json and feeding
it to `python -m adbs.run --config` and to studies/ablation_path.py --to, trials.parquet, and studies/report.py from
an MLflow store, over generated spaces (adbs_lab/records/config_values.py, adbs_lab/records/value_text.py)."""

from __future__ import annotations

import itertools
import json
import shutil
import sys
from pathlib import Path

import numpy as np
import pytest

from adbs.config import PRESETS, Config, from_dict
from adbs_lab.records import config_values as cv
from adbs_lab.records import metrics_keys as K
from adbs_lab.records import trial_records as tr
from adbs_lab.records.objectives import Objective
from adbs_lab.records.tune_keys import describe
from adbs_lab.records.value_text import text
from adbs_lab.results import importance, pareto, tables
from tests.helpers.scripts import in_process
from tests.helpers.values import SHAPES, generated, same

REPO = Path(__file__).resolve().parents[3]
ALPHAS = (0.01, 0.02, 0.03, 0.05)
SEEDS = (0, 1)
P = "base_images_per_class"  # the column the generated values sit in: the readers read any column alike
OBJS = (Objective("val_avg_acc", "max"), Objective("val_last_novel_acc", "max"))


def study(values: list, field: str = P, config=None, seeds=SEEDS) -> list[tr.TrialRecord]:
    """Records of a grid over `values` (in `field`) x ALPHAS x `seeds`: the first value decides (its trials are the
    best), alpha adds a little; a second objective prefers the second value, so the Pareto front holds both.
    `config(v, alpha, seed)`: a trial's config (default: Config's defaults with the values set as they are)."""
    rng = np.random.default_rng(1)
    recs = []
    for i, (k, a, s) in enumerate(itertools.product(range(len(values)), ALPHAS, seeds)):
        val = 50 + 5 * (k == 0) + 20 * a + rng.normal(0, 0.05)
        cfg = config(values[k], a, s) if config else {**Config().to_dict(), field: values[k], "alpha": a, "seed": s,
                                                      "split_seed": s}
        recs.append(tr.TrialRecord(
            trial_id=f"t{i}", state=K.COMPLETE, label=describe({field: values[k], "alpha": a}, [field, "alpha"]),
            config=cfg, optuna_trial=i // len(seeds),
            summary={"val_avg_acc": val, "val_last_novel_acc": 30 + 5 * (k == 1) - 20 * a},
            sessions=[{"session": 0, "test_acc": val + 10}, {"session": 1, "test_acc": val}]))
    return recs


IDS = ["-".join(s) for s in SHAPES]


@pytest.mark.parametrize("shape", SHAPES, ids=IDS)
def test_every_searched_value_reaches_importance_the_table_pareto_best_config_and_trials_parquet(shape, tmp_path):
    """A generated categorical of `shape` (its first value the best: None first where the shape holds it, as
    "all images" was the best of {80, None}) beside alpha, two seeds each: the analysis ranks both parameters over
    every configuration, none left out; the table has a row per configuration; the front and best_config.json name
    the values as they ran; trials.parquet reads back to them."""
    values = generated(shape, SHAPES.index(shape))
    sessions, trials = tr.frames(study(values))
    ran = {f"t{i}": values[k] for i, (k, _, _) in enumerate(itertools.product(range(len(values)), ALPHAS, SEEDS))}
    assert all(same(v, ran[t]) for t, v in zip(trials["trial_id"], trials[P])), list(trials[P])

    assert importance.searched_params(trials) == [P, "alpha"]
    configs, counts = importance.configurations(trials, [P, "alpha"])
    assert len(configs) == len(values) * len(ALPHAS) and counts["without a parameter"] == 0
    assert (configs["seeds"] == len(SEEDS)).all()
    assert same(configs.sort_values("objective").iloc[-1][P], values[0])  # the best trials are counted, and best
    a = importance.analyse(trials, resamples=2)
    assert a is not None and not a.get("too_few") and a["varying"] == [P, "alpha"] and a["n"] == len(configs)
    assert f"| {P} |" in importance.markdown(a)

    table = tables.paper_table(sessions, trials=trials)
    assert len(table) == len(configs) and (table["seeds"] == len(SEEDS)).all()

    record = pareto.pareto_record(trials, OBJS)
    chosen = {f"t{i}": (values[k], a) for i, (k, a, _) in enumerate(itertools.product(range(len(values)), ALPHAS, SEEDS))}
    by_label = dict(zip(trials["label"], trials["trial_id"]))
    assert record["front"] and all(same(p["params"][P], chosen[by_label[p["config_label"]]][0])
                                   and p["params"]["alpha"] == chosen[by_label[p["config_label"]]][1]
                                   for p in record["front"]), record["front"]

    best = tables.best_config(trials)
    assert best is not None and same(best["config"][P], values[0]) and best["config"]["alpha"] == 0.05
    files = tables.write(tmp_path, sessions, trials, "table", best)
    written = json.loads((tmp_path / "best_config.json").read_text())
    assert same(written["config"][P], values[0])  # None as null, True as true, "None" as "None"
    for name, frame in (("trials", trials), ("sessions", sessions)):
        back = cv.read_parquet(tmp_path / f"{name}.parquet")
        assert list(back.columns) == list(frame.columns)
        assert all(same(x, y) for x, y in zip(back[P], frame[P])), (name, list(back[P]), list(frame[P]))
    assert [f.name for f in files] == ["sessions.parquet", "trials.parquet", "table.txt", "best_config.json"]


@pytest.mark.parametrize("pair", [(0.012341, 0.012344), (16.00001, 16.00002), (1234567.0, 1234568.0), (0.05, 0.0500001)])
def test_two_sampled_floats_alike_to_4_digits_are_two_rows(pair):
    """A sampled float is labelled in full where 4 significant digits would give another value's label too, so the
    table (which groups by the label) keeps two configurations two rows of their own seeds, and the best
    configuration is one of them, not a mean of both."""
    sessions, trials = tr.frames(study(list(pair), "finetune_lr"))
    assert trials["label"].nunique() == len(pair) * len(ALPHAS)
    table = tables.paper_table(sessions, trials=trials)
    assert len(table) == len(pair) * len(ALPHAS) and (table["seeds"] == len(SEEDS)).all()
    best = tables.best_config(trials)
    assert best["config"]["finetune_lr"] == pair[0] and best["seeds"] == len(SEEDS)


def test_a_trial_missing_a_searched_value_is_still_left_out_and_counted_beside_none():
    """None is a value; a trial whose record lacks the field is not: it is left out and counted, as before."""
    recs = study([None, 80])
    del recs[0].config[P]
    _, trials = tr.frames(recs)
    assert trials[P].iloc[0] is not None and cv.is_missing(trials[P].iloc[0]) and trials[P].iloc[-1] == 80
    configs, counts = importance.configurations(trials, [P, "alpha"])
    assert counts["without a parameter"] == 1 and len(configs) == 8
    assert configs[P].tolist().count(None) == len(ALPHAS) and configs["seeds"].sum() == len(recs) - 1
    assert P not in tables.configuration(trials.iloc[0])  # its best_config.json would take the field's default
    assert tables.configuration(trials.iloc[1])[P] is None


# -- the same through the MLflow store, best_config.json fed back to the commands ----------------------------------
CONFIG_SHAPES = [("base_images_per_class", (None, 80)), ("base_images_per_class", (None, 40, 80)),
                 ("data_on_device", (None, True, False)), ("temperature", (8, 16.5)), ("data_root", (None, "/tmp/a b"))]
"""Config fields and values a search space may give them: None beside ints, bools or a text, an int beside a float
(the config makes 8 the float 8.0); the first value is the best."""


def _store(uri: str, name: str, recs: list[tr.TrialRecord]) -> None:
    """The study's runs as adbs_lab/driver/tracker.py logs them: a parent run, a nested run per trial with the
    resolved Config as params (their text: str, lists as JSON), its state, label and metrics."""
    from mlflow.entities import Metric, Param
    from mlflow.tracking import MlflowClient

    c = MlflowClient(uri)
    exp = c.create_experiment(name)
    parent = c.create_run(exp, run_name=f"{name} 2026-01-01 00:00", tags={"adbs.role": "study", "adbs.study": name})
    for r in recs:
        run = c.create_run(exp, run_name=r.label, tags={"mlflow.parentRunId": parent.info.run_id, "adbs.role": "trial",
                                                        "adbs.trial_id": r.trial_id, "adbs.state": r.state,
                                                        "adbs.optuna_trial": str(r.optuna_trial), "adbs.label": r.label})
        metrics = [Metric(f"summary/{k}", v, 0, 0) for k, v in r.summary.items()]
        metrics += [Metric(f"session/{k}", v, 0, s["session"]) for s in r.sessions for k, v in s.items() if k != "session"]
        c.log_batch(run.info.run_id, metrics=metrics, params=[
            Param(k, json.dumps(v) if isinstance(v, (list, tuple)) else str(v)) for k, v in r.config.items()])
        c.set_terminated(run.info.run_id)
    c.set_terminated(parent.info.run_id)


@pytest.fixture(scope="module")
def store(tmp_path_factory, empty_mlflow_db):
    """One MLflow store (SQLite) holding a study per shape of CONFIG_SHAPES, each trial's config made by the
    config's own coercion (adbs.config.from_dict), as the searcher makes it."""
    db = tmp_path_factory.mktemp("searched") / "mlflow.db"
    shutil.copy(empty_mlflow_db, db)
    uri = f"sqlite:///{db}"
    studies = {}
    for i, (field, values) in enumerate(CONFIG_SHAPES):
        def config(v, a, s, field=field):
            return from_dict({field: v, "alpha": a, "seed": s, "split_seed": s}).to_dict()

        studies[i] = study(list(values), field, config, seeds=(0,))  # one seed: a run per configuration
        _store(uri, f"shape{i}", studies[i])
    return uri, studies


IDS_STORE = [f"{f}={v}" for f, v in CONFIG_SHAPES]


@pytest.mark.parametrize("i", range(len(CONFIG_SHAPES)), ids=IDS_STORE)
def test_the_store_and_best_config_fed_back_to_the_commands_keep_every_value(i, store, capsys, tmp_path):
    """The study rebuilt from the store (MLflow params are texts: the config's own types read them back, 'None' as
    None for a field that may be None) has the study's own trials, configurations and best configuration;
    best_config.json, given to `python -m adbs.run --config` and to studies/ablation_path.py --to, sets the field to
    the best value."""
    from adbs.run import build_parser, config_of
    from adbs_lab.results import from_store
    from mlflow.tracking import MlflowClient

    uri, studies = store
    field, values = CONFIG_SHAPES[i]
    typed = [from_dict({field: v}).to_dict()[field] for v in values]  # 8 -> 8.0 in a float field
    _, own = tr.frames(studies[i])
    loaded = from_store.load_study(MlflowClient(uri), f"shape{i}")
    assert [text(v) for v in loaded.trials[field]] == [text(v) for v in own[field]]
    assert all(same(x, y) for x, y in zip(loaded.trials[field], own[field]))
    configs, counts = importance.configurations(loaded.trials, [field, "alpha"])
    assert len(configs) == len(values) * len(ALPHAS) and counts["without a parameter"] == 0
    best = tables.best_config(loaded.trials)
    assert best == tables.best_config(own) and same(best["config"][field], typed[0])

    tables.write(tmp_path, *tr.frames(studies[i]), "table", best)
    path = tmp_path / "best_config.json"
    cfg = config_of(build_parser().parse_args(["--config", str(path)]))
    assert same(getattr(cfg, field), typed[0]) and cfg.alpha == 0.05
    r = in_process(capsys, [sys.executable, "-m", "adbs.run", "--config", str(path), "--dry-run"])
    assert r.returncode == 0 and "dry run:" in r.stdout, r.stderr[-2000:]
    r = in_process(capsys, [sys.executable, str(REPO / "studies" / "ablation_path.py"), "--from", "cpu", "--to",
                            str(path), "--storage", str(tmp_path / "runs"), "--tracking-uri", uri, "--dry-run"])
    assert r.returncode == 0, r.stderr[-2000:]
    said = next(line for line in r.stdout.splitlines() if "differences (" in line)
    assert (field in said) == (not same(typed[0], getattr(from_dict(PRESETS["cpu"]), field))), said


@pytest.mark.parametrize("i", range(3), ids=IDS_STORE[:3])  # report.py draws figures: the shapes with None, ~2 s each
def test_report_py_ranks_the_field_over_every_configuration_and_writes_every_value(i, store, capsys, tmp_path):
    """`python studies/report.py STUDY` from the store alone: importance over every configuration (None's among
    them), and trials.parquet read back to the values the study ran."""
    uri, studies = store
    field, values = CONFIG_SHAPES[i]
    _, own = tr.frames(studies[i])
    r = in_process(capsys, [sys.executable, str(REPO / "studies" / "report.py"), f"shape{i}", "--tracking-uri", uri,
                            "--out", str(tmp_path)])
    assert r.returncode == 0, r.stderr[-3000:]
    report = (tmp_path / "report.md").read_text()
    assert f"| {field} |" in report and f"{len(values) * len(ALPHAS)} complete configurations" in report
    back = cv.read_parquet(tmp_path / "trials.parquet")
    assert all(same(x, y) for x, y in zip(back[field], own[field]))
