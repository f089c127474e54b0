"""Reports, fast: artifact builders on hand-made data, and the store -> table path on a store built
with MlflowClient in the tracker's layout (no Ray, no training)."""

from __future__ import annotations

import io
import json
import math
import re

import pandas as pd
import pytest
from mlflow.entities import Metric, Param
from mlflow.tracking import MlflowClient

from adbs.config import Config
from adbs_lab.stats.policy import VerdictPolicy
from adbs_lab.stats.verdicts import LEGACY_MIN_PAIRS
from adbs_lab.results import from_store
from adbs_lab.results import renderings
from adbs_lab.results import run_files
from adbs_lab.results import tables
from adbs_lab.records import metrics_keys as K

MARGINS = [[1.0, 2.0], [1.0, 2.0, 1.5], [1.1, 2.0, 1.5, 1.6]]


def test_boundaries_table_one_row_per_class_one_column_per_session():
    t = run_files.boundaries_table(MARGINS)
    assert list(t.columns) == ["class", "session_added", "kind", "m_s0", "m_s1", "m_s2"]
    assert list(t["session_added"]) == [0, 0, 1, 2] and list(t["kind"]) == ["base", "base", "novel", "novel"]
    assert list(t["m_s2"]) == [1.1, 2.0, 1.5, 1.6]
    assert t["m_s0"].isna().tolist() == [False, False, True, True] and t["m_s1"].isna().tolist() == [False] * 3 + [True]


def test_trial_artifacts_written_only_where_there_is_data(tmp_path):
    sessions = [{"session": s, "val_acc": 60 - s, "test_acc": 58 - s, "test_base_acc": 59.0, "test_novel_acc":
                 math.nan if s == 0 else 30.0, "val_base_acc": 61.0, "val_novel_acc": math.nan if s == 0 else 31.0}
                for s in range(3)]
    files = run_files.write_trial_artifacts(tmp_path / "t", sessions=sessions, boundaries=MARGINS,
                                            config={"alpha": 0.05, "milestones": [40, 70]}, title="alpha=0.05 seed=0")
    assert [f.name for f in files] == ["config.json", "session_curve.png", "boundaries.csv"]
    assert files[1].read_bytes()[:4] == b"\x89PNG"
    assert json.loads(files[0].read_text()) == {"alpha": 0.05, "milestones": [40, 70]}
    assert pd.read_csv(files[2]).shape == (4, 6)
    pruned = run_files.write_trial_artifacts(tmp_path / "p", sessions=[], boundaries=None, config={"alpha": 0.1})
    assert [f.name for f in pruned] == ["config.json"]


def test_pruning_savings_counts_base_epochs_not_run():
    trials = pd.DataFrame({"state": [K.COMPLETE, K.PRUNED, K.PRUNED, K.FAILED], "base_epochs": [10, 10, 10, 10],
                           "base_epochs_run": [10, 3, 5, 1], "wall_time_s": [100.0, None, None, None]})
    s = run_files.pruning_savings(trials)
    assert (s["pruned"], s["failed"], s["base_epochs_planned"], s["base_epochs_run"], s["base_epochs_saved"]) == \
        (2, 1, 40, 19, 12)
    assert s["seconds_saved_est"] == pytest.approx(120.0)  # 10 s per epoch of the complete trial x 12
    md = run_files.report_markdown(study="alpha_sweep", table_md="| t |", best=None, savings=s, figures=["a.png"])
    assert "2 pruned" in md and "saved 12 base epochs" in md and "![a.png](a.png)" in md
    assert "Base epochs trained 19, reused from the cache 0 (adbs/cache.py), of 40 planned" in md


def test_report_md_counts_base_epochs_reused_from_the_cache_apart_from_those_trained():
    """22 of 24 trials loaded their base session from the cache: report.md said "192 of 192 base epochs run"."""
    reused = [8] * 22 + [0, 0]
    trials = pd.DataFrame({"state": [K.COMPLETE] * 24, "base_epochs": [8] * 24, "base_epochs_run": [8] * 24,
                           "base_epochs_reused": reused})
    s = run_files.pruning_savings(trials)
    assert (s["base_epochs_run"], s["base_epochs_reused"]) == (192, 176)
    md = run_files.report_markdown(study="kshot_grid", table_md="| t |", best=None, savings=s)
    assert "Base epochs trained 16, reused from the cache 176 (adbs/cache.py), of 192 planned" in md
    # a trials.parquet written before base_epochs_reused: a complete trial's summary base_reused says it
    older = trials.drop(columns="base_epochs_reused").assign(base_reused=[1.0] * 22 + [0.0, 0.0])
    assert run_files.pruning_savings(older)["base_epochs_reused"] == 176


