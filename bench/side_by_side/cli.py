"""The command line of bench/vs_official.py: its options, their checks (all before any compute), and main,
which runs the steps in order: copy and patch, write the data, check ours' config, run, parse, report.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import shutil
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path
from typing import Any

from adbs import exits
from adbs.config import SYNTHETIC_VERSIONS  # no torch: importable before the checks
from adbs.writable import folder_problem

from . import ALL_SESSIONS, SHOTS, ToolError
from .commands import config_differences, ours_command, ours_overrides, parse_ours_set, released_command
from .data import copy_lists, write_benchmark
from .logs import parse_ours_result, parse_released_log
from .patches import Patch, apply_patches, check_released_checkout, copy_released, released_patches
from .report import format_report, write_outputs
from .reuse import check_reused_data, load_released_runs
from .run import Job, run_all, say, tail
from .stats import summarize, summarize_negatives

REPO = Path(__file__).resolve().parents[2]


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python bench/vs_official.py", description=sys.modules[__package__].__doc__.split("\n\n")[0],
        epilog="The module docstring (bench/vs_official.py) and docs/vs-official.md say more.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--official", required=True, help="a checkout of the authors' ADBS code (never modified)")
    p.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3], help="training seeds, the same for both codes (>= 1)")
    p.add_argument("--epochs", type=int, default=8, help="base epochs (both codes, cosine schedule over them)")
    p.add_argument("--train-per-class", type=int, default=150, help="training images per class written (<= 500)")
    p.add_argument("--test-per-class", type=int, default=100, help="test images per class written (<= 100)")
    p.add_argument("--sessions", type=int, default=ALL_SESSIONS, help="incremental sessions run (1..8; <8 patches the "
                   "released code, for tiny runs)")
    p.add_argument("--synthetic-version", type=int, default=2, help="embedded benchmark version "
                   f"({', '.join(map(str, SYNTHETIC_VERSIONS))}; adbs/data/synthetic.py)")
    p.add_argument("--synthetic-seed", type=int, default=0, help="seed that generates the embedded benchmark")
    p.add_argument("--split-seed", type=int, default=0, help="seed of the 5-shot draws (the project's protocol)")
    p.add_argument("--ours-set", nargs="+", default=[], metavar="KEY=VALUE",
                   help="Config fields of ours to change (e.g. amp=true val_fraction=0.01)")
    p.add_argument("--released-from", default=None, metavar="DIR",
                   help="reuse the released runs in DIR (an earlier --out, same data and settings) instead of running "
                   "the released code again: for checking factors of ours one at a time with --ours-set")
    p.add_argument("--released-only", action="store_true",
                   help="run the released code only (e.g. on other data than an earlier run of ours; a later "
                   "--released-from can pair its runs with ours)")
    p.add_argument("--device", choices=("cuda", "cpu"), default="cuda", help="cpu: patches the released code to run "
                   "on the CPU (tiny settings only)")
    p.add_argument("--jobs", type=int, default=1, help="runs at a time on the one device (epoch times then include "
                   "contention)")
    p.add_argument("--timeout", type=float, default=None, help="seconds after which one run is killed")
    p.add_argument("--official-python", default=sys.executable, help="Python that runs the released code")
    p.add_argument("--out", default=None, help="results folder (default results/vs_official/<time>)")
    p.add_argument("--keep-temp", action="store_true", help="keep the temporary copy and data (their path is printed)")
    return p


def check_args(a: argparse.Namespace) -> dict[str, Any]:
    """Every check that needs no data; returns the parsed --ours-set."""
    check_released_checkout(Path(a.official).expanduser())
    if len(set(a.seeds)) != len(a.seeds):
        raise ToolError(f"--seeds {' '.join(map(str, a.seeds))}: a seed is repeated; give distinct seeds")
    bad = [s for s in a.seeds if s < 1]
    if bad:
        raise ToolError(f"--seeds: {bad} < 1; the released code treats seed 0 as 'no seed' (utils.py: set_seed: "
                        "random, cudnn.benchmark) and the seeds must be the same for both codes: use seeds >= 1")
    _check_sizes(a)
    ours_set = parse_ours_set(a.ours_set)
    if a.released_only and (a.released_from or ours_set):
        raise ToolError("--released-only runs no ours: it takes neither --released-from nor --ours-set")
    if a.device == "cuda":
        import torch

        if not torch.cuda.is_available():
            raise ToolError("--device cuda, but torch sees no CUDA GPU here; run on a GPU machine, or pass --device cpu "
                            "for the tiny CPU path (e.g. --epochs 1 --train-per-class 20 --test-per-class 4 "
                            "--sessions 2 --seeds 1)")
    return ours_set


def _check_sizes(a: argparse.Namespace) -> None:
    """Epochs, sessions, images per class, benchmark version and --jobs within their ranges."""
    if a.epochs < 1:
        raise ToolError(f"--epochs {a.epochs}: at least 1 base epoch")
    if not 1 <= a.sessions <= ALL_SESSIONS:
        raise ToolError(f"--sessions {a.sessions}: expected 1..{ALL_SESSIONS}")
    if not SHOTS <= a.train_per_class <= 500:
        raise ToolError(f"--train-per-class {a.train_per_class}: expected {SHOTS}..500 (5 shots are drawn per novel "
                        "class; the embedded benchmark has 500 training images per class)")
    if not 1 <= a.test_per_class <= 100:
        raise ToolError(f"--test-per-class {a.test_per_class}: expected 1..100 (the benchmark's test images per class)")
    if a.synthetic_version not in SYNTHETIC_VERSIONS:
        raise ToolError(f"--synthetic-version {a.synthetic_version}: expected one of "
                        f"{', '.join(map(str, SYNTHETIC_VERSIONS))} (adbs/data/synthetic.py)")
    if a.jobs < 1:
        raise ToolError(f"--jobs {a.jobs}: expected >= 1")


def _out_folder(a: argparse.Namespace) -> Path:
    """--out (default results/vs_official/<time>), created and writable."""
    out = Path(a.out or REPO / "results" / "vs_official" / datetime.now().strftime("%Y%m%d-%H%M%S")).resolve()
    problem = folder_problem(out, f"--out {out}")
    if problem:
        raise ToolError(problem)
    return out


def _patched_copy(a: argparse.Namespace, official: Path, copy: Path) -> list[Patch]:
    """Copy the checkout to `copy` and patch the copy; print the patches."""
    copy_released(official, copy)
    patches = apply_patches(copy, released_patches(a.device, a.sessions))
    say(f"copied {official} to {copy}; patches applied (each exactly once):")
    for p in patches:
        say(f"  {p.describe()}")
    say("  run setting  -num_crops 1 1 -size_crops 32 32 instead of 2 x 224 + 4 x 96 px (computed and dropped)")
    return patches


def _write_data(a: argparse.Namespace, tmp: Path, copy: Path, out: Path, reused: dict[str, Any] | None
                ) -> dict[str, Any]:
    """Write the benchmark under tmp/data, its lists into the copy and data.json to --out."""
    t0 = time.monotonic()
    data = write_benchmark(tmp / "data", version=a.synthetic_version, synthetic_seed=a.synthetic_seed,
                           train_per_class=a.train_per_class, test_per_class=a.test_per_class,
                           split_seed=a.split_seed)
    copy_lists(data, copy)
    (out / "data.json").write_text(json.dumps(data, indent=1))
    if reused is not None:
        check_reused_data(reused, data)
    say(f"wrote benchmark v{a.synthetic_version}: {data['train_images']} train / {data['test_images']} test "
        f"images and session_1..9.txt to {tmp / 'data'} ({time.monotonic() - t0:.1f}s)")
    return data


def _check_ours_config(a: argparse.Namespace, data: dict[str, Any], ours_set: dict[str, Any]) -> None:
    """ours' configuration against the written data, before any training (adbs.run does the same checks)."""
    from adbs.config import PRESETS, ConfigError, from_dict
    from adbs.data import DataError, check_data

    try:
        for s in a.seeds:
            cfg = from_dict({**PRESETS["cifar100"], **ours_overrides(
                data, seed=s, epochs=a.epochs, device=a.device, sessions=a.sessions, ours_set=ours_set)})
            cfg.validate()
            check_data(cfg)
    except (ConfigError, DataError) as e:
        raise ToolError(f"ours' configuration does not fit the written data: {e}") from None


