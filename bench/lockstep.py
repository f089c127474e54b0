"""The released code's base-training step against ours, in lockstep: same weights, same batches, step by step.

    python bench/lockstep.py --official PATH                      # 20 steps at lr 0.1, seed 1, on the CPU
    python bench/lockstep.py --official PATH --steps 29 --train-per-class 30 --seed 3 --out results/lockstep

bench/vs_official.py compares the two codes over seeds, each with its own random draws (initial weights,
batch order, crops), so it can only say whether their figures agree statistically. This tool removes the
randomness: it runs the released code's own base step (models/adbs/helper.py: base_train, with the optimizer
of models/adbs/fscil_trainer.py: get_optimizer_base and the model of models/adbs/Network.py: MYNET) and
ours' (adbs/loops.py: train_base, the baseline host, preset cifar100) from the same initial weights on the
same batches, one batch per base epoch (the released trainer steps its scheduler once per epoch too, so
--schedule epoch1 holds the lr at 0.1 as in the first epoch, and cosine anneals it over the steps), and compares
after every step the base boundaries m (and at the end the classifier rows and the backbone weights). If the two
steps are the same function, every difference the side-by-side runs find comes from what this tool fixes: the
data each code trains on (ours holds out validation images), the order and augmentation of the batches, and the
random initialisation.

How, in order:
1. Copies the checkout to a temporary folder and applies bench/vs_official.py's CPU patches
   (bench/side_by_side/patches.yaml: no md5 checks, numpy 2, CUDA calls -> CPU).
2. Writes the embedded benchmark in the CIFAR-100 layout, --train-per-class images per class
   (side_by_side.data.write_benchmark; ours needs a dataset for its validation and prototype passes: it holds out
   one image per class) and draws --steps full batches of --batch-size base images, reshuffled after each
   pass over them, with ours' train augmentation (random crop with 4 px zero padding, flip: the released
   CIFAR transform).
3. Runs the released code in a subprocess in the copy: train.py's parser with the README's CIFAR-100
   options, utils.set_seed, FSCILTrainer (the model on the CPU), get_optimizer_base; then for each batch
   base_train on a one-batch loader and scheduler.step(). It saves the initial state and m after each step.
4. Runs ours' train_base in this process with the released initial weights, in the released code's NCHW
   layout (--channels-last: in the layout ours trains in): the backbone (ResNet-12; the
   released encoder's keys renamed, its unused `fc` and `downsample_layer` dropped), the classifier rows
   (the first 60 of the released fc's 100) and m = 1; the training loader replaced by the same batches,
   one per epoch; m after each step read from the checkpoint hook.
5. Prints, per step, the largest |m_ours - m_released|, sign disagreements and both codes' negative counts,
   then the largest differences of the classifier rows and the backbone weights, and writes lockstep.json.

The verdict reads the first step at which m departs at all. A structural difference (another loss term, weight
decay, momentum, lr or order of operations) acts from the step where it first applies, at the size of an update
(lr 0.1 x a gradient: 1e-5 and more on m). float32 rounding in a different order starts at ~1e-7 and then grows
from step to step, because the backbone's float32 gradients at initialisation are ill-conditioned (a few % off
their float64 values in either code), so the two runs drift apart like two runs of one code on different
hardware. Hence: "same, bit for bit" when m never departs; "same up to float32 rounding" when the first departure
is at most --tol (1e-5); else "DIFFERS from step k". Measured (CPU, NCHW, seed 1, 29 steps): bit for bit through
step 4, a departure of 6e-8 at step 5 (the same operations in another order round differently, e.g. ours
multiplies T * |m| * cos where the released code multiplies cos * |m| * T), 2e-3 by step 29, the signs of m and
the negative counts equal at every step.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import torch

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

from adbs import exits  # noqa: E402
from side_by_side import ALL_SESSIONS, BASE_CLASSES, ToolError  # noqa: E402  (bench/vs_official.py's package)
from side_by_side.data import write_benchmark  # noqa: E402
from side_by_side.patches import apply_patches, check_released_checkout, copy_released, released_patches  # noqa: E402

BASE = BASE_CLASSES

# Runs in the patched copy (cwd): the released code's own objects, nothing of ours.
RELEASED_SCRIPT = r"""
import sys, torch
batches_file, out_file, seed, steps, schedule = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
from train import get_command_line_parser
from utils import set_seed
sched = ['-schedule', 'Cosine'] if schedule == 'cosine' else ['-schedule', 'Milestone', '-milestones', str(steps + 1)]
args = get_command_line_parser().parse_args([
    '-project', 'adbs', '-dataset', 'cifar100', '-base_mode', 'ft_cos', '-new_mode', 'avg_cos', '-lr_base', '0.1',
    '-lr_new', '0.01', '-decay', '0.0005', '-epochs_base', str(steps), *sched, '-gpu', '0', '-margin',
    '-seed', str(seed), '-num_workers', '0'])
