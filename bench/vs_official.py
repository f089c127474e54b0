"""Side by side with the authors' released ADBS code, on identical data, over seeds.

    python bench/vs_official.py --official adbs-official            # GPU, seeds 1 2 3, 8 epochs
    python bench/vs_official.py --official PATH --seeds 1 2 3 4 5 --jobs 2
    python bench/vs_official.py --official PATH --ours-set amp=true val_fraction=0.01    # check a change of ours
    python bench/vs_official.py --official PATH --device cpu --epochs 1 --train-per-class 20 \\
        --test-per-class 4 --sessions 2 --seeds 1                                        # the tiny CPU path
    python bench/vs_official.py --official PATH --device cpu --epochs 1 --train-per-class 30 --sessions 1 \\
        --seeds 1 2 3 4 5 6 7 8 --released-from results/vs_official/A --ours-set val_fraction=0.034
                                   # one factor of ours against the released runs of an earlier --out A

What it does, in order (nothing trains before every check has passed):

1. Checks its inputs: the checkout exists and is the released ADBS code (its files, and every patch
   target below present exactly as often as expected), seeds are distinct integers >= 1 (the released
   `utils.py: set_seed` treats 0 as "no seed"), a GPU is there when --device cuda, the --ours-set keys
   are Config fields that the tool does not set itself, the output folder is writable.
2. Copies the checkout into a temporary folder and patches the copy (never the checkout). The patches
   are printed and written to the results; see PATCHES below.
3. Writes the embedded benchmark (adbs/data/synthetic.py, --synthetic-version, --synthetic-seed) in the
   CIFAR-100 python layout: the first --train-per-class / --test-per-class images of every class,
   class-major, as cifar-100-python/{train,test,meta}; and CEC-style index lists: session_1.txt = every
   base-class training image (what the released CIFAR loader trains on), session_2..9.txt = 5 shots of
   each of the 5 classes of incremental sessions 1..8, drawn with this project's per-class protocol
   (adbs/data/protocol.py, seeded draw, --split-seed), i.e. the shots `python -m adbs.run` draws itself
   from the same pool. Both codes read the same files (the released code from data/index_list/cifar100/
   of its copy). Then ours' configuration is checked against the written data (adbs.data.check_data).
4. Runs, for every seed, the released `train.py` (its README's CIFAR-100 command: project adbs,
   -margin, cosine lr 0.1, lr_new 0.01, decay 5e-4; -epochs_base E, -seed S) and ours
   (`python -m adbs.run --preset cifar100 --dataset cifar100 --data-root .. --index-list ..
   --variant adb+ic --base-epochs E --seed S`), one run after another, or --jobs at a time.
5. Parses both (the released log, ours' result JSON) and prints per-session test accuracy means with
   95% CIs (t-distribution, adbs_lab.results.ci95), ours - released per session with a Welch 95% CI,
   the negative base boundaries after base epoch 1 and after the base session (per seed, mean and 95% CI
   per code, ours - released with a Welch 95% CI), per-epoch times, and every setting of ours that
   differs from the released run. Everything goes to --out: vs_official.json, runs.csv, summary.csv,
   negatives.csv, report.txt, data.json (the data's sha256), both codes' logs and ours' result JSONs.
   With --released-from A the released runs are taken from the earlier results folder A (same data,
   checked by sha256, same seeds, epochs, sessions and device) and only ours runs: the released code's
   runs do not depend on --ours-set, so each factor of ours costs ours' runs only.

PATCHES (to the temporary copy; `released_patches` holds their exact text):
    md5-train, md5-meta  dataloader/cifar100/cifar.py: no md5 checks (the data are not CIFAR-100's bytes)
    numpy2               dataloader/cifar100/cifar.py: `data_tmp == []` -> `len(data_tmp) == 0` (an ndarray
                         compared with [] raises under numpy 2)
    print-epoch          models/adbs/fscil_trainer.py: a VS_EPOCH line per base epoch (train and test
                         seconds, negative base boundaries, test accuracy)
    print-base           models/adbs/fscil_trainer.py: VS_BASE_MARGINS (the base m carried into the
                         sessions) and VS_SESSION_ACC 0 (test accuracy of the model carried on)
    print-session        models/adbs/fscil_trainer.py: VS_SESSION_ACC t and VS_SESSION_MARGINS t
  with --device cpu only:
    cpu-device           `.cuda()` -> `.to('cpu')` and device="cuda" -> device="cpu", every site in
                         models/adbs/{fscil_trainer,helper,Network}.py and models/resnet12.py
    cpu-workers          dataloader/data_utils.py, models/adbs/helper.py: the hard-coded num_workers=8 of
                         the base, test and prototype loaders -> args.num_workers (the tool passes 0)
  with --sessions below 8 only:
    sessions             dataloader/data_utils.py: cifar100 `args.sessions = 9` -> 1 + --sessions
  and one run setting, an argument rather than a patch: `-num_crops 1 1 -size_crops 32 32` instead of
  the published 2 x 224 px + 4 x 96 px multi-crops, which the released base_train computes and drops
  (models/adbs/helper.py: base_train trains on data[0] only): the same training, ~10x less loader time.

The released code is CUDA-only (`.cuda()` everywhere). With --device cpu the cpu-device and cpu-workers
patches run it on the CPU and ours runs with --device cpu, so the whole tool runs end to end on a CPU at
tiny settings (tests/test_vs_official.py, marked slow). CPU runs check the plumbing, not fidelity:
fidelity runs are GPU runs (--device cuda, the default).

Session 0 of the released code is what it reports: the best test accuracy over the base epochs and after
the prototype replacement (models/adbs/fscil_trainer.py: trlog['max_acc']). The test accuracy of the
model it carries into the sessions (VS_SESSION_ACC 0) is reported beside it as s0_carried.
"""

from __future__ import annotations

import argparse
import ast
import csv
import dataclasses
import hashlib
import json
import math
import os
import pickle
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from adbs.config import SYNTHETIC_VERSIONS  # noqa: E402  (no torch: importable before the checks)

