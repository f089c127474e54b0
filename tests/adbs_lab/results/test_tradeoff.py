"""The base/novel trade-off figure: per configuration the mean over seeds of each trial's last session, the Pareto
front worked out by hand, validation and test panels, drawn for every study."""

import pandas as pd

from adbs_lab.records import metrics_keys as K
from adbs_lab.results import run_files
from adbs_lab.results import tradeoff


def _sessions():
    rows = []
    # (label, seed, last val base, last val novel); session 1 is not the last one and must not count
    for lab, seed, base, novel in [("baseline", 0, 70, 20), ("baseline", 1, 72, 22), ("adb", 0, 60, 40),
                                   ("adb+ic", 0, 58, 38), ("x", 0, 50, 50)]:
        for s, (b, n) in enumerate([(80, float("nan")), (1, 1), (base, novel)]):
            rows.append({"label": lab, "trial_id": f"{lab}{seed}", "seed": seed, "session": s, "state": K.COMPLETE,
                         "val_base_acc": b, "val_novel_acc": n, "test_base_acc": b - 1, "test_novel_acc": n,
                         "test_acc": b})
    return pd.DataFrame(rows)


def test_points_average_each_trials_last_session_and_the_front_by_hand():
    p = tradeoff.points(_sessions(), "val").set_index("label")
    assert p.loc["baseline", "base"] == 71 and p.loc["baseline", "novel"] == 21 and p.loc["baseline", "seeds"] == 2
    p = p.reset_index()
    # adb+ic (58, 38) is beaten by adb (60, 40) on both; the other three are each best somewhere
    assert sorted(p.loc[tradeoff.pareto(p), "label"]) == ["adb", "baseline", "x"]


def test_every_study_draws_it_with_the_baseline_marked(tmp_path):
    s = _sessions()
    trials = s.drop_duplicates("trial_id")[["label", "trial_id", "seed", "state"]]
    files = run_files.study_figures("ablation", s, trials, tmp_path)
    assert (tmp_path / "tradeoff.png") in files and (tmp_path / "tradeoff.png").stat().st_size > 5000
    assert tradeoff.baselines({"SAVC+ADBS": "SAVC", "SAVC": "SAVC"}) == {"SAVC"}
    # _space_baseline: a private helper of adbs_lab/results/run_files.py, tested directly (which row a study's figure marks)
    assert run_files._space_baseline("ablation") == "baseline"


def _drawn(monkeypatch) -> list:
    """The figures the study draws, kept as they are saved (matplotlib's Figure.savefig, recorded)."""
    import matplotlib.figure

    drawn: list = []
    monkeypatch.setattr(matplotlib.figure.Figure, "savefig", lambda self, *a, **k: drawn.append(self))
    return drawn


def test_a_row_has_one_colour_in_every_figure_and_the_sessions_plot_has_bands_and_an_outside_legend(
        tmp_path, monkeypatch):
    """The sessions plot and the trade-off figure give each row the same colour (in the table's row order), the
    sessions plot shades each row's 95% CI over seeds, and its legend lies outside the axes (covering no curve)."""
    from matplotlib.colors import to_rgba

    drawn = _drawn(monkeypatch)
    s = _sessions()
    trials = s.drop_duplicates("trial_id")[["label", "trial_id", "seed", "state"]]
    order = ["baseline", "adb", "adb+ic", "x"]
    run_files.study_figures("ablation", s.iloc[::-1], trials, tmp_path, order=order)  # trials in another order
    curves, trade = drawn[0].axes[0], drawn[1].axes[0]
    lines = {ln.get_label(): to_rgba(ln.get_color()) for ln in curves.get_lines()}
    assert list(lines) == order and lines["baseline"] == to_rgba("C0") and lines["adb"] == to_rgba("C1")
    dots = {c.get_label(): tuple(c.get_facecolor()[0]) for c in trade.collections if c.get_label() in lines}
    assert dots and all(dots[lab] == lines[lab] for lab in dots)
    assert len([c for c in curves.collections]) == 1  # one band: only baseline has two seeds
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    renderer = FigureCanvasAgg(drawn[0]).get_renderer()
    assert curves.get_legend().get_window_extent(renderer).x0 >= curves.get_window_extent(renderer).x1


def test_alpha_sensitivity_keeps_every_bar_inside_the_axes_and_its_legend_off_them(tmp_path, monkeypatch):
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    from adbs_lab.results import figures

    drawn = _drawn(monkeypatch)
    trials = pd.DataFrame([{"alpha": a, "seed": s, "state": K.COMPLETE, "test_avg_acc": 50 + 10 * s * (a == 0.01),
                            "val_avg_acc": 50.0 + s} for a in (0.01, 0.1) for s in (0, 1, 2)])
    figures.alpha_sensitivity(trials, tmp_path / "a.png")
    ax = drawn[0].axes[0]
    renderer = FigureCanvasAgg(drawn[0]).get_renderer()
    top = max(y for c in ax.collections for seg in c.get_segments() for _, y in seg)  # the error bars' ends
    assert top < ax.get_ylim()[1]
    assert ax.get_legend().get_window_extent(renderer).y1 <= ax.get_window_extent(renderer).y0


def test_the_report_shows_the_trade_off_figure_once():
    md = run_files.report_markdown(study="t", table_md="T", best=None, savings=run_files.pruning_savings(pd.DataFrame()),
                                   figures=["t_sessions.png", "tradeoff.png"])
    assert md.count("![tradeoff.png]") == 1 and md.count("![t_sessions.png]") == 1
