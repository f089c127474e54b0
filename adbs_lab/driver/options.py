"""A study's options: one typed, frozen object, parsed once from the command line (or built in Python).

    opts = options.parse(__doc__, Defaults(pruner="auto", num_samples=4, smoke_num_samples=2))
    opts = StudyOptions(seeds=(0, 1), smoke=True, storage="/tmp/runs")   # the same, without argparse

Every flag a study shares is a field with a docstring, and its flag is generated from the field (its type,
default and docstring; `parser`); the config flags (--preset, --config, --set, --host, --dataset, --data-root,
--dry-run, and every Config field and host option as --<field>/--<host>.<option>) come from adbs/config/cli.py, the
grammar of `python -m adbs.run` too, so a flag means the same in both. A study's own flags (alpha_sweep's --grid,
ablation's --toggles) come back beside it as `extra`. Smoke-dependent defaults (fewer seeds or samples
with --smoke) are resolved here, once; nothing downstream changes the options. `check()` finds what is
wrong with them before anything starts (no Ray, no files).
"""

from __future__ import annotations

import argparse
import collections
import dataclasses
import math
import os
import re
import sys
import typing
from dataclasses import dataclass, field
from typing import Any

from adbs.config import PRESETS, ConfigError, cli, load_file, preset_for, resolve
from adbs.exits import OK, Exit
from adbs.config.docs import read_field_docs
from adbs.redaction import secret_url
from adbs_lab.records import objectives
from adbs_lab.stats.rules import DEFAULT_ALPHA, MAX_ALPHA, alpha_problem, delta_problem, shown
from adbs_lab.stores import paths

NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
MAX_NAME = 100
"""Characters of --name: the study folder <study>-<name> and its moved-aside copy <study>-<name>.<time> must
stay under the usual 255-byte limit of one file name."""
SMOKE_PRESETS = ("cpu", "smoke", *(k for k, v in PRESETS.items() if v.get("host") and k.endswith("_cpu")))
"""Presets --smoke can replace: the CPU ones (a host's CPU preset keeps its host in the smoke run)."""


MAX_THREADS = 2**31 - 1
"""torch.set_num_threads takes a C int."""
MAX_SAMPLER_SEED = 2**32 - 1
"""Optuna's samplers seed numpy's RandomState, which takes 0..2**32 - 1."""


MAX_SEEDS = 100
"""The most seeds a study runs per configuration (--seeds, --max-seeds): adbs_lab/stats/planner.py plans up to as
many (N_MAX)."""


class StudyInputError(ValueError):
    """Bad study input, found before any trial starts; the message says what to change."""


@dataclass(frozen=True)
class Defaults:
    """What differs between studies in the shared flags' defaults."""

    pruner: str = "none"
    pruner_when: tuple[tuple[str, str], ...] = ()
    """(study flag, pruner): the default pruner while that flag of the study's own is on, e.g. (("grid", "none"),):
    a grid's points each count, so none is pruned unless --pruner says so (an explicit --pruner always wins)."""
    pruning: bool = True
    """False: the study runs every trial to the end (each one is a result); --pruner is hidden and only none
    is accepted."""
    num_samples: int | None = None
    """Configurations Optuna samples (sampled studies only; None = the study has no --num-samples)."""
    smoke_num_samples: int | None = None
    sample_on_request: bool = False
    """True: --num-samples has no default and selects sampling: without it the study runs its grid (alpha_sweep:
    the grid draws the curve with error bars; --num-samples N asks TPE for N configurations instead)."""
    seeds: tuple[int, ...] = (0,)
    smoke_seeds: tuple[int, ...] | None = None
    seeds_when: tuple[tuple[str, tuple[int, ...]], ...] = ()
    """(study flag, seeds): the default seeds while that flag is given, e.g. (("num_samples", (0,)),): a sampled
    search explores configurations, one seed each, unless --seeds says otherwise."""
    decide: bool = False
    """True: without --seeds (and without --smoke or a flag of `seeds_when`) the study adds seeds until its
    comparisons are resolved, as --seeds auto (the design of adbs_lab/stats/continuation.py: design); `seeds` is
    then the fixed list it runs where this run compares no rows (no reference among them)."""