# CIFAR-100 FSCIL (docs/protocols.md): 60 base classes, 8 sessions of 5 ways x 5 shots.
BASE_CLASSES, NUM_CLASSES, WAYS, SHOTS, ALL_SESSIONS = 60, 100, 5, 5, 8
RELEASED_FILES = (
    "train.py", "utils.py", "models/adbs/fscil_trainer.py", "models/adbs/helper.py", "models/adbs/Network.py",
    "models/resnet12.py", "dataloader/data_utils.py", "dataloader/cifar100/cifar.py",
)
# Config fields the tool sets from its own options; --ours-set may not touch them.
OURS_RESERVED = {
    "dataset": "always cifar100 (the written benchmark)", "data_root": "the written benchmark",
    "index_list": "the written lists", "seed": "--seeds", "base_epochs": "--epochs", "device": "--device",
    "sessions": "--sessions",
}
# The released run's settings (its README's CIFAR-100 command and train.py defaults), as Config fields of ours:
# any field of ours' resolved config that differs is printed as a difference.
RELEASED_AS_CONFIG: dict[str, Any] = {
    "backbone": "resnet12", "variant": "adb+ic", "alpha": 0.01, "ic_reduction": "mean", "abs_boundary": True,
    "new_boundary_init": "mean", "boundary_weight_decay": True, "finetune_epochs": 10, "finetune_lr": 0.01,
    "finetune_abs_boundary": False, "abs_base_boundary": False, "boundary_lr_scale": 1.0,
    "boundary_warmup_epochs": 0, "base_lr": 0.1, "schedule": "cosine", "batch_size": 64, "momentum": 0.9,
    "weight_decay": 5e-4, "temperature": 16.0, "base_images_per_class": None, "shots": 5,
}
MARK = "# vs_official"  # ends every line a patch adds where a comment fits
PATCHED = "VS_OFFICIAL_PATCHES.txt"  # written into a patched copy: the patches, one a line


class ToolError(RuntimeError):
    """A bad input or a failed step; the message says what to do (exit status 2)."""


class PatchError(ToolError):
    """A patch target is missing (not the released code, or a modified copy) or the copy is already patched."""


# --- patches to a copy of the released code ---------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Patch:
    name: str
    file: str
    old: str
    new: str
    count: int
    why: str

    def describe(self) -> str:
        return f"{self.name:<13} {self.file} ({self.count} site{'s' if self.count > 1 else ''}): {self.why}"


_T = " " * 4  # one indentation level of the released code


def released_patches(device: str = "cuda", sessions: int = ALL_SESSIONS) -> list[Patch]:
    """The patches the run needs, with the exact text they replace (targets: the released code, commit a09f41e)."""
    cifar, trainer = "dataloader/cifar100/cifar.py", "models/adbs/fscil_trainer.py"
    i5, i4 = _T * 5, _T * 4
    base_line = f"{i5}tl, tl_cls, ta, tl_reg = base_train(self.model, trainloader, optimizer, scheduler, epoch, args)\n"
    test_line = f"{i5}tsl, tsa = test(self.model, testloader, epoch, args, session)\n"
    carried = f"{i5}self.model.mode = 'avg_cos'\n{i5}tsl, tsa = test(self.model, testloader, 0, args, session)\n"
    session_line = f"{i4}print('  test acc={{:.3f}}'.format(self.trlog['max_acc'][session]))\n"
    margins = "[float(v) for v in self.model.margin.data[:{n}].tolist()]"
    out = [
        Patch("md5-train", cifar, f"{_T}def _check_integrity(self):\n",
              f"{_T}def _check_integrity(self):\n{_T * 2}return True  {MARK}: no md5 check\n", 1,
              "no md5 check of the pickles (the data are not CIFAR-100's bytes)"),
        Patch("md5-meta", cifar, "if not check_integrity(path, self.meta['md5']):",
              f"if False:  {MARK}: no md5 check", 1, "no md5 check of the meta pickle"),
        Patch("numpy2", cifar, "if data_tmp == []:", f"if len(data_tmp) == 0:  {MARK}: numpy 2", 2,
              "`ndarray == []` raises under numpy 2; `len(data_tmp) == 0` is what it meant"),
        Patch("print-epoch", trainer, base_line + f"{i5}# test model with all seen class\n" + test_line,
              f"{i5}_vs_t0 = time.time()  {MARK}\n" + base_line + f"{i5}_vs_t1 = time.time()  {MARK}\n"
              + f"{i5}# test model with all seen class\n" + test_line
              + f"{i5}print('VS_EPOCH', __import__('json').dumps({{'epoch': epoch, 'train_s': _vs_t1 - _vs_t0, "
                f"'test_s': time.time() - _vs_t1, 'negative': int((self.model.margin.data[:args.base_class] < 0)"
                f".sum()), 'test_acc': 100 * tsa}}), flush=True)  {MARK}\n", 1,
              "prints VS_EPOCH {epoch, train_s, test_s, negative base m, test_acc} after every base epoch"),
        Patch("print-base", trainer, carried,
              carried + f"{i5}print('VS_BASE_MARGINS', __import__('json').dumps("
              + margins.format(n="args.base_class") + "), flush=True)  " + MARK + "\n"
              + f"{i5}print('VS_SESSION_ACC', session, 100 * tsa, flush=True)  {MARK}\n", 1,
              "prints the base boundaries carried into the sessions and that model's session-0 test accuracy"),
        Patch("print-session", trainer, session_line,
              session_line + f"{i4}print('VS_SESSION_ACC', session, 100 * tsa, flush=True)  {MARK}\n"
              + f"{i4}print('VS_SESSION_MARGINS', session, __import__('json').dumps("
              + margins.format(n="args.base_class + session * args.way") + "), flush=True)  " + MARK + "\n", 1,
              "prints every incremental session's test accuracy and boundaries"),
    ]
    if device == "cpu":
        why = "the released code is CUDA-only; runs it on the CPU"
        for f, old, new, n in (
            (trainer, "self.model.cuda()", "self.model.to('cpu')", 1),
            ("models/adbs/helper.py", ".cuda(non_blocking=True)", ".to('cpu', non_blocking=True)", 4),
            ("models/adbs/helper.py", ".cuda()", ".to('cpu')", 2),
            ("models/adbs/helper.py", 'device="cuda"', 'device="cpu"', 2),
            ("models/adbs/Network.py", ".cuda()", ".to('cpu')", 1),
            ("models/adbs/Network.py", 'device="cuda"', 'device="cpu"', 1),
            ("models/resnet12.py", ".cuda()", ".to('cpu')", 3),
        ):
            out.append(Patch("cpu-device", f, old, new, n, f"{old} -> {new}: {why}"))
        why = "8 loader processes per loader on a small CPU; the tool passes -num_workers 0"
        out.append(Patch("cpu-workers", "dataloader/data_utils.py", "num_workers=8,", "num_workers=args.num_workers,",
                         2, "base and test loaders: num_workers=8 -> args.num_workers; " + why))
        out.append(Patch("cpu-workers", "models/adbs/helper.py", "num_workers=8,", "num_workers=args.num_workers,",
                         1, "prototype loader (replace_base_fc): num_workers=8 -> args.num_workers"))
    if sessions != ALL_SESSIONS:
        old = f"{_T * 2}args.shot = 5\n{_T * 2}args.sessions = 9\n{_T}if args.dataset == 'cub200':"
        new = (f"{_T * 2}args.shot = 5\n{_T * 2}args.sessions = {1 + sessions}  {MARK}: --sessions {sessions}\n"
               f"{_T}if args.dataset == 'cub200':")
        out.append(Patch("sessions", "dataloader/data_utils.py", old, new, 1,
                         f"cifar100: args.sessions = 9 -> {1 + sessions} (base + {sessions} incremental sessions)"))
    return out


