"""Do two commits give the same numbers? Runs studies at both, back to back on this machine, and diffs sessions.parquet.

    python bench/same_numbers.py OLD                       # OLD against the working tree, every study's --smoke
    python bench/same_numbers.py OLD NEW --studies ablation alpha_sweep
    python bench/same_numbers.py OLD --full --studies ablation   # the default run instead of --smoke (minutes each)
    python bench/same_numbers.py OLD NEW --studies ablation --with "ablation:--smoke --seeds auto --max-seeds 4"
    python bench/same_numbers.py OLD NEW --studies --path       # the ablation path alone (--smoke, two differences)

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

What each run printed of its decisions is compared too: its verdict lines, the lines of its looks and its race, its
best configuration and its seed plan (`said_lines`), and its table.txt, with the scratch paths, wall times, run ids
and dates made alike. Differing lines are printed as a unified diff under "printed lines differ" and do not change the
exit code unless --strict-lines is given (a wording may change on purpose; a number may not).

`--with STUDY:ARGS` adds a run of STUDY with ARGS (instead of --smoke or the default) at both revisions, e.g. the
looks of --seeds auto or a race, which the smoke runs do not take; `--path` adds studies/ablation_path.py --smoke
between two configuration files that differ in two session knobs (one seed: its Tune runs and path.json compared).
"""

from __future__ import annotations

import argparse
import difflib
import json
import os
import re
import shlex
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
    said: list[str]
    """What it printed of its decisions, and its table.txt (`said_lines`)."""


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("old", help="the revision to compare against (a commit, branch or tag)")
    p.add_argument("new", nargs="?", default=None, help="the revision to check (default: the working tree as it is)")
    p.add_argument("--studies", nargs="*", default=STUDIES, choices=STUDIES, metavar="STUDY",
                   help=f"studies to run at both revisions (default: all: {' '.join(STUDIES)})")
    p.add_argument("--full", action="store_true", help="run each study's default instead of its --smoke run")
    p.add_argument("--keep", action="store_true", help="keep the temporary worktrees and stores (their path is printed)")
    p.add_argument("--with", dest="variants", action="append", default=[], metavar="STUDY:ARGS",
                   help="also run STUDY with ARGS (its flags instead of --smoke) at both revisions; repeatable")
    p.add_argument("--path", action="store_true",
                   help="also run studies/ablation_path.py --smoke between two files differing in two session knobs")
    p.add_argument("--strict-lines", action="store_true",
                   help="exit 1 when the printed verdict lines differ too (default: they are listed only)")
    args = p.parse_args(argv)
    for v in args.variants:
        study, colon, _ = v.partition(":")
        if not colon or study not in STUDIES:
            p.error(f"--with {v!r}: give STUDY:ARGS, STUDY one of {', '.join(STUDIES)}")
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


def run_study(tree: Path, study: str, scratch: Path, full: bool, args: list[str] | None = None) -> Outcome:
    """`python studies/<study>.py` at `tree` (with `args`, else --smoke unless `full`), in stores of its own; its
    sessions table read back (the ablation path's: every Tune run's, one frame, `run` naming the run)."""
    import pandas as pd

    storage, db = scratch / "runs", scratch / "mlflow.db"
    flags = args if args is not None else [] if full else ["--smoke"]
    cmd = [sys.executable, str(tree / "studies" / f"{study}.py"), *flags,
           "--storage", str(storage), "--tracking-uri", f"sqlite:///{db}"]
    # The revision's own code first on the path, whatever this environment's editable install points at.
    env = {**os.environ, "PYTHONPATH": str(tree)}
    started = time.monotonic()
    proc = subprocess.run(cmd, cwd=tree, env=env, capture_output=True, text=True)
    wall = time.monotonic() - started
    found = sorted(storage.glob("*/sessions.parquet"))
    sessions = None
    if proc.returncode == 0 and found:
        frames = [pd.read_parquet(f).assign(run=f.parent.name) for f in found]
        sessions = frames[0].drop(columns="run") if len(frames) == 1 else pd.concat(frames, ignore_index=True)
    said = said_lines(proc.stdout + proc.stderr, scratch)
    for f in sorted(storage.glob("*/table.txt")) + sorted(storage.glob("*/path.json")):
        said += [f"[{f.parent.name}/{f.name}]"] + said_lines(_steps(f) if f.suffix == ".json" else f.read_text(),
                                                               scratch, keep_all=True)
    return Outcome(proc.returncode, wall, proc.stdout + proc.stderr, sessions, said)


