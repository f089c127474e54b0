"""Does a searcher pickled by an earlier commit resume under this code as it would under its own? In process, no Ray.

    python bench/resume_old_state.py OLD        # OLD: a commit from before the seed policies, e.g. 11ef444

For each kind of searcher state (a grid over a seed list, killed after 4 of its 6 trials were handed out, --seeds
auto on a grid, a raced sampled search) it runs, at OLD (its source extracted with `git archive` into a temporary
folder), the searcher of tests/adbs_lab/search (test_auto_seeds.py, test_racing.py) up to a kill point: one trial of
the first batch still running, the searcher saved as Tune saves it (`StudySearch.save`) and optuna.db copied. Then
it continues that state twice from the same copy of optuna.db, once in OLD's code and once in this tree's
(`StudySearch.restore`, which upgrades an old state: adbs_lab/search/old_state.py): the running trial ends, and
every batch the searcher hands out is ended until it says FINISHED. The two continuations must hand out the same
trials (configuration, seed) in the same order, print the same look lines and leave the same Optuna trials
(parameters, state, value, `seeds`). Exit 0 when all three kinds match, 1 otherwise, 2 for bad arguments. Each side runs in
its own Python process (PYTHONPATH set to its tree).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import pickle
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
KINDS = ("seed_list", "auto", "race")
ROWS = ("ref", "a", "b")
LAST = {"ref": [50.0] * 8, "a": [60.0, 60.1, 59.9, 60.0, 60.0, 60.0, 60.0, 60.0],
        "b": [53.0, 56.0, 59.0, 56.0, 56.0, 56.0, 56.0, 56.0]}


def _searcher(kind: str, url: str, old: bool):
    """The searcher of `kind` as the code on sys.path builds it (`old`: the API before the seed policies). The imports
    are here, not at the top: this file runs against two trees, each on its own PYTHONPATH."""
    import optuna
    from optuna.distributions import FloatDistribution

    from adbs_lab.records.tune_keys import ROW_KEY
    from adbs_lab.search import space as sp
    from adbs_lab.search.searcher import StudySearch
    from adbs_lab.stats.looks import Looks

    if kind == "race":
        space = {"alpha": FloatDistribution(0.01, 0.1, log=True)}
        sampler = optuna.samplers.TPESampler(seed=0)
        looks, how = Looks(max_seeds=3), dict(top=2, samples=3, delta=1.0)
    else:
        space = sp.optuna_distributions({ROW_KEY: list(ROWS)})
        sampler = optuna.samplers.GridSampler(sp.grid_points({ROW_KEY: list(ROWS)}), seed=0)
        looks = Looks(max_seeds=5)
    pairs = (("a", "ref"), ("b", "ref"))
    if old:
        if kind == "race":
            from adbs_lab.search.racing import RacePlan
            extra = {"race": RacePlan(looks=looks, label_keys=("alpha",), **how)}
        elif kind == "auto":
            from adbs_lab.search.auto_seeds import AutoPlan
            extra = {"auto": AutoPlan(looks=looks, rows=ROWS, pairs=pairs, delta=1.0, label_keys=(ROW_KEY,))}
        else:
            extra = {"seeds": [0, 1]}
    else:
        from adbs_lab.search.seeds.fixed import SeedList
        from tests.helpers.seeds import race, until_resolved

        extra = {"policy": race(looks, **how) if kind == "race" else
                 until_resolved(looks, ROWS, pairs, 1.0, (ROW_KEY,)) if kind == "auto" else SeedList((0, 1))}
    s = StudySearch(space, storage_url=url, study_name="s", sampler=sampler, **extra)
    s.set_search_properties(None, None, {})
    return s


def _result(kind: str, config: dict) -> dict:
    from adbs_lab.records import metrics_keys as K
    from adbs_lab.records.tune_keys import ROW_KEY, SEED_KEY

    if kind == "race":
        return {K.REPORT_KIND: K.KIND_SUMMARY, K.OBJECTIVE: 1000 * config["alpha"] + 0.1 * config[SEED_KEY]}
    last = LAST[config[ROW_KEY]][config[SEED_KEY]]
    return {K.REPORT_KIND: K.KIND_SUMMARY, K.OBJECTIVE: last + 1, K.SUMMARY + "test_last_acc": last}


def _batch(s, start: int, most: int = 50) -> list[tuple[str, dict]]:
    """What the searcher hands out from trial id t<start> on, at most `most` (Tune's num_samples left)."""
    out = []
    for i in range(start, start + most):
        config = s.suggest(f"t{i}")
        if not isinstance(config, dict):
            return out
        out.append((f"t{i}", config))
    return out


def _key(config: dict) -> list:
    from adbs_lab.records.tune_keys import SEED_KEY

    return [repr(round(v, 12)) if isinstance(v, float) else str(v) for k, v in sorted(config.items())
            if k != SEED_KEY and not k.startswith("_")] + [config.get(SEED_KEY)]


def start(kind: str, folder: Path) -> None:
    """At OLD: up to the kill point; the searcher saved and optuna.db copied."""
    url = f"sqlite:///{folder / 'optuna.db'}"
    s = _searcher(kind, url, old=True)
    first = _batch(s, 0, 4 if kind == "seed_list" else 50)  # a seed list: 4 of its 6 trials handed out
    for tid, config in first[:-1]:
        s.on_trial_complete(tid, _result(kind, config))
    s.save(str(folder / "searcher.pkl"))
    shutil.copy(folder / "optuna.db", folder / "killed.db")
    (folder / "running.pkl").write_bytes(pickle.dumps(first[-1]))


def resume(kind: str, folder: Path, old: bool) -> dict:
    """From the kill point, in the code on sys.path, to FINISHED: what it handed out, printed and left in Optuna."""
    import optuna
    from ray.tune.search import Searcher

    from adbs_lab.records.tune_keys import SEEDS_ATTR

    shutil.copy(folder / "killed.db", folder / "optuna.db")
    url = f"sqlite:///{folder / 'optuna.db'}"
    s = _searcher(kind, url, old=old)
    s.restore(str(folder / "searcher.pkl"))
    tid, config = pickle.loads((folder / "running.pkl").read_bytes())
    handed, printed, n = [], io.StringIO(), 100
    with contextlib.redirect_stdout(printed):
        s.on_trial_complete(tid, _result(kind, config))
        left = 2 if kind == "seed_list" else 50  # a seed list: Tune's num_samples (6) ends it
        for _ in range(20):
            batch = _batch(s, n, left)
            n += 100
            if not batch:
                break
            handed.append([_key(c) for _, c in batch])
            for t, c in batch:
                s.on_trial_complete(t, _result(kind, c))
            if kind == "seed_list":
                break
        finished = s.suggest("last") == Searcher.FINISHED
    study = optuna.load_study(study_name="s", storage=url)
    trials = [[t.number, sorted((k, repr(v)) for k, v in t.params.items()), t.state.name, t.value,
               t.user_attrs.get(SEEDS_ATTR)] for t in study.trials]
    return {"handed": handed, "printed": printed.getvalue().splitlines(), "finished": finished, "trials": trials}


def _side(tree: Path, *args: str) -> str:
    env = {**os.environ, "PYTHONPATH": str(tree)}
    r = subprocess.run([sys.executable, str(ROOT / "bench" / "resume_old_state.py"), *args], env=env, cwd=tree,
                       capture_output=True, text=True)
    if r.returncode != 0:
        raise SystemExit(f"{' '.join(args[:2])} failed at {tree}:\n{r.stdout}{r.stderr}")
    return r.stdout


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("old", help="a commit from before the seed policies (its searcher pickled by that code)")
    p.add_argument("--side", choices=["start", "resume-old", "resume-new"], help=argparse.SUPPRESS)
    p.add_argument("--kind", choices=KINDS, help=argparse.SUPPRESS)
    p.add_argument("--folder", help=argparse.SUPPRESS)
    a = p.parse_args(argv)
    sys.path.append(str(ROOT))  # for adbs/exits.py; appended: a side's PYTHONPATH (its tree) stays first
    from adbs import exits

    if a.side:
        folder = Path(a.folder)
        if a.side == "start":
            start(a.kind, folder)
        else:
            print(json.dumps(resume(a.kind, folder, old=a.side == "resume-old")))
        return exits.OK
    with tempfile.TemporaryDirectory(prefix="resume_old_state-") as tmp:
        old_tree = Path(tmp) / "old"
        old_tree.mkdir()
        archive = subprocess.run(["git", "-C", str(ROOT), "archive", a.old], capture_output=True)
        if archive.returncode != 0:
            print(f"error: {a.old} is not a revision of {ROOT}: {archive.stderr.decode().strip()}", file=sys.stderr)
            return exits.REFUSED
        subprocess.run(["tar", "-x", "-C", str(old_tree)], input=archive.stdout, check=True)
        bad = 0
        for kind in KINDS:
            folder = Path(tmp) / kind
            folder.mkdir()
            args = ("--kind", kind, "--folder", str(folder))
            _side(old_tree, a.old, "--side", "start", *args)
            then = json.loads(_side(old_tree, a.old, "--side", "resume-old", *args))
            now = json.loads(_side(ROOT, a.old, "--side", "resume-new", *args))
            same = {k: then[k] == now[k] for k in then}
            bad += not all(same.values())
            print(f"{kind}: " + ("resumes as at " + a.old if all(same.values()) else
                                 "differs in " + ", ".join(k for k, v in same.items() if not v)) +
                  f" ({sum(map(len, then['handed']))} trials handed out after the kill, {len(then['trials'])} Optuna "
                  f"trials, {len(then['printed'])} printed lines, finished: {then['finished']})")
            if not all(same.values()):
                print(json.dumps({"old": then, "new": now}, indent=1))
        return exits.FAILED if bad else exits.OK


if __name__ == "__main__":
    sys.exit(main())