def check_released_checkout(root: Path) -> None:
    """The folder holds the released ADBS code (its files); patch targets are checked by apply_patches."""
    if not root.exists():
        raise ToolError(f"--official {root}: no such folder; pass the path of a checkout of the authors' ADBS code "
                        "(github.com/Yongzhang-Tan/ADBS)")
    if not root.is_dir():
        raise ToolError(f"--official {root} is not a folder; pass the checkout's root folder (it holds train.py)")
    missing = [f for f in RELEASED_FILES if not (root / f).is_file()]
    if missing:
        raise ToolError(f"--official {root} is not the ADBS code: it lacks {', '.join(missing)}; pass the root of a "
                        "checkout of github.com/Yongzhang-Tan/ADBS (it holds train.py and models/adbs/)")
    train = (root / "train.py").read_text(errors="replace")
    if "'-margin'" not in train or "fscil_trainer" not in train:
        raise ToolError(f"--official {root}: train.py has no -margin option or does not load models.<project>."
                        "fscil_trainer; this is not the ADBS code's train.py")


def apply_patches(root: Path, patches: list[Patch]) -> list[Patch]:
    """Apply every patch exactly once to the files under root; check them all before writing any file.

    A patch whose target text is not found exactly `count` times raises PatchError naming the patch, the file
    and what was expected; so does a copy patched before (its PATCHED file, or MARK in a file to patch).
    """
    if (root / PATCHED).exists():
        raise PatchError(f"{root} is already patched ({PATCHED} lists its patches); patch a fresh copy of the checkout")
    texts: dict[str, str] = {}
    done: set[str] = set()
    for p in patches:
        path = root / p.file
        if p.file not in texts:
            if not path.is_file():
                raise PatchError(f"patch {p.name}: {p.file} is missing from {root}; this is not the released ADBS code")
            texts[p.file] = path.read_text()
        s = texts[p.file]
        if MARK in s and p.file not in done:
            raise PatchError(f"patch {p.name}: {p.file} in {root} is already patched ({MARK!r} in it); patch a fresh "
                             "copy of the checkout")
        done.add(p.file)
        found = s.count(p.old)
        if found != p.count:
            raise PatchError(
                f"patch {p.name}: expected {p.count} occurrence(s) of {p.old.strip()[:90]!r} in {p.file}, found "
                f"{found}; this checkout differs from the released ADBS code (commit a09f41e) the patches were "
                "written for. Use an unmodified checkout of that commit, or update released_patches in "
                "bench/vs_official.py for this version")
        texts[p.file] = s.replace(p.old, p.new)
    for f, s in texts.items():
        (root / f).write_text(s)
    (root / PATCHED).write_text("".join(p.describe() + "\n" for p in patches))
    return patches


def copy_released(src: Path, dst: Path) -> None:
    """Copy the checkout without its .git, checkpoints and data (the tool writes data/index_list itself)."""
    def ignore(folder: str, names: list[str]) -> list[str]:
        top = Path(folder).resolve() == src.resolve()
        return [n for n in names if n in (".git", "__pycache__") or (top and n in ("checkpoint", "data"))]

    shutil.copytree(src, dst, ignore=ignore)


# --- the benchmark in the CIFAR-100 layout -----------------------------------------------------------------


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _first_per_class(labels: np.ndarray, k: int) -> np.ndarray:
    return np.concatenate([np.flatnonzero(labels == c)[:k] for c in range(NUM_CLASSES)])


def write_benchmark(root: Path, *, version: int = 2, synthetic_seed: int = 0, train_per_class: int = 150,
                    test_per_class: int = 100, split_seed: int = 0) -> dict[str, Any]:
    """Write the embedded benchmark as root/cifar-100-python/{train,test,meta} and root/lists/session_{1..9}.txt.

    Images: the first train_per_class (test_per_class) images of every class of
    adbs.data.synthetic.synthetic_pools(synthetic_seed, version), class-major, uint8 rows of 3072 values
    (torchvision's CIFAR-100 pickle: 'data', 'fine_labels'). Lists: session_1.txt = every base-class
    training image; session_{t+1}.txt = the shots of incremental session t as this project's seeded
    protocol draws them from these pickles (adbs/data/protocol.py, split_seed).
    """
    from adbs.overrides import from_dict
    from adbs.data import build_data
    from adbs.data.synthetic import synthetic_pools

    train, test = synthetic_pools(int(synthetic_seed), int(version))
    d = root / "cifar-100-python"
    d.mkdir(parents=True, exist_ok=True)
    kept = {}
    for split, pool, k in (("train", train, train_per_class), ("test", test, test_per_class)):
        labels = np.asarray(pool.labels)
        keep = _first_per_class(labels, k)
        data = pool.images.numpy()[keep].reshape(len(keep), -1)
        assert data.dtype == np.uint8 and data.shape[1] == 3 * 32 * 32
        with open(d / split, "wb") as fh:
            pickle.dump({"data": data, "fine_labels": labels[keep].tolist()}, fh)
        kept[split] = labels[keep]
    with open(d / "meta", "wb") as fh:
        pickle.dump({"fine_label_names": [f"class{c:02d}" for c in range(NUM_CLASSES)]}, fh)

    # The shots: the project's seeded draw on the written pool. Only the novel sessions' `train` is used;
    # novel_val_per_class=0 and val_fraction=0.5 only keep the draw's checks satisfiable at tiny sizes
    # (a novel class's shots are the first `shots` of its permutation whatever the validation sizes).
    cfg = from_dict({"dataset": "cifar100", "data_root": str(root), "split_seed": split_seed, "shots": SHOTS,
                     "ways": WAYS, "novel_val_per_class": 0, "val_fraction": 0.5, "base_images_per_class": None})
    sessions = build_data(cfg).sessions
    ytr = kept["train"]
    lists = root / "lists"
    lists.mkdir(exist_ok=True)
    files = {1: np.flatnonzero(ytr < BASE_CLASSES)}
    for t in range(1, ALL_SESSIONS + 1):
        files[t + 1] = sessions[t].train
    for t, idx in files.items():
        (lists / f"session_{t}.txt").write_text("".join(f"{int(i)}\n" for i in idx))
    return {
        "synthetic_version": int(version), "synthetic_seed": int(synthetic_seed), "split_seed": int(split_seed),
        "train_per_class": int(train_per_class), "test_per_class": int(test_per_class),
        "train_images": int(len(kept["train"])), "test_images": int(len(kept["test"])),
        "data_root": str(root), "index_list": str(lists),
        "sha256": {f: _sha256(d / f) for f in ("train", "test", "meta")},
    }


