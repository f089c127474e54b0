"""A study's options: one typed, frozen object, parsed once from the command line (or built in Python).

    opts = options.parse(__doc__, Defaults(pruner="median", num_samples=4, smoke_num_samples=2))
    opts = StudyOptions(seeds=(0, 1), smoke=True, storage="/tmp/runs")   # the same, without argparse

Every flag a study shares is a field with a docstring; a study's own flags (alpha_sweep's --grid,
ablation's --toggles) come back beside it as `extra`. Smoke-dependent defaults (fewer seeds or samples
with --smoke) are resolved here, once; nothing downstream changes the options. `check()` finds what is
wrong with them before anything starts (no Ray, no files).
"""

from __future__ import annotations

import argparse
import dataclasses
import re
import sys
from dataclasses import dataclass, field
from typing import Any, Callable

from adbs.config import ConfigError
from adbs.config_file import load_file
from adbs.presets import PRESETS, preset_for, resolve
from adbs_lab import paths

PRUNERS = ("median", "halving", "hyperband", "none")
NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
MAX_NAME = 100
"""Characters of --name: the study folder <study>-<name> and its moved-aside copy <study>-<name>.<time> must
stay under the usual 255-byte limit of one file name."""
SMOKE_PRESETS = ("cpu", "smoke", *(k for k, v in PRESETS.items() if v.get("host") and k.endswith("_cpu")))
"""Presets --smoke can replace: the CPU ones (a host's CPU preset keeps its host in the smoke run)."""


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


