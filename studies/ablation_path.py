"""ablation_path: which of the differences between two configurations matter, in the order a greedy path takes them.

    python studies/ablation_path.py                       # the CPU preset -> the latest knobs study's best_config.json
    python studies/ablation_path.py --released            # from the released code's recipe (boundary remedies off)
    python studies/ablation_path.py --from a.yaml --to runs/knobs/best_config.json --seeds 0 1 2
    python studies/ablation_path.py --smoke --from a.yaml --to b.yaml    # at most 2 differences, 1 seed: seconds
    python studies/ablation_path.py --dry-run             # the differences and how many trials; runs nothing

--from A and --to B are each a config file (YAML or JSON, over the study's preset), a study's best_config.json, or a
preset name. Defaults: A = the preset as the study runs it (--preset, --smoke, --set; --released resets the boundary
remedies to the released code's values, adbs/config/schema.py: BOUNDARY_REMEDIES), B = best_config.json of the
latest knobs study in --storage (`python studies/knobs.py` makes one).
A difference is a config field where A and B differ. From A, each step tries every remaining difference alone and
applies the one that does best on the validation objective (val_avg_acc): the candidates race over the --seeds
(looks at 3, 5, ... seeds, as --seeds auto spends α: docs/statistics.md), a candidate dropped once its paired
interval against the leader lies below 0. Each step's Δ, interval and verdict then come from --confirm-seeds, which
chose nothing (Bonferroni over the steps); where they include seeds that chose a step or one before it, its Δ is
marked post-selection (a note says so before anything runs). Trials:
about d^2/2 candidates times seeds for d differences, plus d + 1 configurations on the confirmation seeds
(--dry-run prints the count); a candidate that only changes session knobs reuses its base session from
<storage>/base_cache.
Each race look and the confirmation is one Ray Tune run (its own study folder <storage>/ablation_path[-NAME]-sKlJ
and -confirm, MLflow experiment 'ablation_path'; so a --name cannot end in those); --resume reuses the finished ones and
continues the interrupted one.
One run of a path at a time per --storage: a second (its --resume and --dry-run too) exits 2 naming the first.
Writes <storage>/ablation_path[-NAME]/: table.txt/.md (step, change, objective, Δ with interval, verdict), path.png,
path.json, report.md; and an MLflow run 'ablation path ...' with them.
Time: --smoke 59 s (4 trials in one Tune run; 2-core CPU, load average 9-11; 98 s at 13-15); the default depends on d
(--dry-run prints the trials; a cached-base trial takes 5-20 s, a new base session about 40 s on 2 idle cores).
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from any cwd without installing

from adbs import light  # noqa: E402
light.guard(__name__)  # from here on SIGINT and SIGTERM end it with exit 130 and one line (adbs/light.py)

import re  # noqa: E402
import time  # noqa: E402
from contextlib import contextmanager  # noqa: E402
from typing import TYPE_CHECKING, Iterator  # noqa: E402

from adbs import env, exits  # noqa: E402
from adbs.redaction import redact  # noqa: E402
from adbs.config import (BOUNDARY_REMEDIES, PRESETS, Config, ConfigError, canonical, from_dict, load_file,  # noqa: E402
                         resolve)
from adbs_lab import study  # noqa: E402 - its driver (Ray, MLflow, pandas, torch) loads once the flags are checked
from adbs_lab.driver import interrupts, options  # noqa: E402
from adbs_lab.driver.options import StudyInputError  # noqa: E402
from adbs_lab.driver.prepared import RunSettings, resume_command  # noqa: E402
from adbs_lab.driver.plan import Plan  # noqa: E402
from adbs_lab.driver.prepared import bad_input, fail  # noqa: E402
from adbs_lab.results import path_report  # noqa: E402
from adbs_lab.search import path as greedy_path  # noqa: E402
from adbs_lab.stats.looks import Looks  # noqa: E402
from adbs_lab.stats.policy import VerdictPolicy  # noqa: E402
from adbs_lab.stores import tracking_store  # noqa: E402
from adbs_lab.stores.study_folder import StudyBusy, StudyFolder  # noqa: E402
from studies import times  # noqa: E402

if TYPE_CHECKING:
    import pandas as pd

    from adbs_lab.driver import preflight
    from adbs_lab.records import config_values
else:  # loaded at their first use, once the flags are checked (adbs/light.py)
    pd = light.lazy("pandas")
    preflight = light.lazy("adbs_lab.driver.preflight")
    config_values = light.lazy("adbs_lab.records.config_values")  # pandas

NAME = "ablation_path"
MAX_SMOKE_DIFFERENCES = 2
OBJECTIVE = "val_avg_acc"
TUNE_RUN_TAG = re.compile(r"(^|-)(s\d+l\d+|confirm)$")
"""The end of a Tune run's folder name beside a path's (sub_opts: <name>-s<K>l<J>, <name>-confirm;
adbs_lab/search/path.py names the tags): a --name ending so names another path's Tune run."""