# --- commands ------------------------------------------------------------------------------------------------


def released_command(python: str, data_root: Path, *, seed: int, epochs: int, device: str) -> list[str]:
    cmd = [python, "train.py", "-project", "adbs", "-dataset", "cifar100", "-dataroot", str(data_root),
           "-base_mode", "ft_cos", "-new_mode", "avg_cos", "-lr_base", "0.1", "-lr_new", "0.01", "-decay", "0.0005",
           "-epochs_base", str(epochs), "-schedule", "Cosine", "-gpu", "0", "-margin", "-seed", str(seed),
           "-num_crops", "1", "1", "-size_crops", "32", "32"]
    if device == "cpu":
        cmd += ["-num_workers", "0"]
    return cmd


def parse_ours_set(items: list[str]) -> dict[str, Any]:
    """KEY=VALUE items -> {field: typed value}; unknown keys, bad values and the tool's own fields raise."""
    from adbs.config import ConfigError
    from adbs.overrides import coerce

    out: dict[str, Any] = {}
    for item in items:
        if "=" not in item:
            raise ToolError(f"--ours-set {item!r}: expected KEY=VALUE with KEY a Config field (python -m adbs.run "
                            "--help lists them), e.g. amp=false")
        key, value = item.split("=", 1)
        key = key.strip().replace("-", "_")
        if key in OURS_RESERVED:
            raise ToolError(f"--ours-set {key}: set by the tool ({OURS_RESERVED[key]}); use that option instead")
        try:
            out[key] = coerce(key, value)
        except ConfigError as e:
            raise ToolError(f"--ours-set {item!r}: {e}") from None
    return out


def ours_overrides(data: dict[str, Any], *, seed: int, epochs: int, device: str, sessions: int,
                   ours_set: dict[str, Any]) -> dict[str, Any]:
    """ours' config as overrides of the cifar100 preset (what ours_command passes on its command line)."""
    o = {"dataset": "cifar100", "data_root": data["data_root"], "index_list": data["index_list"],
         "variant": "adb+ic", "base_epochs": epochs, "seed": seed, "device": device}
    if sessions != ALL_SESSIONS:
        o["sessions"] = sessions
    return {**o, **ours_set}


def ours_command(python: str, overrides: dict[str, Any], out_json: Path) -> list[str]:
    cmd = [python, "-m", "adbs.run", "--preset", "cifar100", "--out", str(out_json)]
    for k, v in overrides.items():
        flag = "--" + k.replace("_", "-")
        if isinstance(v, (list, tuple)):
            cmd += [flag, *map(str, v)]
        else:
            cmd += [flag, "none" if v is None else str(v).lower() if isinstance(v, bool) else str(v)]
    return cmd


# --- parsers ---------------------------------------------------------------------------------------------------

_LIST_RE = re.compile(r"^\[\s*-?\d+(?:\.\d*)?(?:\s*,\s*-?\d+(?:\.\d*)?)*\s*\]$")


def parse_released_log(text: str) -> dict[str, Any]:
    """Figures from a log of the released train.py (stdout and stderr together, tqdm's \\r included).

    Reads the patched copy's VS_* lines and, for logs of an earlier side-by-side script (patch_official.py), its
    EPOCH_TRAIN_S / MARGINS_BASE lines; the session accuracies come from the list the released trainer
    prints at the end (trlog['max_acc']), else from VS_SESSION_ACC / '  test acc=' lines.
    """
    epochs: list[dict[str, float]] = []
    base_margins: list[float] | None = None
    session_acc: dict[int, float] = {}
    session_margins: dict[int, list[float]] = {}
    reported: list[float] | None = None
    test_acc_lines: list[float] = []
    total_min = None
    for raw in text.replace("\r", "\n").splitlines():
        s = raw.strip()
        if s.startswith("VS_EPOCH "):
            epochs.append(json.loads(s[len("VS_EPOCH "):]))
        elif s.startswith("VS_BASE_MARGINS "):
            base_margins = [float(v) for v in json.loads(s[len("VS_BASE_MARGINS "):])]
        elif s.startswith("VS_SESSION_ACC "):
            _, t, acc = s.split()[:3]
            session_acc[int(t)] = float(acc)
        elif s.startswith("VS_SESSION_MARGINS "):
            _, t, rest = s.split(" ", 2)
            session_margins[int(t)] = [float(v) for v in json.loads(rest)]
        elif s.startswith("MARGINS_BASE "):  # gpu-compare's patch_official.py
            base_margins = [float(v) for v in ast.literal_eval(s[len("MARGINS_BASE "):])]
        elif s.startswith("EPOCH_TRAIN_S "):  # gpu-compare: EPOCH_TRAIN_S <epoch> <s> MARGIN_MEAN <m> NEG <n>
            parts = s.split()
            row = {"epoch": int(parts[1]), "train_s": float(parts[2])}
            if "NEG" in parts:
                row["negative"] = int(parts[parts.index("NEG") + 1])
            epochs.append(row)
        elif _LIST_RE.match(s):
            reported = [float(v) for v in ast.literal_eval(s)]
        elif m := re.search(r"Total time used ([\d.]+) mins", s):
            total_min = float(m.group(1))
        elif m := re.match(r"^test acc=([\d.]+)$", s):
            test_acc_lines.append(float(m.group(1)))
    if reported is not None:
        sessions, source = reported, "trlog['max_acc']"
    elif session_acc:
        sessions, source = [session_acc[t] for t in sorted(session_acc)], "VS_SESSION_ACC"
    else:
        sessions, source = test_acc_lines, "'test acc=' lines (sessions 1..)"
    neg = None if base_margins is None else int(sum(m < 0 for m in base_margins))
    return {
        "sessions": sessions, "sessions_source": source, "s0_carried": session_acc.get(0),
        "base_margins": base_margins, "negative_base": neg,
        "base_abs_mean": None if not base_margins else float(np.mean(np.abs(base_margins))),
        "session_margins": session_margins, "epochs": epochs, "total_min": total_min,
    }