def _steps(path_json: Path) -> str:
    """path.json's decisions (the steps, their looks and Δs), without its times."""
    record = json.loads(path_json.read_text())
    record.pop("wall_s", None)
    return json.dumps(record, indent=1, sort_keys=True)


SAID = re.compile(r"(verdicts|vs .*: |look \d+ of at most|race look|--seeds auto|best configuration|seeds that would "
                  r"settle|cost on this machine|post-selection|step \d+:|racing saved|dry run|note: |\d+ trials \()")
"""The lines of a run's output that say what it decided (kept by `said_lines`); progress lines and logs are not."""
_ALIKE = [(re.compile(r"\b[0-9a-f]{32}\b"), "<run id>"), (re.compile(r"\d{4}-\d\d-\d\d[ T]\d\d:\d\d(:\d\d)?"), "<date>"),
          (re.compile(r"\d+(\.\d+)? ?(s|min|h)\b"), "<time>"), (re.compile(r"(load average|at its load now) [\d.]+"),
                                                             r"\1 <load>"),
          (re.compile(r"x\d+\.\d the time"), "x<f> the time")]


def said_lines(output: str, scratch: Path, keep_all: bool = False) -> list[str]:
    """The decision lines of `output` (every line with `keep_all`), with what differs between two runs of the same
    code made alike: the scratch folder, run ids, dates, times and the machine's load."""
    out = []
    for line in output.splitlines():
        if not (keep_all or SAID.search(line)):
            continue
        line = line.replace(str(scratch), "<scratch>").rstrip()
        for pattern, alike in _ALIKE:
            line = pattern.sub(alike, line)
        out.append(line)
    return out


def differences(old: "pd.DataFrame", new: "pd.DataFrame") -> list[str]:  # noqa: F821
    """What differs between two sessions tables: rows missing at one side, then each moved value."""
    sys.path.insert(0, str(ROOT))
    from adbs.config import FIELDS

    key = [k for k in ["run", *FIELDS, "session"] if k in old.columns and k in new.columns]
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


def compare(study: str, old: Outcome, new: Outcome, strict_lines: bool = False) -> bool:
    """Print one study's verdict; True when its numbers (and with `strict_lines` its printed lines) are the same at
    both revisions."""
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
    diff = list(difflib.unified_diff(old.said, new.said, "OLD", "NEW", lineterm="", n=1))
    print(f"  {study}: printed lines differ ({sum(d[:1] in '+-' for d in diff[2:])} lines):" if diff else
          f"  {study}: same printed lines ({len(new.said)})")
    for line in diff:
        print(f"    {line}")
    return not found and not (strict_lines and diff)


def runs(args: argparse.Namespace, scratch: Path) -> list[tuple[str, str, list[str] | None]]:
    """(name, study, its flags or None for --smoke/--full) of every run to compare."""
    out: list[tuple[str, str, list[str] | None]] = [(s, s, None) for s in args.studies]
    out += [(v, v.partition(":")[0], shlex.split(v.partition(":")[2])) for v in args.variants]
    if args.path:
        a, b = scratch / "a.yaml", scratch / "b.yaml"  # two session knobs: one base session per seed
        a.write_text("new_boundary_init: abs_mean\nfinetune_epochs: 2\n")
        b.write_text("new_boundary_init: one\nfinetune_epochs: 0\n")
        out.append(("ablation_path --smoke", "ablation_path", ["--smoke", "--from", str(a), "--to", str(b)]))
    return out


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    scratch = Path(tempfile.mkdtemp(prefix="adbs-same-numbers-"))
    print(f"comparing {args.old} with {args.new or WORKTREE}: {' '.join(n for n, _, _ in runs(args, scratch))} "
          f"({'default runs' if args.full else '--smoke'}), scratch {scratch}", flush=True)
    trees = {}
    try:
        trees = {"old": checkout(args.old, scratch / "old"), "new": checkout(args.new, scratch / "new")}
        ok = True
        for i, (name, study, flags) in enumerate(runs(args, scratch)):
            print(f"  {name}: running at both ...", flush=True)
            old = run_study(trees["old"], study, scratch / "old" / str(i), args.full, flags)
            new = run_study(trees["new"], study, scratch / "new" / str(i), args.full, flags)
            ok = compare(name, old, new, args.strict_lines) and ok
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