def _jobs(a: argparse.Namespace, data: dict[str, Any], copy: Path, out: Path, ours_set: dict[str, Any],
          reused: dict[str, Any] | None) -> list[Job]:
    """Per seed: the released run (unless reused) and ours' run (unless --released-only)."""
    jobs = []
    for s in a.seeds:
        if reused is None:
            jobs.append(Job("released", s, released_command(a.official_python, Path(data["data_root"]), seed=s,
                                                            epochs=a.epochs, device=a.device),
                            copy, out / f"released-seed{s}.log"))
        if a.released_only:
            continue
        res_json = out / f"ours-seed{s}.json"
        ov = ours_overrides(data, seed=s, epochs=a.epochs, device=a.device, sessions=a.sessions, ours_set=ours_set)
        jobs.append(Job("ours", s, ours_command(sys.executable, ov, res_json), REPO, out / f"ours-seed{s}.log",
                        res_json))
    return jobs


def _run(a: argparse.Namespace, jobs: list[Job], out: Path, reused: dict[str, Any] | None
         ) -> dict[tuple[str, int], float]:
    """Say what runs, run it; the wall time of each run."""
    what = (f"{len(a.seeds)} seeds, ours only: the released runs are reused from {reused['folder']}"
            if reused is not None else f"{len(a.seeds)} seeds, the released code only" if a.released_only
            else f"{len(a.seeds)} seeds x 2 codes")
    say(f"{len(jobs)} runs ({what}), {a.jobs} at a time, on {a.device}; results in {out}")
    env_rel = {**os.environ, "PYTHONUNBUFFERED": "1"}
    env_ours = {**os.environ, "PYTHONUNBUFFERED": "1",
                "PYTHONPATH": os.pathsep.join([str(REPO), *filter(None, [os.environ.get("PYTHONPATH")])])}
    return run_all(jobs, n_parallel=a.jobs, envs={"released": env_rel, "ours": env_ours}, timeout=a.timeout)