def parse_ours_result(d: dict[str, Any]) -> dict[str, Any]:
    """Figures from ours' result JSON (python -m adbs.run --out; adbs/state.py: TrialResult.to_dict)."""
    try:
        sessions = [float(r["test_acc"]) for r in d["sessions"]]
        base_margins = [float(v) for v in (d.get("boundaries") or d["margins"])[0]]  # "margins" before the rename
        epochs = [{"epoch": int(r["epoch"]), "epoch_s": float(r["epoch_time_s"]),
                   "negative": int(r["boundary_negative"]), "val_acc": float(r["val_acc"])} for r in d["base_curve"]]
        config = d["config"]
    except (KeyError, IndexError, TypeError, ValueError) as e:
        raise ToolError(f"ours' result JSON lacks {e!r}; expected the output of python -m adbs.run --out") from None
    return {
        "sessions": sessions, "base_margins": base_margins, "negative_base": int(sum(m < 0 for m in base_margins)),
        "base_abs_mean": float(np.mean(np.abs(base_margins))), "epochs": epochs,
        "best_base_epoch": d.get("summary", {}).get("best_base_epoch"),
        "wall_time_s": d.get("summary", {}).get("wall_time_s"), "config": config,
    }


# --- statistics -------------------------------------------------------------------------------------------------


def ci95(values: list[float]) -> tuple[float, float]:
    """Mean and 95% half-width (t-distribution; 0 for one value): adbs_lab.results.ci95."""
    from adbs_lab.results import ci95 as _ci95

    return _ci95(list(values))


def welch_ci95(a: list[float], b: list[float]) -> tuple[float, float]:
    """mean(b) - mean(a) and the half-width of its Welch 95% CI (nan when a side has fewer than 2 values)."""
    from scipy import stats

    a, b = [float(v) for v in a], [float(v) for v in b]
    if not a or not b:
        return math.nan, math.nan
    diff = sum(b) / len(b) - sum(a) / len(a)
    if len(a) < 2 or len(b) < 2:
        return diff, math.nan
    va, vb = np.var(a, ddof=1) / len(a), np.var(b, ddof=1) / len(b)
    se = math.sqrt(va + vb)
    if se == 0:
        return diff, 0.0
    df = (va + vb) ** 2 / (va ** 2 / (len(a) - 1) + vb ** 2 / (len(b) - 1))
    return diff, float(stats.t.ppf(0.975, df) * se)


def _rows(runs: list[dict[str, Any]]) -> dict[str, list[float]]:
    """Per-run figures: s0..sN, avg, PD."""
    out: dict[str, list[float]] = {}
    for r in runs:
        acc = r["sessions"]
        for t, v in enumerate(acc):
            out.setdefault(f"s{t}", []).append(v)
        out.setdefault("avg", []).append(sum(acc) / len(acc))
        out.setdefault("PD", []).append(acc[0] - acc[-1])
    return out


def summarize(released: list[dict[str, Any]], ours: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per figure (s0..sN, avg, PD): means, 95% CIs, ours - released with its Welch CI."""
    ra, oa = _rows(released), _rows(ours)
    rows = []
    for key in [k for k in ra if k in oa]:
        rm, rc = ci95(ra[key])
        om, oc = ci95(oa[key])
        d, dc = welch_ci95(ra[key], oa[key])
        rows.append({"figure": key, "released_mean": rm, "released_ci95": rc, "ours_mean": om, "ours_ci95": oc,
                     "diff": d, "diff_ci95": dc, "n_released": len(ra[key]), "n_ours": len(oa[key]),
                     "within_noise": None if math.isnan(dc) else abs(d) <= dc})
    return rows


NEGATIVE_FIGURES = {"epoch1": "after base epoch 1", "base": "after the base session"}


def negative_counts(run: dict[str, Any]) -> dict[str, int | None]:
    """A run's negative base boundaries after its first base epoch and after the base session (None: not logged).

    Released: VS_EPOCH's count of the first epoch (the tool's print-epoch patch) and VS_BASE_MARGINS;
    ours: the base curve's first epoch (boundary_negative) and the base boundaries carried into the sessions.
    """
    first = run["epochs"][0].get("negative") if run.get("epochs") else None
    return {"epoch1": None if first is None else int(first), "base": run.get("negative_base")}


def summarize_negatives(released: list[dict[str, Any]], ours: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Negative base boundaries across seeds, per figure (NEGATIVE_FIGURES): per-seed counts, mean and 95% CI per
    code (t), ours - released with its Welch 95% CI; within_noise is None when a side has fewer than 2 counts."""
    rows = []
    for key, label in NEGATIVE_FIGURES.items():
        r = [c for c in (negative_counts(x)[key] for x in released) if c is not None]
        o = [c for c in (negative_counts(x)[key] for x in ours) if c is not None]
        if not r and not o:
            continue
        rm, rc = ci95(r) if r else (math.nan, math.nan)
        om, oc = ci95(o) if o else (math.nan, math.nan)
        d, dc = welch_ci95(r, o)
        rows.append({"figure": key, "label": label, "released": r, "ours": o, "released_mean": rm,
                     "released_ci95": rc, "ours_mean": om, "ours_ci95": oc, "diff": d, "diff_ci95": dc,
                     "n_released": len(r), "n_ours": len(o), "within_noise": None if math.isnan(dc) else abs(d) <= dc})
    return rows


def config_differences(config: dict[str, Any], device: str) -> list[str]:
    """Settings of ours' resolved config that differ from the released run, in words."""
    out = []
    if config.get("amp") and device == "cuda":
        out.append("ours trains with bf16 autocast (amp=true); the released code trains in fp32 (--ours-set amp=false)")
    vf = config.get("val_fraction")
    if vf:
        out.append(f"ours trains the base session on {100 * (1 - vf):.0f}% of the base images (val_fraction={vf} held "
                   "out) and keeps the base epoch with the best validation accuracy; the released code trains on all "
                   "of them and keeps the epoch with the best test accuracy (docs/protocols.md)")
    for k, v in RELEASED_AS_CONFIG.items():
        if k in config and config[k] != v and not (isinstance(v, float) and math.isclose(float(config[k] or 0), v)):
            out.append(f"{k}={config[k]!r} (released: {v!r})")
    return out


