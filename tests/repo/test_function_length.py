"""The code stays readable: no function in adbs/ over 80 lines, and the two loops that are the method
(adbs/loops.py: train_base, adbs/sessions.py: run_sessions) under 60, each reading as "for each phase (session),
for each epoch: train, validate, checkpoint"; no function in adbs_lab/ or studies/ over 60 lines (a study's main,
a table's columns, a report's sections: each a few functions of one step each)."""

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def _lengths(*tops: str) -> dict[str, int]:
    out = {}
    for top in tops:
        for path in sorted((REPO / top).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    out[f"{path.relative_to(REPO).as_posix()}: {node.name}"] = node.end_lineno - node.lineno + 1
    return out


def test_no_function_in_adbs_is_over_80_lines():
    long = {name: n for name, n in _lengths("adbs").items() if n > 80}
    assert not long, f"functions over 80 lines (split them): {long}"


def test_the_loops_are_under_60_lines():
    lengths = _lengths("adbs")
    for name in ("adbs/loops.py: train_base", "adbs/sessions.py: run_sessions"):
        assert lengths[name] < 60, (name, lengths[name])


def test_no_function_in_adbs_lab_or_studies_is_over_60_lines():
    lengths = _lengths("adbs_lab", "studies")
    assert "adbs_lab/results/tables.py: paper_table" in lengths and "studies/report.py: main" in lengths
    long = {name: n for name, n in lengths.items() if n > 60}
    assert not long, f"functions over 60 lines (split them): {long}"