# -- a store in the tracker's layout ----------------------------------------------------------
CURVES = {("baseline", 0): [70.0, 60.0, 50.0], ("baseline", 1): [72.0, 61.0, 52.0],
          ("adb+ic", 0): [75.0, 66.0, 57.0], ("adb+ic", 1): [76.0, 68.0, 58.0]}
D_CS = {("baseline", 0): 0.85, ("baseline", 1): 0.87, ("adb+ic", 0): 0.90, ("adb+ic", 1): 0.94}


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    uri = f"sqlite:///{tmp_path_factory.mktemp('store') / 'mlflow.db'}"
    c = MlflowClient(uri)
    exp = c.create_experiment("ablation")
    parent = c.create_run(exp, run_name="ablation 2026-01-01 00:00",
                          tags={"adbs.role": "study", "adbs.study": "ablation", "adbs.baseline": "baseline",
                                "adbs.order": json.dumps(["baseline", "adb+ic"])})
    rows, trials, number = [], [], 0
    for (variant, seed), accs in [*sorted(CURVES.items(), key=lambda kv: kv[0][0] != "adb+ic"), (("adb+ic", 2), None)]:
        cfg = Config(variant=variant, seed=seed, base_epochs=4).to_dict()
        tags = {"mlflow.parentRunId": parent.info.run_id, "adbs.role": "trial", "adbs.study": "ablation",
                "adbs.trial_id": f"t{number}", "adbs.optuna_trial": str(number),
                "adbs.state": K.COMPLETE if accs else K.PRUNED}
        run = c.create_run(exp, run_name=f"{variant} seed={seed}", tags=tags)  # no adbs.label: from the name
        metrics = [Metric(K.BASE_PRUNE_VALUE, 10.0 * e, 0, e) for e in range(1, 3 if accs is None else 5)]
        # seed 1's base sessions came from the cache: replayed epochs, each with base/reused = 1 (adbs/trial.py)
        metrics += [Metric(K.REUSED, float(seed == 1), 0, e) for e in range(1, 3 if accs is None else 5)]
        for s, a in enumerate(accs or []):
            metrics += [Metric("session/test_acc", a, 0, s), Metric("session/val_acc", a + 1, 0, s)]
            rows.append({"trial_id": f"t{number}", "state": K.COMPLETE, "label": variant, "seed": seed, "session": s,
                         "test_acc": a})
        if accs:
            metrics += [Metric("summary/val_avg_acc", sum(accs) / 3 + 1, 0, 0), Metric("summary/wall_time_s", 8.0, 0, 0),
                        Metric("summary/d_cs", D_CS[variant, seed], 0, 0)]
            trials.append({"trial_id": f"t{number}", "state": K.COMPLETE, "label": variant, "seed": seed,
                           "d_cs": D_CS[variant, seed]})
        else:  # the table counts it among the row's seeds: "2 of 3, 1 pruned"
            trials.append({"trial_id": f"t{number}", "state": K.PRUNED, "label": variant, "seed": seed})
        c.log_batch(run.info.run_id, metrics=metrics,
                    params=[Param(k, json.dumps(v) if isinstance(v, list) else str(v)) for k, v in cfg.items()])
        c.set_terminated(run.info.run_id, "FINISHED" if accs else "KILLED")
        number += 1
    c.set_terminated(parent.info.run_id)
    return uri, parent.info.run_id, pd.DataFrame(rows), pd.DataFrame(trials)


