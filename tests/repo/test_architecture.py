"""docs/architecture.md, the maintainers' map, names every module of adbs/ and adbs_lab/ (its citations are checked
by tests/repo/test_citations.py)."""

from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_the_map_names_every_module():
    text = (REPO / "docs" / "architecture.md").read_text(encoding="utf-8")
    modules = sorted(p.relative_to(REPO).as_posix() for top in ("adbs", "adbs_lab") for p in (REPO / top).rglob("*.py"))
    assert len(modules) > 60
    missing = [m for m in modules if f"`{m}`" not in text]
    assert not missing, f"docs/architecture.md has no paragraph for: {missing}"


def test_ci_runs_the_readmes_set_up_and_test_commands():
    """.ci/run is the README's set-up line and test command in a fresh clone (docs/architecture.md, "Testing"): the
    lint and type checks reach CI through the tests (tests/repo/test_lint.py), so the two must not drift apart."""
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    ci = (REPO / ".ci" / "run").read_text(encoding="utf-8")
    setup = "python3 -m venv .venv && .venv/bin/pip install -e '.[test]'"
    tests = ".venv/bin/python -m pytest -q -n 2"
    assert f"{setup}   # set-up" in readme and f"{tests}                            # the tests" in readme
    assert f"\n{setup}\n" in ci and f"\n{tests}\n" in ci


def test_test_files_have_unique_names_across_folders():
    """tests/ mirrors the packages (tests/adbs_lab/results/test_tables.py tests adbs_lab/results/tables.py), and one
    name names one test module: `pytest -k test_tables`, a failure's file name and a doc's citation of a test leave no
    doubt which file is meant."""
    from collections import Counter

    names = Counter(p.name for p in (REPO / "tests").rglob("*.py") if p.name not in ("__init__.py", "conftest.py"))
    assert not [n for n, k in names.items() if k > 1]


def test_the_adbs_lab_tests_mirror_its_packages():
    """A test module of adbs_lab/ lives in the folder of the package it tests (tests/adbs_lab/<package>/), and
    every folder there is a package of adbs_lab/."""
    tests = REPO / "tests" / "adbs_lab"
    assert not list(tests.glob("test_*.py")), "move them into tests/adbs_lab/<package>/"
    folders = {d.name for d in tests.iterdir() if d.is_dir() and d.name != "__pycache__"}
    packages = {d.name for d in (REPO / "adbs_lab").iterdir() if (d / "__init__.py").is_file()}
    assert folders and folders <= packages, sorted(folders - packages)


def test_no_test_module_imports_another_or_edits_sys_path():
    """What several test modules share lives in tests/helpers/ (or, shared with bench/, in testing/) and is imported
    by its package name (`from tests.helpers.scripts import in_process`): a test module imports no other test module,
    and tests/conftest.py adds nothing to sys.path, so one file or `-k` imports the same code as the whole suite."""
    import re

    other_test = re.compile(r"^\s*(?:from|import) ((?:tests\.\S*\.)?test_\w+|_[a-z]\w*)(?: import\b|$)", flags=re.M)
    bad = {p.relative_to(REPO).as_posix(): m for p in (REPO / "tests").rglob("*.py") for m in other_test.findall(p.read_text())}
    assert not bad, bad
    assert "sys.path" not in (REPO / "tests" / "conftest.py").read_text()
    assert all((d / "__init__.py").is_file() for d in (REPO / "tests").rglob("*")
               if d.is_dir() and d.name != "__pycache__"), "each folder of tests/ is a package (tests/__init__.py)"