def parser():
    p = options.parser(__doc__, options.Defaults(pruning=False, seeds=(0, 1, 2, 3, 4), smoke_seeds=(0,)))
    p.add_argument("--from", dest="path_from", metavar="A", default=None,
                   help="config file, best_config.json or preset name (default: the preset as the study runs it)")
    p.add_argument("--to", dest="path_to", metavar="B", default=None,
                   help="config file, best_config.json or preset name (default: the latest knobs study's "
                        "best_config.json in --storage)")
    p.add_argument("--released", action="store_true",
                   help="A = the preset with the boundary remedies at the released code's values (with no --from)")
    p.add_argument("--confirm-seeds", nargs="*", type=int, default=None, metavar="SEED",
                   help="seeds that measure each step's Δ (default: the 3 seeds after the largest --seeds; with "
                        "--smoke, or given empty, the selection seeds, and the Δ is marked post-selection)")
    return p


def config_of(spec: str, opts: options.StudyOptions, flag: str) -> dict:
    """A full config from a file (over the study's preset) or a preset name; StudyInputError if it is neither."""
    path = Path(spec).expanduser()
    try:
        if path.is_file():
            typed = resolve(opts.preset_name, None, opts.config_overrides(), load_file(str(path)))
        elif spec in PRESETS:
            typed = resolve(spec, None, opts.config_overrides(), {})
        elif path.is_dir():
            raise StudyInputError(f"{flag} {spec} is a folder; pass a config file in it (YAML or JSON), e.g. a "
                                  "study's best_config.json, or a preset name")
        else:
            raise StudyInputError(f"{flag} {spec}: no such file, and not a preset name; pass a config file (YAML or "
                                  f"JSON), a study's best_config.json, or a preset: {', '.join(PRESETS)}")
        return from_dict(typed).to_dict()
    except ConfigError as e:
        raise StudyInputError(f"{flag} {spec}: {e}") from None


def latest_knobs(storage: str) -> Path:
    """best_config.json of the newest knobs study folder in `storage` (knobs, knobs-NAME)."""
    found = sorted(Path(storage).glob("knobs*/best_config.json"), key=lambda f: f.stat().st_mtime)
    if not found:
        raise StudyInputError(f"--to: no knobs study in {redact(storage)} (no knobs*/best_config.json) to take B from; run "
                              "`python studies/knobs.py` (or `python studies/knobs.py --smoke`) first, or pass --to "
                              "FILE or a preset name")
    return found[-1]


def endpoints(opts: options.StudyOptions, extra) -> tuple[dict, dict, str, str]:
    """(A, B, how A is named, how B is named), checked; StudyInputError for bad input."""
    if extra.released and extra.path_from:
        raise StudyInputError("--released names A (the released recipe); it cannot go with --from: drop one")
    if extra.path_from:
        a, a_name = config_of(extra.path_from, opts, "--from"), extra.path_from
    else:
        a = from_dict(opts.base_config()).to_dict()
        a_name = f"preset {opts.preset_name}"
        if extra.released:
            default = Config()
            a = from_dict({**a, **{k: getattr(default, k) for k in BOUNDARY_REMEDIES}}).to_dict()
            a_name += " (released recipe)"
    to = extra.path_to or str(latest_knobs(opts.storage))
    b = config_of(to, opts, "--to")
    smoke_budget(opts, (("--from", a_name, a, bool(extra.path_from) and Path(extra.path_from).is_file()),
                        ("--to", to, b, Path(to).is_file())))
    d = greedy_path.differences(a, b)
    if not d:
        raise StudyInputError(f"--from {a_name} and --to {to} are the same configuration (no field differs, seeds and "
                              "devices aside): there is no path; pass two configurations that differ")
    if opts.smoke and len(d) > MAX_SMOKE_DIFFERENCES:
        raise StudyInputError(f"--smoke runs at most {MAX_SMOKE_DIFFERENCES} differences; A and B differ in {len(d)} "
                              f"({', '.join(d)}): drop --smoke, or pass --from/--to closer together")
    return a, b, a_name, to


BUDGET = tuple(PRESETS["smoke"])
"""The fields the smoke preset shrinks (epochs, images, sessions): a run's budget, not a knob of its configuration."""