def _flag(*, flag: str | None = "", dest: str = "", group: str = "", **kw: Any) -> Any:
    """A StudyOptions field whose flag departs from the rule (--<field>, of the field's type): its option string
    (None: no flag), its argparse dest, or the help group it opens (the fields after it belong to that group until
    the next one opens)."""
    meta = {"flag": flag, "dest": dest, "group": group}
    return field(metadata={k: v for k, v in meta.items() if v != ""}, **kw)


@dataclass(frozen=True)
class StudyOptions:
    """A study's shared flags: one field each, its docstring the flag's help. The flag is --<field> of the field's
    type, unless its metadata says otherwise (_flag); the flags shared with `python -m adbs.run` (adbs.config.cli.SHARED:
    --preset, --config, --set and every config field, --host, --dataset, --data-root, --dry-run) are defined in
    adbs/config/cli.py, once for both."""

    # --- configuration (flags of adbs/config/cli.py, but --smoke) ------------------------------------------
    preset: str = "cpu"
    """Named Config preset (adbs.config.PRESETS); --smoke means the smoke preset."""
    overrides: tuple[tuple[str, str], ...] = ()
    """--set KEY=VALUE pairs and the config field flags (--base-epochs 3 is base_epochs=3), in the order typed, the
    values as typed (adbs.config.coerce coerces and checks them)."""
    host: str | None = None
    """--host NAME: shortcut for --set host=NAME (the FSCIL method ADBS plugs into; its version of the preset)."""
    dataset: str | None = None
    """--dataset NAME: shortcut for --set dataset=NAME (the paper preset of that name with the default preset)."""
    data_root: str | None = None
    """--data-root DIR: shortcut for --set data_root=DIR."""
    config_file: str | None = _flag(dest="config", default=None)
    """--config FILE: a YAML or JSON file of config values (shown in messages; its values are `config_values`)."""
    config_values: tuple[tuple[str, Any], ...] = _flag(flag=None, default=())
    """The values of --config FILE, read once, checked and typed (adbs.config.load_file); precedence: preset <
    this file < --host/--dataset/--data-root/--set and the field flags."""
    dry_run: bool = False
    """Check every input as a run would and print the number of trials; start and write nothing."""
    smoke: bool = False
    """preset smoke and a tiny study (fewer seeds or samples): seconds, end to end"""
    # --- study ----------------------------------------------------------------------------------
    seeds: tuple[int, ...] = _flag(group="study", default=(0,))
    """repeat every configuration over these seeds, each the Config's seed and split_seed; `auto` (a grid's rows):
    seeds 0 1 2, then 2 more at a time for the rows of unresolved comparisons, up to --max-seeds; `auto` on a
    sampled search (--num-samples): each sample on seed 0, then the best --race-top race on fresh seeds"""
    seeds_auto: bool = _flag(flag=None, default=False)
    """--seeds auto: the seeds follow the looks (adbs_lab/search/seeds/until_resolved.py); `seeds` is then 0 .. max_seeds-1,
    the most a row may run."""
    seeds_default: bool = _flag(flag=None, default=False)
    """--seeds not given to a study that decides by default (Defaults.decide): `seeds_auto` is on, and `seeds` is
    the fixed list the study runs where this run compares no rows."""
    max_seeds: int | None = None
    """with --seeds auto: the most seeds a row runs, at least 3 (default: 8 for up to 3 comparisons, 9 for up to 12,
    11 for up to 20, where the default's power is simulated: docs/statistics.md); on a sampled search (--num-samples),
    the most fresh seeds a raced configuration runs beside its screening seed 0 (default 8)"""
    race_top: int | None = None
    """with --seeds auto on a sampled search (--num-samples): how many of the best samples on the validation
    objective race on fresh seeds, at least 2 (default 3; docs/statistics.md)"""
    num_samples: int | None = None
    """configurations Optuna samples; TPE draws its first 10 configurations at random (Optuna's n_startup_trials)
    and models the results only after them, so up to 10 samples are a random search"""
    pruner: str = "none"
    """Optuna pruner on base-epoch validation accuracy; auto: the median pruner, at a base epoch only once that
    epoch's accuracy predicts the objective (95% lower bound of Spearman's rho >= 0.7 over the completed trials and
    shadows; docs/statistics.md), every trial running to the end until then"""
    shadow_share: float = 0.2
    """share of the trials the pruner stops that run on to the end, unseen by the pruner and sampler, to measure
    whether base accuracy predicts the objective (docs/statistics.md); 0: none"""
    objectives: tuple[str, ...] = ()
    """what the search optimises: per-trial validation summary metrics, each NAME:max or NAME:min, e.g.
    val_last_base_acc:max val_last_novel_acc:max (adbs_lab/records/objectives.py lists them; test metrics never feed a
    search); one: a search on that metric; two or more: a multi-objective search, no pruning, its Pareto front in
    pareto.json and the table's front column, best_config.json the front's point best on the first objective"""
    sampler_seed: int = 0
    """seed of the Optuna sampler"""
    reference: str | None = None
    """the row every row is compared with, by its label in the table (e.g. 'alpha=0.05'; default: the study's own
    reference: the baseline row, each host without ADBS, the preset's alpha)"""
    resolve: float = 1.0
    """δ in accuracy points, the smallest difference that matters: each comparison's verdict reads its interval
    against 0 and ±δ (better, worse, equivalent within ±δ, better or worse by less than δ, not resolved; with --plan,
    a finished study's intervals re-read against ±δ, below its own verdicts; docs/statistics.md)"""
    error_rate: float = DEFAULT_ALPHA
    """A, the family error rate: all of the study's verdicts (table, looks, race) are true together with probability
    at least 1 - A, the level their intervals print at (95% at 0.05); > 0 and at most 0.5 (docs/statistics.md)"""
    plan_only: bool = _flag(flag="--plan", default=False)
    """print the verdicts of this study's finished run (the same flags and --name), as the run recorded them, and
    where the sequential design would stop the unresolved ones (seeds, trials, time); another --resolve or
    --reference is printed below them as a re-reading; run nothing"""
    resume: bool = False
    """continue the interrupted study in the same storage folder (on too with --more-seeds)"""
    more_seeds: bool = False
    """continue a finished study whose comparisons were left open at its pause (its cap): their rows run the
    planned looks after it, up to the next pause, in the same folder, MLflow run and Optuna study, and every verdict
    stays within the study's guarantee (the plan kept a share of its error rate for them: docs/statistics.md)"""
    cache: bool = _flag(flag="--no-cache", default=True)
    """train every trial's base session itself instead of reusing an identical one (cache: <storage>/base_cache;
    results are identical either way)"""
    max_failures: int = 2
    """restarts of a trial whose process dies, each from its last checkpoint"""
    checkpoint_every: int = 5
    """base epochs between trial checkpoints; one is also taken at the end of the base session and after every
    incremental session"""
    name: str | None = None
    """suffix of the study folder and MLflow parent run name (a study beside the default one; letters, digits,
    '.', '_', '-')"""
    # --- resources and where things go ---------------------------------------------------------
    cpus_per_trial: float | None = _flag(group="resources and storage", default=None)
    """CPUs per trial, torch threads follow (default: 1 on a CPU cluster; on a GPU cluster the CPUs split between
    the trials packed on each GPU: adbs_lab/cluster/packing.py)"""
    gpus_per_trial: float | None = None
    """GPUs per trial, fractional allowed (default: 0 without GPUs; with GPUs, packing: the study probes one
    trial's peak GPU memory and runs as many trials per GPU as fit in 80% of it, at most 8, and prints its
    choice: adbs_lab/cluster/packing.py)"""
    max_concurrent: int | None = None
    """trials running at once (default: as many as the CPUs/GPUs fit)"""
    address: str | None = None
    """Ray cluster address (default: start a local one)"""
    storage: str = str(paths.DEFAULT_STORAGE)
    """where results, checkpoints and the base-session cache go: a folder (on a cluster one every node mounts)
    or an object-store URL, e.g. s3://bucket/adbs-runs (S3-compatible servers:
    s3://bucket/runs?endpoint_override=HOST:PORT&scheme=http)"""
    optuna_storage: str | None = None
    """Optuna storage URL (default sqlite:///<storage>/<study>/optuna.db; with an object-store --storage, a local
    copy uploaded beside the results)"""
    tracking_uri: str | None = None
    """MLflow tracking URI (default $MLFLOW_TRACKING_URI or the project's store, mlflow/mlflow.db)"""
    argv: tuple[str, ...] = _flag(flag=None, default_factory=lambda: tuple(sys.argv))
    """The command line as typed (for --resume hints and the logged command)."""
    continue_argv: tuple[str, ...] | None = _flag(flag=None, default=None)
    """The command that continues this study when another command runs it as a part (studies/paper.py: its own
    command line, which reuses and continues its parts); None: this study's own command with --resume."""

    def __post_init__(self) -> None:
        # URL flags that may carry a password print, log, tag and pickle redacted (adbs/redaction.py: SecretUrl)
        for name in ("optuna_storage", "tracking_uri"):
            object.__setattr__(self, name, secret_url(getattr(self, name)))

    @property
    def folder(self) -> str:
        """What the study's name gets in its folder and Optuna study: `-smoke` for --smoke, then `-NAME`."""
        return (paths.SMOKE if self.smoke else "") + ("" if self.name is None else f"-{self.name}")

    def experiment(self, study: str) -> str:
        """The MLflow experiment of this run of `study`: its name, `<study>-smoke` with --smoke (paths.SMOKE)."""
        return study + (paths.SMOKE if self.smoke else "")

    def config_overrides(self) -> dict[str, str]:
        """--host, --dataset, --data-root, then --set and the field flags, as one dict (later wins), for
        adbs.config.resolve: adbs.config.cli.config_overrides, the rule of `python -m adbs.run` too.

        With --smoke and a host's CPU preset (--preset savc_cpu), the host is that preset's: --smoke replaces
        the preset by `smoke`, and the host it named is kept (host_preset gives that host's smoke run)."""
        host = self.host or (PRESETS.get(self.preset, {}).get("host") if self.smoke else None)
        return cli.config_overrides({"host": host, "dataset": self.dataset, "data_root": self.data_root},
                                    self.overrides)

    @property
    def preset_name(self) -> str:
        """The preset the flags pick: smoke with --smoke, a paper preset for --dataset NAME (or a --config file's
        dataset), else --preset."""
        dataset = {**dict(self.config_values), **self.config_overrides()}.get("dataset")
        return "smoke" if self.smoke else preset_for(self.preset, dataset)

    def base_config(self, study_defaults: dict[str, Any] | None = None, without: tuple[str, ...] = ()) -> dict[str, Any]:
        """The study's base config: adbs.config.resolve(preset < study defaults < --config < overrides).

        `without`: keys of the --config file the study sets itself (searched, fixed by its space, or from --seeds)."""
        file = {k: v for k, v in self.config_values if k not in without}
        return resolve("smoke" if self.smoke else self.preset, study_defaults, self.config_overrides(), file)

    def check(self) -> None:
        """Everything wrong with the options themselves; raises StudyInputError naming the flag."""
        if self.preset not in PRESETS:
            raise StudyInputError(f"--preset {self.preset!r} is unknown; valid presets: {', '.join(PRESETS)}")
        if self.pruner not in objectives.PRUNERS:
            raise StudyInputError(f"--pruner {self.pruner!r} is unknown; valid pruners: {', '.join(objectives.PRUNERS)}")
        try:
            objectives.parse(self.objectives)
        except objectives.ObjectiveError as e:
            raise StudyInputError(str(e)) from None
        if not (math.isfinite(self.shadow_share) and 0 <= self.shadow_share <= 1):
            raise StudyInputError(f"--shadow-share {self.shadow_share:g} is out of range; allowed: 0..1, the share of "
                                  "pruned trials that run on to the end (e.g. --shadow-share 0.2; 0: none)")
        clash = objectives.pruner_problem(self.objectives, self.pruner) or objectives.shadow_problem(
            self.pruner, self.shadow_share, any(a.split("=")[0] == "--shadow-share" for a in self.argv[1:]))
        if clash:
            raise StudyInputError(clash)
        self._check_seeds()
        if delta_problem(self.resolve):
            raise StudyInputError(f"--resolve {shown(self.resolve)}: {delta_problem(self.resolve)}")
        if alpha_problem(self.error_rate):
            raise StudyInputError(f"--error-rate {shown(self.error_rate)}: {alpha_problem(self.error_rate)}")
        if self.reference is not None and not self.reference.strip():
            raise StudyInputError("--reference needs a row's label as the table shows it, e.g. --reference 'alpha=0.05'")
        if self.plan_only and self.resume:
            raise StudyInputError(f"--plan reads a finished study and runs nothing: drop "
                                  f"{'--more-seeds' if self.more_seeds else '--resume'}")
        if self.num_samples is not None and self.num_samples < 1:
            raise StudyInputError(f"--num-samples must be >= 1 (configurations to sample), got {self.num_samples}")
        if self.max_concurrent is not None and self.max_concurrent < 1:
            raise StudyInputError(f"--max-concurrent must be >= 1, got {self.max_concurrent}")
        if self.cpus_per_trial is not None and not 0 < self.cpus_per_trial <= MAX_THREADS:
            raise StudyInputError(f"--cpus-per-trial {self.cpus_per_trial:g} is out of range; allowed: > 0 and at "
                                  f"most {MAX_THREADS} (a trial's CPUs are its torch threads, a C int)")
        if not 0 <= self.sampler_seed <= MAX_SAMPLER_SEED:
            raise StudyInputError(f"--sampler-seed {self.sampler_seed} is out of range; allowed: 0..{MAX_SAMPLER_SEED} "
                                  "(what Optuna's samplers take)")
        if self.gpus_per_trial is not None and self.gpus_per_trial < 0:
            raise StudyInputError(f"--gpus-per-trial must be >= 0, got {self.gpus_per_trial:g}")
        if self.max_failures < 0:
            raise StudyInputError(f"--max-failures must be >= 0, got {self.max_failures}")
        if self.checkpoint_every < 1:
            raise StudyInputError(f"--checkpoint-every must be >= 1, got {self.checkpoint_every}")
        check_name(self.name, smoke=self.smoke)
        if self.smoke and self.preset not in SMOKE_PRESETS:
            raise StudyInputError(
                f"--smoke runs the seconds-long smoke preset on the embedded benchmark and cannot shorten --preset "
                f"{self.preset}: drop --smoke to run {self.preset}, or drop --preset (--smoke --dataset NAME "
                f"--data-root DIR is a smoke run on that dataset; --set base_epochs=N shortens any preset)")
        owner = PRESETS[self.preset].get("host")
        if self.smoke and self.host and owner and self.host != owner:
            raise StudyInputError(f"--preset {self.preset} is host {owner}'s, but --host is {self.host}: pass one "
                                  "of them")

    def _check_seeds(self) -> None:
        """--seeds, --max-seeds and --more-seeds."""
        if self.more_seeds and not self.seeds_auto:
            typed = any(a == "--seeds" or a.startswith("--seeds=") for a in self.argv[1:])
            which = (f"--seeds {' '.join(map(str, self.seeds))} runs exactly its seeds: drop --seeds" if typed else
                     f"this run's seeds are a fixed list ({' '.join(map(str, self.seeds))}, the study's default "
                     f"{'with --smoke' if self.smoke else 'here'}): pass --seeds auto (with --smoke too, for a smoke "
                     "study that ran with it)")
            raise StudyInputError(f"--more-seeds continues a study whose seeds follow its looks (the default of a "
                                  f"study that compares rows, or --seeds auto); {which}, or start a new study with "
                                  "--name NAME")
        if self.max_seeds is not None and not self.seeds_auto:
            raise StudyInputError(f"--max-seeds {self.max_seeds}: it caps --seeds auto; pass --seeds auto too, or drop "
                                  "--max-seeds (a seed list runs exactly its seeds)")
        if self.seeds_auto and self.max_seeds is not None and not 3 <= self.max_seeds <= MAX_SEEDS:
            raise StudyInputError(f"--max-seeds {self.max_seeds}: --seeds auto runs a first batch of 3 seeds, so the "
                                  f"cap is at least 3, and at most {MAX_SEEDS} (default 8)")
        if self.race_top is not None and not self.seeds_auto:
            raise StudyInputError(f"--race-top {self.race_top}: it sizes the race of --seeds auto on a sampled search "
                                  "(--num-samples); pass --seeds auto too, or drop --race-top")
        if self.race_top is not None and self.race_top < 2:
            raise StudyInputError(f"--race-top {self.race_top}: a race compares contenders, so it is at least 2 "
                                  "(default 3)")
        if len(self.seeds) > MAX_SEEDS:
            raise StudyInputError(f"--seeds: {len(self.seeds)} seeds; a study runs at most {MAX_SEEDS} per "
                                  "configuration (the seed planner plans up to that many)")
        if not self.seeds:
            raise StudyInputError("--seeds needs at least one seed, e.g. --seeds 0 1 2")
        bad = [s for s in self.seeds if s < 0]
        if bad:
            raise StudyInputError(f"--seeds {' '.join(map(str, bad))}: seeds must be >= 0 (they seed the "
                                  "training and the few-shot draw)")
        dup = sorted(s for s, k in collections.Counter(self.seeds).items() if k > 1)
        if dup:
            raise StudyInputError(f"--seeds repeats {' '.join(map(str, dup))}: each seed is one repetition, and a "
                                  f"repeated seed reruns the same trial; pass distinct seeds, e.g. --seeds "
                                  f"{' '.join(map(str, sorted(set(self.seeds))))}")

    def replace(self, **changes: Any) -> "StudyOptions":
        return dataclasses.replace(self, **changes)


