"""Citations of this repository's code stay true: every `path/file.py: name` in the code and the docs names a file
that exists and a name defined in it (a def, a class or an assignment, found with ast; `Class.method` for a member).

What counts as a citation: a file ending in .py followed by ": " and a name, with or without backticks around either
(`adbs/loops.py: train_base`, `adbs/cache.py: BaseCache.key`). A path from the repository root is this repository's;
a bare file name is the module beside the citing file, else the one file of that name in the repository. `file.py:NAME`
without a space is the search-space syntax of the studies' --space flag, not a citation. A lower-case word followed
by more prose (`adbs/runtime.py: settings gives ...`) is a sentence, not a name.

Citations of other code bases (the authors' released code, the hosts' official code, Ray's, MLflow's, Optuna's) name
files this repository does not have; they carry a marker on their line or the three lines above it (for a Markdown
table, its header row): one of MARKERS, e.g. "the released code's helper.py: base_train" or "OrCo's Network.py:
update_base"; a path under another package's name (ray/tune/tuner.py) is marked by it; a host's module whose docstring
names the host's code ("Public code: zysong0113/SAVC (...)") marks its citations of files it does not have. Such a
citation is not checked; one with neither a file here nor a marker fails.

A name counts where the module defines it; an import counts only in a package's __init__.py (its public names), so
a citation of a name a module merely imports points at the module that defines it.
"""

from __future__ import annotations

import ast
import functools
import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SUFFIXES = {".py", ".md", ".toml", ".yaml", ".yml", ".sh", ".sbatch", ".txt", ".cfg"}
NO_SUFFIX = {".ci/run", "deploy/Dockerfile"}
CITATION = re.compile(r"(?<![\w./-])`?(?P<path>[\w./-]*\w\.py)`?: `?(?P<name>[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*)(?P<after>.?.?)")
MARKERS = re.compile(r"authors'|released|official|\b(?:OrCo|SAVC|ALICE|Ray|MLflow|Optuna|PyTorch|torchvision)'s\b"
                     r"|zysong0113/|another repository|that repo", re.IGNORECASE)
FOREIGN_ROOTS = {"ray", "optuna", "torch", "torchvision", "sklearn", "pandas", "numpy"}  # other packages' source trees
FILE_MARKER = "Public code:"  # in the first lines of a host's module docstring (adbs/hosts/)
NOT_NAMES = {"md", "json", "txt", "parquet", "csv", "db", "yaml", "toml", "png", "pdf"}  # `importance.py: importance.md`


def _files() -> list[str]:
    listed = ["git", "ls-files", "--cached", "--others", "--exclude-standard"]  # new files too, before a commit
    out = subprocess.run(listed, cwd=ROOT, capture_output=True, text=True, check=True).stdout.split()
    return [f for f in out if (Path(f).suffix in SUFFIXES or f in NO_SUFFIX) and (ROOT / f).is_file()]


@functools.cache
def _by_basename() -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for f in _files():
        if f.endswith(".py"):
            out.setdefault(Path(f).name, []).append(f)
    return out


def _resolve(path: str, citing: str) -> str | None:
    """The repository file `path` names from `citing`, else None (another code base's file)."""
    if (ROOT / path).is_file() and "/" in path:
        return path
    if "/" not in path:
        beside = Path(citing).parent / path
        if (ROOT / beside).is_file():
            return beside.as_posix()
        found = _by_basename().get(path, [])
        if len(found) == 1:
            return found[0]
    return None


@functools.cache
def _names(path: str) -> tuple[frozenset[str], dict[str, frozenset[str]]]:
    """Every name a module defines or imports, anywhere in it, and each class's members."""
    tree = ast.parse((ROOT / path).read_text(encoding="utf-8"))
    names: set[str] = set()
    members: dict[str, set[str]] = {}

    def targets(node: ast.AST) -> list[str]:
        return [n.id for n in ast.walk(node) if isinstance(n, ast.Name)]

    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names.update(t for tg in node.targets for t in targets(tg))
        elif isinstance(node, (ast.AnnAssign, ast.AugAssign)):
            names.update(targets(node.target))
        elif isinstance(node, (ast.Import, ast.ImportFrom)) and path.endswith("__init__.py"):
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
        if isinstance(node, ast.ClassDef):
            inside = members.setdefault(node.name, set())
            for item in node.body:
                if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                    inside.add(item.name)
                elif isinstance(item, ast.Assign):
                    inside.update(t for tg in item.targets for t in targets(tg))
                elif isinstance(item, ast.AnnAssign):
                    inside.update(targets(item.target))
            for fn in (n for n in ast.walk(node) if isinstance(n, ast.FunctionDef)):  # self.x = ... in methods
                for a in (n for n in ast.walk(fn) if isinstance(n, (ast.Assign, ast.AnnAssign))):
                    for tg in (a.targets if isinstance(a, ast.Assign) else [a.target]):
                        if isinstance(tg, ast.Attribute) and isinstance(tg.value, ast.Name) and tg.value.id == "self":
                            inside.add(tg.attr)
    return frozenset(names), {k: frozenset(v) for k, v in members.items()}


