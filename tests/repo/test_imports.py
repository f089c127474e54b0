"""The import graph keeps its shape: studies and bench -> search_spaces -> adbs_lab -> adbs, adbs without
ray/optuna/mlflow, search spaces without ray/mlflow/adbs_lab, no circles; and
studies/ and bench/ use only the public names of adbs and adbs_lab (not `_private`, and in a module's `__all__`
when it declares one), so a maintainer may change the rest freely.

The contracts live in pyproject.toml ([tool.importlinter]); `lint-imports` in the repository root checks the
same. Imports inside functions count as imports here: a circle closed inside a function is still a circle
(it only fails later, and only on some paths). Imports under `if TYPE_CHECKING:` do not: they never run.
"""

from __future__ import annotations

import ast
import functools
import sys
from pathlib import Path

import grimp
import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("adbs", "adbs_lab", "studies", "bench", "search_spaces", "testing")


@pytest.fixture
def repo_on_path(monkeypatch):
    """The packages of this checkout, not an installed copy, are the ones analysed. Tests of bench/'s scripts put
    bench/ itself on sys.path, where `bench` is bench/bench.py: here it is the folder (a namespace package)."""
    monkeypatch.chdir(ROOT)
    monkeypatch.setattr(sys, "path", [p for p in sys.path if Path(p or ".").resolve() != ROOT / "bench"])
    for name in [m for m in sys.modules if m == "bench" or m.startswith("bench.")]:
        monkeypatch.delitem(sys.modules, name)
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
    graph = grimp.build_graph(*PACKAGES, cache_dir=None, exclude_type_checking_imports=True)
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


# -- studies/ and bench/ use the public names of adbs and adbs_lab only -------------------------------------------

SCRIPTS = ("studies", "bench")
LIBRARIES = ("adbs", "adbs_lab")


@functools.cache
def _module_file(module: str) -> Path | None:
    base = ROOT.joinpath(*module.split("."))
    for f in (base.with_suffix(".py"), base / "__init__.py"):
        if f.is_file():
            return f
    return None


@functools.cache
def _declared_all(module: str) -> frozenset[str] | None:
    """The module's `__all__` as written in its source (no import), None when it declares none."""
    f = _module_file(module)
    if f is None:
        return None
    for node in ast.parse(f.read_text()).body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "__all__" for t in node.targets):
            return frozenset(ast.literal_eval(node.value))
    return None


def _is_public(module: str, name: str) -> bool:
    """`name` of library module `module`: not `_private`, and in its `__all__` when it declares one (a submodule
    of a package is public unless its own name is private)."""
    if name.startswith("_") or any(part.startswith("_") for part in module.split(".")):
        return False
    if _module_file(f"{module}.{name}") is not None:
        return True
    declared = _declared_all(module)
    return declared is None or name in declared


def private_uses(source: str) -> list[str]:
    """Every use of a private name of adbs or adbs_lab in `source`: `from M import _x` (or a name M's `__all__`
    leaves out), and `m._x` (or such a name) where m is a library module the source imported."""
    tree = ast.parse(source)
    modules: dict[str, str] = {}  # local name -> library module it is bound to
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module \
                and node.module.split(".")[0] in LIBRARIES:
            for alias in node.names:
                if not _is_public(node.module, alias.name):
                    found.append(f"line {node.lineno}: from {node.module} import {alias.name}")
                if _module_file(f"{node.module}.{alias.name}") is not None:
                    modules[alias.asname or alias.name] = f"{node.module}.{alias.name}"
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] in LIBRARIES:
                    if any(part.startswith("_") for part in alias.name.split(".")):
                        found.append(f"line {node.lineno}: import {alias.name}")
                    if alias.asname:
                        modules[alias.asname] = alias.name
                    else:
                        modules[alias.name.split(".")[0]] = alias.name.split(".")[0]
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in modules:
            module = modules[node.value.id]
            if not node.attr.startswith("__") and not _is_public(module, node.attr):
                found.append(f"line {node.lineno}: {node.value.id}.{node.attr} ({module})")
    return found


def test_studies_and_bench_use_only_public_names_of_adbs_and_adbs_lab():
    found = [f"{f.relative_to(ROOT)} {use}" for folder in SCRIPTS for f in sorted((ROOT / folder).rglob("*.py"))
             for use in private_uses(f.read_text())]
    assert not found, "private names used:\n" + "\n".join(found)


