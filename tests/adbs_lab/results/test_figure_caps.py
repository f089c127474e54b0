"""A search of many configurations: its session-curve figure draws at most run_files.CURVE_ROWS rows (the best by the
study's objective, and the baseline) and says so, a small study's figure is drawn as before, the trade-off figure
draws many configurations as one collection, and importance ranks a declared, deterministic subsample."""

from __future__ import annotations

import numpy as np
import pandas as pd

from adbs_lab.records import metrics_keys as K
from adbs_lab.records.objectives import Objective
from adbs_lab.results import importance, run_files


def _search(n: int, baseline: bool = True):
    """(sessions, trials) of `n` configurations of alpha (one searched parameter: no importance analysis to wait for),
    one seed each; the row's validation average accuracy rises with its number, so the best rows are the last ones;
    with `baseline` a row "baseline", the worst."""
    sessions, trials = [], []
    labels = [f"alpha={0.01 * (i + 1):g}" for i in range(n)] + (["baseline"] if baseline else [])
    for i, lab in enumerate(labels):
        value = 10.0 if lab == "baseline" else 20.0 + i
        trials.append({"trial_id": f"t{i}", "label": lab, "seed": 0, "state": K.COMPLETE, "val_avg_acc": value,
                       "alpha": 0.01 * (i + 1)})
        for s in range(3):
            sessions.append({"trial_id": f"t{i}", "label": lab, "seed": 0, "session": s, "state": K.COMPLETE,
                             "test_acc": value - s, "val_acc": value - s + 1, "val_base_acc": value, "test_base_acc": value,
                             "val_novel_acc": value / 2 if s else np.nan, "test_novel_acc": value / 2 if s else np.nan})
    return pd.DataFrame(sessions), pd.DataFrame(trials)


def _drawn(monkeypatch) -> dict:
    """{file name: the matplotlib Figure saved to it}, the files still written."""
    import matplotlib.figure

    saved: dict = {}
    save = matplotlib.figure.Figure.savefig

    def keep(self, path, *a, **k):
        saved[str(path).rsplit("/", 1)[-1]] = self
        return save(self, path, *a, **k)

    monkeypatch.setattr(matplotlib.figure.Figure, "savefig", keep)
    return saved


def test_a_search_draws_its_best_rows_and_the_baseline_and_says_so(tmp_path, monkeypatch):
    from adbs_lab.results import figures

    drawn = _drawn(monkeypatch)
    s, t = _search(40)
    run_files.study_figures("ablation", s, t, tmp_path / "a", objectives=None)  # search_spaces.ablation: baseline
    ax = drawn["ablation_sessions.png"].axes[0]
    names = [ln.get_label() for ln in ax.get_lines()]
    table = figures.row_order(s)
    best = t[t["label"] != "baseline"].nlargest(run_files.CURVE_ROWS - 1, "val_avg_acc")["label"]
    assert len(names) == run_files.CURVE_ROWS and set(names) == {"baseline", *best}
    assert names == [lab for lab in table if lab in set(names)]  # in the table's order
    assert "the best 11 by the study's objective val_avg_acc:max and the baseline; 12 of 41 rows, all in table.txt" \
        in ax.get_title().replace("\n", " ")
    # every kept row keeps the study's colour, and no two drawn curves share colour and style
    colors = figures.study_colors(s, t)
    for ln in ax.get_lines():
        assert ln.get_color() == colors[ln.get_label()]
    assert len({(ln.get_color(), ln.get_marker(), ln.get_linestyle()) for ln in ax.get_lines()}) == len(names)


def test_a_min_objective_keeps_the_lowest_and_rows_without_a_value_come_last():
    s, t = _search(30, baseline=False)
    labels = list(dict.fromkeys(t["label"]))
    rows, note = run_files.curve_rows(t, labels, objectives=(Objective("val_avg_acc", "min"),), cap=5)
    assert rows == labels[:5] and note.startswith("the best 5 by the study's objective val_avg_acc:min;")
    t.loc[t.index[:28], "val_avg_acc"] = np.nan  # only two rows have a value
    rows, note = run_files.curve_rows(t, labels, cap=5)
    assert rows == labels[:3] + labels[28:] and "then 3 without a value of it; 5 of 30 rows" in note
    assert run_files.curve_rows(t, labels[:5], cap=5) == (labels[:5], "")