def _defines(path: str, name: str) -> bool:
    names, members = _names(path)
    head, *rest = name.split(".")
    if not rest:
        return head in names
    return head in members and rest[0] in members[head] or head in names and head not in members


def _is_prose(name: str, after: str) -> bool:
    """`adbs/runtime.py: settings gives` is a sentence: a lower-case word without `_` followed by another word."""
    return name.islower() and "_" not in name and "." not in name and after.startswith(" ") and after[1:2].isalpha()


def _table_header(lines: list[str], i: int) -> str:
    j = i
    while j > 0 and lines[j - 1].lstrip().startswith("|"):
        j -= 1
    return lines[j] if lines[i].lstrip().startswith("|") else ""


def citations() -> list[tuple[str, int, str, str, str, bool]]:
    """(citing file, line, path, name, resolved path or '', marked) of every citation in the repository."""
    out = []
    for f in _files():
        if f == "tests/repo/test_citations.py":  # its docstring shows the forms
            continue
        lines = (ROOT / f).read_text(encoding="utf-8", errors="replace").splitlines()
        file_marked = any(FILE_MARKER in line for line in lines[:15])
        for i, line in enumerate(lines):
            for m in CITATION.finditer(line):
                name, after = m["name"], m["after"]
                if name.rsplit(".", 1)[-1] in NOT_NAMES or _is_prose(name, after):
                    continue
                context = "\n".join(lines[max(0, i - 3):i + 1]) + "\n" + _table_header(lines, i)
                marked = (bool(MARKERS.search(context)) or file_marked or "/" in m["path"]
                          and m["path"].split("/")[0] in FOREIGN_ROOTS)
                out.append((f, i + 1, m["path"], name, _resolve(m["path"], f) or "", marked))
    return out


def test_the_survey_finds_citations_of_both_kinds():
    found = citations()
    assert sum(1 for c in found if c[4]) > 50 and sum(1 for c in found if not c[4]) > 20


def test_every_citation_of_this_repository_resolves():
    hint = "; a citation of another code base carries a marker, e.g. authors' code: "
    bad = [f"{f}:{line}: {path}: {name} ({'no ' + name + ' in ' + res if res else 'no such file here' + hint + path})"
           for f, line, path, name, res, marked in citations()
           if (res and not _defines(res, name)) or (not res and not marked)]
    assert not bad, "stale or unmarked citations:\n" + "\n".join(bad)


@pytest.mark.parametrize("text, ok", [
    ("see adbs/loops.py: train_base", True),
    ("see adbs/loops.py: no_such_function_here", False),
    ("see adbs/no_such_module.py: train_base", False),
    ("see helper.py: base_train", False),  # another code base, unmarked
    ("the released code's helper.py: base_train", True),
    ("`adbs/runtime.py: Runtime`", True),
    ("adbs/cache.py: BaseCache.nothing_like_this", False),
])
def test_the_check_itself(tmp_path, text, ok):
    """The rule on one line, so that the repository-wide test can fail."""
    ms = [m for m in CITATION.finditer(text) if not _is_prose(m["name"], m["after"])]
    assert ms
    good = all((res := _resolve(m["path"], "adbs/x.md")) and _defines(res, m["name"])
               or not res and MARKERS.search(text) for m in ms)
    assert bool(good) == ok


PATH_MENTION = re.compile(r"(?<![\w./-])(?:adbs|adbs_lab|studies|bench|search_spaces|tests|mlflow|deploy|examples)"
                          r"/[\w/.-]*\.py\b")


def test_every_path_of_this_repository_exists():
    """A bare mention (`adbs_lab/stores/study_folder.py`, no name) names a file that exists; NAME-style placeholders and the
    made-up paths of tests' inputs aside."""
    bad = []
    for f in _files():
        if f.startswith("tests/"):
            continue
        for i, line in enumerate((ROOT / f).read_text(encoding="utf-8", errors="replace").splitlines()):
            bad += [f"{f}:{i + 1}: {p}" for p in PATH_MENTION.findall(line)
                    if not (ROOT / p).exists() and not Path(p).stem.isupper()]
    assert not bad, "paths that do not exist:\n" + "\n".join(bad)