_HINTS = typing.get_type_hints(StudyOptions)
_DOCS = read_field_docs(StudyOptions)


def parser(doc: str | None, defaults: Defaults = Defaults()) -> argparse.ArgumentParser:
    """The shared flags: adbs/config/cli.py's, one per StudyOptions field, then every config field and host option.

    A study adds its own flags to the returned parser before `parse`; one named as a config field replaces that
    field's flag (kshot_grid's --ways and --shots pick cells of its grid, which sets those fields itself)."""
    p = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter,
                                usage=f"%(prog)s [study flags, below] {cli.USAGE}", conflict_handler="resolve",
                                allow_abbrev=False)  # whole names: studies/submit.py checks flags by their names
    p.set_defaults(_defaults=defaults)
    group = p.add_argument_group("configuration")
    cli.add_shared_flags(group)
    for f in dataclasses.fields(StudyOptions):
        if "group" in f.metadata:
            group = p.add_argument_group(f.metadata["group"])
        kwargs = _flag_kwargs(f, defaults)
        if kwargs is not None:
            group.add_argument(f.metadata.get("flag") or "--" + f.name.replace("_", "-"), **kwargs)
    cli.add_field_flags(p, "config fields (the same as in python -m adbs.run; each the same as --set FIELD=VALUE)")
    return p


