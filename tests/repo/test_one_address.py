"""Every name has one address: the module that defines it (docs/architecture.md, "Modules of adbs_lab/").

By AST, over all the repository's Python (adbs, adbs_lab, studies, bench, search_spaces, mlflow, testing, tests):
- `from M import n` takes n from the module that binds it by a definition or an assignment, never from a module
  that only imported it (a re-export kept for an old address); and `m.n`, where m is a module of the repository,
  reads n only from its owner too (mypy's no_implicit_reexport sees this where it checks; bench/ it does not check,
  its scripts' types being loose). Assigning `m.n = ...` is allowed: it patches the name where m looks it up, which
  is how bench/lockstep.py and bench/epoch_breakdown.py swap a step of adbs/loops.py. A package's face
  (`__init__.py`) may gather names (adbs/__init__.py lazily, adbs/config/__init__.py, adbs/hosts/__init__.py), and so
  may adbs_lab/study.py, the one face study scripts import;
- a module's `__all__` lists only names it defines (faces excepted); no `from x import *`; no module-level import
  marked `noqa: F401` (an import kept only to be re-exported) outside the faces;
- the faces of adbs_lab's packages import nothing and list only their modules in `__all__`, so importing one costs
  nothing and `from adbs_lab.results import tables` is the module.
"""

from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
TOPS = ("adbs", "adbs_lab", "studies", "bench", "search_spaces", "mlflow", "testing", "tests")
FACES = ("adbs_lab.study",)  # beside every package's __init__.py