@dataclass(frozen=True)
class StudyOptions:
    # --- configuration --------------------------------------------------------------------------
    preset: str = "cpu"
    """Named Config preset (adbs.presets.PRESETS); --smoke means the smoke preset."""
    overrides: tuple[tuple[str, str], ...] = ()
    """--set KEY=VALUE pairs, in order, as typed (adbs.overrides coerces and checks them)."""
    host: str | None = None
    """--host NAME: shortcut for --set host=NAME (the FSCIL method ADBS plugs into; its version of the preset)."""
    dataset: str | None = None
    """--dataset NAME: shortcut for --set dataset=NAME (the paper preset of that name with the default preset)."""
    data_root: str | None = None
    """--data-root DIR: shortcut for --set data_root=DIR."""
    config_file: str | None = None
    """--config FILE: a YAML or JSON file of config values (shown in messages; its values are `config_values`)."""
    config_values: tuple[tuple[str, Any], ...] = ()
    """The values of --config FILE, read once, checked and typed (adbs.config_file.load_file); precedence: preset <
    this file < --host/--dataset/--data-root/--set."""
    smoke: bool = False
    """A seconds-long end-to-end version of the study (smoke preset, fewer seeds or samples)."""
    # --- study ----------------------------------------------------------------------------------
    seeds: tuple[int, ...] = (0,)
    """Every configuration runs once per seed (Config.seed and split_seed together)."""
    num_samples: int | None = None
    """Configurations Optuna samples in a sampled study (grids run every point)."""
    pruner: str = "none"
    """Optuna pruner on base-epoch validation accuracy: median, halving, hyperband or none."""
    sampler_seed: int = 0
    """Seed of the Optuna sampler."""
    resume: bool = False
    """Continue the interrupted study in the same results folder."""
    dry_run: bool = False
    """Check every input as a run would and print the number of trials; start and write nothing."""
    cache: bool = True
    """Reuse identical base sessions through <storage>/base_cache (--no-cache turns it off)."""
    max_failures: int = 2
    """Restarts of a trial whose process dies, each from its last checkpoint."""
    checkpoint_every: int = 5
    """Base epochs between trial checkpoints (also at the end of the base session and every session)."""
    name: str | None = None
    """Suffix of the study's folder and MLflow parent run (a study beside the default one)."""
    # --- resources and where things go ---------------------------------------------------------
    cpus_per_trial: float | None = None
    """CPUs per trial (torch threads follow); None = 1 on a CPU cluster, and on a GPU cluster the CPUs
    split evenly between the trials packed on the GPUs (adbs_lab/packing.py)."""
    gpus_per_trial: float | None = None
    """GPUs per trial, fractional allowed; None = 0 on a CPU cluster, and on a GPU cluster packing:
    1/k with k trials per GPU chosen from a probe of one trial's peak GPU memory (adbs_lab/packing.py)."""
    max_concurrent: int | None = None
    """Trials at once; None = as many as the CPUs/GPUs fit."""
    address: str | None = None
    """Ray cluster address; None = start a local Ray instance."""
    storage: str = str(paths.DEFAULT_STORAGE)
    """Where a study's results go: a folder (on a cluster one every node mounts) or an object-store URL."""
    optuna_storage: str | None = None
    """Optuna's database URL; None = sqlite:///<storage>/<study>/optuna.db."""
    tracking_uri: str | None = None
    """MLflow tracking URI; None = $MLFLOW_TRACKING_URI or the project's store."""
    argv: tuple[str, ...] = field(default_factory=lambda: tuple(sys.argv))
    """The command line as typed (for --resume hints and the logged command)."""

    @property
    def folder(self) -> str:
        return "" if self.name is None else f"-{self.name}"

    def config_overrides(self) -> dict[str, str]:
        """--host, --dataset, --data-root, then --set, as one dict (later wins), for adbs.presets.resolve.

        With --smoke and a host's CPU preset (--preset savc_cpu), the host is that preset's: --smoke replaces
        the preset by `smoke`, and the host it named is kept (host_preset gives that host's smoke run)."""
        out: dict[str, str] = {}
        host = self.host or (PRESETS.get(self.preset, {}).get("host") if self.smoke else None)
        if host:
            out["host"] = host
        if self.dataset:
            out["dataset"] = self.dataset
        if self.data_root:
            out["data_root"] = self.data_root
        out.update(dict(self.overrides))
        return out

    @property
    def preset_name(self) -> str:
        """The preset the flags pick: smoke with --smoke, a paper preset for --dataset NAME (or a --config file's
        dataset), else --preset."""
        dataset = {**dict(self.config_values), **self.config_overrides()}.get("dataset")
        return "smoke" if self.smoke else preset_for(self.preset, dataset)

    def base_config(self, study_defaults: dict[str, Any] | None = None, without: tuple[str, ...] = ()) -> dict[str, Any]:
        """The study's base config: adbs.presets.resolve(preset < study defaults < --config < overrides).

        `without`: keys of the --config file the study sets itself (searched, fixed by its space, or from --seeds)."""
        file = {k: v for k, v in self.config_values if k not in without}
        return resolve("smoke" if self.smoke else self.preset, study_defaults, self.config_overrides(), file)

    def check(self) -> None:
        """Everything wrong with the options themselves; raises StudyInputError naming the flag."""
        if self.preset not in PRESETS:
            raise StudyInputError(f"--preset {self.preset!r} is unknown; valid presets: {', '.join(PRESETS)}")
        if self.pruner not in PRUNERS:
            raise StudyInputError(f"--pruner {self.pruner!r} is unknown; valid pruners: {', '.join(PRUNERS)}")
        if not self.seeds:
            raise StudyInputError("--seeds needs at least one seed, e.g. --seeds 0 1 2")
        bad = [s for s in self.seeds if s < 0]
        if bad:
            raise StudyInputError(f"--seeds {' '.join(map(str, bad))}: seeds must be >= 0 (they seed the "
                                  "training and the few-shot draw)")
        dup = sorted({s for s in self.seeds if self.seeds.count(s) > 1})
        if dup:
            raise StudyInputError(f"--seeds repeats {' '.join(map(str, dup))}: each seed is one repetition, and a "
                                  f"repeated seed reruns the same trial; pass distinct seeds, e.g. --seeds "
                                  f"{' '.join(map(str, sorted(set(self.seeds))))}")
        if self.num_samples is not None and self.num_samples < 1:
            raise StudyInputError(f"--num-samples must be >= 1 (configurations to sample), got {self.num_samples}")
        if self.max_concurrent is not None and self.max_concurrent < 1:
            raise StudyInputError(f"--max-concurrent must be >= 1, got {self.max_concurrent}")
        if self.cpus_per_trial is not None and not self.cpus_per_trial > 0:
            raise StudyInputError(f"--cpus-per-trial must be > 0, got {self.cpus_per_trial:g}")
        if self.gpus_per_trial is not None and self.gpus_per_trial < 0:
            raise StudyInputError(f"--gpus-per-trial must be >= 0, got {self.gpus_per_trial:g}")
        if self.max_failures < 0:
            raise StudyInputError(f"--max-failures must be >= 0, got {self.max_failures}")
        if self.checkpoint_every < 1:
            raise StudyInputError(f"--checkpoint-every must be >= 1, got {self.checkpoint_every}")
        if self.name is not None and (not NAME.match(self.name) or ".." in self.name):
            raise StudyInputError(f"--name {self.name!r}: a study name is one folder name: letters, digits, '.', "
                                  "'_' and '-', starting with a letter or digit (no '/', no '..')")
        if self.name is not None and len(self.name) > MAX_NAME:
            raise StudyInputError(f"--name is {len(self.name)} characters long; at most {MAX_NAME}: it names the "
                                  "study's folder (and the folder earlier results are moved to), whose name the "
                                  "filesystem limits; pass a shorter --name")
        if self.smoke and self.preset not in SMOKE_PRESETS:
            raise StudyInputError(
                f"--smoke runs the seconds-long smoke preset on the embedded benchmark and cannot shorten --preset "
                f"{self.preset}: drop --smoke to run {self.preset}, or drop --preset (--smoke --dataset NAME "
                f"--data-root DIR is a smoke run on that dataset; --set base_epochs=N shortens any preset)")
        owner = PRESETS[self.preset].get("host")
        if self.smoke and self.host and owner and self.host != owner:
            raise StudyInputError(f"--preset {self.preset} is host {owner}'s, but --host is {self.host}: pass one "
                                  "of them")

    def replace(self, **changes: Any) -> "StudyOptions":
        return dataclasses.replace(self, **changes)