def _collect(a: argparse.Namespace, jobs: list[Job], walls: dict[tuple[str, int], float],
             reused: dict[str, Any] | None) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Each run's figures, released and ours, in seed order (reused released runs first)."""
    released = [] if reused is None else [dict(r) for r in reused["runs"]]
    ours = []
    for j in jobs:
        if j.code == "released":
            r = parse_released_log(j.log.read_text(errors="replace"))
            if len(r["sessions"]) != a.sessions + 1:
                raise ToolError(f"{j.tag}: parsed {len(r['sessions'])} session accuracies from {j.log}, expected "
                                f"{a.sessions + 1}; last lines:\n{tail(j.log)}")
            released.append({"seed": j.seed, "wall_s": walls[(j.code, j.seed)], **r})
        else:
            r = parse_ours_result(json.loads(j.result.read_text()))
            ours.append({"seed": j.seed, "wall_s": walls[(j.code, j.seed)], **r})
    return released, ours


def main(argv: list[str] | None = None) -> int:
    a = build_parser().parse_args(argv)
    t_start = time.monotonic()
    tmp: Path | None = None
    try:
        ours_set = check_args(a)
        reused = load_released_runs(Path(a.released_from).expanduser(), a) if a.released_from else None
        out = _out_folder(a)
        tmp = Path(tempfile.mkdtemp(prefix="vs_official-"))
        official, copy = Path(a.official).expanduser().resolve(), tmp / "released"
        patches = _patched_copy(a, official, copy)
        data = _write_data(a, tmp, copy, out, reused)
        _check_ours_config(a, data, ours_set)
        jobs = _jobs(a, data, copy, out, ours_set, reused)
        t_runs = time.monotonic()
        walls = _run(a, jobs, out, reused)
        wall_runs = time.monotonic() - t_runs
        released, ours = _collect(a, jobs, walls, reused)
        res = {
            "args": {**vars(a), "official": str(official)}, "device_name": _device_name(a.device), "data": data,
            "patches": [p.describe() for p in patches],
            "patch_text": [dataclasses.asdict(p) for p in patches],
            "released": released, "ours": ours, "summary": summarize(released, ours),
            "negatives": summarize_negatives(released, ours),
            "released_from": None if reused is None else reused["folder"],
            "differences": [] if not ours else config_differences(ours[0]["config"], a.device)
            + [f"changed with --ours-set: {k}={v!r}" for k, v in ours_set.items()],
            "wall_s": wall_runs, "total_s": time.monotonic() - t_start,
            "temp": str(tmp) if a.keep_temp else None,
        }
        _finish(out, res, a.keep_temp, tmp, t_start)
        return exits.OK
    except ToolError as e:
        print(f"error: {e}", file=sys.stderr)
        return exits.REFUSED
    finally:
        if tmp is not None and not a.keep_temp:
            shutil.rmtree(tmp, ignore_errors=True)


def _device_name(device: str) -> str | None:
    if device != "cuda":
        return None
    import torch

    return torch.cuda.get_device_name(0)


def _finish(out: Path, res: dict[str, Any], keep_temp: bool, tmp: Path, t_start: float) -> None:
    """Write the outputs, print the report and where everything is."""
    report = format_report(res)
    write_outputs(out, res, report)
    print()
    print(report)
    print(f"\nwrote {out}/vs_official.json, runs.csv, summary.csv, report.txt and the logs "
          f"({time.monotonic() - t_start:.0f}s in all)")
    if keep_temp:
        print(f"kept the patched copy and the data in {tmp}")