def _modules(root: Path) -> dict[str, Path]:
    out = {}
    for top in TOPS:
        for p in (root / top).rglob("*.py") if (root / top).is_dir() else ():
            parts = list(p.relative_to(root).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            out[".".join(parts)] = p
    return out


def _top_statements(tree: ast.Module):
    """Module-level statements, into if/try blocks; not under `if TYPE_CHECKING:` (never runs)."""
    for node in tree.body:
        if isinstance(node, ast.If):
            if isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING":
                continue
            yield from node.body + node.orelse
        elif isinstance(node, ast.Try):
            yield from node.body + [s for h in node.handlers for s in h.body] + node.orelse + node.finalbody
        else:
            yield node


def _bindings(path: Path) -> tuple[set[str], dict[str, tuple[str, str | None]], list[str] | None]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    defined: set[str] = set()
    imported: dict[str, tuple[str, str | None]] = {}
    all_names = None
    for n in _top_statements(tree):
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            defined.add(n.name)
        elif isinstance(n, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            targets = n.targets if isinstance(n, ast.Assign) else [n.target]
            defined |= {x.id for t in targets for x in ast.walk(t) if isinstance(x, ast.Name)}
            if any(isinstance(t, ast.Name) and t.id == "__all__" for t in targets) and n.value is not None:
                try:
                    all_names = list(ast.literal_eval(n.value))
                except ValueError:
                    pass
        elif isinstance(n, ast.ImportFrom) and n.module and n.level == 0:
            for a in n.names:
                imported[a.asname or a.name] = (n.module, a.name)
        elif isinstance(n, ast.Import):
            for a in n.names:
                imported[a.asname or a.name.split(".")[0]] = (a.name, None)
    return defined, imported, all_names


def _module_names(tree: ast.Module, mods: dict[str, Path]) -> dict[str, str]:
    """Local name -> repository module it is bound to, by any import in the file (functions' included)."""
    bound: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.asname and a.name in mods:
                    bound[a.asname] = a.name
                elif not a.asname and a.name.split(".")[0] in mods:
                    bound[a.name.split(".")[0]] = a.name.split(".")[0]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            for a in node.names:
                if f"{node.module}.{a.name}" in mods:
                    bound[a.asname or a.name] = f"{node.module}.{a.name}"
    return bound


def _attribute_reads(rel: str, tree: ast.Module, mods: dict[str, Path], info: dict, faces: set[str]) -> list[str]:
    """`m.n` read (not assigned) where module m only imports n: the name's address is its owner's."""
    bound = _module_names(tree, mods)
    out = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Attribute) or isinstance(node.ctx, ast.Store):
            continue
        parts, base = [node.attr], node.value
        while isinstance(base, ast.Attribute):
            parts.insert(0, base.attr)
            base = base.value
        if not isinstance(base, ast.Name) or base.id not in bound:
            continue
        module = ".".join([bound[base.id], *parts[:-1]])
        if module not in mods or module in faces or f"{module}.{node.attr}" in mods:
            continue
        defined, imported, _ = info[module]
        if node.attr not in defined and node.attr in imported:
            out.append(f"{rel}:{node.lineno}: {ast.unparse(node)} reads {node.attr} from {module}, which only "
                       f"imports it (its owner: {imported[node.attr][0]})")
    return out


def problems(root: Path) -> list[str]:
    mods = _modules(root)
    info = {m: _bindings(p) for m, p in mods.items()}
    faces = {m for m, p in mods.items() if p.name == "__init__.py"} | set(FACES)
    out = []
    for m, p in mods.items():
        rel = p.relative_to(root).as_posix()
        defined, imported, all_names = info[m]
        tree = ast.parse(p.read_text(encoding="utf-8"))
        lines = p.read_text(encoding="utf-8").splitlines()
        for node in ast.walk(tree):
            if not isinstance(node, ast.ImportFrom) or node.level or node.module not in info:
                continue
            for a in node.names:
                if a.name == "*":
                    out.append(f"{rel}:{node.lineno}: from {node.module} import *")
                    continue
                if f"{node.module}.{a.name}" in mods or node.module in faces:
                    continue  # a module, or a face's name
                src_defined, src_imported, _ = info[node.module]
                if a.name not in src_defined and a.name in src_imported:
                    owner = src_imported[a.name][0]
                    out.append(f"{rel}:{node.lineno}: {a.name} from {node.module}, which only imports it "
                               f"(its owner: {owner})")
        out += _attribute_reads(rel, tree, mods, info, faces)
        if m in faces:
            continue
        for n in _top_statements(tree):
            if isinstance(n, (ast.Import, ast.ImportFrom)) and "noqa: F401" in lines[n.lineno - 1]:
                out.append(f"{rel}:{n.lineno}: an import kept with noqa: F401 (a re-export)")
        for name in all_names or []:
            if name not in defined:
                out.append(f"{rel}: __all__ lists {name}, which it does not define")
    for face in sorted((root / "adbs_lab").glob("*/__init__.py")):
        tree = ast.parse(face.read_text(encoding="utf-8"))
        rel = face.relative_to(root).as_posix()
        if any(isinstance(n, (ast.Import, ast.ImportFrom)) and not (isinstance(n, ast.ImportFrom)
               and n.module == "__future__") for n in tree.body):
            out.append(f"{rel}: a face of adbs_lab imports something")
        _, _, all_names = _bindings(face)
        missing = [n for n in all_names or [] if not (face.parent / f"{n}.py").exists()
                   and not (face.parent / n / "__init__.py").exists()]
        if all_names is None or missing:
            out.append(f"{rel}: __all__ must list its modules (not modules: {missing})")
    return out


def test_every_name_is_imported_from_its_owner():
    found = problems(REPO)
    assert not found, "names taken from a module that does not own them:\n" + "\n".join(found)


def test_a_planted_reexport_is_found(tmp_path):
    (tmp_path / "adbs").mkdir()
    (tmp_path / "adbs" / "__init__.py").write_text("")
    (tmp_path / "adbs" / "owner.py").write_text("def f():\n    return 1\n")
    (tmp_path / "adbs" / "middle.py").write_text("from adbs.owner import f  # noqa: F401\n__all__ = ['f']\n")
    (tmp_path / "adbs" / "user.py").write_text("from adbs.middle import f\nfrom adbs.owner import f as g\n"
                                               "import adbs.middle as mid\nfrom adbs import middle\n"
                                               "mid.f()\nmiddle.f = g\nadbs.middle.f()\nimport adbs.middle\n")
    (tmp_path / "adbs_lab" / "pkg").mkdir(parents=True)
    (tmp_path / "adbs_lab" / "__init__.py").write_text("")
    (tmp_path / "adbs_lab" / "pkg" / "__init__.py").write_text("from adbs.owner import f\n__all__ = ['f']\n")
    found = "\n".join(problems(tmp_path))
    assert "adbs/user.py:1: f from adbs.middle, which only imports it (its owner: adbs.owner)" in found
    assert "adbs/middle.py:1: an import kept with noqa: F401" in found
    assert "__all__ lists f, which it does not define" in found
    assert "adbs_lab/pkg/__init__.py: a face of adbs_lab imports something" in found
    assert "adbs/user.py:5: mid.f reads f from adbs.middle, which only imports it (its owner: adbs.owner)" in found
    assert "adbs/user.py:7: adbs.middle.f reads f from adbs.middle" in found
    assert "adbs/user.py:2" not in found and "adbs/user.py:6" not in found  # patching where middle looks f up
