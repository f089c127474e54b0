"""The method library stays readable: no function in adbs/ over 80 lines, and the two loops that are the method
(adbs/loops.py: train_base, adbs/sessions.py: run_sessions) under 60, each reading as "for each phase (session),
for each epoch: train, validate, checkpoint"."""

import ast
from pathlib import Path

ADBS = Path(__file__).resolve().parents[2] / "adbs"


def _lengths() -> dict[str, int]:
    out = {}
    for path in sorted(ADBS.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                out[f"{path.relative_to(ADBS.parent)}: {node.name}"] = node.end_lineno - node.lineno + 1
    return out


def test_no_function_in_adbs_is_over_80_lines():
    long = {name: n for name, n in _lengths().items() if n > 80}
    assert not long, f"functions over 80 lines (split them): {long}"


def test_the_loops_are_under_60_lines():
    lengths = _lengths()
    for name in ("adbs/loops.py: train_base", "adbs/sessions.py: run_sessions"):
        assert lengths[name] < 60, (name, lengths[name])
