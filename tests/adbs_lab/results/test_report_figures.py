"""studies/report.py's figures and row order, read back from the matplotlib artists it draws: a store in the tracker's
layout built with MlflowClient (no Ray, no training) holding an alpha sweep whose trials ran in the order 0.05, 0.1,
0.02, 0.01, and a hosts study (`<host>` and `<host>+ADBS` rows), two seeds each."""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import runpy
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
from mlflow.entities import Metric, Param
from mlflow.tracking import MlflowClient

from adbs.config import Config
from adbs_lab.records import metrics_keys as K

REPORT = Path(__file__).resolve().parents[3] / "studies" / "report.py"
ALPHAS = (0.05, 0.1, 0.02, 0.01)  # the order the sweep's trials ran in
HOSTS = {"baseline": "baseline", "baseline+ADBS": "adb+ic", "SAVC": "baseline", "SAVC+ADBS": "adb+ic"}


def _study(c: MlflowClient, name: str, rows: dict[str, dict], order: list[str], baseline) -> None:
    exp = c.create_experiment(name)
    parent = c.create_run(exp, run_name=f"{name} 2026-01-01", tags={
        "adbs.role": "study", "adbs.study": name, "adbs.order": json.dumps(order),
        "adbs.baseline": json.dumps(baseline) if isinstance(baseline, dict) else baseline})
    rng = np.random.default_rng(0)
    for n, (label, seed) in enumerate((lab, seed) for lab in rows for seed in (0, 1)):
        run = c.create_run(exp, run_name=f"{label} seed={seed}", tags={
            "mlflow.parentRunId": parent.info.run_id, "adbs.role": "trial", "adbs.study": name, "adbs.label": label,
            "adbs.trial_id": f"{name}{n}", "adbs.optuna_trial": str(n), "adbs.state": K.COMPLETE})
        accs = [70.0 - 5 * s + 2 * n % 5 + rng.normal(0, 2) for s in range(3)]
        metrics = [Metric(f"session/{k}", a + d, 0, s) for s, a in enumerate(accs)
                   for k, d in (("test_acc", 0), ("val_acc", 1), ("test_base_acc", 3), ("val_base_acc", 4))]
        metrics += [Metric(f"session/{k}", a - 20, 0, s) for s, a in enumerate(accs) if s
                    for k in ("test_novel_acc", "val_novel_acc")]
        metrics += [Metric("summary/val_avg_acc", sum(accs) / 3 + 1, 0, 0),
                    Metric("summary/test_avg_acc", sum(accs) / 3, 0, 0)]
        c.log_batch(run.info.run_id, metrics=metrics, params=[
            Param(k, json.dumps(v) if isinstance(v, list) else str(v))
            for k, v in Config(seed=seed, **rows[label]).to_dict().items()])
        c.set_terminated(run.info.run_id, "FINISHED")
    c.set_terminated(parent.info.run_id)


def _run(*args: str) -> SimpleNamespace:
    """`python studies/report.py ARGS` in this process (as tests/helpers/scripts.py: in_process runs a script, without
    capsys, which a module's fixture cannot have): returncode, stdout, stderr."""
    environ, argv = dict(os.environ), list(sys.argv)  # the script sets MLflow's variables for its own process
    out, err, code = io.StringIO(), io.StringIO(), 0
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            sys.argv[:] = [str(REPORT), *args]
            runpy.run_path(str(REPORT), run_name="__main__")
    except SystemExit as e:
        code = e.code or 0
    finally:
        sys.argv[:] = argv
        os.environ.clear()
        os.environ.update(environ)
    return SimpleNamespace(returncode=code, stdout=out.getvalue(), stderr=err.getvalue())


