"""Which run of a study a report reads: studies/report.py NAME takes the latest study run of the default folder
(no --name), `--name N` the latest of `--name N`; a --smoke run is said to be one. A study's parent run records
the command it was started with (tag adbs.command), which names both."""

from __future__ import annotations

import shlex


def _argv(parent) -> list[str]:
    try:
        return shlex.split(parent.data.tags.get("adbs.command", ""))
    except ValueError:  # an unbalanced quote in a hand-edited tag: no flags known
        return []


def name_of(parent) -> str | None:
    """The --name the study ran with (None: the default folder)."""
    argv = _argv(parent)
    for i, a in enumerate(argv):
        if a == "--name" and i + 1 < len(argv):
            return argv[i + 1]
        if a.startswith("--name="):
            return a[len("--name="):]
    words = (parent.info.run_name or "").split(" ")  # '<study> <name> <date> <time>' when no command was logged
    return words[1] if not argv and len(words) == 4 else None


def is_smoke(parent) -> bool:
    return "--smoke" in _argv(parent)


def describe(parent) -> str:
    """`--name N, a --smoke run` / `the default folder`: said beside the parent run in every report."""
    name = name_of(parent)
    return (f"--name {name}" if name else "the default folder (no --name)") + (", a --smoke run" if is_smoke(parent) else "")


def of_name(parents: list, name: str | None) -> tuple[list, str | None]:
    """The study runs of `name` (None: the default folder's, else every run when the store has none); with a
    note when it fell back. A name no run has: an empty list (the caller says which names exist). Among them, the
    runs without --smoke where there are any: a --smoke run logs to experiment `<study>-smoke` (adbs_lab/stores/paths.py:
    SMOKE), but a store written before that holds them among the study's own runs."""
    if name is not None:
        return _real_first([p for p in parents if name_of(p) == name]), None
    default = [p for p in parents if name_of(p) is None]
    if default:
        return _real_first(default), None
    return _real_first(parents), "no run of the default folder (every run had --name): the latest run of any name"


def _real_first(runs: list) -> list:
    return [p for p in runs if not is_smoke(p)] or runs


def names(parents: list) -> list[str]:
    return sorted({name_of(p) or "(default)" for p in parents})
