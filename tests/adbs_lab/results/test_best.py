"""One owner of "best" (adbs_lab/results/best.py): a study without a reference row makes no verdicts and names no
best, in its start line, dry run, table notes, progress lines and best_config.json; a study that varies data
conditions ranks none of them, and its trade-off figure puts no two cells on one Pareto front; the figures' unpaired
bands say that the verdicts are paired. No Ray: the preflight's typed plan, the progress callback with stub trials,
and the figures drawn off screen."""

from __future__ import annotations

from types import SimpleNamespace

import pandas as pd
import pytest

from adbs_lab import study
from adbs_lab.driver import launch, options, run, summarise
from adbs_lab.driver.preflight import study as typed
from adbs_lab.records import metrics_keys as K
from adbs_lab.results import best, figures, run_files, tradeoff
from adbs_lab.search.seeds.policy import Standing

# the README's own study ("A researcher's second day"), without and with its guards
BARE = study.Plan(name="my_study", space={"variant": "adb+ic", "shots": [1, 5], "alpha": [0.02, 0.05]},
                  space_source="tests")
ALPHA = study.Plan(name="my_study", space={"variant": "adb+ic", "shots": 5, "alpha": [0.02, 0.05]},
                   space_source="tests", reference_axis="alpha", reference_value=0.02)
GUARDED = study.Plan(name="my_study", space={"variant": "adb+ic", "shots": [1, 5], "alpha": [0.02, 0.05]},
                     space_source="tests", reference_axis="alpha", reference_value=0.02, conditions=("shots",))


def _prepared(plan, tmp_path, tracking_uri, *flags):
    opts = options.parse("t", argv=["--smoke", "--dry-run", "--gpus-per-trial", "0", "--storage",
                                    str(tmp_path / "runs"), "--tracking-uri", tracking_uri, *flags])[0]
    return typed(plan, opts)


def _trials(labels_means: dict[str, list[float]]) -> pd.DataFrame:
    from adbs.config import Config

    rows = [{"label": lab, "seed": i, "state": K.COMPLETE, "val_avg_acc": v, "test_avg_acc": v}
            for lab, vals in labels_means.items() for i, v in enumerate(vals)]
    t = pd.DataFrame(rows)
    for k, v in Config().to_dict().items():
        if k not in t:
            t[k] = str(v) if isinstance(v, list) else v
    return t


def test_the_rule_names_its_reason():
    assert best.withheld("s", conditions=("ways", "shots"), verdicts=True).startswith(
        "s varies data conditions (ways, shots), not knobs: no configuration is best across them")
    said = best.withheld("s", verdicts=False)
    assert "no reference row, so it makes no verdicts and names no best" in said and "reference_axis=" in said
    assert best.withheld("s", verdicts=True) is None
    assert best.progress_text(verdicts=True) is None and "no best" in best.progress_text(verdicts=False)
    assert "no best across shots" in best.progress_text(("shots",), verdicts=True)


def test_a_study_without_a_reference_row_says_so_as_it_starts_and_in_its_dry_run(tmp_path, tracking_uri, capsys):
    p = _prepared(BARE, tmp_path, tracking_uri)
    assert not p.verdicts.pairs and "no reference row" in p.no_best
    launch.print_start(p, 2)
    run.dry_run(p)
    out = capsys.readouterr().out
    assert out.count("note: my_study has no reference row, so it makes no verdicts and names no best") == 2, out
    # the guarded README study: compared within each shots value, so the reason is its condition, said once each
    g = _prepared(GUARDED, tmp_path / "g", tracking_uri)
    assert set(g.verdicts.pairs) == {("shots=1 alpha=0.05", "shots=1 alpha=0.02"),
                                  ("shots=5 alpha=0.05", "shots=5 alpha=0.02")}
    assert g.no_best.startswith("my_study varies data conditions (shots)")
    # a reference row and no condition varied: verdicts, and a best they back or not
    assert _prepared(ALPHA, tmp_path / "a", tracking_uri).no_best is None
    # one cell of a condition varies none: a best within it
    one = study.Plan(name="k", space={"variant": ["baseline", "adb+ic"], "shots": 5}, space_source="tests",
                     conditions=("shots",), reference_axis="variant", reference_value="baseline")
    assert _prepared(one, tmp_path / "o", tracking_uri).no_best is None