def smoke_budget(opts: options.StudyOptions, sides) -> None:
    """A or B from a file at the smoke preset's budget (a --smoke run's best_config.json) while the other runs a full
    budget: StudyInputError, since the budget would count as differences of the path (--smoke runs both at it). A
    preset named as an end is taken as it is: `--from smoke --to cpu` asks for the path between them."""
    fixed = {canonical(k) for k in opts.config_overrides()}  # set on both sides alike
    free = [k for k in BUDGET if k not in fixed]
    small = [(flag, name, file) for flag, name, cfg, file in sides
             if free and all(cfg.get(k) == PRESETS["smoke"][k] for k in free)]
    if opts.smoke or len(small) != 1 or not small[0][2]:
        return
    flag, name, _ = small[0]
    shown = ", ".join(f"{k}={PRESETS['smoke'][k]}" for k in free)
    raise StudyInputError(f"{flag} {name} holds the smoke preset's budget ({shown}): a --smoke run's configuration, "
                          f"while the other end runs preset {opts.preset_name}'s, so these fields would count as "
                          "differences of the path, not knobs; pass --smoke to run the path at the smoke budget, or "
                          "take it from a run without --smoke (python studies/knobs.py)")


def check(opts: options.StudyOptions, extra) -> tuple[list[int], Looks]:
    """The flags' own checks; (confirmation seeds, the looks over --seeds)."""
    opts.check()
    if env.problems():  # a duration from the environment out of its bounds, as each Tune run's checks refuse it
        raise StudyInputError("; ".join(env.problems()))
    if opts.name and TUNE_RUN_TAG.search(opts.name):
        raise StudyInputError(f"--name {opts.name!r}: {NAME}{opts.folder} is the folder of a Tune run of another path "
                              "(its runs' folders end in -s<K>l<J> and -confirm); pass a --name that does not end so")
    if opts.seeds_auto or opts.plan_only or opts.reference:
        raise StudyInputError("ablation_path races the candidates over --seeds itself: pass --seeds with a list of "
                              "seeds (default 0 1 2 3 4); --seeds auto, --plan and --reference do not apply")
    seeds = list(opts.seeds)
    if extra.confirm_seeds is None:
        confirm = [] if opts.smoke else list(range(max(seeds) + 1, max(seeds) + 4))
    else:
        confirm = list(extra.confirm_seeds)
    if any(s < 0 for s in confirm) or len(set(confirm)) != len(confirm):
        raise StudyInputError(f"--confirm-seeds {' '.join(map(str, confirm))}: seeds are distinct numbers >= 0")
    n = len(seeds)
    return confirm or seeds, Looks(n0=min(3, n), batch=2, max_seeds=n)


def row_overrides(config: dict, base: dict) -> dict:
    """What a row sets over the study's base config (the Plan's rows), leaving the seeds to the study."""
    return {k: v for k, v in config.items() if k not in greedy_path.IGNORED and base.get(k) != v}


def sub_plan(rows: dict[str, dict]) -> Plan:
    return Plan(name=NAME, space={}, space_source="studies/ablation_path.py: the path's configurations", rows=rows,
                order=list(rows), cpu_defaults={}, est_trial_s=times.trial_s("ablation"),
                est_load=times.load("ablation"), est_smoke_trial_s=times.smoke_trial_s())


def first_tag(d: list[str]) -> str:
    """The Tune run a path starts with: the first step's race, or with one difference (a step with one candidate
    races nothing: adbs_lab/search/path.py, race) the confirmation."""
    return "s1l1" if len(d) > 1 else "confirm"


def check_resume(opts: options.StudyOptions, d: list[str]) -> None:
    """--resume continues an earlier run of this path: the folder of its first Tune run must hold that study
    (study.json), else the run would start from nothing; the run and the dry run refuse alike."""
    if not opts.resume:
        return
    where = StudyFolder(opts.storage, NAME + sub_opts(opts, first_tag(d), list(opts.seeds)).folder)
    try:
        found = where.read_text("study.json")
    finally:
        where.cleanup()
    if not found:
        raise StudyInputError(f"--resume: no earlier run of {NAME}{' --name ' + opts.name if opts.name else ''} to "
                              f"continue in {redact(opts.storage)} (nothing in {where}); run without --resume to start one")


def path_folder(opts: options.StudyOptions):
    """The path's own study folder <storage>/ablation_path[-NAME] (its table and report); its lock stands for the
    whole path: the Tune runs' folders beside it (-sKlJ, -confirm) are taken one at a time, so a second run of the
    same path would otherwise start (or move aside, or reuse) the ones the first is not in at that moment."""
    return StudyFolder(opts.storage, NAME + opts.folder)