def _flag_kwargs(f: dataclasses.Field, d: Defaults) -> dict[str, Any] | None:
    """argparse's keywords for field `f`'s flag, from its type, default and docstring; None where the field has no
    flag of its own here (adbs/config/cli.py defines it, it has none, or this study samples nothing)."""
    dest = f.metadata.get("dest", f.name)
    if dest in cli.SHARED or f.metadata.get("flag", "") is None:
        return None
    if f.name == "num_samples" and d.num_samples is None and not d.sample_on_request:
        return None
    hint = _HINTS[f.name]
    text = (_DOCS[f.name] + _default_text(f, d)).replace("%", "%%")
    if hint is bool:
        return dict(dest=dest, action="store_false" if f.default else "store_true", help=text)
    args = [a for a in typing.get_args(hint) if a is not type(None)]
    kwargs: dict[str, Any] = dict(dest=dest, help=text, default=None if f.name in _STUDY_DEFAULTS else f.default,
                                  type=args[0] if args else hint)
    if typing.get_origin(hint) is tuple:
        kwargs["nargs"] = "+"
    if f.name == "objectives":
        kwargs["metavar"] = "NAME:max|min"
    if f.name == "seeds":
        kwargs.update(type=_seed, metavar="SEED|auto")
    if f.name == "error_rate":
        kwargs.update(type=_rate, metavar="A")
    if f.name == "pruner":
        kwargs.update(choices=objectives.PRUNERS, help=text if d.pruning else argparse.SUPPRESS)
    return kwargs