def test_store_gives_the_table_paper_table_gives_on_the_same_data(store):
    uri, parent_id, rows, trials = store
    study = from_store.load_study(MlflowClient(uri), "ablation")
    assert study.parent.info.run_id == parent_id and (study.baseline, study.order) == ("baseline", ["baseline", "adb+ic"])
    assert set(study.trials["state"]) == {K.COMPLETE, K.PRUNED}
    assert list(dict.fromkeys(study.sessions["label"])) == ["adb+ic", "baseline"]  # Optuna trial order
    # its parent run records no verdict policy: a study from before it, read by the rule it printed by (2 pairs)
    expected = tables.paper_table(rows, baseline="baseline", order=["baseline", "adb+ic"], trials=trials,
                                  verdicts=VerdictPolicy(min_pairs=LEGACY_MIN_PAIRS))
    got = from_store.study_table(study)
    assert tables.format_table(got) == tables.format_table(expected)
    assert got.loc[0, "d_cs"][0] == pytest.approx(0.86) and got.loc[1, "d_cs"][0] == pytest.approx(0.92)
    assert list(got["config"]) == ["baseline", "adb+ic"] and got.loc[1, "delta_last"] == pytest.approx(57.5 - 51.0)
    assert study.trials.set_index("trial_id").loc["t4", "base_epochs_run"] == 2
    reused = study.trials.set_index("seed")["base_epochs_reused"]
    assert list(reused[1]) == [4, 4] and list(reused[0]) == [0, 0]  # seed 1's epochs replayed from the cache
    saved = run_files.pruning_savings(study.trials)
    assert (saved["pruned"], saved["base_epochs_saved"]) == (1, 2)
    assert study.trials["alpha"].map(type).eq(float).all() and study.trials["seed"].map(type).eq(int).all()


def test_find_parent_by_name_parent_id_or_trial_id(store):
    uri, parent_id, _, _ = store
    client = MlflowClient(uri)
    trial = client.search_runs([client.get_experiment_by_name("ablation").experiment_id],
                               filter_string="tags.`adbs.role` = 'trial'")[0]
    assert from_store.find_parent(client, trial.info.run_id).info.run_id == parent_id
    assert from_store.find_parent(client, parent_id).info.run_id == parent_id
    with pytest.raises(from_store.ReportError, match="studies here: ablation"):
        from_store.find_parent(client, "alpha_sweep")


def test_formats_and_the_papers_numbers(store):
    uri, _, _, _ = store
    table = from_store.study_table(from_store.load_study(MlflowClient(uri), "ablation"))
    tex = renderings.to_latex(table, caption="ablation")
    assert "\\toprule" in tex and "adb+ic & 2 of 3, 1 pruned &" in tex and "$\\pm$" in tex
    csv = pd.read_csv(io.StringIO(renderings.to_csv(table)))
    assert list(csv.columns[:4]) == ["config", "seeds", "s0", "s0_ci95"] and csv.loc[0, "s0"] == pytest.approx(71.0)
    assert renderings.render(table, "text") == tables.format_table(table)
    beside = renderings.paper_beside(table, "cifar100")
    assert list(beside["source"]) == ["ours", "paper", "ours", "paper"]
    assert beside.iloc[1]["s0"] == 73.92 and beside.iloc[3]["avg"] == 63.77
    assert renderings.paper_beside(table, "synthetic") is None
    assert "| baseline | paper | 73.92" in renderings.render_plain(beside, "markdown")
    # the class separation beside the accuracies: ours per row and the paper's Table 4 (baseline, ADBS)
    assert "$D_{cs}$" in tex and "0.860 $\\pm$" in tex and csv.loc[0, "d_cs"] == pytest.approx(0.86)
    assert list(beside["D_cs"]) == [pytest.approx(0.86), 0.8846, pytest.approx(0.92), 0.9497]
    assert "| 0.8846 |" in renderings.render_plain(beside, "markdown")