set_seed(args.seed)
from models.adbs.fscil_trainer import FSCILTrainer
from models.adbs.helper import base_train
trainer = FSCILTrainer(args)
model = trainer.model
optimizer, scheduler = trainer.get_optimizer_base()
init = {k: v.detach().clone() for k, v in model.state_dict().items()}
batches = torch.load(batches_file)
margins, lrs = [], []
for epoch, (x, y) in enumerate(batches):
    lrs.append(scheduler.get_last_lr()[0])
    base_train(model, [([x, x], y)], optimizer, scheduler, epoch, args)  # base_train trains on data[0]
    scheduler.step()
    margins.append(model.margin.data[:args.base_class].clone())
torch.save({'init': init, 'margins': torch.stack(margins), 'lrs': lrs,
            'final': {k: v.detach().clone() for k, v in model.state_dict().items()}}, out_file)
print('RELEASED_DONE', flush=True)
"""


def released_encoder_to_ours(state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """The released MYNET's encoder weights as ours' ResNet-12 state_dict (adbs/backbones.py: ResNet12).

    Released keys `encoder.layerK.0.<name>` become `layerK.<name>` (ours has one block per stage, no Sequential);
    the released encoder's own `fc` and `downsample_layer`, which its forward never uses for the features, are
    dropped, as are MYNET's `fc` and `margin` (they become ours' head rows and boundaries).
    """
    out = {}
    for k, v in state.items():
        if not k.startswith("encoder."):
            continue
        k = k[len("encoder."):]
        if k.startswith(("fc.", "downsample_layer.")):
            continue
        parts = k.split(".")
        if len(parts) < 3 or not parts[0].startswith("layer") or parts[1] != "0":
            raise ValueError(f"unexpected key in the released encoder: encoder.{k}")
        out[".".join([parts[0], *parts[2:]])] = v
    return out


def draw_batches(data, steps: int, batch_size: int, seed: int) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """`steps` batches of base training images with ours' train augmentation (the released CIFAR transform)."""
    from adbs.data import make_loader

    base = data.sessions[0]
    idx = np.concatenate([base.train, base.val])
    out: list[tuple[torch.Tensor, torch.Tensor]] = []
    loader = make_loader(data, data.train_pool, idx, train=True, batch_size=batch_size, shuffle=True, seed=seed)
    while len(out) < steps:
        for x, y in loader:
            if len(y) == batch_size:
                out.append((x.contiguous(), y))
            if len(out) == steps:
                break
    return out


class _FixedLoader:
    """Stands in for ours' training loader: epoch e yields batch e only."""

    def __init__(self, batches):
        self.batches = batches
        self.epoch = 0
        self.indices = np.arange(len(batches[0][1]))

    def __len__(self) -> int:
        return 1

    def __iter__(self):
        x, y = self.batches[self.epoch]
        self.epoch += 1
        return iter([(x.clone(), y.clone())])


def run_ours(cfg, data, batches, released_init: dict[str, torch.Tensor], channels_last: bool = False) -> dict[str, Any]:
    """ours' train_base over the batches from the released initial weights; m after every step, final state.

    channels_last=False runs ours' model and images in the released code's NCHW layout instead of the channels_last
    layout adbs/runtime.py: Runtime uses: the same arithmetic, so the two steps can agree to float32 rounding.
    """
    import adbs.loops as loops
    from adbs.backbones import create_backbone
    from adbs.data import make_loader
    from adbs.hosts import create_host
    from adbs.runtime import Runtime
    from adbs.trainer import Hooks
    from adbs.state import read_checkpoint

    encoder = released_encoder_to_ours(released_init)
    rows = released_init["fc.weight"][:BASE].clone()
    originals = (create_backbone, create_host, make_loader)  # patched below where adbs/loops.py looks them up

    def backbone(name, **kw):
        b = create_backbone(name, **kw)
        b.load_state_dict(encoder, strict=True)
        return b

    def host(cfg_, data_, rt):
        h = originals[1](cfg_, data_, rt)
        build = h.build

        def build_with_rows(b):
            model = build(b)
            with torch.no_grad():
                model.head.copy_(rows.to(model.head.device))
            return model

        h.build = build_with_rows
        return h

    def loader(data_, pool, indices, *, train, batch_size, shuffle, seed, num_workers=0, device=None):
        if shuffle:  # the training loader (extract_features never shuffles)
            return _FixedLoader(batches)
        return originals[2](data_, pool, indices, train=train, batch_size=batch_size, shuffle=shuffle, seed=seed,
                            num_workers=num_workers, device=device)

    margins: list[torch.Tensor] = []
    lrs: list[float] = []
    last: dict[str, Any] = {}

    def checkpoint(saved: dict[str, Any]) -> None:
        state = read_checkpoint(saved)
        margins.append(state.boundaries[:BASE].clone())
        last["model"] = state.model  # the model after this step (BaseSession keeps the best epoch's)

    hooks = Hooks(on_checkpoint=checkpoint, on_base_epoch=lambda r: lrs.append(r["lr"]), checkpoint_every=1)
    layout = (Runtime.images, Runtime.module)
    loops.create_backbone, loops.create_host, loops.make_loader = backbone, host, loader
    if not channels_last:
        Runtime.images = lambda self, x: x.to(self.device)
        Runtime.module = lambda self, m: m.to(self.device)
    try:
        loops.train_base(cfg, data, hooks)
    finally:
        loops.create_backbone, loops.create_host, loops.make_loader = originals
        Runtime.images, Runtime.module = layout
    model = last["model"]
    return {"margins": torch.stack(margins), "lrs": lrs, "head": model["head"],
            "backbone": {k[len("backbone."):]: v for k, v in model.items() if k.startswith("backbone.")}}


