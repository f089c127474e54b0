"""docs/architecture.md, the maintainers' map, names every module of adbs/ and adbs_lab/ (its citations are checked
by tests/test_citations.py)."""

from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def test_the_map_names_every_module():
    text = (REPO / "docs" / "architecture.md").read_text(encoding="utf-8")
    modules = sorted(p.relative_to(REPO).as_posix() for top in ("adbs", "adbs_lab") for p in (REPO / top).rglob("*.py"))
    assert len(modules) > 60
    missing = [m for m in modules if f"`{m}`" not in text]
    assert not missing, f"docs/architecture.md has no paragraph for: {missing}"
