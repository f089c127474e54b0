"""What a study reports is what ran, on hand-made trial records: every table row, best configuration and Pareto
point says how many of its seeds completed; a configuration missing a seed is listed, never ranked; a seed's NaN is
never averaged away; best_config.json and pareto.json's front follow one group rule (adbs_lab/results/seed_counts.py,
adbs_lab/results/compare.py: ranking_groups)."""

from __future__ import annotations

import math

import pandas as pd

from adbs_lab.records import metrics_keys as K
from adbs_lab.records import objectives
from adbs_lab.results import pareto
from adbs_lab.results import tables
from adbs_lab.records.trial_records import CONFIG_COLUMNS

TWO = objectives.parse(["val_last_base_acc:max", "val_avg_acc:max"])


def _trial(lab: str, seed: int, state: str, base: float = math.nan, avg: float = math.nan, **cfg) -> dict:
    return {"trial_id": f"{lab}-{seed}", "state": state, "label": lab, "seed": seed,
            "val_last_base_acc": base, "val_avg_acc": avg,
            **{c: None for c in CONFIG_COLUMNS if c not in ("seed", *cfg)}, **cfg}


def _diverged_study() -> pd.DataFrame:
    """a: both seeds complete; b: its completed seed beats a on everything, its other seed diverged; c: every seed
    diverged."""
    return pd.DataFrame([
        _trial("a", 0, K.COMPLETE, 60, 50, alpha=0.1), _trial("a", 1, K.COMPLETE, 62, 52, alpha=0.1),
        _trial("b", 0, K.COMPLETE, 80, 70, alpha=0.2), _trial("b", 1, K.DIVERGED, alpha=0.2),
        _trial("c", 0, K.DIVERGED, alpha=0.3), _trial("c", 1, K.DIVERGED, alpha=0.3)])


def _sessions(trials: pd.DataFrame) -> pd.DataFrame:
    done = trials[trials["state"] == K.COMPLETE]
    return pd.DataFrame([{"trial_id": t.trial_id, "state": t.state, "label": t.label, "seed": t.seed, "session": s,
                          "test_acc": t.val_avg_acc - 10 * s} for t in done.itertuples() for s in (0, 1)])


def test_a_configuration_missing_a_seed_is_never_the_best_and_says_why():
    t = _diverged_study()
    best = tables.best_config(t, objectives.DEFAULT)
    assert best["config_label"] == "a" and best["mean_over_seeds"] == 51.0 and best["seeds"] == 2
    assert best["seed_states"] == {"complete": 2}
    assert best["not_ranked"] == [
        {"config_label": "b", "seeds": "1 of 2, 1 diverged", "seed_states": {"complete": 1, "diverged": 1}},
        {"config_label": "c", "seeds": "0 of 2, 2 diverged", "seed_states": {"diverged": 2}}]
    only_missing = t[t["label"] != "a"]
    assert tables.best_config(only_missing, objectives.DEFAULT) is None  # nothing whole: nothing ranked


def test_a_configuration_missing_a_seed_is_never_on_the_front():
    t = _diverged_study()
    assert pareto.front_labels(t, TWO) == ["a"]
    rec = pareto.pareto_record(t, TWO)
    assert [p["config_label"] for p in rec["front"]] == ["a"] and rec["front"][0]["seed_states"] == {"complete": 2}
    assert [(r["config_label"], r["seeds"]) for r in rec["not_ranked"]] == [("b", "1 of 2, 1 diverged"),
                                                                            ("c", "0 of 2, 2 diverged")]
    lines = pareto.front_lines(rec)
    assert "  b: 1 of 2, 1 diverged" in lines and any(line.startswith("not ranked (missing seeds") for line in lines)
    assert tables.best_config(t, TWO)["config_label"] == "a"


def test_a_seeds_nan_is_never_averaged_away():
    """A complete trial may still report NaN for a secondary metric: its configuration's mean is NaN, not the mean
    of its other seeds, so it is on no front."""
    t = pd.DataFrame([_trial("a", 0, K.COMPLETE, 60, 50), _trial("a", 1, K.COMPLETE, 60, 50),
                      _trial("b", 0, K.COMPLETE, 90, 90), _trial("b", 1, K.COMPLETE, math.nan, 90)])
    means = pareto.config_means(t, TWO).set_index("label")
    assert math.isnan(means.loc["b", "val_last_base_acc"]) and means.loc["a", "val_last_base_acc"] == 60
    assert pareto.front_labels(t, TWO) == ["a"]
    assert tables.best_config(t, TWO)["config_label"] == "a"


def test_every_table_row_says_how_many_of_its_seeds_completed():
    from adbs_lab.results import seed_counts  # here, not above: the other tests run (and fail) on code without it

    t = _diverged_study()
    s = _sessions(t)
    with_counts = tables.paper_table(s, trials=t, front=pareto.front_labels(t, TWO))
    text = tables.format_table(with_counts)
    rows = {line.split()[0]: line for line in text.splitlines()[2:5]}
    assert " 2 of 2 " in rows["a"] and " 1 of 2, 1 diverged " in rows["b"] and " 0 of 2, 2 diverged " in rows["c"]
    assert rows["a"].rstrip().endswith("*") and not rows["b"].rstrip().endswith("*")
    assert seed_counts.NOTE in text
    # the numbers of a whole configuration are the ones a table without the counts gives
    plain = tables.paper_table(s)
    for col in ("0", "1", "avg", "last"):
        assert with_counts.loc[0, col] == plain.loc[0, col]
    md = tables.format_table(with_counts, markdown=True)
    assert "| b | 1 of 2, 1 diverged |" in md
    whole = t[t["label"] == "a"]
    assert seed_counts.NOTE not in tables.format_table(tables.paper_table(_sessions(whole), trials=whole))


def _grid() -> pd.DataFrame:
    """A k-shot grid of two ways: the 10-way row beats both 5-way rows on both objectives."""
    rows = []
    for lab, ways, base, avg in (("ways=5 shots=1", 5, 60, 40), ("ways=5 shots=5", 5, 50, 45),
                                 ("ways=10 shots=1", 10, 90, 80)):
        rows.append(_trial(lab, 0, K.COMPLETE, base, avg, ways=ways, dataset="synthetic", sessions=None))
    return pd.DataFrame(rows)


def test_best_config_is_on_the_front_pareto_json_claims():
    t = _grid()
    best = tables.best_config(t, TWO)
    rec = pareto.pareto_record(t, TWO)
    assert best["config_label"] == "ways=5 shots=1" and best["compared_within"]["ways"] == 5
    assert best["config_label"] == rec["front"][0]["config_label"]
    assert [p["config_label"] for p in rec["front"]] == ["ways=5 shots=1", "ways=5 shots=5"]
    assert rec["compared_within"] == best["compared_within"]
    assert [[p["config_label"] for p in g["front"]] for g in rec["per_group"]] == [
        ["ways=5 shots=1", "ways=5 shots=5"], ["ways=10 shots=1"]]
    # the table's front column: every row on its own group's front
    assert sorted(pareto.front_labels(t, TWO)) == sorted(t["label"])