def test_the_papers_host_rows_beside_the_hosts_study():
    """docs/hosts.md, "The paper's CIFAR100 rows": SAVC 52.19 -> 60.60 with ADBS in the last session."""
    sessions = pd.DataFrame([{"label": lab, "trial_id": lab, "session": s, "test_acc": 50.0 + s, "state": K.COMPLETE}
                             for lab in ("SAVC", "SAVC+ADBS", "ALICE", "ALICE+ADBS", "OrCo", "OrCo+ADBS",
                                         "baseline+ADBS")
                             for s in range(9)])
    table = tables.paper_table(sessions, baseline={"SAVC+ADBS": "SAVC", "SAVC": "SAVC"})
    beside = renderings.paper_beside(table, "cifar100").set_index(["config", "source"])
    assert beside.loc[("SAVC", "paper"), "s8"] == 52.19 and beside.loc[("SAVC+ADBS", "paper"), "s8"] == 60.60
    assert beside.loc[("ALICE+ADBS", "paper"), "avg"] == 65.63 and beside.loc[("ALICE", "paper"), "s0"] == 80.37
    assert beside.loc[("OrCo", "paper"), "s8"] == 51.12 and beside.loc[("OrCo+ADBS", "paper"), "avg"] == 60.32
    assert beside.loc[("baseline+ADBS", "paper"), "avg"] == 63.77  # the baseline host with ADBS = adb+ic
    assert beside.loc[("SAVC", "ours"), "s8"] == 58.0


def _second_study(uri: str, name: str, curves: dict[str, list[float]], baseline: str,
                  summary: dict[str, dict[str, float]] | None = None, tags: dict[str, str] | None = None) -> str:
    """Another study in the store (one seed per row), as the tracker writes it; `summary`: more summary metrics per
    row, `tags`: more tags on its parent run."""
    c = MlflowClient(uri)
    exp = c.create_experiment(name)
    parent = c.create_run(exp, run_name=f"{name} 2026-01-02 00:00",
                          tags={"adbs.role": "study", "adbs.study": name, "adbs.baseline": baseline,
                                "adbs.order": json.dumps(list(curves)), **(tags or {})})
    for number, (label, accs) in enumerate(curves.items()):
        run = c.create_run(exp, run_name=f"{label} seed=0",
                           tags={"mlflow.parentRunId": parent.info.run_id, "adbs.role": "trial", "adbs.study": name,
                                 "adbs.trial_id": f"{name}{number}", "adbs.optuna_trial": str(number),
                                 "adbs.state": K.COMPLETE, "adbs.label": label})
        c.log_batch(run.info.run_id, metrics=[Metric("session/test_acc", a, 0, s) for s, a in enumerate(accs)]
                    + [Metric("summary/val_avg_acc", sum(accs) / len(accs), 0, 0)]
                    + [Metric(f"summary/{k}", v, 0, 0) for k, v in (summary or {}).get(label, {}).items()],
                    params=[Param(k, json.dumps(v) if isinstance(v, list) else str(v))
                            for k, v in Config(seed=0).to_dict().items()])
        c.set_terminated(run.info.run_id, "FINISHED")
    c.set_terminated(parent.info.run_id)
    return parent.info.run_id


def test_report_across_two_studies_one_table_one_figure(store, tmp_path, capsys):
    """`report.py ablation boundary`: every row of both, each Delta_last against its own study's baseline."""
    import sys
    from pathlib import Path

    from tests.helpers.scripts import in_process

    uri, ablation_id, _, _ = store
    _second_study(uri, "boundary", {"released": [70.0, 40.0, 20.0], "clamp": [70.0, 58.0, 50.0]}, "released")
    script = Path(__file__).resolve().parents[3] / "studies" / "report.py"

    def run(*a: str):
        return in_process(capsys, [sys.executable, str(script), *a, "--tracking-uri", uri])

    r = run("ablation", "boundary", "--out", str(tmp_path / "cmp"))
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("config"))
    head, body = lines[start], [line for line in lines[start + 2:start + 6]]
    assert [b.split("  ")[0] for b in body] == ["ablation: baseline", "ablation: adb+ic", "boundary: released",
                                                 "boundary: clamp"]
    cols = re.split(r"\s{2,}", head.strip())
    delta = [re.split(r"\s{2,}", b.strip())[cols.index("Δlast")] for b in body]
    assert delta == ["+0.00", "+6.50", "+0.00", "+30.00"]
    out = tmp_path / "cmp"
    assert (out / "compare_sessions.png").read_bytes()[:4] == b"\x89PNG"
    assert "boundary: clamp" in (out / "report.md").read_text() and (out / "table.txt").exists()
    assert len(pd.read_parquet(out / "sessions.parquet")["label"].unique()) == 4
    twice = run("ablation", ablation_id)  # the same run by name and by id
    assert twice.returncode == 2 and "same study run twice" in twice.stderr
    paper = run("ablation", "boundary", "--paper")
    assert paper.returncode == 2 and "one at a time" in paper.stderr


