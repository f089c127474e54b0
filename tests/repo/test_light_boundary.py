"""The entry points parse and check their flags before torch, Ray, MLflow or pandas load, and reach them through one
boundary (adbs/light.py: lazy); their first statement is the signal handler (adbs/light.py: guard).

By AST, over the entry points (every study script, studies/report.py, studies/paper.py, studies/submit.py and
adbs/run.py) and their *light closure*: the repository modules their module-level imports name, those modules'
module-level imports, and so on (a package's __init__ with each module; `if TYPE_CHECKING:` never runs, an entry
point's `if __name__ == "__main__":` block does):

1. no module of the closure imports one of adbs.light.HEAVY at module level;
2. no function of the closure imports one of HEAVY, or a repository module whose own module-level imports reach one
   (a *heavy module*): such a module is declared at the module's top with `light.lazy(...)` and loads at its first
   use, so there is one way across, not imports scattered through the functions;
3. each `light.lazy("X")` names a module that exists: a repository module, or an installed package's;
4. no `except` clause of the closure names an attribute of a lazy module: it would import the module whenever any
   exception passes through the clause, a signal's exit too (name a light module's class, or read the class into a
   name before the `try`);
5. each entry point calls `light.guard(__name__)` before anything but its docstring, `from __future__`, `import sys`,
   `import os`, `from pathlib import Path`, the line that puts the repository on sys.path (with its `REPO = ...`)
   and `from adbs import light`.

What these modules load at run time, third-party imports of imports included, is checked by running them:
tests/repo/test_light_imports.py.
"""

from __future__ import annotations

import ast
import functools
import importlib.util
from pathlib import Path

import pytest

from adbs.light import HEAVY

REPO = Path(__file__).resolve().parents[2]
PACKAGES = ("adbs", "adbs_lab", "studies", "search_spaces")
ENTRIES = {**{f"studies.{p.stem}": p for p in sorted((REPO / "studies").glob("*.py"))
              if p.stem not in ("__init__", "times", "gpu_hours")},
           "adbs.run": REPO / "adbs" / "run.py"}
BEFORE_GUARD = {"import sys", "import os", "from pathlib import Path", "from adbs import light",
                "from __future__ import annotations"}


def _path(module: str) -> Path | None:
    """The file of a repository module, None for anything else."""
    if module.split(".")[0] not in PACKAGES:
        return None
    base = REPO.joinpath(*module.split("."))
    for p in (base.with_suffix(".py"), base / "__init__.py"):
        if p.is_file():
            return p
    return None


@functools.cache
def _tree(path: Path) -> ast.Module:
    return ast.parse(path.read_text(encoding="utf-8"))


def _type_checking(node: ast.stmt) -> bool:
    return isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING"


def _module_level(body: list[ast.stmt]):
    """The statements that run when the module is imported (or run): into if/else, try, with and class bodies,
    not into functions, not under `if TYPE_CHECKING:` (its else runs)."""
    for node in body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        yield node
        if isinstance(node, ast.If):
            yield from _module_level(node.orelse if _type_checking(node) else node.body + node.orelse)
        elif isinstance(node, ast.Try):
            yield from _module_level(node.body + [s for h in node.handlers for s in h.body] + node.orelse
                                     + node.finalbody)
        elif isinstance(node, (ast.With, ast.ClassDef)):
            yield from _module_level(node.body)


def _in_functions(tree: ast.Module):
    """The import statements inside functions (methods and nested functions too), not under TYPE_CHECKING."""
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for sub in ast.walk(node):
                if isinstance(sub, (ast.Import, ast.ImportFrom)):
                    yield sub


def _targets(node: ast.Import | ast.ImportFrom, here: str) -> list[str]:
    """The modules an import statement runs: each name and its parents, a `from m import x` submodule x too."""
    if isinstance(node, ast.Import):
        names = [a.name for a in node.names]
    else:
        base = node.module or ""
        if node.level:  # relative: from the importing module's package (itself, for a package's __init__)
            package = here.split(".") if _is_package(here) else here.split(".")[:-1]
            base = ".".join([*package[: len(package) - node.level + 1], *([base] if base else [])])
        names = [base] + [f"{base}.{a.name}" for a in node.names if _path(f"{base}.{a.name}") is not None]
    out = []
    for name in names:
        parts = name.split(".")
        out += [".".join(parts[: i + 1]) for i in range(len(parts))]
    return out


def _is_package(module: str) -> bool:
    p = _path(module)
    return p is not None and p.name == "__init__.py"


def _imports(module: str) -> list[str]:
    """What `module`'s module-level code imports (its own package's __init__ files included)."""
    path = _path(module)
    if path is None:
        return []
    parts = module.split(".")
    out = [".".join(parts[: i + 1]) for i in range(len(parts) - 1)]
    for node in _module_level(_tree(path).body):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            out += _targets(node, module)
    return out