# --- running --------------------------------------------------------------------------------------------------


@dataclasses.dataclass
class Job:
    code: str  # "released" or "ours"
    seed: int
    cmd: list[str]
    cwd: Path
    log: Path
    result: Path | None = None  # ours' JSON

    @property
    def tag(self) -> str:
        return f"{self.code} seed {self.seed}"


_print_lock = threading.Lock()


def say(msg: str) -> None:
    with _print_lock:
        print(msg, flush=True)


def tail(path: Path, n: int = 30) -> str:
    try:
        lines = path.read_text(errors="replace").replace("\r", "\n").splitlines()
    except OSError:
        return "(no log)"
    return "\n".join("    | " + ln[:300] for ln in [ln for ln in lines if ln.strip()][-n:])


def _progress_line(job: Job, line: str) -> str | None:
    s = line.strip()
    if job.code == "released":
        if s.startswith("VS_EPOCH "):
            try:
                e = json.loads(s[9:])
            except ValueError:
                return None
            return (f"base epoch {e['epoch'] + 1}: test {e['test_acc']:.2f}%  m<0: {e['negative']}  "
                    f"train {e['train_s']:.1f}s test {e['test_s']:.1f}s")
        if s.startswith("VS_SESSION_ACC "):
            _, t, acc = s.split()[:3]
            return f"session {t}: test {float(acc):.2f}%"
        return None
    if re.match(r"^(base epoch \d+/\d+|session \d+:) ", s):
        return s[:160]
    return None


def run_job(job: Job, *, env: dict[str, str], timeout: float | None, stop: threading.Event) -> float:
    """Run one job, echo its progress lines, return its wall time; raise ToolError with the log's tail on failure."""
    if stop.is_set():
        raise ToolError(f"{job.tag}: not started (an earlier run failed)")
    say(f"[{job.tag}] start (log {job.log})")
    t0 = time.monotonic()
    with open(job.log, "w") as fh:
        fh.write("$ " + " ".join(job.cmd) + f"\n# cwd {job.cwd}\n")
        fh.flush()
        proc = subprocess.Popen(job.cmd, cwd=job.cwd, env=env, stdout=fh, stderr=subprocess.STDOUT)
    pos, buf, rc = 0, "", None
    while rc is None:
        try:
            rc = proc.wait(timeout=1.0)
        except subprocess.TimeoutExpired:
            if stop.is_set():  # another run failed: do not spend the device on this one
                proc.kill()
                proc.wait()
                raise ToolError(f"{job.tag}: stopped (an earlier run failed)") from None
            if timeout and time.monotonic() - t0 > timeout:
                proc.kill()
                proc.wait()
                raise ToolError(f"{job.tag}: killed after --timeout {timeout:.0f}s; last lines of {job.log}:\n"
                                + tail(job.log)) from None
        with open(job.log, "rb") as fh:
            fh.seek(pos)
            chunk = fh.read()
            pos += len(chunk)
        buf += chunk.decode("utf-8", errors="replace").replace("\r", "\n")
        *lines, buf = buf.split("\n")
        for ln in lines:
            msg = _progress_line(job, ln)
            if msg:
                say(f"[{job.tag}] {msg}")
    wall = time.monotonic() - t0
    if rc != 0:
        raise ToolError(f"{job.tag} failed (exit status {rc}) after {wall:.0f}s; last lines of {job.log}:\n"
                        + tail(job.log))
    say(f"[{job.tag}] done in {wall:.1f}s")
    return wall


def run_all(jobs: list[Job], *, n_parallel: int, envs: dict[str, dict[str, str]], timeout: float | None
            ) -> dict[tuple[str, int], float]:
    stop = threading.Event()
    walls: dict[tuple[str, int], float] = {}
    errors: list[str] = []

    def one(job: Job) -> None:
        try:
            walls[(job.code, job.seed)] = run_job(job, env=envs[job.code], timeout=timeout, stop=stop)
        except ToolError as e:
            if not (stop.is_set() and str(e).endswith("(an earlier run failed)")):
                errors.append(str(e))
            stop.set()

    with ThreadPoolExecutor(max_workers=max(1, n_parallel)) as ex:
        list(ex.map(one, jobs))
    if errors:
        raise ToolError("\n".join(errors))
    return walls


# --- report ----------------------------------------------------------------------------------------------------


def _pm(mean: float, ci: float, n: int = 2) -> str:
    if math.isnan(mean):
        return "-"
    return f"{mean:6.2f} ± {ci:5.2f}" if n > 1 and not math.isnan(ci) else f"{mean:6.2f} ±   n/a"