def test_report_across_studies_marks_each_multi_objective_studys_own_front(store, tmp_path, capsys):
    """`report.py ablation alpha_sweep` where alpha_sweep searched two objectives: the combined table has a front
    column, '*' on the rows of alpha_sweep's own Pareto front and on no ablation row."""
    import sys
    from pathlib import Path

    from tests.helpers.scripts import in_process

    uri, _, _, _ = store
    # a and b trade base for novel accuracy; c is beaten by b on both
    values = {"alpha=0.01": (70.0, 20.0), "alpha=0.05": (60.0, 40.0), "alpha=0.1": (55.0, 35.0)}
    _second_study(uri, "alpha_sweep", {lab: [70.0, 50.0, 40.0] for lab in values}, "",
                  summary={lab: {"val_last_base_acc": b, "val_last_novel_acc": n} for lab, (b, n) in values.items()},
                  tags={"adbs.objectives": json.dumps(["val_last_base_acc:max", "val_last_novel_acc:max"])})
    script = Path(__file__).resolve().parents[3] / "studies" / "report.py"
    r = in_process(capsys, [sys.executable, str(script), "ablation", "alpha_sweep", "--tracking-uri", uri,
                            "--out", str(tmp_path / "cmp")])
    assert r.returncode == 0, r.stderr
    text = (tmp_path / "cmp" / "table.txt").read_text().splitlines()
    lines = text[next(i for i, line in enumerate(text) if line.startswith("config")):]  # after the verdicts' lines
    assert lines[0].split()[-1] == "front"
    marked = {re.split(r"\s{2,}", line.strip())[0]: line.rstrip().endswith("*") for line in lines[2:7]}
    assert marked == {"ablation: baseline": False, "ablation: adb+ic": False, "alpha_sweep: alpha=0.01": True,
                      "alpha_sweep: alpha=0.05": True, "alpha_sweep: alpha=0.1": False}
    assert "Pareto front of its study's --objectives" in r.stdout


def test_a_combined_table_lists_a_study_without_an_order_by_its_swept_values():
    """report.py A B: alpha_sweep has no row order of its own, so its rows follow alpha (as its own table does),
    not the order its trials ran in."""
    from types import SimpleNamespace

    from adbs_lab.results.from_store import Recorded, combine

    alphas = [0.05, 0.1, 0.02, 0.01]  # the trials' order
    sessions = pd.DataFrame([{"label": f"alpha={a:g}", "alpha": a, "trial_id": f"t{i}", "session": 0,
                              "state": K.COMPLETE, "test_acc": 50.0} for i, a in enumerate(alphas)])
    parent = SimpleNamespace(info=SimpleNamespace(run_id="0123456789"))
    study = Recorded(parent, "alpha_sweep", sessions, sessions.drop(columns="session"), None, None)
    order = combine([study, Recorded(parent, "ablation", sessions.iloc[0:0], sessions.iloc[0:0], None, ["b"])])[2]
    assert order == ["alpha_sweep: alpha=0.01", "alpha_sweep: alpha=0.02", "alpha_sweep: alpha=0.05",
                     "alpha_sweep: alpha=0.1", "ablation: b"]


def test_histories_in_bulk_are_those_read_run_by_run(tmp_path):
    """A database store is read one query per key for many runs; a store without the bulk call (an MLflow server
    over HTTP) one run at a time: the same histories, a step logged twice keeping its last value."""
    from types import SimpleNamespace

    from mlflow.entities import Metric
    from mlflow.tracking import MlflowClient

    client = MlflowClient(f"sqlite:///{tmp_path / 'm.db'}")
    exp = client.create_experiment("h")
    runs = []
    for i in range(3):
        run_id = client.create_run(exp).info.run_id
        client.log_batch(run_id, metrics=[Metric("session/acc", 10.0 * i + s, 1000 + s, s) for s in range(4)])
        if i:
            client.log_batch(run_id, metrics=[Metric("session/acc", -1.0, 2000, 2), Metric("base/x", 1.0, 2000, 0)])
        runs.append(client.get_run(run_id))
    keys = {"session/acc", "base/x"}
    one_by_one = SimpleNamespace(get_metric_history=client.get_metric_history)  # no _tracking_client: no bulk call
    got = from_store.histories(client, runs, keys)
    assert got == from_store.histories(one_by_one, runs, keys)
    assert got[(runs[1].info.run_id, "session/acc")] == {0: 10.0, 1: 11.0, 2: -1.0, 3: 13.0}
    assert (runs[0].info.run_id, "base/x") not in got and len(got) == 5


