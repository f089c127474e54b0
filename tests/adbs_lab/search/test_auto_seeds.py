"""--seeds auto's batch logic with fake results, no Ray cluster: the looks replayed from the trials that ended
(adbs_lab/search/seeds/until_resolved.py), and StudySearch handing out the batches they ask for, telling Optuna each row once,
and taking the same looks after a restore from its saved state."""

from __future__ import annotations


import optuna
import pytest

from adbs_lab.records import metrics_keys as K
from adbs_lab.records.tune_keys import ROW_KEY, SEED_KEY, SEEDS_ATTR
from adbs_lab.results import comparisons
from adbs_lab.search import space as sp
from adbs_lab.search.searcher import StudySearch
from adbs_lab.search.seeds.until_resolved import LAST_KEY
from adbs_lab.stats.looks import Looks
from adbs_lab.stats.sequential import ALL_RESOLVED, CAP
from adbs_lab.stats.policy import VerdictPolicy
from tests.helpers.seeds import auto_standing as replay
from tests.helpers.seeds import until_resolved

LOOKS = Looks(max_seeds=5)
PAIRS = (("a", "ref"), ("b", "ref"))
ROWS = ("ref", "a", "b")
# a - ref: 10 ± 0.1 (better at the first look); b - ref: 3, 6, 9 then 6, 6 (better at the second)
LAST = {"ref": [50.0] * 8, "a": [60.0, 60.1, 59.9, 60.0, 60.0, 60.0, 60.0, 60.0],
        "b": [53.0, 56.0, 59.0, 56.0, 56.0, 56.0, 56.0, 56.0]}


def _ended(runs: dict[str, int], last=LAST, state=lambda row, s: K.COMPLETE):
    values = {row: {s: last[row][s] for s in range(n) if state(row, s) == K.COMPLETE} for row, n in runs.items()}
    states = {row: {s: state(row, s) for s in range(n)} for row, n in runs.items()}
    return values, states


def test_the_looks_resolve_one_comparison_first_and_the_other_with_more_seeds():
    first = replay(ROWS, *_ended({"ref": 2, "a": 3, "b": 3}), PAIRS, LOOKS, 1.0)
    assert not first.looks and first.missing == {"ref": [2]} and not first.done  # the batch is under way
    look1 = replay(ROWS, *_ended({"ref": 3, "a": 3, "b": 3}), PAIRS, LOOKS, 1.0)
    assert [(k.k, k.n, k.resolved, k.next) for k in look1.looks] == [(1, 3, 1, {"b": 5, "ref": 5})]
    assert look1.targets == {"ref": 5, "a": 3, "b": 5} and look1.missing == {"ref": [3, 4], "b": [3, 4]}
    assert look1.final("a") and not look1.final("b")
    done = replay(ROWS, *_ended({"ref": 5, "a": 3, "b": 5}), PAIRS, LOOKS, 1.0)
    assert done.done and done.reason == ALL_RESOLVED and [k.resolved for k in done.looks] == [1, 2]
    # the table, read at the same looks on the same trials, gives the same verdicts
    table = comparisons.compare_rows(_sessions({"ref": 5, "a": 3, "b": 5}), list(PAIRS),
                                     policy=VerdictPolicy(looks=LOOKS))
    assert [(c.verdict.look, c.verdict.n_seeds, c.resolved) for c in table] == [(1, 3, True), (2, 5, True)]


def test_a_failed_seed_counts_as_run_and_the_cap_stops_the_study():
    noisy = {**LAST, "b": [50.0, 52.0, 48.0, 51.0, 49.0]}
    failed = replay(ROWS, *_ended({"ref": 3, "a": 3, "b": 3}, noisy,
                                  lambda row, s: K.FAILED if (row, s) == ("b", 1) else K.COMPLETE), PAIRS, LOOKS, 1.0)
    assert failed.looks and failed.targets["b"] == 5  # the failed seed ended: the look was taken without it
    cap = replay(ROWS, *_ended({"ref": 5, "a": 3, "b": 5}, noisy), PAIRS, LOOKS, 1.0)
    assert cap.done and cap.reason == CAP and cap.targets == {"ref": 5, "a": 3, "b": 5}


