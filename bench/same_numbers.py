"""Do two commits give the same numbers? Runs studies at both, back to back on this machine, and diffs sessions.parquet.

    python bench/same_numbers.py OLD                       # OLD against the working tree, every study's --smoke
    python bench/same_numbers.py OLD NEW --studies ablation alpha_sweep
    python bench/same_numbers.py OLD --full --studies ablation   # the default run instead of --smoke (minutes each)

OLD and NEW are git revisions of this repository (NEW defaults to the working tree as it is, uncommitted changes
included). Each revision is checked out into a temporary git worktree and each study runs there as a user would run
it (`python studies/<study>.py [--smoke]`), with its own storage, MLflow store and base-session cache, so nothing
one revision trained is reused by the other. A refactoring or a change that must not move numbers passes when
every study's sessions.parquet holds the same rows with the same values at both revisions.

The comparison: the rows of sessions.parquet, keyed by their configuration (every config field present at both
revisions, the seed among them) and session, not by label or trial id (a label's wording may change), every
numeric column present at both revisions compared exactly (the same config and seeds on the CPU give bit-identical
numbers: the project's determinism guarantee). Columns present at one revision only are listed, not compared
(a new column is not a moved number). Exit 0 when every study matches, 1 when a number moved or a study failed
at one revision (its output is printed), 2 for bad arguments.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
STUDIES = ["ablation", "alpha_sweep", "boundary", "hosts", "knobs", "kshot_grid"]
IDENT = {"trial_id", "state", "label", "optuna_trial", "mlflow_run_id"}
WORKTREE = "(working tree)"


@dataclass(frozen=True)
class Outcome:
    """One study run at one revision: its sessions table (None when it failed) and what it printed."""

    rc: int
    wall_s: float
    output: str
    sessions: "pd.DataFrame | None"  # noqa: F821


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("old", help="the revision to compare against (a commit, branch or tag)")
    p.add_argument("new", nargs="?", default=None, help="the revision to check (default: the working tree as it is)")
    p.add_argument("--studies", nargs="+", default=STUDIES, choices=STUDIES, metavar="STUDY",
                   help=f"studies to run at both revisions (default: all: {' '.join(STUDIES)})")
    p.add_argument("--full", action="store_true", help="run each study's default instead of its --smoke run")
    p.add_argument("--keep", action="store_true", help="keep the temporary worktrees and stores (their path is printed)")
    args = p.parse_args(argv)
    for rev in [args.old] + ([args.new] if args.new else []):
        if subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}"],
                          capture_output=True).returncode:
            p.error(f"{rev!r} is not a commit of this repository (git rev-parse --verify {rev} finds none); "
                    "give a commit hash, branch or tag")
    return args


def checkout(rev: str | None, into: Path) -> Path:
    """A worktree of `rev` under `into`; the working tree itself (uncommitted changes included) for None."""
    if rev is None:
        return ROOT
    into.mkdir(parents=True, exist_ok=True)
    tree = into / "tree"
    subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", "--quiet", str(tree), rev], check=True)
    return tree


def run_study(tree: Path, study: str, scratch: Path, full: bool) -> Outcome:
    """`python studies/<study>.py` at `tree`, in stores of its own; its sessions table read back."""
    import pandas as pd

    storage, db = scratch / study / "runs", scratch / study / "mlflow.db"
    cmd = [sys.executable, str(tree / "studies" / f"{study}.py"), *([] if full else ["--smoke"]),
           "--storage", str(storage), "--tracking-uri", f"sqlite:///{db}"]
    # The revision's own code first on the path, whatever this environment's editable install points at.
    env = {**os.environ, "PYTHONPATH": str(tree)}
    started = time.monotonic()
    proc = subprocess.run(cmd, cwd=tree, env=env, capture_output=True, text=True)
    wall = time.monotonic() - started
    found = sorted(storage.glob("*/sessions.parquet"))
    sessions = pd.read_parquet(found[0]) if proc.returncode == 0 and found else None
    return Outcome(proc.returncode, wall, proc.stdout + proc.stderr, sessions)


def differences(old: "pd.DataFrame", new: "pd.DataFrame") -> list[str]:  # noqa: F821
    """What differs between two sessions tables: rows missing at one side, then each moved value."""
    sys.path.insert(0, str(ROOT))
    from adbs.config import FIELDS

    key = [k for k in [*FIELDS, "session"] if k in old.columns and k in new.columns]
    numeric = [c for c in old.columns if c in new.columns and c not in key and c not in IDENT
               and old[c].dtype.kind in "fiub" and new[c].dtype.kind in "fiub"]
    # As strings: a key column may hold None/NaN (a field that does not apply), which an index would not match.
    a, b = (df.assign(**{k: df[k].astype(str) for k in key}).set_index(key).sort_index() for df in (old, new))
    for name, df in (("OLD", a), ("NEW", b)):
        if df.index.has_duplicates:
            raise SystemExit(f"error: {name}'s sessions.parquet has two rows for one configuration and session; "
                             "this script cannot pair them")
    found = [f"row {i} only in OLD" for i in a.index.difference(b.index)]
    found += [f"row {i} only in NEW" for i in b.index.difference(a.index)]
    shared = a.index.intersection(b.index)
    for col in numeric:
        x, y = a.loc[shared, col], b.loc[shared, col]
        moved = ~((x == y) | (x.isna() & y.isna()))
        found += [f"{col} at {i}: {x[i].item()!r} -> {y[i].item()!r}" for i in moved[moved].index]
    return found


def compare(study: str, old: Outcome, new: Outcome) -> bool:
    """Print one study's verdict; True when its numbers are the same at both revisions."""
    if old.sessions is None or new.sessions is None:
        for name, o in (("OLD", old), ("NEW", new)):
            if o.sessions is None:
                print(f"  {study}: failed at {name} (exit {o.rc}); its last lines:\n" +
                      "\n".join("    " + line for line in o.output.strip().splitlines()[-15:]))
        return False
    only = sorted(set(old.sessions.columns) ^ set(new.sessions.columns))
    found = differences(old.sessions, new.sessions)
    extra = f"; columns at one revision only (not compared): {', '.join(only)}" if only else ""
    verdict = "same numbers" if not found else f"{len(found)} difference(s)"
    print(f"  {study}: {verdict} ({len(new.sessions)} rows; {old.wall_s:.0f} s old, {new.wall_s:.0f} s new){extra}")
    for line in found[:20]:
        print(f"    {line}")
    return not found


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    scratch = Path(tempfile.mkdtemp(prefix="adbs-same-numbers-"))
    print(f"comparing {args.old} with {args.new or WORKTREE}: {' '.join(args.studies)} "
          f"({'default runs' if args.full else '--smoke'}), scratch {scratch}", flush=True)
    trees = {}
    try:
        trees = {"old": checkout(args.old, scratch / "old"), "new": checkout(args.new, scratch / "new")}
        ok = True
        for study in args.studies:
            print(f"  {study}: running at both ...", flush=True)
            old = run_study(trees["old"], study, scratch / "old", args.full)
            new = run_study(trees["new"], study, scratch / "new", args.full)
            ok = compare(study, old, new) and ok
        print("same numbers at both revisions" if ok else "numbers differ (or a study failed): see above")
        sys.path.insert(0, str(ROOT))  # for adbs/exits.py (standard library only), as `differences` does
        from adbs import exits

        return exits.OK if ok else exits.FAILED
    finally:
        for tree in trees.values():
            if tree != ROOT and not args.keep:
                subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(tree)],
                               capture_output=True)
        if args.keep:
            print(f"kept: {scratch}")
        else:
            shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