def _seed(text: str) -> int | str:
    """One value of --seeds: a seed number, or `auto`."""
    if text == AUTO:
        return AUTO
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid seed {text!r}: a seed is a number >= 0, or --seeds auto") from None


def _rate(text: str) -> float:
    """--error-rate's value: a number (check() refuses one outside (0, MAX_ALPHA])."""
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number: the family error rate A is a number > 0 and at "
                                         f"most {MAX_ALPHA:g}, e.g. --error-rate 0.05 (the default)") from None


AUTO = "auto"
"""--seeds auto (StudyOptions.seeds_auto)."""
DEFAULT_MAX_SEEDS = 8
"""--max-seeds when not given (adbs_lab/stats/looks.py: DEFAULT_MAX_SEEDS)."""

_STUDY_DEFAULTS = ("seeds", "num_samples", "pruner")
"""Fields whose default a study sets (Defaults), and which may follow its own flags: `parse` resolves them."""


def _default_text(f: dataclasses.Field, d: Defaults) -> str:
    """The default a flag's help states: the study's for _STUDY_DEFAULTS, else the field's (None: the docstring
    says what happens)."""
    if f.name == "seeds" and d.decide:
        return (f" (default: auto, seeds until the table's comparisons are resolved, 3 to 8 per row for up to 3 "
                f"comparisons (9 for up to 12, 11 for up to 20); {' '.join(map(str, d.seeds))} where the run compares "
                f"no rows; {' '.join(map(str, d.smoke_seeds or d.seeds))} with --smoke"
                + "".join(f"; {' '.join(map(str, s))} with --{flag.replace('_', '-')}" for flag, s in d.seeds_when)
                + ")")
    if f.name == "seeds":
        return (f" (default {' '.join(map(str, d.seeds))}"
                + "".join(f"; {' '.join(map(str, s))} with --{flag.replace('_', '-')}" for flag, s in d.seeds_when)
                + ")")
    if f.name == "num_samples":
        return (" (none by default: the study runs its grid; with it, a TPE search of that many configurations)"
                if d.sample_on_request else f" (default {d.num_samples})")
    if f.name == "pruner":
        when = "".join(f"; {pruner} with --{flag.replace('_', '-')}" for flag, pruner in d.pruner_when)
        return (f" (default: {d.pruner}{when}; none with --objectives other than {objectives.PRUNED_ON}:max, as the "
                f"pruner ranks base-session validation accuracy, a part of {objectives.PRUNED_ON} only; none: every "
                "trial runs to the end)")
    if f.name == "objectives":
        return f" (default: {objectives.DEFAULT[0].text})"
    return "" if f.default is None or isinstance(f.default, bool) else f" (default: {f.default})"