def parser(doc: str | None, defaults: Defaults = Defaults()) -> argparse.ArgumentParser:
    """The shared flags; a study adds its own to the returned parser before `parse`."""
    p = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.set_defaults(_defaults=defaults)
    _configuration_flags(p)
    _study_flags(p, defaults)
    _resource_flags(p)
    return p


def _configuration_flags(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("configuration")
    g.add_argument("--preset", default="cpu", choices=list(PRESETS),
                   help="named Config preset (adbs.presets.PRESETS); default cpu = embedded benchmark on CPU")
    g.add_argument("--config", metavar="FILE", default=None,
                   help="YAML or JSON file of config values (Config fields, <host>.<option> keys; a study's "
                        "best_config.json as written); precedence: preset < this file < --host/--dataset/--data-root/"
                        "--set; keys the study searches or takes from --seeds are the study's")
    g.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                   help="override any Config field, repeatable (e.g. --set base_epochs=20)")
    g.add_argument("--host", help="host method ADBS plugs into (adbs/hosts/: baseline, savc, alice): its version of "
                                  "--preset/--dataset (e.g. savc_cpu, savc_cifar100); host options with "
                                  "--set <host>.<option>=VALUE (python -m adbs.run --help lists them)")
    g.add_argument("--dataset", help="shortcut for --set dataset=NAME (paper preset of that name when one exists)")
    g.add_argument("--data-root", help="shortcut for --set data_root=DIR")
    g.add_argument("--smoke", action="store_true", help="preset smoke and a tiny study: seconds, end to end")