def busy_advice(where) -> str:
    """What the refusal of a second run of the path says to do (adbs_lab/stores/study_folder.py: StudyLock)."""
    return (f"that run holds this path ({where}, and its Tune runs' folders {where.folder}-s<K>l<J> and "
            f"{where.folder}-confirm beside it) until it ends: wait for it to end (its table is then in {where}; "
            "--resume reuses its Tune runs), or pass --name NAME to run another path beside it")


def check_running(opts: options.StudyOptions) -> None:
    """Another run of this path on this storage (its lock, probed without taking it): StudyInputError; the run and
    the dry run refuse alike, before anything is written."""
    where = path_folder(opts)
    try:
        busy = where.running(busy_advice(where))
    finally:
        where.cleanup()
    if busy:
        raise StudyInputError(f"{NAME}: {busy}")


@contextmanager
def holding(opts: options.StudyOptions) -> Iterator[None]:
    """Hold the path's lock for the whole path (every Tune run and the outputs); taken by another run since
    `check_running`: exit 2, nothing written."""
    where = path_folder(opts)
    try:
        lock = where.lock(command_tag(opts.argv), busy_advice(where))
    except StudyBusy as e:
        where.cleanup()
        fail(f"{NAME}: {e}")
    try:
        yield
    finally:
        lock.release()
        where.cleanup()


def sub_opts(opts: options.StudyOptions, tag: str, seeds: list[int]) -> options.StudyOptions:
    name = f"{opts.name}-{tag}" if opts.name else tag
    return opts.replace(name=name, seeds=tuple(seeds), dry_run=False)


class Runner:
    """`evaluate` for adbs_lab/search/path.py: one Ray Tune run (a study of its own) per call; with --resume a
    finished one is read back and an interrupted one continued."""

    def __init__(self, opts: options.StudyOptions, base: dict):
        self.opts, self.base = opts, base

    def __call__(self, tag: str, configs: dict[str, dict], seeds: list[int]) -> dict[str, dict[int, float]]:
        plan = sub_plan({lab: row_overrides(c, self.base) for lab, c in configs.items()})
        sopts = sub_opts(self.opts, tag, seeds)
        state = None
        if self.opts.resume:
            with bad_input():
                p = preflight.study(plan, sopts)
            state = study.held(p)  # "claimed" (interrupted before Tune saved anything): it starts again
            p.where.cleanup()
        if state == "finished":
            print(f"{NAME}: {tag} finished earlier: reused", flush=True)
            trials = config_values.read_parquet(p.dir / "trials.parquet")  # every config value as written
        else:
            out = study.run(plan, sopts.replace(resume=state == "unfinished"))
            assert out is not None, "run returns None only for --dry-run"
            if out.code != exits.OK:
                cmd = " ".join(resume_command(RunSettings.of(self.opts)))
                raise exits.Exit(exits.FAILED, f"{NAME}: {tag} did not complete every trial; continue with: {cmd}")
            trials = out.trials
        done = trials[trials["state"] == "COMPLETE"]
        return {lab: {int(s): float(v) for s, v in zip(g["seed"], g[OBJECTIVE])} for lab, g in done.groupby("label")}


def dry_run(opts: options.StudyOptions, a: dict, b: dict, a_name: str, b_name: str, confirm: list[int],
            looks: Looks) -> None:
    """The checks a run makes before its first trial (the first step's study too), then the count; runs nothing."""
    d = greedy_path.differences(a, b)
    base = opts.base_config()
    first = {greedy_path.change_label(f, b.get(f)): {**a, f: b.get(f)} for f in d}
    # --resume is checked by check_resume, as a run checks it: a run's first Tune run may hold other rows than
    # these (the confirmation's, with one difference or with prefetch), so the preflight's own --resume check
    # would refuse a path the run continues
    p = study.preflight(sub_plan({lab: row_overrides(c, base) for lab, c in first.items()}),
                        sub_opts(opts, "s1l1", list(opts.seeds[:looks.n0])).replace(resume=False))
    p.where.cleanup()
    fewest, most = greedy_path.trial_counts(len(d), looks, len(confirm))
    conf = (len(d) + 1) * len(confirm)
    size = f"{fewest}-{most}" if fewest != most else f"{most}"
    print(f"dry run: study {NAME}, {a_name} -> {b_name}: {len(d)} differences ({', '.join(d)}); {size} trials: the "
          f"race {fewest - conf}-{most - conf} (about d^2/2 candidates on seeds {' '.join(map(str, opts.seeds))}; "
          f"{most - conf} without racing), the confirmation {conf} at most (the {len(d) + 1} configurations of the "
          f"path on seeds {' '.join(map(str, confirm))}); preset {opts.preset_name}; flags, configs, storage "
          f"{p.where} and the stores checked; nothing was started and no result written", flush=True)