def parse(p: argparse.ArgumentParser | str | None = None, defaults: Defaults = Defaults(),
          argv: list[str] | None = None) -> tuple[StudyOptions, argparse.Namespace]:
    """(StudyOptions, the study's own flags) from the command line; bad --set syntax and a bad --config file fail
    here."""
    if p is None or isinstance(p, str):
        p = parser(p, defaults)
    ns = p.parse_args(argv)
    d: Defaults = ns._defaults
    try:
        cli.check_pairs(ns.overrides)
        config_values = tuple((k, tuple(v) if isinstance(v, list) else v)
                              for k, v in (load_file(ns.config).items() if ns.config else ()))
    except ConfigError as e:
        p.error(str(e))  # argparse's usage line and exit 2, as for its own usage errors
    pruner = ns.pruner
    given_objectives = tuple(ns.objectives or ())
    if pruner is None:  # not typed: the study's default, which may follow one of its own flags (--grid)
        pruner = next((p_ for flag, p_ in d.pruner_when if _given(ns, flag)), d.pruner)
        if objectives.no_pruning(given_objectives):  # Optuna prunes single-objective studies only
            pruner = "none"
    if not d.pruning and pruner != "none":
        p.error(f"--pruner {pruner}: this study runs every trial to the end (each one is a result), so it takes no "
                "pruner; drop --pruner")
    seeds = ns.seeds
    auto = seeds is not None and AUTO in seeds
    if auto and list(seeds) != [AUTO]:
        p.error("--seeds auto chooses the seeds itself: pass --seeds auto alone, or a list of seed numbers")
    if auto:  # every seed a row may run; the looks decide how many it does (adbs_lab/search/seeds/)
        cap = ns.max_seeds if ns.max_seeds is not None and ns.max_seeds >= 3 else DEFAULT_MAX_SEEDS
        seeds = tuple(range(min(cap, MAX_SEEDS + 1)))  # check() refuses a cap above MAX_SEEDS, by its value
    by_default = False
    if seeds is None:  # not typed: the study's default, which may follow one of its own flags (--num-samples)
        when = next((s_ for flag, s_ in d.seeds_when if _given(ns, flag)), None)
        by_default = d.decide and not ns.smoke and when is None
        auto = by_default
        seeds = (d.smoke_seeds if ns.smoke and d.smoke_seeds else when if when is not None else d.seeds)
    num_samples = getattr(ns, "num_samples", None)
    if num_samples is None and d.num_samples is not None and not d.sample_on_request:
        num_samples = d.smoke_num_samples if ns.smoke and d.smoke_num_samples else d.num_samples
    dests = {f.metadata.get("dest", f.name): f.name for f in dataclasses.fields(StudyOptions)}
    opts = StudyOptions(**{**{name: getattr(ns, dest) for dest, name in dests.items() if hasattr(ns, dest)},
                           "overrides": tuple(ns.overrides), "config_values": config_values, "seeds": tuple(seeds),
                           "seeds_auto": auto, "seeds_default": by_default, "num_samples": num_samples, "pruner": pruner,
                           "objectives": given_objectives, "resume": ns.resume or ns.more_seeds,
                           "argv": tuple(sys.argv if argv is None else [sys.argv[0], *argv])})
    extra = argparse.Namespace(**{k: v for k, v in vars(ns).items() if k not in dests and k != "_defaults"})
    if os.environ.get(FLAGS_ONLY_ENV):  # studies/submit.py: do the flags parse here, before the job is sent?
        raise Exit(OK)
    return opts, extra