def _study_flags(p: argparse.ArgumentParser, defaults: Defaults) -> None:
    s = p.add_argument_group("study")
    s.add_argument("--seeds", type=int, nargs="+", default=None,
                   help=f"repeat every configuration over these seeds (Config.seed and split_seed; default "
                        f"{' '.join(map(str, defaults.seeds))}"
                        + "".join(f"; {' '.join(map(str, s_))} with --{flag.replace('_', '-')}"
                                  for flag, s_ in defaults.seeds_when) + ")")
    if defaults.sample_on_request:
        s.add_argument("--num-samples", type=int, default=None,
                       help="sample this many configurations with Optuna's TPE (pruner median, seed 0 unless "
                            "--pruner/--seeds say otherwise) instead of running the grid; TPE draws its first 10 "
                            "configurations at random (Optuna's n_startup_trials), so up to 10 samples are a random "
                            "search")
    elif defaults.num_samples is not None:
        # TPESampler(n_startup_trials=10) is Optuna's default: its first 10 configurations are random draws.
        s.add_argument("--num-samples", type=int, default=None,
                       help=f"configurations Optuna samples (default {defaults.num_samples}); Optuna's TPE draws its "
                            f"first 10 configurations at random (its n_startup_trials) and models the results only "
                            f"after them, so up to 10 samples are a random search")
    when = "".join(f"; {pruner} with --{flag.replace('_', '-')}" for flag, pruner in defaults.pruner_when)
    s.add_argument("--pruner", default=None, choices=PRUNERS,
                   help=argparse.SUPPRESS if not defaults.pruning else
                   f"Optuna pruner on base-epoch validation accuracy (default: {defaults.pruner}{when}; none: every "
                   "trial runs to the end)")
    s.add_argument("--sampler-seed", type=int, default=0, help="seed of the Optuna sampler (default: %(default)s)")
    s.add_argument("--resume", action="store_true", help="continue the interrupted study in the same storage folder")
    s.add_argument("--dry-run", action="store_true",
                   help="check every input as a run would (flags, config, search space, data, storage) and print how "
                        "many trials it would run, then exit: nothing is started or written")
    s.add_argument("--no-cache", action="store_true",
                   help="train every trial's base session itself instead of reusing an identical one "
                        "(cache: <storage>/base_cache; results are identical either way)")
    s.add_argument("--max-failures", type=int, default=2,
                   help="restarts of a trial whose process dies, each from its last checkpoint (default: "
                        "%(default)s)")
    s.add_argument("--checkpoint-every", type=int, default=5,
                   help="base epochs between trial checkpoints (also at the end of the base session and "
                        "after every incremental session; default: %(default)s)")
    s.add_argument("--name", help="suffix of the study folder and MLflow parent run name (a study beside the "
                                  "default one; letters, digits, '.', '_', '-')")


def _resource_flags(p: argparse.ArgumentParser) -> None:
    r = p.add_argument_group("resources and storage")
    r.add_argument("--cpus-per-trial", type=float, default=None,
                   help="CPUs per trial, torch threads follow (default: 1 on a CPU cluster; on a GPU cluster the "
                        "CPUs split between the trials packed on each GPU)")
    r.add_argument("--gpus-per-trial", type=float, default=None,
                   help="GPUs per trial, fractional allowed (default: 0 without GPUs; with GPUs, packing: the study "
                        "probes one trial's peak GPU memory and runs as many trials per GPU as fit in 80%% of it, "
                        "at most 8, and prints its choice)")
    r.add_argument("--max-concurrent", type=int, default=None,
                   help="trials running at once (default: as many as the CPUs/GPUs fit)")
    r.add_argument("--address", default=None, help="Ray cluster address (default: start a local one)")
    r.add_argument("--storage", default=str(paths.DEFAULT_STORAGE),
                   help="where results, checkpoints and the base-session cache go: a folder (default <repo>/runs; "
                        "on a cluster one every node mounts) or an object-store URL, e.g. s3://bucket/adbs-runs "
                        "(S3-compatible servers: s3://bucket/runs?endpoint_override=HOST:PORT&scheme=http)")
    r.add_argument("--optuna-storage", default=None,
                   help="Optuna storage URL (default sqlite:///<storage>/<study>/optuna.db; with an object-store "
                        "--storage, a local copy uploaded beside the results)")
    r.add_argument("--tracking-uri", default=None,
                   help=f"MLflow tracking URI (default $MLFLOW_TRACKING_URI or {paths.DEFAULT_TRACKING_URI})")