def format_report(res: dict[str, Any]) -> str:
    a, data = res["args"], res["data"]
    rel, ours = res["released"], res["ours"]
    lines = [
        f"Released ADBS code vs ours on identical data: benchmark v{data['synthetic_version']} (synthetic seed "
        f"{data['synthetic_seed']}), {data['train_per_class']} train / {data['test_per_class']} test images per class, "
        f"split seed {data['split_seed']}",
        f"device {a['device']}{' (' + res['device_name'] + ')' if res.get('device_name') else ''}, {a['epochs']} base "
        f"epochs, {a['sessions']} incremental sessions, seeds {' '.join(map(str, a['seeds']))} (each code)",
        "",
        "test accuracy (%), mean ± 95% CI half-width over seeds (t-distribution); diff = ours - released ± its Welch "
        "95% CI (within noise: the CI holds 0)",
        f"{'':>6}  {'released':>15}  {'ours':>15}  {'diff':>16}",
    ]
    for r in res["summary"]:
        flag = "" if r["within_noise"] is None else ("  within noise" if r["within_noise"] else "  DIFFERS")
        dc = "  n/a" if math.isnan(r["diff_ci95"]) else f"{r['diff_ci95']:5.2f}"
        lines.append(f"{r['figure']:>6}  {_pm(r['released_mean'], r['released_ci95'], r['n_released']):>15}  "
                     f"{_pm(r['ours_mean'], r['ours_ci95'], r['n_ours']):>15}  {r['diff']:+7.2f} ± {dc}{flag}")
    s0c = [r["s0_carried"] for r in rel if r.get("s0_carried") is not None]
    if s0c:
        m, c = ci95(s0c)
        lines.append(f"released s0 is what it reports, the best test accuracy over the base epochs; the model it "
                     f"carries into the sessions scores {_pm(m, c, len(s0c)).strip()} (ours s0 is that model's)")

    def per_seed(runs: list[dict[str, Any]], key: str, fmt: str = "{}") -> str:
        vals = [r.get(key) for r in runs]
        shown = " ".join("-" if v is None else fmt.format(v) for v in vals)
        ok = [v for v in vals if v is not None]
        return shown + (" (mean " + fmt.format(float(np.mean(ok))) + ")" if len(ok) > 1 else "")

    lines += [
        "",
        f"negative base boundaries (of {BASE_CLASSES}) after the base session, per seed: released "
        f"{per_seed(rel, 'negative_base', '{:.3g}')} | ours {per_seed(ours, 'negative_base', '{:.3g}')}",
        f"mean |m| of the base boundaries: released {per_seed(rel, 'base_abs_mean', '{:.2f}')} | ours "
        f"{per_seed(ours, 'base_abs_mean', '{:.2f}')}",
    ]
    neg = res.get("negatives") or summarize_negatives(rel, ours)
    if neg:
        lines += ["", f"negative base boundaries (of {BASE_CLASSES}) across seeds, mean ± 95% CI half-width (t); "
                      "diff = ours - released ± its Welch 95% CI"]
        for r in neg:
            flag = "" if r["within_noise"] is None else ("  within noise" if r["within_noise"] else "  DIFFERS")
            dc = "  n/a" if math.isnan(r["diff_ci95"]) else f"{r['diff_ci95']:5.2f}"
            diff = "-" if math.isnan(r["diff"]) else f"{r['diff']:+6.2f} ± {dc}"
            lines.append(f"  {r['label']:<23} released {_pm(r['released_mean'], r['released_ci95'], r['n_released'])}"
                         f"  ours {_pm(r['ours_mean'], r['ours_ci95'], r['n_ours'])}  diff {diff}{flag}"
                         f"  (per seed: released {' '.join(map(str, r['released'])) or '-'} | ours "
                         f"{' '.join(map(str, r['ours'])) or '-'})")
    if res.get("released_from"):
        lines.append(f"released runs reused from {res['released_from']} (same data, seeds, epochs, sessions, device)")
    rt = [e["train_s"] for r in rel for e in r["epochs"] if "train_s" in e]
    rs = [e["test_s"] for r in rel for e in r["epochs"] if "test_s" in e]
    ot = [e["epoch_s"] for r in ours for e in r["epochs"]]
    lines.append(
        "base epoch time (s, mean over epochs and seeds): released train "
        + (f"{np.mean(rt):.2f}" if rt else "-") + " + test " + (f"{np.mean(rs):.2f}" if rs else "-")
        + " | ours train + validation pass " + (f"{np.mean(ot):.2f}" if ot else "-"))
    lines.append("wall time per run (s), process start to exit: released "
                 + " ".join(f"{r['wall_s']:.0f}" for r in rel) + " | ours " + " ".join(f"{r['wall_s']:.0f}" for r in ours)
                 + f" | all runs {res['wall_s']:.0f} s ({a['jobs']} at a time)")
    diffs = res["differences"]
    lines += ["", "settings of ours that differ from the released run" + (
        ": (ours not run, --released-only)" if not ours else ":" if diffs else ": none")]
    lines += [f"  - {d}" for d in diffs]
    lines += ["", f"patches applied to the temporary copy of {a['official']} (bench/vs_official.py: released_patches):"]
    lines += [f"  {p}" for p in res["patches"]]
    lines.append(f"  run setting  -num_crops 1 1 -size_crops 32 32 (published 2 x 224 + 4 x 96 px crops are "
                 "computed and dropped by base_train)")
    return "\n".join(lines)


