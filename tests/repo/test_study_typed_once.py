"""A study's facts are typed once: the raw `--objectives` strings on the options object are read only by the
option parser and its checks (adbs_lab/driver/options.py) and by the preflight (adbs_lab/driver/preflight.py),
which parses them into the study object every later step reads (adbs_lab/driver/prepared.py: Study.objectives).

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
                       "objectives (adbs_lab/driver/prepared.py: Study.objectives) instead: " + ", ".join(found))


# --- no step after the preflight reads the options -------------------------------------------------------------------
# The preflight types the options once into the study object (adbs_lab/driver/prepared.py: Study, and its
# RunSettings); the steps after it (claim, launch, session, summarise, --resume's checks, ...) read that object only,
# so a new flag reaches them through one field. Read off the options: the parser and its checks (options.py), the
# cheap checks before the driver loads (flags.py), the preflight (preflight.py) and RunSettings.of (prepared.py).
READERS = {Path("adbs_lab/driver/options.py"), Path("adbs_lab/driver/flags.py"), Path("adbs_lab/driver/preflight.py"),
           Path("adbs_lab/driver/prepared.py")}
ENTRIES = READERS | {Path("adbs_lab/driver/run.py"), Path("adbs_lab/driver/compose.py"), Path("adbs_lab/study.py")}
"""Modules that take the options to hand them to the preflight, and may read them before it: a study's entry
(adbs_lab/study.py, adbs_lab/driver/run.py: run, main, code) and a composition's parts (compose.py: Part.opts, each
part's own run's options); a function of theirs that takes the study reads the study."""
STUDY_TYPES = ("Study",)


def option_reads(source: str, entry: bool = False) -> list[int]:
    """Lines of `source` that read a flag after the preflight: any `.opts` of the study (`p.opts`), a name `opts`
    inside a function that takes the study (annotated Study), and, outside an entry, an attribute of something's
    `.opts` (`x.opts.resume`; `.opts.replace`, a changed copy handed to an entry, passes) and an import of
    StudyOptions."""
    out = []
    tree = ast.parse(source)
    for node in ast.walk(tree):
        if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Attribute) and node.value.attr == "opts"
                and node.attr != "replace" and not entry):
            out.append(node.lineno)
        elif isinstance(node, ast.Attribute) and node.attr == "opts" and isinstance(node.value, ast.Name) \
                and node.value.id == "p":
            out.append(node.lineno)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and any(
                isinstance(a.annotation, ast.Name) and a.annotation.id in STUDY_TYPES
                or isinstance(a.annotation, ast.Constant) and a.annotation.value in STUDY_TYPES
                for a in node.args.args + node.args.kwonlyargs):
            out += [n.lineno for n in ast.walk(node) if isinstance(n, ast.Name) and n.id == "opts"]
        elif isinstance(node, ast.ImportFrom) and not entry and any(a.name == "StudyOptions" for a in node.names):
            out.append(node.lineno)
    return sorted(set(out))


def test_the_reader_finds_flags_read_after_the_preflight():
    assert option_reads("x = p.opts.resume\ny = part.opts.folder\nz = c.part.opts.replace(resume=True)\n") == [1, 2]
    assert option_reads("def f(p: Study):\n    opts = p.opts\n    return opts.name\n") == [2, 3]
    assert option_reads("from adbs_lab.driver.options import StudyInputError, StudyOptions\n") == [1]
    assert option_reads("from adbs_lab.driver.options import StudyOptions\ny = part.opts.folder\n", entry=True) == []
    assert option_reads("x = p.opts\n", entry=True) == [1]
    assert option_reads("def f(p: Study):\n    return p.run.resume, p.experiment\n") == []
    assert option_reads("def run(plan, opts: StudyOptions):\n    return opts.plan_only\n", entry=True) == []


def test_no_step_after_the_preflight_reads_the_options():
    found = []
    for path in sorted((REPO / "adbs_lab").rglob("*.py")):
        rel = path.relative_to(REPO)
        if rel not in READERS:
            found += [f"{rel}:{line}" for line in option_reads(path.read_text(), entry=rel in ENTRIES)]
    assert not found, ("a flag read off the options after the preflight; read the study's field (adbs_lab/driver/"
                       "prepared.py: Study, its `run`: RunSettings) and add the field there, typed once by the "
                       "preflight: " + ", ".join(found))
