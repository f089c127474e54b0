"""The studies' measured times have one owner, studies/times.json: the Plans' estimates (the start line), the --smoke
estimate of studies/paper.py and the figures of the README's and docs/studies.md's study tables all come from it."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from studies import times

REPO = Path(__file__).resolve().parents[2]
README = (REPO / "README.md").read_text(encoding="utf-8")
STUDIES_PAGE = (REPO / "docs" / "studies.md").read_text(encoding="utf-8")  # the studies in full
TABLES = {"README.md": README, "docs/studies.md": STUDIES_PAGE}
"""The two study tables, each with a row per study whose last cell is its default run's time."""
STUDIES = ["ablation", "alpha_sweep", "boundary", "hosts", "knobs", "kshot_grid"]


def _row(study: str, page: str = "README.md") -> str:
    rows = [line for line in TABLES[page].splitlines() if line.startswith(f"| `{study}` |")]
    assert len(rows) == 1, f"{page}'s study table has no single row for {study}"
    return rows[0]


@pytest.mark.parametrize("page", TABLES)
@pytest.mark.parametrize("study", STUDIES)
def test_the_readme_quotes_the_measured_default_run(study, page):
    assert times.shown(times.of(study)["default"]) in _row(study, page).rsplit("|", 2)[-2]


LOAD_SAID = re.compile(r"idle|load")
"""How a quoted time names the machine's load: an idle machine, or its load average."""


@pytest.mark.parametrize("page", TABLES)
@pytest.mark.parametrize("study", STUDIES)
def test_every_quoted_time_says_the_load_it_was_measured_at(study, page):
    """A time measured on an idle machine reads as a promise to a user at load 2-5 (who measured 445 s for the
    ablation's 263 s): each row and quick-start line that quotes a time names the load, and the figure measured with
    other jobs running (times.json's `loaded`) is quoted beside the idle one."""
    cell = _row(study, page).rsplit("|", 2)[-2]
    assert LOAD_SAID.search(cell), cell
    loaded = times.of(study).get("loaded")
    lines = [cell] + [line for line in TABLES[page].splitlines() if f"studies/{study}.py " in line and "#" in line
                      and times.shown(times.of(study)["default"]) in line]
    for line in lines:
        assert LOAD_SAID.search(line), line
        if loaded:
            assert f"{loaded['wall_s']} s at load average {loaded['load']}" in line, line


def test_the_quick_start_and_the_paper_section_quote_them_too():
    lines = {name: next(line for line in README.splitlines() if f"studies/{name}.py " in line and "#" in line)
             for name in ("ablation", "alpha_sweep")}
    for name, line in lines.items():
        assert times.shown(times.of(name)["default"]) in line, line
    assert f"took {times.shown(times.of('paper')['smoke'])} wall" in STUDIES_PAGE  # the paper study in full
    assert f"`--smoke`: {times.shown(times.of('paper')['smoke'])} wall" in _row("paper")  # and the README's table


@pytest.mark.parametrize("study", STUDIES + ["paper"])
def test_no_study_keeps_a_figure_of_its_own(study):
    """Scripts read the figures (times.trial_s, times.smoke): no number for est_trial_s, no SMOKE_S table, no
    measured wall time in a docstring."""
    text = (REPO / "studies" / f"{study}.py").read_text(encoding="utf-8")
    assert not re.search(r"est_(smoke_)?trial_s=\d", text) and "SMOKE_S" not in text
    assert not re.search(r"\d+(\.\d+)? (s|min) wall", text.split('"""')[1])


def test_a_plan_and_the_paper_estimate_read_the_file():
    from adbs_lab.driver import options
    from studies import ablation, paper

    plan, _ = ablation.plan(options.parse("ablation", options.Defaults(seeds=(0,)), argv=[])[0])
    assert plan.est_trial_s == times.trial_s("ablation") and plan.est_smoke_trial_s == times.smoke_trial_s()
    seconds, trials = times.smoke("hosts")
    opts, _ = options.parse("paper", options.Defaults(seeds=(0,)), argv=["--smoke"])
    part = type("Checked", (), {"name": "hosts", "trials": trials * 2, "fewest": None})()
    assert paper._estimate(opts, None)(part) == f"~{seconds * 2 / 60:.1f} min (measured on a busy 2-core CPU)"
