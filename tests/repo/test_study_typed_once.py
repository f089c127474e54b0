"""A study's facts are typed once: the raw `--objectives` strings on the options object are read only by the
option parser and its checks (adbs_lab/driver/options.py) and by the preflight (adbs_lab/driver/preflight.py),
which parses them into the study object every later step reads (adbs_lab/driver/prepared.py: Prepared.objectives).

By AST over adbs_lab/ and studies/: no `<options>.objectives` (nor `getattr(<options>, "objectives")`) where
<options> is the options object: a name `opts`, `options` or ending in `_opts`, or an attribute `.opts` (as in
`p.opts.objectives`). The typed field, `p.objectives`, and a report's objectives read from its MLflow tag
(`study.objectives` in adbs_lab/results/from_store.py) are not the options object and pass.
"""

from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
ALLOWED = {Path("adbs_lab/driver/preflight.py"), Path("adbs_lab/driver/options.py")}


def _is_options(node: ast.expr) -> bool:
    if isinstance(node, ast.Name):
        return node.id in ("opts", "options") or node.id.endswith("_opts")
    if isinstance(node, ast.Attribute):
        return node.attr == "opts" or node.attr.endswith("_opts")
    return False


def raw_objective_reads(source: str) -> list[int]:
    """Lines of `source` that read --objectives off the options object."""
    out = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Attribute) and node.attr == "objectives" and _is_options(node.value):
            out.append(node.lineno)
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "getattr"
              and len(node.args) >= 2 and _is_options(node.args[0])
              and isinstance(node.args[1], ast.Constant) and node.args[1].value == "objectives"):
            out.append(node.lineno)
    return sorted(out)


def test_the_reader_finds_raw_reads_and_passes_the_typed_field():
    assert raw_objective_reads("objectives.effective(opts.objectives)\nx = p.opts.objectives\n") == [1, 2]
    assert raw_objective_reads("getattr(part_opts, 'objectives')") == [1]
    assert raw_objective_reads("p.objectives\nstudy.objectives\nobjectives.DEFAULT\nself.objectives") == []


def test_raw_objectives_are_read_only_by_the_preflight_and_the_options():
    found = []
    for top in ("adbs_lab", "studies"):
        for path in sorted((REPO / top).rglob("*.py")):
            rel = path.relative_to(REPO)
            if rel in ALLOWED:
                continue
            found += [f"{rel}:{line}" for line in raw_objective_reads(path.read_text())]
    assert not found, ("--objectives read off the options object after the preflight; read the study's parsed "
                       "objectives (adbs_lab/driver/prepared.py: Prepared.objectives) instead: " + ", ".join(found))