def compare(released_m: torch.Tensor, ours_m: torch.Tensor) -> list[dict[str, Any]]:
    """Per step: the largest |m_ours - m_released|, the m whose signs differ, both codes' negative counts and mean m."""
    rows = []
    for t, (r, o) in enumerate(zip(released_m, ours_m), 1):
        rows.append({"step": t, "max_abs_dm": float((r - o).abs().max()), "sign_differs": int(((r < 0) != (o < 0)).sum()),
                     "negative_released": int((r < 0).sum()), "negative_ours": int((o < 0).sum()),
                     "m_mean_released": float(r.mean()), "m_mean_ours": float(o.mean())})
    return rows


def verdict(rows: list[dict[str, Any]], tol: float) -> tuple[str, bool]:
    """(verdict in words, same?) from compare's rows: see the module docstring."""
    departed = [x for x in rows if x["max_abs_dm"] > 0]
    if not departed:
        return "same, bit for bit", True
    first = departed[0]
    equal = f"equal through step {first['step'] - 1}" if first["step"] > 1 else "departing at step 1"
    if first["max_abs_dm"] <= tol:
        signs = sum(1 for x in rows if x["sign_differs"])
        return (f"same up to float32 rounding: {equal}, then |dm| {first['max_abs_dm']:.1e} at step {first['step']} "
                f"growing to {rows[-1]['max_abs_dm']:.1e} by step {rows[-1]['step']} (signs differ at "
                f"{signs} step{'' if signs == 1 else 's'})"), True
    return f"DIFFERS from step {first['step']} (|dm| {first['max_abs_dm']:.1e}, above rounding)", False


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python bench/lockstep.py", description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--official", required=True, help="a checkout of the authors' ADBS code (never modified)")
    p.add_argument("--steps", type=int, default=20, help="base steps (one batch per epoch, cosine over them)")
    p.add_argument("--schedule", choices=("epoch1", "cosine"), default="epoch1",
                   help="epoch1: lr 0.1 at every step, as within the first base epoch (a milestone after the last "
                   "step in both codes); cosine: the CIFAR-100 cosine schedule over the steps")
    p.add_argument("--batch-size", type=int, default=64, help="images per batch (the released -batch_size_base)")
    p.add_argument("--seed", type=int, default=1, help="seed of the released initialisation and of the batches (>= 1)")
    p.add_argument("--train-per-class", type=int, default=6, help="base images per class the batches are drawn "
                   "from (each epoch of the draw is a fresh shuffle; 30 gives 28 batches of 64 distinct images)")
    p.add_argument("--synthetic-version", type=int, default=1, help="embedded benchmark version the images come from")
    p.add_argument("--channels-last", action="store_true", help="run ours in the channels_last layout it trains in "
                   "(adbs/runtime.py: Runtime) rather than the released code's NCHW: then float32 rounding differs from "
                   "the first step on and the two runs drift apart (the backbone's gradients at initialisation are "
                   "ill-conditioned in float32)")
    p.add_argument("--tol", type=float, default=1e-5, help="largest first departure of m still taken for float32 "
                   "rounding (a structural difference departs by an update's size)")
    p.add_argument("--official-python", default=sys.executable, help="Python that runs the released code")
    p.add_argument("--out", default=None, help="folder for lockstep.json (default: none written)")
    return p