@functools.cache
def _reaches_heavy(module: str) -> tuple[str, ...]:
    """The import chain from `module` to one of HEAVY by module-level imports (empty: none)."""
    seen: set[str] = set()
    todo: list[tuple[str, tuple[str, ...]]] = [(module, (module,))]
    while todo:
        m, chain = todo.pop()
        if m in seen:
            continue
        seen.add(m)
        if m.split(".")[0] in HEAVY:
            return chain
        todo += [(t, (*chain, t)) for t in _imports(m) if t not in seen]
    return ()


def _closure() -> dict[str, str]:
    """{repository module of the entry points' light closure: the entry point that reaches it first}."""
    out: dict[str, str] = {}
    for entry in ENTRIES:
        todo = [entry]
        while todo:
            m = todo.pop()
            if m in out or _path(m) is None:
                continue
            out[m] = entry
            todo += _imports(m)
    return out


def _lazy_names(tree: ast.Module) -> dict[str, str]:
    """{name: module} of the module-level `name = light.lazy("module")` declarations."""
    out = {}
    for node in _module_level(tree.body):
        if (isinstance(node, ast.Assign) and isinstance(node.value, ast.Call)
                and isinstance(node.value.func, ast.Attribute) and node.value.func.attr == "lazy"
                and isinstance(node.value.func.value, ast.Name) and node.value.func.value.id == "light"):
            arg = node.value.args[0]
            for t in node.targets:
                if isinstance(t, ast.Name) and isinstance(arg, ast.Constant):
                    out[t.id] = arg.value
    return out


def test_the_entry_points_light_closure_imports_no_heavy_library_at_module_level():
    bad = []
    for module, entry in _closure().items():
        for node in _module_level(_tree(_path(module)).body):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                hit = [t for t in _targets(node, module) if t.split(".")[0] in HEAVY]
                if hit:
                    bad.append(f"{module}:{node.lineno} imports {hit[0]} (reached from {entry})")
    assert not bad, "\n".join(bad)


def test_no_function_of_the_light_closure_imports_a_heavy_module_but_through_light_lazy():
    bad = []
    for module in _closure():
        for node in _in_functions(_tree(_path(module))):
            for target in _targets(node, module)[-1:] if isinstance(node, ast.Import) else _targets(node, module):
                chain = _reaches_heavy(target)
                if chain:
                    bad.append(f"{module}:{node.lineno} imports {target} inside a function ({' -> '.join(chain)}); "
                               f"declare it at the top with light.lazy (adbs/light.py)")
                    break
    assert not bad, "\n".join(bad)


def test_every_lazy_module_exists():
    bad = []
    for module in _closure():
        for name, target in _lazy_names(_tree(_path(module))).items():
            if _path(target) is None and importlib.util.find_spec(target.split(".")[0]) is None:
                bad.append(f"{module}: {name} = light.lazy({target!r}) names no module")
    assert not bad, "\n".join(bad)


def test_no_except_clause_of_the_light_closure_names_a_lazy_module():
    bad = []
    for module in _closure():
        tree = _tree(_path(module))
        lazy = _lazy_names(tree)
        for node in ast.walk(tree):
            if isinstance(node, ast.ExceptHandler) and node.type is not None:
                named = [n.value.id for n in ast.walk(node.type)
                         if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name) and n.value.id in lazy]
                if named:
                    bad.append(f"{module}:{node.lineno}: except names {named[0]}, a lazy module ({lazy[named[0]]})")
    assert not bad, "\n".join(bad)


def _guard_call(node: ast.stmt) -> bool:
    return (isinstance(node, ast.Expr) and isinstance(node.value, ast.Call)
            and ast.unparse(node.value) == "light.guard(__name__)")


def _path_line(node: ast.stmt) -> bool:
    """`REPO = Path(...)...` or `sys.path.insert(0, ...)`: what makes the repository importable from any cwd."""
    text = ast.unparse(node)
    return text.startswith("sys.path.insert(") or (isinstance(node, ast.Assign) and text.startswith("REPO = Path("))


@pytest.mark.parametrize("entry", list(ENTRIES))
def test_an_entry_point_installs_its_handler_before_anything_else(entry):
    body = _tree(ENTRIES[entry]).body
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
        body = body[1:]  # the docstring
    before = []
    for node in body:
        if _guard_call(node):
            break
        if ast.unparse(node) not in BEFORE_GUARD and not _path_line(node):
            before.append(f"line {node.lineno}: {ast.unparse(node)[:80]}")
    else:
        pytest.fail(f"{entry} never calls light.guard(__name__) at module level")
    assert not before, f"{entry} runs these before light.guard(__name__):\n" + "\n".join(before)


def test_the_checks_see_what_they_check():
    """The closure holds the entry points and the option parsing, and the heavy modules are seen as heavy: the
    checks above would pass on nothing otherwise."""
    closure = _closure()
    assert set(ENTRIES) <= set(closure) and {"adbs_lab.study", "adbs_lab.driver.options", "adbs.config"} <= set(closure)
    assert _reaches_heavy("adbs_lab.driver.run") and _reaches_heavy("adbs.trial")
    assert not _reaches_heavy("adbs_lab.study") and not _reaches_heavy("adbs.config")
    assert _lazy_names(_tree(_path("adbs_lab.study"))) == {"driver": "adbs_lab.driver.run"}
