"""The flags every study shares, and turning them into a base Config (strictly checked)."""

from __future__ import annotations

import argparse
from typing import Any

from adbs.config import PRESETS, ConfigError, coerce, fold_options, host_preset
from adbs_lab import paths
from adbs_lab.pruning import PRUNERS


def parser(doc: str | None, *, pruner: str = "none", num_samples: int | None = None,
           seeds: list[int] | None = None) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    g = p.add_argument_group("configuration")
    g.add_argument("--preset", default="cpu", choices=list(PRESETS),
                   help="named Config preset (adbs.config.PRESETS); default cpu = embedded benchmark on CPU")
    g.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                   help="override any Config field, repeatable (e.g. --set base_epochs=20)")
    g.add_argument("--dataset", help="shortcut for --set dataset=NAME (paper preset of that name when one exists)")
    g.add_argument("--data-root", help="shortcut for --set data_root=DIR")
    g.add_argument("--host", help="host method ADBS plugs into (adbs/hosts/: baseline, savc, alice): its preset that "
                                  "goes with --preset/--dataset (e.g. savc_cpu, savc_cifar100); host options with "
                                  "--set <host>.<option>=VALUE (python -m adbs.run --help lists them)")
    g.add_argument("--smoke", action="store_true", help="preset smoke and a tiny study: seconds, end to end")
    s = p.add_argument_group("study")
    s.add_argument("--seeds", type=int, nargs="+", default=seeds or [0],
                   help="repeat every configuration over these seeds (Config.seed and split_seed)")
    if num_samples is not None:
        s.add_argument("--num-samples", type=int, default=num_samples, help="configurations Optuna samples")
    s.add_argument("--pruner", default=pruner, choices=PRUNERS,
                   help="Optuna pruner on base-epoch validation accuracy")
    s.add_argument("--sampler-seed", type=int, default=0, help="seed of the Optuna sampler")
    s.add_argument("--resume", action="store_true", help="continue the interrupted study in the same storage folder")
    s.add_argument("--no-cache", action="store_true",
                   help="train every trial's base session itself instead of reusing an identical one "
                        "(cache: <storage>/base_cache; results are identical either way)")
    s.add_argument("--max-failures", type=int, default=2,
                   help="restarts of a trial whose process dies, each from its last checkpoint")
    s.add_argument("--checkpoint-every", type=int, default=5,
                   help="base epochs between trial checkpoints (also at the end of the base session and "
                        "after every incremental session)")
    s.add_argument("--name", help="suffix of the study folder and MLflow parent run name (a study beside the default one)")
    r = p.add_argument_group("resources and storage")
    r.add_argument("--cpus-per-trial", type=float, default=1.0, help="CPUs per trial (torch threads follow)")
    r.add_argument("--gpus-per-trial", type=float, default=None,
                   help="GPUs per trial, fractional allowed (default: 1 when CUDA is available, else 0)")
    r.add_argument("--max-concurrent", type=int, default=None,
                   help="trials running at once (default: as many as the CPUs/GPUs fit)")
    r.add_argument("--address", default=None, help="Ray cluster address (default: start a local one)")
    r.add_argument("--storage", default=str(paths.DEFAULT_STORAGE), help="where results, checkpoints and the base-session cache go: a folder (default <repo>/runs; "
                        "on a cluster one every node mounts) or an object-store URL, e.g. s3://bucket/adbs-runs "
                        "(S3-compatible servers: s3://bucket/runs?endpoint_override=HOST:PORT&scheme=http)")
    r.add_argument("--optuna-storage", default=None,
                   help="Optuna storage URL (default sqlite:///<storage>/<study>/optuna.db; with an object-store "
                        "--storage, a local copy uploaded beside the results)")
    r.add_argument("--tracking-uri", default=None,
                   help=f"MLflow tracking URI (default $MLFLOW_TRACKING_URI or {paths.DEFAULT_TRACKING_URI})")
    return p


def preset_name(args: argparse.Namespace) -> str:
    """The preset the flags pick: smoke with --smoke, the dataset's paper preset for `--dataset NAME`, else --preset."""
    if args.smoke:
        return "smoke"
    if args.dataset and args.preset == "cpu" and args.dataset in PRESETS:
        return args.dataset  # `--dataset cifar100` means the paper's CIFAR100 settings
    return args.preset


def base_overrides(args: argparse.Namespace, study_defaults: dict[str, Any] | None = None) -> dict[str, Any]:
    """preset (smoke with --smoke; the --host's version of it) < study CPU defaults < --dataset/--data-root
    < --set; all coerced."""
    preset = preset_name(args)
    host = getattr(args, "host", None)
    out: dict[str, Any] = host_preset(host, preset) if host else dict(PRESETS[preset])
    if preset == "cpu" and study_defaults:
        out.update(study_defaults)  # studies may shrink the CPU budget (printed with the estimate)
    if args.dataset:
        out["dataset"] = args.dataset
    if args.data_root:
        out["data_root"] = args.data_root
    for item in args.overrides:
        if "=" not in item:
            raise ConfigError(f"--set expects KEY=VALUE, got {item!r} (e.g. --set base_epochs=20)")
        key, value = item.split("=", 1)
        out[key.strip()] = value.strip()
    return fold_options({k: coerce(k, v) for k, v in out.items()})  # --set savc.queue_size=... -> host_options