def parse(p: argparse.ArgumentParser | str | None = None, defaults: Defaults = Defaults(),
          argv: list[str] | None = None) -> tuple[StudyOptions, argparse.Namespace]:
    """(StudyOptions, the study's own flags) from the command line; bad --set syntax fails here."""
    if p is None or isinstance(p, str):
        p = parser(p, defaults)
    ns = p.parse_args(argv)
    d: Defaults = ns._defaults
    pairs = []
    for item in ns.overrides:
        key, eq, value = item.partition("=")
        if not eq or not key.strip():
            raise SystemExit(_usage_error(p, f"--set expects KEY=VALUE, got {item!r} (e.g. --set base_epochs=20)"))
        pairs.append((key.strip(), value.strip()))
    config_values: tuple[tuple[str, Any], ...] = ()
    if ns.config:
        try:
            config_values = tuple((k, tuple(v) if isinstance(v, list) else v)
                                  for k, v in load_file(ns.config).items())
        except ConfigError as e:
            raise SystemExit(_usage_error(p, str(e))) from None
    pruner = ns.pruner
    if pruner is None:  # not typed: the study's default, which may follow one of its own flags (--grid)
        pruner = next((p_ for flag, p_ in d.pruner_when if _given(ns, flag)), d.pruner)
    if not d.pruning and pruner != "none":
        raise SystemExit(_usage_error(p, f"--pruner {pruner}: this study runs every trial to the end (each one is a "
                                         "result), so it takes no pruner; drop --pruner"))
    seeds = ns.seeds
    if seeds is None:  # not typed: the study's default, which may follow one of its own flags (--num-samples)
        seeds = (d.smoke_seeds if ns.smoke and d.smoke_seeds else
                 next((s_ for flag, s_ in d.seeds_when if _given(ns, flag)), d.seeds))
    num_samples = getattr(ns, "num_samples", None)
    if num_samples is None and d.num_samples is not None and not d.sample_on_request:
        num_samples = d.smoke_num_samples if ns.smoke and d.smoke_num_samples else d.num_samples
    shared = {"preset", "config", "overrides", "host", "dataset", "data_root", "smoke", "seeds", "num_samples", "pruner",
              "dry_run",
              "sampler_seed", "resume", "no_cache", "max_failures", "checkpoint_every", "name", "cpus_per_trial",
              "gpus_per_trial", "max_concurrent", "address", "storage", "optuna_storage", "tracking_uri", "_defaults"}
    opts = StudyOptions(
        preset=ns.preset, config_file=ns.config, config_values=config_values, overrides=tuple(pairs), host=ns.host, dataset=ns.dataset, data_root=ns.data_root, smoke=ns.smoke,
        seeds=tuple(seeds), num_samples=num_samples, pruner=pruner, sampler_seed=ns.sampler_seed,
        resume=ns.resume, dry_run=ns.dry_run, cache=not ns.no_cache, max_failures=ns.max_failures, checkpoint_every=ns.checkpoint_every,
        name=ns.name, cpus_per_trial=ns.cpus_per_trial, gpus_per_trial=ns.gpus_per_trial,
        max_concurrent=ns.max_concurrent, address=ns.address, storage=ns.storage, optuna_storage=ns.optuna_storage,
        tracking_uri=ns.tracking_uri, argv=tuple(sys.argv if argv is None else [sys.argv[0], *argv]),
    )
    extra = argparse.Namespace(**{k: v for k, v in vars(ns).items() if k not in shared})
    return opts, extra


def _given(ns: argparse.Namespace, flag: str) -> bool:
    """Whether a study flag of Defaults.pruner_when / seeds_when was given: a switch on, or a value typed."""
    return getattr(ns, flag, None) not in (None, False)


def _usage_error(p: argparse.ArgumentParser, msg: str) -> int:
    p.print_usage(sys.stderr)
    print(f"{p.prog}: error: {msg}", file=sys.stderr)
    return 2


def resume_command(opts: StudyOptions, python: Callable[[], str] = lambda: sys.executable) -> list[str]:
    """The command that continues this study."""
    argv = list(opts.argv)
    return [python(), *argv] + ([] if "--resume" in argv else ["--resume"])


__all__ = ["Defaults", "PRUNERS", "StudyInputError", "StudyOptions", "parse", "parser", "resume_command",
           "ConfigError"]