@pytest.fixture(scope="module")
def reports(tmp_path_factory) -> dict[str, SimpleNamespace]:
    """Each command's result, its --out folder (`out`) and {file name: the matplotlib Figure saved to it} (`figures`),
    the files still written: `report.py alpha_sweep`, `hosts`, `alpha_sweep hosts`, and `alpha_sweep --reference
    nope` (refused)."""
    import matplotlib.figure

    root = tmp_path_factory.mktemp("store")
    uri = f"sqlite:///{root / 'mlflow.db'}"
    c = MlflowClient(uri)
    _study(c, "alpha_sweep", {f"alpha={a:g}": {"variant": "adb+ic", "alpha": a} for a in ALPHAS}, [], "")
    _study(c, "hosts", {lab: {"variant": v} for lab, v in HOSTS.items()}, list(HOSTS),
           {"baseline+ADBS": "baseline", "SAVC+ADBS": "SAVC"})
    save, figures = matplotlib.figure.Figure.savefig, {}

    def keep(self, path, *a, **k):
        figures[Path(path).name] = self
        return save(self, path, *a, **k)

    out = {}
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(matplotlib.figure.Figure, "savefig", keep)
        for name, studies in (("alpha_sweep", ["alpha_sweep"]), ("hosts", ["hosts"]),
                              ("both", ["alpha_sweep", "hosts"])):
            figures = {}
            r = _run(*studies, "--tracking-uri", uri, "--out", str(root / name))
            assert r.returncode == 0, r.stderr
            out[name] = SimpleNamespace(**vars(r), out=root / name, figures=figures)
    out["refused"] = _run("alpha_sweep", "--reference", "nope", "--tracking-uri", uri)
    return out


@pytest.fixture
def drawn(monkeypatch) -> dict[str, object]:
    """{file name: the matplotlib Figure saved to it}: every figure drawn, still written."""
    import matplotlib.figure

    saved: dict[str, object] = {}
    save = matplotlib.figure.Figure.savefig

    def keep(self, path, *a, **k):
        saved[Path(path).name] = self
        return save(self, path, *a, **k)

    monkeypatch.setattr(matplotlib.figure.Figure, "savefig", keep)
    return saved


def _line_colors(fig) -> dict[str, tuple]:
    from matplotlib.colors import to_rgba

    return {ln.get_label(): to_rgba(ln.get_color()) for ax in fig.axes for ln in ax.get_lines()
            if not ln.get_label().startswith("_")}


def _dot_colors(fig) -> dict[str, tuple]:
    """{row: colour} of the trade-off's points ('SAVC (baseline)' is row SAVC)."""
    return {c.get_label().split(" (")[0]: tuple(c.get_facecolor()[0]) for ax in fig.axes for c in ax.collections
            if not c.get_label().startswith("_") and len(c.get_facecolor()) and "configurations" not in c.get_label()}


def test_report_lists_a_sweeps_rows_by_alpha_not_in_the_order_its_trials_ran(reports):
    """docs/tables.md, "What a table compares": rows in the order of the values they swept. The list of rows a wrong
    --reference prints, the table and the trade-off figure's legend all read 0.01, 0.02, 0.05, 0.1."""
    expected = ["alpha=0.01", "alpha=0.02", "alpha=0.05", "alpha=0.1"]
    assert reports["refused"].returncode == 2
    assert re.findall(r"'(alpha=[\d.]+)'", reports["refused"].stderr) == expected
    r = reports["alpha_sweep"]
    assert re.findall(r"^(alpha=[\d.]+)\s", r.stdout, flags=re.M) == expected
    legend = [t.get_text() for t in r.figures["tradeoff.png"].legends[0].get_texts()]
    assert [x for x in legend if x.startswith("alpha")] == expected


def test_alpha_sensitivity_leaves_room_above_the_tallest_bar(reports):
    """The y-limit clears the highest mean + 95% CI half-width (intervals.mean_t, the interval the bars draw)."""
    from adbs_lab.stats.intervals import mean_t

    r = reports["alpha_sweep"]
    trials = pd.read_parquet(r.out / "trials.parquet")
    top = max(m + h for col in ("test_avg_acc", "val_avg_acc")
              for m, h in trials.groupby("alpha")[col].apply(lambda v: mean_t(list(v))))
    lo, hi = r.figures["alpha_sensitivity.png"].axes[0].get_ylim()
    assert hi > top + 0.02 * (hi - lo)  # headroom, not the edge


