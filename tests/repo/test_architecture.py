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
    """tests/ mirrors the packages, and tests/conftest.py puts every folder of it on sys.path (a few test modules
    import another's data writers), so two test files of one name would shadow each other."""
    from collections import Counter

    names = Counter(p.name for p in (REPO / "tests").rglob("*.py") if p.name != "__init__.py")
    assert not [n for n, k in names.items() if k > 1]


def test_every_test_module_a_test_imports_exists():
    """A test that reuses another test module's helpers (`from test_data import write_mini`) names a file that
    exists somewhere under tests/: a renamed test module breaks no import that only a slow test makes."""
    import re

    names = {p.stem for p in (REPO / "tests").rglob("test_*.py")}
    imported = {m for p in (REPO / "tests").rglob("*.py")
                for m in re.findall(r"^\s*from (test_\w+) import", p.read_text(), flags=re.M)}
    assert imported and not imported - names, sorted(imported - names)