def test_histories_read_as_rows_are_mlflows_bulk_answers_nan_and_steps_logged_twice_included(tmp_path):
    """sql_histories reads a database store's points as plain rows: the same points, in the same order, as MLflow's
    SqlAlchemyStore.get_metric_history_bulk, with a NaN read back as NaN, a step logged twice keeping its last value
    (later timestamp) and, at one timestamp, the larger value (the bulk call orders by value last), on a real store."""
    client = MlflowClient(f"sqlite:///{tmp_path / 'm.db'}")
    store = client._tracking_client.store
    exp = client.create_experiment("h")
    ids = [client.create_run(exp).info.run_id for _ in range(3)]
    for i, run_id in enumerate(ids):
        client.log_batch(run_id, metrics=[Metric("session/acc", 10.0 * i + s, 1000 + s, s) for s in range(4)]
                         + [Metric("base/x", float(i), 1000, 0)])
    client.log_batch(ids[1], metrics=[Metric("session/acc", -1.0, 2000, 2), Metric("session/acc", math.nan, 2000, 5),
                                      Metric("base/x", 7.0, 1000, 0), Metric("base/x", math.nan, 3000, 1)])
    client.log_batch(ids[2], metrics=[Metric("session/acc", math.nan, 1500, 1)])
    wanted = {"base/x": ids, "session/acc": ids[1:], "none": ids}

    def plain(histories):  # NaN != NaN: compare its text, and the order of the steps as read
        return {pair: [(step, repr(v)) for step, v in points.items()] for pair, points in histories.items()}

    def bulk(wanted: dict) -> dict:
        out: dict = {}
        for key, runs in wanted.items():
            for m in store.get_metric_history_bulk(runs, key, max_results=2**62):
                out.setdefault((m.run_id, key), {})[int(m.step)] = float(m.value)
        return out

    expected = bulk(wanted)
    got: dict = {}
    assert from_store.sql_histories(store, wanted, got)
    assert plain(got) == plain(expected) and len(got) == 5
    assert plain(got)[(ids[1], "session/acc")] == [(0, "10.0"), (1, "11.0"), (2, "-1.0"), (3, "13.0"), (5, "nan")]
    assert got[(ids[1], "base/x")] == {0: 7.0, 1: pytest.approx(math.nan, nan_ok=True)}
    assert math.isnan(got[(ids[2], "session/acc")][1]) and (ids[0], "session/acc") not in got
    runs = [client.get_run(run_id) for run_id in ids]
    assert plain(from_store.histories(client, runs, {"base/x", "session/acc"})) == plain(bulk({"base/x": ids,
                                                                                               "session/acc": ids}))