def test_best_config_names_no_best_without_verdicts_nor_across_conditions(tmp_path, tracking_uri, capsys):
    """Without verdicts best_config.json keeps the highest mean for reference (--config reruns it), marked not named;
    across data conditions it holds no configuration. The closing line and report.md say the same."""
    trials = _trials({"shots=1 alpha=0.02": [50.0], "shots=1 alpha=0.05": [52.0],
                      "shots=5 alpha=0.02": [60.0], "shots=5 alpha=0.05": [61.0]})
    bare = summarise.best_record(_prepared(BARE, tmp_path, tracking_uri), trials, pd.DataFrame(), Standing())
    assert bare["named"] is False and "no reference row" in bare["why"] and bare["config_label"] == "shots=5 alpha=0.05"
    assert "alpha" in bare["config"] and "mean_over_seeds" in bare  # a configuration to rerun, not a finding
    summarise.print_best(SimpleNamespace(best=bare, trials=trials, pareto=None))
    said = capsys.readouterr().out
    assert said.startswith("best configuration: none named (my_study has no reference row") and \
        "for reference only" in said and "best configuration by" not in said, said
    md = run_files.report_markdown(study="my_study", table_md="", best=bare, savings=run_files.pruning_savings(trials))
    assert "None named: my_study has no reference row" in md and "for reference only" in md
    chosen = summarise.best_record(_prepared(GUARDED, tmp_path / "g", tracking_uri), trials, pd.DataFrame(), Standing())
    assert chosen["config_label"] is None and "data conditions (shots)" in chosen["why"]
    a = _trials({"alpha=0.02": [50.0, 51.0], "alpha=0.05": [52.0, 53.0]})
    assert summarise.best_record(_prepared(ALPHA, tmp_path / "a", tracking_uri), a, pd.DataFrame(), Standing())["config_label"] \
        == "alpha=0.05"
    md = run_files.report_markdown(study="my_study", table_md="", best=chosen, savings=run_files.pruning_savings(trials))
    assert "None: my_study varies data conditions (shots)" in md and "shots=5 alpha=0.05`:" not in md
    # studies/report.py reads the decision back from the parent run's tag instead of ranking the rows itself
    for why, cells in (("x has no reference row", False), ("x varies data conditions (shots)", True)):
        assert best.from_tag({best.TAG: best.tag_value(why, ("shots",) if cells else ())}) == (why, cells)
    assert best.from_tag({}) == (None, False) and best.from_tag({best.TAG: "not json"}) == (None, False)


def _stub(trial_id, config):
    return SimpleNamespace(trial_id=trial_id, config=config, status="TERMINATED", last_result=None)


@pytest.mark.parametrize("plan, said", [(BARE, "no reference row: no verdicts, no best named"),
                                        (GUARDED, "no best across shots (data conditions")])
def test_progress_lines_name_no_best(plan, said, tmp_path, tracking_uri, capsys):
    p = _prepared(plan, tmp_path, tracking_uri)
    progress = launch.progress_lines(p, lambda t: K.COMPLETE, 2)
    ts = [_stub("a", {"shots": 1, "alpha": 0.02}), _stub("b", {"shots": 5, "alpha": 0.05})]
    for t, v in zip(ts, (50.0, 63.5)):
        t.last_result = {K.OBJECTIVE: v, "summary/test_avg_acc": v, K.REPORT_KIND: K.KIND_SUMMARY}
        progress.on_trial_complete(0, ts, t)
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 2 and all(("| " + said) in line and "best val" not in line for line in lines), lines
    a = _prepared(ALPHA, tmp_path / "a", tracking_uri)  # verdicts: the best so far, as before
    progress = launch.progress_lines(a, lambda t: K.COMPLETE, 2)
    progress.on_trial_complete(0, ts[:1], ts[0])
    assert capsys.readouterr().out.rstrip().endswith("| best val avg acc 50.00 (alpha=0.02)")