def write_outputs(out: Path, res: dict[str, Any], report: str) -> None:
    (out / "vs_official.json").write_text(json.dumps(res, indent=1, default=str))
    (out / "report.txt").write_text(report + "\n")
    with open(out / "runs.csv", "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["code", "seed", "session", "test_acc", "negative_base", "wall_s"])
        for code in ("released", "ours"):
            for r in res[code]:
                for t, v in enumerate(r["sessions"]):
                    w.writerow([code, r["seed"], t, v, r.get("negative_base"), r.get("wall_s")])
    with open(out / "summary.csv", "w", newline="") as fh:
        keys = ["figure", "released_mean", "released_ci95", "ours_mean", "ours_ci95", "diff", "diff_ci95",
                "n_released", "n_ours", "within_noise"]
        w = csv.DictWriter(fh, fieldnames=keys)
        w.writeheader()
        for r in res["summary"]:
            w.writerow(r)
        for r in res.get("negatives", []):  # negative base boundaries: figures negative_epoch1, negative_base
            w.writerow({**{k: r[k] for k in keys}, "figure": f"negative_{r['figure']}"})
    with open(out / "negatives.csv", "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["code", "seed", "negative_epoch1", "negative_base"])
        for code in ("released", "ours"):
            for r in res[code]:
                c = negative_counts(r)
                w.writerow([code, r["seed"], c["epoch1"], c["base"]])


# --- main ------------------------------------------------------------------------------------------------------


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python bench/vs_official.py", description=__doc__.split("\n\n")[0],
        epilog="The module docstring (bench/vs_official.py) and README.md, 'Against the authors' code', say more.",
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


REUSE_ARGS = ("epochs", "sessions", "device", "synthetic_version", "synthetic_seed", "split_seed", "train_per_class",
              "test_per_class")
"""Options an earlier run must share for --released-from to reuse its released runs (the data are checked too)."""


def load_released_runs(folder: Path, a: argparse.Namespace) -> dict[str, Any]:
    """The earlier results (vs_official.json in `folder`) whose released runs --released-from reuses.

    The released code's runs do not depend on anything of ours, so a factor of ours (--ours-set) can be checked
    against released runs made before on the same data: same REUSE_ARGS, every seed asked for present. The
    written data's sha256 is compared after the data are written (check_reused_data).
    """
    f = folder / "vs_official.json"
    if not f.is_file():
        raise ToolError(f"--released-from {folder}: no vs_official.json there; pass the --out folder of an earlier "
                        "run of this tool")
    try:
        prev = json.loads(f.read_text())
        prev_args, runs = prev["args"], prev["released"]
        have = {int(r["seed"]): r for r in runs}
    except (ValueError, KeyError, TypeError) as e:
        raise ToolError(f"--released-from {folder}: {f.name} is not this tool's output ({e!r})") from None
    bad = [f"--{k.replace('_', '-')} {getattr(a, k)} (there: {prev_args.get(k)})" for k in REUSE_ARGS
           if prev_args.get(k) != getattr(a, k)]
    if bad:
        raise ToolError(f"--released-from {folder}: its released runs were made with other settings: {'; '.join(bad)}; "
                        "reuse only runs on the same data and settings")
    missing = [s for s in a.seeds if s not in have]
    if missing:
        raise ToolError(f"--released-from {folder}: no released run of seed(s) {' '.join(map(str, missing))} there "
                        f"(it has {' '.join(map(str, sorted(have))) or 'none'}); ask for those seeds or run them")
    return {"folder": str(folder.resolve()), "data": prev["data"], "runs": [have[s] for s in a.seeds]}


def check_reused_data(reused: dict[str, Any], data: dict[str, Any]) -> None:
    """The data the reused released runs trained on are the bytes just written (sha256 of the pickles)."""
    if reused["data"].get("sha256") != data["sha256"]:
        raise ToolError(f"--released-from {reused['folder']}: its data differ from the data written now (sha256 of "
                        "the pickles); the embedded benchmark changed since, so run the released code again")


def check_args(a: argparse.Namespace) -> dict[str, Any]:
    """Every check that needs no data; returns the parsed --ours-set."""
    check_released_checkout(Path(a.official).expanduser())
    if len(set(a.seeds)) != len(a.seeds):
        raise ToolError(f"--seeds {' '.join(map(str, a.seeds))}: a seed is repeated; give distinct seeds")
    bad = [s for s in a.seeds if s < 1]
    if bad:
        raise ToolError(f"--seeds: {bad} < 1; the released code treats seed 0 as 'no seed' (utils.py: set_seed: "
                        "random, cudnn.benchmark) and the seeds must be the same for both codes: use seeds >= 1")
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


def main(argv: list[str] | None = None) -> int:
    a = build_parser().parse_args(argv)
    t_start = time.monotonic()
    tmp: Path | None = None
    try:
        ours_set = check_args(a)
        reused = load_released_runs(Path(a.released_from).expanduser(), a) if a.released_from else None
        out = Path(a.out or REPO / "results" / "vs_official" / datetime.now().strftime("%Y%m%d-%H%M%S")).resolve()
        try:
            out.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise ToolError(f"--out {out}: cannot create it ({e}); pass a writable folder") from None
        if not os.access(out, os.W_OK):
            raise ToolError(f"--out {out} is not writable; pass a writable folder")

        tmp = Path(tempfile.mkdtemp(prefix="vs_official-"))
        official = Path(a.official).expanduser().resolve()
        copy = tmp / "released"
        copy_released(official, copy)
        patches = apply_patches(copy, released_patches(a.device, a.sessions))
        say(f"copied {official} to {copy}; patches applied (each exactly once):")
        for p in patches:
            say(f"  {p.describe()}")
        say("  run setting  -num_crops 1 1 -size_crops 32 32 instead of 2 x 224 + 4 x 96 px (computed and dropped)")

        t0 = time.monotonic()
        data = write_benchmark(tmp / "data", version=a.synthetic_version, synthetic_seed=a.synthetic_seed,
                               train_per_class=a.train_per_class, test_per_class=a.test_per_class,
                               split_seed=a.split_seed)
        lists = copy / "data" / "index_list" / "cifar100"
        lists.mkdir(parents=True)
        for f in sorted(Path(data["index_list"]).iterdir()):
            shutil.copy(f, lists / f.name)
        (out / "data.json").write_text(json.dumps(data, indent=1))
        if reused is not None:
            check_reused_data(reused, data)
        say(f"wrote benchmark v{a.synthetic_version}: {data['train_images']} train / {data['test_images']} test "
            f"images and session_1..9.txt to {tmp / 'data'} ({time.monotonic() - t0:.1f}s)")

        # ours' configuration against the written data, before any training (adbs.run does the same checks).
        from adbs.config import ConfigError
        from adbs.overrides import from_dict
        from adbs.presets import PRESETS
        from adbs.data import DataError, check_data

        try:
            for s in a.seeds:
                cfg = from_dict({**PRESETS["cifar100"], **ours_overrides(
                    data, seed=s, epochs=a.epochs, device=a.device, sessions=a.sessions, ours_set=ours_set)})
                cfg.validate()
                check_data(cfg)
        except (ConfigError, DataError) as e:
            raise ToolError(f"ours' configuration does not fit the written data: {e}") from None

        env_rel = {**os.environ, "PYTHONUNBUFFERED": "1"}
        env_ours = {**os.environ, "PYTHONUNBUFFERED": "1",
                    "PYTHONPATH": os.pathsep.join([str(REPO), *filter(None, [os.environ.get("PYTHONPATH")])])}
        jobs = []
        for s in a.seeds:
            if reused is None:
                jobs.append(Job("released", s, released_command(a.official_python, tmp / "data", seed=s,
                                                                epochs=a.epochs, device=a.device),
                                copy, out / f"released-seed{s}.log"))
            if a.released_only:
                continue
            res_json = out / f"ours-seed{s}.json"
            ov = ours_overrides(data, seed=s, epochs=a.epochs, device=a.device, sessions=a.sessions, ours_set=ours_set)
            jobs.append(Job("ours", s, ours_command(sys.executable, ov, res_json), REPO, out / f"ours-seed{s}.log",
                            res_json))
        what = (f"{len(a.seeds)} seeds, ours only: the released runs are reused from {reused['folder']}"
                if reused is not None else f"{len(a.seeds)} seeds, the released code only" if a.released_only
                else f"{len(a.seeds)} seeds x 2 codes")
        say(f"{len(jobs)} runs ({what}), {a.jobs} at a time, on {a.device}; results in {out}")
        t_runs = time.monotonic()
        walls = run_all(jobs, n_parallel=a.jobs, envs={"released": env_rel, "ours": env_ours}, timeout=a.timeout)
        wall_runs = time.monotonic() - t_runs

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
        device_name = None
        if a.device == "cuda":
            import torch

            device_name = torch.cuda.get_device_name(0)
        res = {
            "args": {**vars(a), "official": str(official)}, "device_name": device_name, "data": data,
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
        report = format_report(res)
        write_outputs(out, res, report)
        print()
        print(report)
        print(f"\nwrote {out}/vs_official.json, runs.csv, summary.csv, report.txt and the logs "
              f"({time.monotonic() - t_start:.0f}s in all)")
        if a.keep_temp:
            print(f"kept the patched copy and the data in {tmp}")
        return 0
    except ToolError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    finally:
        if tmp is not None and not a.keep_temp:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