def main(opts: options.StudyOptions, extra) -> int:
    """Checks (exit 2 before anything starts), then the greedy path, the confirmation and the outputs."""
    with bad_input():
        confirm, looks = check(opts, extra)
        a, b, a_name, b_name = endpoints(opts, extra)
        check_running(opts)  # before --resume's check: the other run may not have written what it looks for yet
        check_resume(opts, greedy_path.differences(a, b))
        note = greedy_path.confirm_note(list(opts.seeds), confirm)
        if note:  # the dry run and the run alike
            print(f"note: {note}", flush=True)
        if opts.dry_run:
            dry_run(opts, a, b, a_name, b_name, confirm, looks)
            return exits.OK
    with holding(opts), interrupts.handling() as ints:  # one handler for the whole path: the steps' runs share it
        try:
            return _path(opts, a, b, a_name, b_name, confirm, looks)
        except KeyboardInterrupt:  # between two Tune runs (inside one, the run itself exits 130 with this advice)
            cmd = " ".join(resume_command(RunSettings.of(opts)))
            print(f"\n{NAME}: interrupted ({ints.name}); continue with: {cmd}", file=sys.stderr, flush=True)
            return exits.INTERRUPTED


def _path(opts, a, b, a_name, b_name, confirm, looks) -> int:
    t0 = time.time()
    d = greedy_path.differences(a, b)
    print(f"{NAME}: {a_name} -> {b_name}: {len(d)} differences ({', '.join(d)}); each step races its candidates on "
          f"seeds {' '.join(map(str, opts.seeds))} (looks at {', '.join(map(str, looks.sizes))})", flush=True)
    memo = greedy_path.Memo(Runner(opts, opts.base_config()))
    if set(confirm) <= set(opts.seeds[:looks.n0]):  # the confirmation's A and B run in the first race's Tune run
        memo.prefetch({"from (A)": a, "to (B)": greedy_path.end(a, b)})
    steps = greedy_path.greedy(a, b, memo, list(opts.seeds), looks, opts.resolve, on_step=_said)
    verdicts = VerdictPolicy(delta=opts.resolve)  # the confirmation's family: its steps' Δs
    start, confirmed = greedy_path.confirm(a, steps, memo, confirm, verdicts.alpha, verdicts.delta)
    return _outputs(opts, a_name, b_name, d, steps, start, confirmed, confirm, time.time() - t0, verdicts)


def _said(step) -> None:
    looks = "; ".join(f"look {lk.k} at {lk.n} seeds: leader {lk.leader}" + (f", dropped {', '.join(lk.dropped)}"
                                                                            if lk.dropped else "") for lk in step.looks)
    print(f"{NAME}: step {step.k}: {step.change} ({looks or 'the one difference left'}; {step.runs} trials, "
          f"{step.full} without racing)", flush=True)


def command_tag(argv: tuple[str, ...]) -> str:
    """The command as the path's MLflow run records it: a --tracking-uri or --optuna-storage password as ***."""
    return " ".join(preflight.logged_argv(argv))


def _outputs(opts, a_name, b_name, d, steps, start, confirmed, confirm, wall_s, verdicts) -> int:
    folder = Path(opts.storage) / (NAME + opts.folder)
    files = path_report.write(folder, a_name=a_name, b_name=b_name, fields=d, steps=steps, start=start,
                              confirmed=confirmed, objective=OBJECTIVE, policy=verdicts, seeds=list(opts.seeds),
                              confirm_seeds=confirm, wall_s=wall_s)
    uri = tracking_store.tracking_uri(opts.tracking_uri)
    rid = path_report.log_run(tracking_store.client(uri), uri, opts.storage, files, steps, confirmed,
                              {"adbs.command": command_tag(opts.argv), "adbs.from": a_name, "adbs.to": b_name},
                              experiment=opts.experiment(path_report.EXPERIMENT))
    print(f"\n{NAME}: {a_name} -> {b_name} ({OBJECTIVE}, Δ on seeds {' '.join(map(str, confirm))})\n")
    print((folder / "table.txt").read_text())
    print(path_report.saved_line(steps))
    print(f"{NAME}: wrote {folder} (table, path.png, report.md, path.json); MLflow run {rid}; {wall_s:.0f} s",
          flush=True)
    return exits.OK


if __name__ == "__main__":
    opts, extra = options.parse(parser())
    raise SystemExit(exits.status(main, opts, extra))