def _cells():
    rows = []
    for ways, shots, variant, base, novel in [(5, 1, "baseline", 70, 20), (5, 1, "adb+ic", 60, 40),
                                              (10, 5, "baseline", 80, 10), (10, 5, "adb+ic", 75, 15)]:
        lab = f"ways={ways} shots={shots} variant={variant}"
        for s, (b, n) in enumerate([(90, float("nan")), (base, novel)]):
            rows.append({"label": lab, "trial_id": lab, "seed": 0, "session": s, "state": K.COMPLETE,
                         "val_base_acc": b, "val_novel_acc": n, "test_base_acc": b, "test_novel_acc": n,
                         "test_acc": b, "ways": ways, "shots": shots, "variant": variant})
    return pd.DataFrame(rows)


def _drawn(monkeypatch) -> list:
    import matplotlib.figure

    drawn: list = []
    monkeypatch.setattr(matplotlib.figure.Figure, "savefig", lambda self, *a, **k: drawn.append(self))
    return drawn


def test_the_tradeoff_figure_puts_no_two_cells_on_one_front(tmp_path, monkeypatch):
    """(10-way 5-shot baseline) beats every 5-way point on base accuracy: drawn as one front, it would crown it."""
    drawn = _drawn(monkeypatch)
    s = _cells()
    refs = {lab: lab.replace("adb+ic", "baseline") for lab in s["label"].unique()}
    tradeoff.figure(s, tmp_path / "t.png", baseline=refs, conditions=("ways", "shots"))
    fig = drawn[-1]
    names = [t.get_text() for t in fig.legends[0].get_texts()]
    assert sorted(names) == ["ways=10 shots=5", "ways=5 shots=1"], names
    assert "no Pareto front across ways, shots" in fig._suptitle.get_text()
    assert all("Pareto front" not in line.get_label() for ax in fig.axes for line in ax.get_lines())
    tradeoff.figure(s[s["ways"] == 5], tmp_path / "one.png", conditions=("ways", "shots"))  # one cell: its front
    assert any(line.get_label() == "Pareto front" for line in drawn[-1].axes[0].get_lines())


def test_the_figures_bands_say_they_are_unpaired_and_the_verdicts_paired(tmp_path, monkeypatch):
    drawn = _drawn(monkeypatch)
    s = _cells()
    s = pd.concat([s, s.assign(seed=1, trial_id=s["trial_id"] + "1", test_acc=s["test_acc"] + 2)])
    run_files.session_curves(s, tmp_path / "s.png", "t")
    title = drawn[-1].axes[0].get_title()
    assert "unpaired" in title and "verdicts are paired" in title, title
    t = _trials({"alpha=0.02": [50.0, 52.0], "alpha=0.05": [53.0, 54.0]})
    t["alpha"] = [0.02, 0.02, 0.05, 0.05]
    figures.alpha_sensitivity(t, tmp_path / "a.png")
    title = drawn[-1].axes[0].get_title()
    assert "unpaired" in title and "verdicts are paired" in title, title


def test_a_races_progress_lines_name_no_best_before_its_leader(tmp_path, tracking_uri, capsys):
    """A race's best is the leader its verdicts choose on fresh seeds; the highest value of one trial so far (a
    screening sample on seed 0, or one fresh seed of a contender) is no best, and named none is said instead."""
    from optuna.distributions import FloatDistribution

    raced = study.Plan(name="my_study", space={"variant": "adb+ic", "alpha": FloatDistribution(0.01, 0.1, log=True)},
                       space_source="tests")
    parser = options.parser("t", options.Defaults(num_samples=4))
    opts = options.parse(parser, argv=["--smoke", "--dry-run", "--gpus-per-trial", "0", "--storage",
                                       str(tmp_path / "runs"), "--tracking-uri", tracking_uri, "--num-samples", "4",
                                       "--seeds", "auto"])[0]
    p = typed(raced, opts)
    assert p.seeding.chooses and p.no_best is None  # it names a best: its leader, at its end
    progress = launch.progress_lines(p, lambda t: K.COMPLETE, 2)
    t = _stub("a", {"alpha": 0.05})
    t.last_result = {K.OBJECTIVE: 61.0, "summary/test_avg_acc": 61.0, K.REPORT_KIND: K.KIND_SUMMARY}
    progress.on_trial_complete(0, [t], t)
    line = capsys.readouterr().out.rstrip()
    assert line.endswith("| " + best.RACE_PROGRESS) and "best val avg acc" not in line, line