def test_trial_runs_read_as_rows_are_the_runs_search_runs_gives_in_its_order(tmp_path):
    """sql_trial_runs reads a parent's nested runs as rows: the Runs all_runs (search_runs) gives, in its order (start
    time, ties by run id), with their latest metrics (NaN as NaN), params and tags in its order; deleted runs, another
    parent's and another experiment's left out, on a real store."""
    client = MlflowClient(f"sqlite:///{tmp_path / 'm.db'}")
    exp, other = client.create_experiment("h"), client.create_experiment("o")
    parent = client.create_run(exp, start_time=1)
    nested = {"mlflow.parentRunId": parent.info.run_id, "adbs.role": "trial"}
    ids = [client.create_run(exp, start_time=t, tags=nested, run_name=f"r{t}" if t != 5 else None).info.run_id
           for t in (9, 5, 5, 5, 7)]
    for i, run_id in enumerate(ids):
        client.log_batch(run_id, metrics=[Metric("summary/acc", math.nan if i == 2 else float(i), 10, 0),
                                          Metric("session/acc", 1.0, 11, 3)],
                         params=[Param("alpha", str(i)), Param("seed", "0")])
    client.set_terminated(ids[0])
    client.delete_run(client.create_run(exp, start_time=6, tags=nested).info.run_id)
    client.create_run(exp, start_time=6, tags={"mlflow.parentRunId": ids[0]})
    client.create_run(other, start_time=6, tags=nested)

    def plain(run):
        i = run.info
        return (i.run_id, i.run_name, i.experiment_id, i.user_id, i.status, i.start_time, i.end_time, i.lifecycle_stage,
                i.artifact_uri, [(k, repr(v)) for k, v in run.data.metrics.items()], list(run.data.params.items()),
                list(run.data.tags.items()))

    expected = from_store.all_runs(client, [exp], f"tags.`mlflow.parentRunId` = '{parent.info.run_id}'")
    got = from_store.sql_trial_runs(client._tracking_client.store, exp, parent.info.run_id)
    assert [plain(r) for r in got] == [plain(r) for r in expected] and len(got) == 5
    assert [r.info.start_time for r in got] == [5, 5, 5, 7, 9] and got[-1].info.status == "FINISHED"
    assert math.isnan(got[[r.info.run_id for r in got].index(ids[2])].data.metrics["summary/acc"])
    assert [plain(r) for r in from_store.trial_runs(client, parent)] == [plain(r) for r in expected]


def _answer(status: int, body: dict | str):
    import requests

    r = requests.Response()
    r.status_code = status
    r._content = (body if isinstance(body, str) else json.dumps(body)).encode()
    return r


def test_a_server_is_read_in_bulk_in_batches_and_a_cut_answer_run_by_run(monkeypatch):
    """An MLflow server's bulk route, HTTP_BULK_RUNS runs a request; an answer of the server's most points may have
    been cut, so its runs are left to be read one at a time; the points of the others land in the output."""
    import mlflow.utils.rest_utils as rest

    asked = []

    def answer(host_creds, endpoint, method, params):
        asked.append((endpoint, method, params["metric_key"], list(params["run_id"]), params["max_results"]))
        if params["metric_key"] == "big":  # a key whose answer fills the server's limit
            return _answer(200, {"metrics": [{"run_id": params["run_id"][0], "step": 0, "value": 1.0}]
                                 * from_store.HTTP_BULK_POINTS})
        return _answer(200, {"metrics": [{"run_id": r, "key": params["metric_key"], "step": s, "value": v, "timestamp": 1}
                                         for r in params["run_id"] for s, v in ((0, 1.5), (1, 2.5), (1, 3.5))]})

    monkeypatch.setattr(rest, "http_request", answer)
    ids = [f"{i:032x}" for i in range(120)]
    out = {}
    left = from_store.http_histories("creds", {"session/acc": ids, "big": ids[:3]}, out)
    assert [(a[2], len(a[3]), a[4]) for a in asked] == [("session/acc", 50, 25000), ("session/acc", 50, 25000),
                                                        ("session/acc", 20, 25000), ("big", 3, 25000)]
    assert {a[:2] for a in asked} == {(from_store.HTTP_BULK, "GET")} and [i for a in asked[:3] for i in a[3]] == ids
    assert left == [(r, "big") for r in ids[:3]]
    assert out == {(r, "session/acc"): {0: 1.5, 1: 3.5} for r in ids}  # a step logged twice: its last value


@pytest.mark.parametrize("status", [404, 405])
def test_a_server_without_the_bulk_route_is_read_run_by_run(monkeypatch, status):
    import mlflow.utils.rest_utils as rest

    monkeypatch.setattr(rest, "http_request", lambda *a, **k: _answer(status, "<html>Not Found</html>"))
    wanted = {"a": ["r1", "r2"], "b": ["r2"]}
    out = {}
    assert from_store.http_histories("creds", wanted, out) == [("r1", "a"), ("r2", "a"), ("r2", "b")] and out == {}


def test_a_server_s_other_failures_are_raised(monkeypatch):
    import mlflow.utils.rest_utils as rest
    from mlflow.exceptions import MlflowException

    monkeypatch.setattr(rest, "http_request", lambda *a, **k: _answer(403, {"error_code": "PERMISSION_DENIED",
                                                                            "message": "no read on run r1"}))
    with pytest.raises(MlflowException, match="no read on run r1"):
        from_store.http_histories("creds", {"a": ["r1"]}, {})


