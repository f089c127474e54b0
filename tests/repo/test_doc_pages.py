"""The README is a front door and the docs hold together: README.md is at most 300 lines with no prose line over 120
characters (code blocks and tables may be wider), and every relative link of README.md and docs/*.md names a file
that exists and, with `#anchor`, a heading of that file (GitHub's anchors)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PAGES = ["README.md", *sorted(p.relative_to(REPO).as_posix() for p in (REPO / "docs").glob("*.md"))]
MAX_LINES, MAX_WIDTH = 300, 120


def prose(text: str) -> list[tuple[int, str]]:
    """(line number, line) of every line outside fenced code blocks."""
    out, fenced = [], False
    for n, line in enumerate(text.splitlines(), 1):
        if line.lstrip().startswith("```"):
            fenced = not fenced
            continue
        if not fenced:
            out.append((n, line))
    return out


def test_the_readme_is_short():
    text = (REPO / "README.md").read_text(encoding="utf-8")
    assert len(text.splitlines()) <= MAX_LINES, f"README.md has {len(text.splitlines())} lines; move detail to docs/"


def test_no_readme_prose_line_is_wider_than_120_characters():
    text = (REPO / "README.md").read_text(encoding="utf-8")
    wide = [f"{n}: {len(line)} characters" for n, line in prose(text)
            if len(line) > MAX_WIDTH and not line.lstrip().startswith("|")]
    assert not wide, "README.md lines over 120 characters outside code blocks and tables:\n" + "\n".join(wide)


def anchor(heading: str) -> str:
    """GitHub's anchor of a Markdown heading: links reduced to their text, lower case, every character but word
    characters, `-` and spaces dropped, spaces turned into `-`."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading.strip())
    return re.sub(r"[^\w\- ]", "", text.lower()).replace(" ", "-")


def anchors(path: Path) -> set[str]:
    seen: dict[str, int] = {}
    out = set()
    for _, line in prose(path.read_text(encoding="utf-8")):
        m = re.match(r"^#{1,6} (.+)$", line)
        if m:
            a = anchor(m.group(1))
            out.add(a if a not in seen else f"{a}-{seen[a]}")  # GitHub numbers repeated headings
            seen[a] = seen.get(a, 0) + 1
    return out


LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")


def links(page: str) -> list[tuple[int, str]]:
    """(line, target) of every relative link of a page, outside code blocks and inline code."""
    out = []
    for n, line in prose((REPO / page).read_text(encoding="utf-8")):
        for target in LINK.findall(re.sub(r"`[^`]*`", "", line)):
            if not re.match(r"^[a-z][a-z0-9+.-]*:", target):  # http:, https:, mailto:: not this repository's
                out.append((n, target))
    return out


def test_the_anchor_rule():
    assert anchor("Seeds until resolved: `--seeds auto`") == "seeds-until-resolved---seeds-auto"
    assert anchor("2. The k-shot grid and the paper's tables on real CIFAR-100, one GPU") == (
        "2-the-k-shot-grid-and-the-papers-tables-on-real-cifar-100-one-gpu")


@pytest.mark.parametrize("page", PAGES)
def test_every_relative_link_resolves(page):
    bad = []
    for n, target in links(page):
        path, _, frag = target.partition("#")
        file = (REPO / page).parent / path if path else REPO / page
        if not file.exists():
            bad.append(f"{page}:{n}: {target}: no file {file.relative_to(REPO) if REPO in file.parents else file}")
        elif frag and file.suffix == ".md" and frag not in anchors(file):
            bad.append(f"{page}:{n}: {target}: no heading #{frag} in {file.relative_to(REPO)}")
    assert not bad, "\n".join(bad)


def test_the_docs_index_names_every_page():
    index = (REPO / "docs" / "README.md").read_text(encoding="utf-8")
    missing = [p for p in PAGES if p.startswith("docs/") and p != "docs/README.md" and f"({p[5:]})" not in index]
    assert not missing, f"docs/README.md links no: {missing}"


def test_the_readme_links_every_reference_page():
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    pages = ["one-run", "config", "data", "studies", "tables", "mlflow-and-reports", "stores", "security", "hosts",
             "gpu", "benchmarks", "vs-official", "findings"]
    missing = [p for p in pages if f"(docs/{p}.md" not in readme]
    assert not missing, missing
