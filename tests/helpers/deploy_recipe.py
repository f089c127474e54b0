"""The commands of deploy/README.md's "Trying it on one machine" (a two-node Ray cluster on one machine), read from
the document, so that the tests run what a user copies: tests/e2e/test_two_node_cluster.py runs them, and
tests/adbs_lab/cluster/test_local_cluster.py checks that they fit together."""

from __future__ import annotations

import shlex
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SECTION = "## Trying it on one machine"
ROLES = {"export": ("export",), "start": ("adbs_lab.cluster.local_cluster", "start"), "mlflow": ("mlflow/serve.py",),
         "submit": ("studies/submit.py",), "stop": ("adbs_lab.cluster.local_cluster", "stop"), "kill": ("kill",)}
"""Each command of the recipe, by the words that tell it apart."""


def one_machine_recipe() -> dict[str, list[str]]:
    """The recipe's commands as argv lists (continuation lines joined, comments and a trailing `&` dropped), by role
    (ROLES); AssertionError when the section, its bash block or one of the commands is not there."""
    text = (REPO / "deploy" / "README.md").read_text()
    assert SECTION in text, f"deploy/README.md has no section {SECTION!r}"
    section = text.split(SECTION, 1)[1].split("\n## ", 1)[0]
    block = section.split("```bash\n", 1)[1].split("```", 1)[0]
    commands = [shlex.split(line, comments=True) for line in block.replace("\\\n", " ").splitlines()]
    found = {}
    for role, words in ROLES.items():
        matching = [argv for argv in commands if argv and all(w in argv for w in words)]
        assert len(matching) == 1, f"deploy/README.md, {SECTION!r}: {len(matching)} commands with {words}, not one"
        found[role] = [a for a in matching[0] if a != "&"]
    assert len([argv for argv in commands if argv]) == len(ROLES), f"{SECTION!r} has commands no role names"
    return found


def value(argv: list[str], flag: str) -> str:
    """The value of `flag` in `argv` (`--flag value` or `--flag=value`)."""
    for i, arg in enumerate(argv):
        if arg == flag:
            return argv[i + 1]
        if arg.startswith(flag + "="):
            return arg.split("=", 1)[1]
    raise AssertionError(f"{flag} is not in {shlex.join(argv)}")


def replace(argv: list[str], new: dict[str, str]) -> list[str]:
    """`argv` with each word in `new` replaced (whole words, and the values of `--flag=word`)."""
    out = []
    for arg in argv:
        flag, eq, rest = arg.partition("=")
        out.append(new.get(arg, f"{flag}={new[rest]}" if eq and rest in new else arg))
    return out