def test_private_uses_sees_each_kind_of_private_name():
    source = ("from adbs.data.loader import _normalise\nfrom adbs_lab.driver.launch import _fit\n"
              "from adbs_lab import study\nfrom adbs_lab.driver import launch as la\nimport adbs_lab.driver.outcome\n"
              "study._env_defaults()\nla._search(None)\nstudy.run(None, None)\nla.launch(None)\n"
              "from adbs_lab.driver.outcome import trial_error, not_declared\n")
    assert private_uses(source) == [
        "line 1: from adbs.data.loader import _normalise", "line 2: from adbs_lab.driver.launch import _fit",
        "line 10: from adbs_lab.driver.outcome import not_declared",
        "line 6: study._env_defaults (adbs_lab.study)", "line 7: la._search (adbs_lab.driver.launch)"]


def test_tests_of_private_helpers_are_few_and_say_so():
    """A test may reach a private helper where the public path hides what it checks; it says so in a comment
    (naming the helper as private), and such tests stay few."""
    users = {f.relative_to(ROOT / "tests").as_posix(): private_uses(f.read_text())
             for f in sorted((ROOT / "tests").rglob("test_*.py"))}
    users = {name: uses for name, uses in users.items() if uses}
    silent = [name for name in users if "# " not in (text := (ROOT / "tests" / name).read_text())
              or not any("private" in line for line in text.splitlines() if line.lstrip().startswith("#"))]
    assert not silent, f"tests using private names without a comment that says so: {silent}"
    assert len(users) <= 12, f"{len(users)} test files use private names: {sorted(users)}"


def _lazy_block(node: ast.If) -> bool:
    """`if TYPE_CHECKING: <imports> else: <name = light.lazy("module")>...`: modules declared, none imported."""
    return (ast.unparse(node.test) == "TYPE_CHECKING" and all(isinstance(n, (ast.Import, ast.ImportFrom)) for n in node.body)
            and all(isinstance(n, ast.Assign) and ast.unparse(n.value).startswith("light.lazy(") for n in node.orelse))


def _module_level_script(source: str) -> list[str]:
    """Statements at a script's module level other than its docstring, imports, the sys.path line that lets it run
    from any cwd, its signal handler (`light.guard(__name__)`, which does nothing when imported: adbs/light.py), its
    lazy modules (`if TYPE_CHECKING:` imports, else `light.lazy` declarations), named constants, definitions and the
    `if __name__ == "__main__":` call."""
    found = []
    for node in ast.parse(source).body:
        if isinstance(node, (ast.Import, ast.ImportFrom, ast.FunctionDef, ast.ClassDef, ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [getattr(node, "target", None)]
            if isinstance(node, (ast.Assign, ast.AnnAssign)) and not all(
                    isinstance(t, ast.Name) and t.id.isupper() for t in targets):
                found.append(f"line {node.lineno}: {ast.unparse(node)[:60]}")
            continue
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
            continue  # a docstring
        if isinstance(node, ast.Expr) and (ast.unparse(node).startswith("sys.path.insert(0, ")
                                           or ast.unparse(node) == "light.guard(__name__)"):
            continue
        if isinstance(node, ast.If) and _lazy_block(node):
            continue
        if isinstance(node, ast.If) and ast.unparse(node.test) == "__name__ == '__main__'":
            continue
        found.append(f"line {node.lineno}: {ast.unparse(node).splitlines()[0][:60]}")
    return found


@pytest.mark.parametrize("script", ["paper.py", "ablation.py", "alpha_sweep.py", "boundary.py", "hosts.py",
                                    "kshot_grid.py"])
def test_a_study_script_runs_nothing_at_import(script):
    """A study is a plan plus a call: what it runs is under `if __name__ == "__main__":` (studies/paper.py: main()),
    so another script can import its plan (studies/paper.py imports the other four)."""
    assert _module_level_script((ROOT / "studies" / script).read_text()) == []


def test_module_level_script_is_seen():
    assert _module_level_script('"""doc"""\nimport sys\nX = 1\nopts = parse()\nmain()\n'
                                'if __name__ == "__main__":\n    main()\n') == [
        "line 4: opts = parse()", "line 5: main()"]
    assert _module_level_script('light.guard(__name__)\nif TYPE_CHECKING:\n    import pandas as pd\nelse:\n'
                                '    pd = light.lazy("pandas")\nif TYPE_CHECKING:\n    import x\nelse:\n'
                                '    x = run()\nlight.guard("x")\n') == [
        "line 6: if TYPE_CHECKING:", "line 10: light.guard('x')"]
