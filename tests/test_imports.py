"""The import graph keeps its shape: studies -> adbs_lab -> adbs, adbs without ray/optuna/mlflow, no circles.

The contracts live in pyproject.toml ([tool.importlinter]); `lint-imports` in the repository root checks the
same. Imports inside functions count as imports here: a circle closed inside a function is still a circle
(it only fails later, and only on some paths).
"""

from __future__ import annotations

from pathlib import Path

import grimp
import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("adbs", "adbs_lab", "studies")


@pytest.fixture
def repo_on_path(monkeypatch):
    """The packages of this checkout, not an installed copy, are the ones analysed."""
    monkeypatch.chdir(ROOT)
    monkeypatch.syspath_prepend(str(ROOT))


def test_import_contracts_are_kept(repo_on_path, capsys):
    from importlinter.cli import lint_imports

    code = lint_imports(config_filename=str(ROOT / "pyproject.toml"), no_cache=True, no_logo=True)
    assert code == 0, capsys.readouterr().out


def _circles(graph: grimp.ImportGraph) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative): each holds a circle."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []
    for root in sorted(graph.modules):
        if root in index:
            continue
        work = [(root, iter(sorted(graph.find_modules_directly_imported_by(root))))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            for child in children:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.find_modules_directly_imported_by(child)))))
                    break
                if child in on_stack:
                    low[node] = min(low[node], index[child])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        m = stack.pop()
                        on_stack.discard(m)
                        component.append(m)
                        if m == node:
                            break
                    if len(component) > 1:
                        out.append(sorted(component))
    return out


def test_no_import_circle_among_project_modules(repo_on_path):
    """Across packages and between a package and its own modules too, which the sibling contract does not see."""
    graph = grimp.build_graph(*PACKAGES, cache_dir=None)
    circles = _circles(graph)
    detail = [" <-> ".join(c) + ": " + "; ".join(
        f"{a} -> {b} (line {d['line_number']})" for a in c for b in c
        for d in graph.get_import_details(importer=a, imported=b)) for c in circles]
    assert not circles, "import circles:\n" + "\n".join(detail)


def test_circle_finder_sees_a_circle():
    graph = grimp.ImportGraph()
    for a, b in (("p.a", "p.b"), ("p.b", "p.c"), ("p.c", "p.a"), ("p.c", "p.d")):
        graph.add_import(importer=a, imported=b)
    assert _circles(graph) == [["p.a", "p.b", "p.c"]]