def main(argv: list[str] | None = None) -> int:
    a = build_parser().parse_args(argv)
    if a.steps < 1 or a.batch_size < 2 or a.seed < 1 or not 6 <= a.train_per_class <= 500:
        print("error: --steps >= 1, --batch-size >= 2, --seed >= 1 (the released code treats seed 0 as unseeded) and "
              "--train-per-class in 6..500 (the benchmark writer draws 5 shots per novel class)", file=sys.stderr)
        return exits.REFUSED
    try:
        check_released_checkout(Path(a.official).expanduser())
    except ToolError as e:
        print(f"error: {e}", file=sys.stderr)
        return exits.REFUSED
    from adbs.config import PRESETS, from_dict
    from adbs.data import build_data

    tmp = Path(tempfile.mkdtemp(prefix="lockstep-"))
    try:
        copy = tmp / "released"
        copy_released(Path(a.official).expanduser().resolve(), copy)
        apply_patches(copy, released_patches("cpu", ALL_SESSIONS))
        # ours' validation and prototype passes need a dataset: one validation image per class (val_fraction 1/n);
        # the batches are drawn from all of the written base images
        n = a.train_per_class
        threads = torch.get_num_threads()
        info = write_benchmark(tmp / "data", version=a.synthetic_version, train_per_class=n, test_per_class=1)
        cfg = from_dict({**PRESETS["cifar100"], "data_root": info["data_root"], "index_list": info["index_list"],
                         "base_epochs": a.steps, "seed": a.seed, "device": "cpu", "sessions": 1,
                         **({"schedule": "cosine"} if a.schedule == "cosine" else
                            {"schedule": "milestones", "milestones": (a.steps + 1,)}),
                         "val_fraction": 1 / n, "eval_batch_size": 128,
                         # both codes on the same number of CPU threads: another count sums in another order
                         # (float32 rounding from the first step); ours would otherwise take adbs/runtime.py's 1
                         "threads": threads})
        data = build_data(cfg)
        batches = draw_batches(data, a.steps, a.batch_size, a.seed)
        torch.save(batches, tmp / "batches.pt")

        r = subprocess.run([a.official_python, "-c", RELEASED_SCRIPT, str(tmp / "batches.pt"), str(tmp / "released.pt"),
                            str(a.seed), str(a.steps), a.schedule], cwd=copy, capture_output=True, text=True,
                           env={**os.environ, "OMP_NUM_THREADS": str(threads)})
        if r.returncode != 0 or "RELEASED_DONE" not in r.stdout:
            print(f"error: the released code failed (exit status {r.returncode}):\n{r.stderr[-3000:]}", file=sys.stderr)
            return exits.REFUSED
        rel = torch.load(tmp / "released.pt")
        ours = run_ours(cfg, data, batches, rel["init"], channels_last=a.channels_last)

        rows = compare(rel["margins"], ours["margins"])
        final = rel["final"]
        head_diff = float((final["fc.weight"][:BASE] - ours["head"]).abs().max())
        enc = released_encoder_to_ours(final)
        backbone_diff = max(float((enc[k] - ours["backbone"][k]).abs().max()) for k in enc
                            if enc[k].is_floating_point())
        lr_diff = max(abs(x - y) for x, y in zip(rel["lrs"], ours["lrs"]))
        said, same = verdict(rows, a.tol)
        layout = "channels_last" if a.channels_last else "NCHW"
        print(f"lockstep, {a.steps} steps of {a.batch_size} images (benchmark v{a.synthetic_version}, "
              f"{a.train_per_class} images per base class), seed {a.seed}, schedule {a.schedule}, ours in {layout}: "
              "the released base step (helper.py: base_train) against ours (adbs/loops.py: train_base) from the same "
              "weights on the same batches")
        print(f"{'step':>4}  {'max|dm|':>9}  {'signs differ':>12}  {'m<0 released':>12}  {'m<0 ours':>8}  "
              f"{'mean m released':>15}  {'mean m ours':>11}")
        for x in rows:
            print(f"{x['step']:>4}  {x['max_abs_dm']:9.2e}  {x['sign_differs']:>12}  {x['negative_released']:>12}  "
                  f"{x['negative_ours']:>8}  {x['m_mean_released']:15.4f}  {x['m_mean_ours']:11.4f}")
        print(f"lr per step, largest difference: {lr_diff:.2e}; after the last step, largest difference of the "
              f"classifier rows {head_diff:.2e}, of the backbone's weights and BN statistics {backbone_diff:.2e}")
        print(f"verdict (tol {a.tol:g}): {said}")
        res = {"args": vars(a), "rows": rows, "lr_diff": lr_diff, "backbone_diff": backbone_diff, "verdict": said,
               "head_diff": head_diff}
        if a.out:
            out = Path(a.out)
            out.mkdir(parents=True, exist_ok=True)
            (out / "lockstep.json").write_text(json.dumps(res, indent=1))
        return exits.OK if same else exits.FAILED
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