def test_a_row_has_one_colour_in_every_figure_and_in_report_py_a_b(reports):
    """hosts: the curves and the trade-off give each row the same colour (a host's two rows its hue, light and dark),
    four rows four colours; `report.py alpha_sweep hosts` keeps each row's own colour, a line style per study."""
    curves = _line_colors(reports["hosts"].figures["hosts_sessions.png"])
    dots = _dot_colors(reports["hosts"].figures["tradeoff.png"])
    assert set(curves) == set(HOSTS) and len(set(curves.values())) == 4
    assert {lab: dots[lab] for lab in HOSTS} == curves
    sweep = _dot_colors(reports["alpha_sweep"].figures["tradeoff.png"])
    assert len(sweep) == len(ALPHAS) and len(set(sweep.values())) == len(ALPHAS)
    fig = reports["both"].figures["compare_sessions.png"]
    both = _line_colors(fig)
    assert {lab: both[f"hosts: {lab}"] for lab in HOSTS} == curves
    assert {lab: both[f"alpha_sweep: {lab}"] for lab in sweep} == sweep
    styles = {ln.get_label().split(":")[0]: ln.get_linestyle() for ln in fig.axes[0].get_lines()}
    assert styles["alpha_sweep"] != styles["hosts"]


def test_the_hosts_curves_have_bands_and_a_legend_off_the_axes(reports):
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    fig = reports["hosts"].figures["hosts_sessions.png"]
    ax = fig.axes[0]
    assert len(ax.collections) == len(HOSTS)  # a band per row: each has two seeds
    assert "95% CI" in ax.get_title() and "t-interval" in ax.get_title()
    renderer = FigureCanvasAgg(fig).get_renderer()
    assert ax.get_legend().get_window_extent(renderer).x0 >= ax.get_window_extent(renderer).x1


@pytest.mark.parametrize("name", ["alpha_sweep", "hosts", "both"])
def test_report_md_shows_each_figure_once(reports, name):
    out = reports[name].out
    shown = re.findall(r"!\[[^\]]*\]\(([^)]+)\)", (out / "report.md").read_text())
    assert shown and sorted(shown) == sorted(p.name for p in out.glob("*.png"))  # every figure, each once


def test_the_similarity_panels_name_their_seed_and_the_tables_mean(tmp_path, drawn):
    """One trial per panel (t-SNE is not averaged): its title says which seed, and the table's D_cs (the mean over
    the row's seeds) stands under the trial's own."""
    import torch

    from adbs.metrics import embedding_sample
    from adbs_lab.results import figures

    g = torch.Generator().manual_seed(0)
    sample = K.encode_embeddings(embedding_sample(torch.randn(40, 8, generator=g), torch.arange(40) % 10,
                                                  torch.randn(10, 8, generator=g), n_base=6, per_class=4))
    trials = pd.DataFrame({"state": K.COMPLETE, "label": ["adb+ic", "adb+ic", "baseline"], "seed": [1, 0, 0],
                           "d_cs": [0.80, 0.90, 0.70], K.EMBEDDINGS: sample})
    figures.embedding_figures(trials, tmp_path, order=["baseline", "adb+ic"])
    titles = [ax.get_title() for ax in drawn["prototype_similarity.png"].axes if ax.get_title()]
    assert titles[0].startswith("baseline (seed 0): D_cs") and "table's D_cs: 0.700, mean of 1 seed" in titles[0]
    assert titles[1].startswith("adb+ic (seed 0): D_cs") and "table's D_cs: 0.850, mean of 2 seed" in titles[1]
    tsne = drawn["tsne.png"]
    assert [ax.get_title() for ax in tsne.axes] == ["baseline (seed 0)", "adb+ic (seed 0)"]
    assert "means over seeds" in tsne._suptitle.get_text()
