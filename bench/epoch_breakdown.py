"""Where a base epoch's time goes, and whether a device's batches are the CPU path's, on the machine at hand.

    python bench/epoch_breakdown.py                  # on a GPU machine: the cifar100 preset, 4 base epochs
    python bench/epoch_breakdown.py --device cpu --quick     # the same steps at tiny sizes on a CPU (~20 s)

bench/gpu.py measures a trial's images/s against the train step alone; when a trial falls short of it, this
splits the base epoch of the same preset (the cifar100 preset on the embedded benchmark v1, ResNet-12) into
  - the loader alone: one epoch of training batches, made on the device from its resident copy of the pool;
  - the validation pass (adbs.loops.extract_features, timed around each call, device synchronised);
  - the rest: the training steps themselves (forward, loss with the boundaries and IC, backward, SGD);
and checks the device-resident data path (adbs/data/loader.py): the batches made on the device against the
CPU path's for the same seed (the count of float32 values that differ; 0 is the contract), with the number
that would differ if the device divided by the Python scalar 255 (CUDA turns that into a multiplication by
its reciprocal). --out writes breakdown.json.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from adbs import exits  # noqa: E402


def batches_against_cpu(device: str) -> dict:
    """The device path's first training batches against the CPU path's, value by value."""
    import torch

    from adbs.config import Config
    from adbs.data import build_data, make_loader
    from adbs.data.loader import normalise

    data = build_data(Config())
    idx = data.sessions[0].train[:300]

    def mk(d):
        return make_loader(data, data.train_pool, idx, train=True, batch_size=64, shuffle=True, seed=2, device=d)

    dev = [x.cpu() for x, _ in mk(device)]
    cpu = [x for x, _ in mk(None)]
    mean = torch.tensor(data.spec.mean).view(1, 3, 1, 1)
    std = torch.tensor(data.spec.std).view(1, 3, 1, 1)
    raw = [((x * std + mean) * 255).round() for x in cpu]  # the uint8 crops behind the CPU batches
    # the loader's normalisation with its default scale, the Python scalar 255 (the device path passes a tensor)
    by_scalar = [normalise(r.to(device), mean.to(device), std.to(device)).cpu() for r in raw]
    return {"values": sum(x.numel() for x in cpu),
            "differing": sum(int((a != b).sum()) for a, b in zip(dev, cpu)),
            "differing_if_divided_by_python_scalar": sum(int((a != b).sum()) for a, b in zip(by_scalar, cpu))}


def epoch_split(device: str, epochs: int, quick: bool) -> dict:
    import torch

    from adbs import loops
    from adbs.data import build_data, make_loader
    from adbs.config import preset
    from adbs.runtime import Runtime
    from adbs.trainer import Hooks, extract_features

    cfg = dataclasses.replace(preset("cifar100", dataset="synthetic", synthetic_version=1), device=device,
                              base_epochs=epochs)
    if quick:
        cfg = dataclasses.replace(cfg, backbone="convnet", base_images_per_class=20)
    cfg = cfg.validate()
    data = build_data(cfg)
    rt = Runtime(cfg)
    sync = torch.cuda.synchronize if rt.device.type == "cuda" else (lambda: None)
    val_s: list[float] = []
    extract = extract_features

    def timed(*args, **kw):  # the validation and prototype passes, synchronised on both sides
        sync()
        t0 = time.perf_counter()
        out = extract(*args, **kw)
        sync()
        val_s.append(time.perf_counter() - t0)
        return out

    rows: list[dict] = []
    loops.extract_features = timed
    try:
        loops.train_base(cfg, data, hooks=Hooks(on_base_epoch=lambda r: rows.append(dict(r))))
    finally:
        loops.extract_features = extract
    train_idx = data.sessions[0].train
    loader = make_loader(data, data.train_pool, train_idx, train=True, batch_size=cfg.batch_size, shuffle=True,
                         seed=0, device=rt.data_device)
    for _ in loader:  # first epoch: the pool's copy to the device
        pass
    sync()
    t0 = time.perf_counter()
    for _ in range(3):
        for _ in loader:
            pass
    sync()
    loader_s = (time.perf_counter() - t0) / 3
    epoch_s = [r["epoch_time_s"] for r in rows]
    later = statistics.median(epoch_s[1:])  # epochs >= 2 (main): the first is warm-up
    val_later = statistics.median(val_s[1:epochs])  # val_s[epochs] is the prototype pass after the last epoch
    return {"images_per_epoch": len(train_idx), "epoch_s": epoch_s, "epoch_s_median_after_first": later,
            "validation_s_per_epoch": val_s[:epochs], "loader_alone_s": loader_s,
            "steps_s": later - val_later, "threads": torch.get_num_threads()}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--device", choices=["cuda", "cpu"], default=None, help="default: cuda when available")
    ap.add_argument("--epochs", type=int, default=4, help="base epochs (>= 2: the first is warm-up)")
    ap.add_argument("--quick", action="store_true", help="a ConvNet on 20 images per class: the plumbing")
    ap.add_argument("--out", type=Path, default=None, help="folder for breakdown.json")
    a = ap.parse_args(argv)
    if a.epochs < 2:
        ap.error(f"--epochs must be >= 2 (the first epoch is warm-up), got {a.epochs}")
    import torch

    device = a.device or ("cuda" if torch.cuda.is_available() else "cpu")
    if device == "cuda" and not torch.cuda.is_available():
        ap.error("--device cuda: torch sees no CUDA GPU; use --device cpu (with --quick)")
    res = {"device": torch.cuda.get_device_name() if device == "cuda" else "cpu"}
    res["batches"] = b = batches_against_cpu(device)
    print(f"device batches vs the CPU path's: {b['differing']} of {b['values']} values differ "
          f"({b['differing_if_divided_by_python_scalar']} would, divided by the Python scalar 255)", flush=True)
    res["epoch"] = e = epoch_split(device, a.epochs, a.quick)
    n, t = e["images_per_epoch"], e["epoch_s_median_after_first"]
    print(f"base epoch ({n} images, {e['threads']} threads): {t:.2f} s ({n / t:.0f} images/s); validation pass "
          f"{e['validation_s_per_epoch'][-1]:.3f} s; loader alone {e['loader_alone_s']:.3f} s "
          f"({n / e['loader_alone_s']:.0f} images/s); training steps {e['steps_s']:.2f} s "
          f"({n / e['steps_s']:.0f} images/s); first epoch {e['epoch_s'][0]:.2f} s")
    if a.out:
        a.out.mkdir(parents=True, exist_ok=True)
        (a.out / "breakdown.json").write_text(json.dumps(res, indent=1))
    return exits.OK


if __name__ == "__main__":
    sys.exit(main())