def _sessions(runs: dict[str, int]):
    import pandas as pd

    rows = [{"trial_id": f"{row}-{s}", "state": K.COMPLETE, "label": row, "seed": s, "session": 1,
             "test_acc": LAST[row][s]} for row, n in runs.items() for s in range(n)]
    return pd.DataFrame(rows)


GRID = {ROW_KEY: list(ROWS)}


def _searcher(url: str) -> StudySearch:
    auto = until_resolved(LOOKS, ROWS, PAIRS, 1.0, (ROW_KEY,))
    s = StudySearch(sp.optuna_distributions(GRID), storage_url=url, study_name="s",
                    sampler=optuna.samplers.GridSampler(sp.grid_points(GRID), seed=0), policy=auto)
    s.set_search_properties(None, None, {})
    return s


def _result(config: dict) -> dict:
    last = LAST[config[ROW_KEY]][config[SEED_KEY]]
    return {K.REPORT_KIND: K.KIND_SUMMARY, K.OBJECTIVE: last + 1, LAST_KEY: last}


def _batch(s: StudySearch, start: int) -> list[tuple[str, dict]]:
    out = []
    while True:
        tid = f"t{start + len(out)}"
        config = s.suggest(tid)
        if not isinstance(config, dict):
            return out
        out.append((tid, config))


def test_the_searcher_runs_the_batches_the_looks_ask_for(tmp_path, capsys):
    url = f"sqlite:///{tmp_path / 'optuna.db'}"
    s = _searcher(url)
    first = _batch(s, 0)
    assert sorted((c[ROW_KEY], c[SEED_KEY]) for _, c in first) == sorted((r, i) for r in ROWS for i in range(3))
    for tid, config in first[:-1]:
        s.on_trial_complete(tid, _result(config))
    assert s.suggest("wait") is None  # one trial of the batch still runs: no look yet
    s.save(str(tmp_path / "searcher.pkl"))  # Tune's saved state; the driver is killed here
    s.on_trial_complete(first[-1][0], _result(first[-1][1]))
    assert "look 1 of at most 2 at 3 seeds: 1 of 2 comparisons resolved; next: rows b, ref to 5 seeds" \
        in capsys.readouterr().out
    second = _batch(s, 100)
    assert sorted((c[ROW_KEY], c[SEED_KEY]) for _, c in second) == [("b", 3), ("b", 4), ("ref", 3), ("ref", 4)]
    study = optuna.load_study(study_name="s", storage=url)
    by_row = {t.params[ROW_KEY]: t for t in study.trials}
    assert by_row["a"].state == optuna.trial.TrialState.COMPLETE  # row a runs no more: told its mean now
    assert by_row["a"].value == pytest.approx(60.0 + 1) and by_row["a"].user_attrs[SEEDS_ATTR] == [0, 1, 2]
    assert by_row["b"].state == optuna.trial.TrialState.RUNNING and by_row["b"].user_attrs[SEEDS_ATTR] == [0, 1, 2, 3, 4]
    for tid, config in second:
        s.on_trial_complete(tid, _result(config))
    assert "stop: all resolved" in capsys.readouterr().out
    from ray.tune.search import Searcher

    assert s.suggest("more") == Searcher.FINISHED
    study = optuna.load_study(study_name="s", storage=url)
    assert all(t.state == optuna.trial.TrialState.COMPLETE for t in study.trials)
    b = [t for t in study.trials if t.params[ROW_KEY] == "b"][0]
    assert b.value == pytest.approx(sum(LAST["b"][:5]) / 5 + 1)

    # --resume from the state saved before the batch ended (the same Optuna storage, told meanwhile): the trial that
    # was running ends again, the same look follows, nothing told twice
    resumed = _searcher(url)
    resumed.restore(str(tmp_path / "searcher.pkl"))
    resumed.on_trial_complete(first[-1][0], _result(first[-1][1]))
    again = _batch(resumed, 200)
    assert sorted((c[ROW_KEY], c[SEED_KEY]) for _, c in again) == [("b", 3), ("b", 4), ("ref", 3), ("ref", 4)]
    assert resumed.standing().looks == s.standing().looks[:1]