def test_a_small_study_draws_every_row_as_before(tmp_path, monkeypatch):
    """Every row, in the table's order, in colours C0, C1, ... and the default style, with no line about a cap."""
    from matplotlib.colors import to_rgba

    drawn = _drawn(monkeypatch)
    s, t = _search(run_files.CURVE_ROWS - 1)
    order = ["baseline", *dict.fromkeys(t["label"][:-1])]
    run_files.study_figures("ablation", s, t, tmp_path, order=order)
    ax = drawn["ablation_sessions.png"].axes[0]
    assert [ln.get_label() for ln in ax.get_lines()] == order
    assert [to_rgba(ln.get_color()) for ln in ax.get_lines()] == [to_rgba(f"C{i % 10}") for i in range(len(order))]
    assert {(ln.get_marker(), ln.get_linestyle()) for ln in ax.get_lines()} == {("o", "-")}
    assert ax.get_title() == "ablation: test accuracy per session"


def test_many_configurations_are_one_collection_with_the_front_outlined(tmp_path, monkeypatch):
    drawn = _drawn(monkeypatch)
    s, t = _search(30)
    run_files.study_figures("ablation", s, t, tmp_path)
    val = drawn["tradeoff.png"].axes[0]
    bulk = [c for c in val.collections if len(c.get_offsets()) > 1]
    assert len(bulk) == 1 and len(bulk[0].get_offsets()) == 30  # the baseline is drawn by name, as a star
    outlined = [e[3] > 0 for e in bulk[0].get_edgecolors()]  # black where on the front, "none" (transparent) elsewhere
    assert outlined == [False] * 29 + [True]  # on this front: the one configuration best on both base and novel accuracy
    assert any(c.get_label() == "baseline" for c in val.collections)


def test_importance_ranks_a_declared_deterministic_subsample(tmp_path):
    """Above MAX_CONFIGS configurations: the same sample whatever the trials' order, the counts over every trial,
    and the header says how many and how they were drawn."""
    rng = np.random.default_rng(0)
    n = 60
    t = pd.DataFrame({"alpha": rng.uniform(0.01, 0.1, n).round(5), "temperature": rng.choice([8.0, 16.0, 32.0], n),
                      "seed": 0, "state": K.COMPLETE})
    t["label"] = [f"alpha={a:g} temperature={b:g}" for a, b in zip(t["alpha"], t["temperature"])]
    t["val_avg_acc"] = 40 + 100 * t["alpha"] + rng.normal(0, 0.1, n)
    t.loc[0, "state"], t.loc[0, "val_avg_acc"] = K.DIVERGED, np.nan
    configs, _ = importance.configurations(t, ["alpha", "temperature"])
    a = importance.subsample(configs, ["alpha", "temperature"], limit=20)
    b = importance.subsample(configs.iloc[::-1], ["alpha", "temperature"], limit=20)
    assert len(a) == 20 and a.equals(b) and importance.subsample(configs, ["alpha"], limit=100) is configs
    out = importance.analyse(t, resamples=3, max_configs=20)
    again = importance.analyse(t.iloc[::-1], resamples=3, max_configs=20)
    head = importance.markdown(out).splitlines()[0]
    assert out["sample"] == 20 and out["n"] == n - 1 and out["counts"]["diverged"] == 1
    assert out["importance"] == again["importance"]
    assert head.startswith(f"{n - 1} complete configurations") and "1 diverged" in head
    assert f"Ranked on 20 of the {n - 1} configurations, a uniform random sample (numpy's default_rng, seed 0" in head


def test_references_that_fill_the_cap_are_said_as_such():
    """Reference rows (a {row: its reference} baseline) that fill the cap alone: the line under the title says the
    references were drawn, not that no row has a value of the objective (every row has one here)."""
    s, t = _search(8, baseline=False)
    labels = list(dict.fromkeys(t["label"]))
    refs = {lab: labels[i % 3] for i, lab in enumerate(labels)}  # three reference rows
    rows, note = run_files.curve_rows(t, labels, baseline=refs, cap=3)
    assert rows == labels[:3] and note == "the baselines; 3 of 8 rows, all in table.txt"