FLAGS_ONLY_ENV = "ADBS_CHECK_FLAGS_ONLY"
"""Set (to 1): a study script parses its flags and exits 0 (or 2 with argparse's message), doing nothing else;
studies/submit.py checks a study's flags this way before it sends the job."""


def _given(ns: argparse.Namespace, flag: str) -> bool:
    """Whether a study flag of Defaults.pruner_when / seeds_when was given: a switch on, or a value typed."""
    return getattr(ns, flag, None) not in (None, False)


def check_name(name: str | None, given: str = "--name", smoke: bool = False) -> None:
    """--name (or `given`: a study script's `Plan(name=...)`, flags.check): one folder name under --storage (the
    study's folder, its moved-aside copy and its Optuna study), never a path out of it, and no --name that makes the
    folder of the study's --smoke runs (`smoke`: this run is one); else StudyInputError."""
    flag = given.startswith("--")
    if flag and name is not None and not smoke and (name == paths.SMOKE[1:] or name.startswith(paths.SMOKE[1:] + "-")):
        raise StudyInputError(f"{given} {name!r}: <study>-{name} is the folder of the study's --smoke runs (with "
                              "--smoke, --name N makes <study>-smoke-N); pick another name")
    if name is not None and (not NAME.match(name) or ".." in name):
        raise StudyInputError(f"{f'{given} {name!r}' if flag else f'{given}={name!r})'}: a study name is one folder "
                              "name: letters, digits, '.', '_' and '-', starting with a letter or digit (no '/', no '..')")
    if name is not None and len(name) > MAX_NAME:
        raise StudyInputError(f"{given if flag else given + '=...)'} is {len(name)} characters long; at most {MAX_NAME}: "
                              "it names the study's folder (and the one earlier results move to), whose name the "
                              "filesystem limits; pass a shorter one")


__all__ = ["MAX_SEEDS", "Defaults", "StudyInputError", "StudyOptions", "parse", "parser", "check_name", "FLAGS_ONLY_ENV"]
