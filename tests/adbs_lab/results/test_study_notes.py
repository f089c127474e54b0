"""The lines above a study's tables (adbs_lab/results/notes.py): a smoke run says its numbers are not meaningful, and
every setting the command changed from the study's defaults is named, in the table, table.md and report.md alike."""

from __future__ import annotations

import pandas as pd

from adbs_lab import study
from adbs_lab.driver import options
from adbs_lab.results import run_files
from adbs_lab.results import notes as study_notes
from adbs_lab.results import tables

PLAN = study.Plan(name="t", space={"variant": "adb+ic", "alpha": [0.01, 0.1]}, space_source="tests")


def _notes(*flags: str) -> list[str]:
    opts = options.parse("t", argv=[*flags, "--gpus-per-trial", "0"])[0]
    base = study.validate(PLAN, opts)[0]
    return study_notes.lines(PLAN, opts, base)


def test_a_flag_the_study_does_not_sweep_is_named_and_a_default_value_is_not():
    assert _notes() == []
    assert _notes("--shots", "3", "--set", "base_epochs=4") == [
        "settings departing from t's defaults: shots=3, base_epochs=4"]
    assert _notes("--shots", "5") == []  # the default preset's value: nothing changed
    assert _notes("--preset", "smoke")[0].startswith("settings departing from t's defaults: preset=smoke")


def test_a_smoke_run_says_its_numbers_are_not_meaningful():
    assert _notes("--smoke") == [study_notes.SMOKE]
    assert _notes("--smoke", "--shots", "3") == [study_notes.SMOKE,
                                                 "settings departing from t's defaults: shots=3"]


def test_the_notes_head_the_table_the_markdown_table_and_the_report():
    notes = [study_notes.SMOKE, "settings departing from t's defaults: shots=3"]
    trials = pd.DataFrame()
    assert tables.annotate("TABLE", trials, notes=notes).splitlines() == [*notes, "TABLE"]
    assert tables.annotate("TABLE", trials, markdown=True, notes=notes).split("\n\n") == [*notes, "TABLE"]
    md = run_files.report_markdown(study="t", table_md="TABLE", best=None, savings=run_files.pruning_savings(trials),
                                   notes=notes).splitlines()
    assert md[:5] == ["# t", "", f"**{notes[0]}**", "", f"**{notes[1]}**"]
    assert study_notes.from_tag({study_notes.TAG: '["a", "b"]'}) == ["a", "b"] and study_notes.from_tag({}) == []