def test_histories_read_one_by_one_run_at_most_threads_at_once_and_raise_the_first_failure():
    import threading
    import time
    from types import SimpleNamespace

    lock, now, most = threading.Lock(), [0], [0]

    def history(run_id, key):
        with lock:
            now[0] += 1
            most[0] = max(most[0], now[0])
        time.sleep(0.02)
        with lock:
            now[0] -= 1
        if run_id == "bad":
            raise RuntimeError("RESOURCE_DOES_NOT_EXIST: run bad")
        return [SimpleNamespace(step=s, value=float(len(run_id) + s)) for s in (0, 1, 1)]

    client = SimpleNamespace(get_metric_history=history)
    pairs = [(f"r{i}", k) for i in range(20) for k in ("a", "b")]
    got = from_store.histories_one_by_one(client, pairs)
    assert list(got) == pairs and got[("r12", "a")] == {0: 3.0, 1: 4.0}
    assert 1 < most[0] <= from_store.THREADS
    with pytest.raises(RuntimeError, match="run bad"):
        from_store.histories_one_by_one(client, [*pairs[:5], ("bad", "a"), *pairs[5:]])


def test_a_server_s_histories_are_its_bulk_answers_and_the_rest_read_one_by_one(monkeypatch):
    """histories() on a client of an MLflow server: the bulk route's points, and the pairs it left read one by one."""
    from types import SimpleNamespace

    monkeypatch.setattr(from_store, "http_histories",
                        lambda creds, wanted, out: out.update({("r1", "a"): {0: 1.0}}) or [("r2", "a")])
    store = SimpleNamespace(get_host_creds=lambda: "creds")
    client = SimpleNamespace(_tracking_client=SimpleNamespace(store=store),
                             get_metric_history=lambda run_id, key: [SimpleNamespace(step=3, value=2.0)])
    runs = [SimpleNamespace(info=SimpleNamespace(run_id=r), data=SimpleNamespace(metrics={"a": 0.0})) for r in ("r1", "r2")]
    assert from_store.histories(client, runs, {"a"}) == {("r1", "a"): {0: 1.0}, ("r2", "a"): {3: 2.0}}


def test_embedding_samples_over_http_come_in_parallel_and_their_warnings_in_the_runs_order(tmp_path, capsys):
    """Samples on this machine are read from the run's folder; those on a server downloaded THREADS at a time, each
    run its own sample, and the warnings of those that cannot be read printed in the runs' order."""
    import threading
    import time
    from pathlib import Path
    from types import SimpleNamespace

    local = tmp_path / "local"
    local.mkdir()
    (local / run_files.EMBEDDINGS_JSON).write_text("here")
    lock, now, most = threading.Lock(), [0], [0]

    def download(run_id, path, dst):
        with lock:
            now[0] += 1
            most[0] = max(most[0], now[0])
        time.sleep(0.05 if int(run_id[1:]) % 3 == 0 else 0.01)  # the earlier runs finish later
        with lock:
            now[0] -= 1
        if int(run_id[1:]) % 2:
            raise FileNotFoundError(f"no {path} in {run_id}")
        (Path(dst) / path).write_text(f"sample of {run_id}")
        return str(Path(dst) / path)

    def run(i, uri, keep="true"):
        return SimpleNamespace(info=SimpleNamespace(run_id=f"r{i}", artifact_uri=uri),
                               data=SimpleNamespace(params={"keep_embeddings": keep}))

    runs = [run(i, "mlflow-artifacts:/1/r/artifacts") for i in range(12)] + [run(12, str(local)), run(13, "x", "false")]
    got = from_store.embeddings(SimpleNamespace(download_artifacts=download), runs)
    assert got == {**{f"r{i}": None if i % 2 else f"sample of r{i}" for i in range(12)}, "r12": "here", "r13": None}
    warned = [line.split()[2] for line in capsys.readouterr().out.splitlines()]
    assert warned == [f"r{i}" for i in range(1, 12, 2)] and 1 < most[0] <= from_store.THREADS
