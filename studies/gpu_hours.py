"""The paper study's GPU-hours (studies/paper.py prints them before any part trains): measured on CIFAR-100 from
studies/gpu_measured.json when that file is there, else the studies' estimate.

studies/gpu_measured.json is what `bench/gpu.py --compare` writes on a GPU (its gpu_compare.json, copied here;
docs/gpu.md, "The two measuring commands"): the card, each host's base epoch for each of its phases on its CIFAR-100
paper preset at CIFAR-100's size (500 training images a class), alone on the GPU with fast_step off, and the
baseline's trial alone and 8 packed. What the printed figure takes from it:
  measured:     the card; each host's epoch time per phase (the second of two epochs, its validation pass
                included); the baseline's throughput packed 8 on one GPU against alone;
  extrapolated: a trial's whole base session (epoch time x its epochs, the first epoch's warm-up left out), with
                the incremental sessions left out (seconds on a GPU, against hours); packed, the baseline's gain
                applied to every host.
"""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any

from adbs import light
from adbs.config import Config

if TYPE_CHECKING:
    from adbs import data, hosts
else:  # torch: loaded at first use, after studies/paper.py has checked its flags (adbs/light.py)
    data = light.lazy("adbs.data")
    hosts = light.lazy("adbs.hosts")

FILE = Path(__file__).with_name("gpu_measured.json")
MEASURED_DATASETS = ("cifar100",)
"""The datasets the measurement stands for: the embedded benchmark written at CIFAR-100's size and resolution."""
GPU_H_PER_100_EPOCHS = (1.0, 2.0)
"""The studies' own figure for one trial of a paper preset on one GPU (100 base epochs: 1-2 h); not measured on
the paper's datasets here, so without a measurement the paper presets' time is printed as an estimate, scaled by
base epochs."""


class MeasurementError(ValueError):
    """studies/gpu_measured.json is there but is not a GPU measurement of bench/gpu.py --compare."""


def load(path: Path | None = None) -> dict[str, Any] | None:
    """The measurement in `path` (default FILE), None when there is no file; a file that is not one raises
    MeasurementError saying why."""
    path = path or FILE
    if not path.exists():
        return None
    try:
        m = json.loads(path.read_text(encoding="utf-8"))
    except ValueError as e:
        raise MeasurementError(f"{path}: not JSON ({e}); copy there the gpu_compare.json of a GPU run of "
                               "bench/gpu.py --compare") from e
    if m.get("dry"):
        raise MeasurementError(f"{path}: written by bench/gpu.py --compare --dry (the CPU plumbing), not a measurement; "
                               "remove it or copy there the gpu_compare.json of a GPU run")
    if not m.get("hosts") or not m.get("versions", {}).get("card"):
        raise MeasurementError(f"{path}: no host epoch times or no card; copy there the gpu_compare.json of a "
                               "finished GPU run of bench/gpu.py --compare")
    return m


def phase_epochs(cfg: Config) -> dict[str, int]:
    """{phase: base epochs} a trial of `cfg` trains, as its host plans them (adbs/hosts/: Host.phases; OrCo's
    pretraining phase is its own), read without data: the phases need only the dataset's spec."""
    spec = data.get_spec(cfg.dataset)
    host = hosts.create_host(cfg, SimpleNamespace(spec=spec, base_classes=spec.base_classes), None)  # type: ignore[arg-type]
    out: dict[str, int] = {}
    for p in host.phases():
        out[p.name] = out.get(p.name, 0) + p.epochs
    return out


def measured(bases: list[Config], m: dict[str, Any]) -> dict[str, Any]:
    """GPU hours of `bases` (one config per base session) alone on one GPU, and with the baseline's packing gain, over
    the base epochs counted; the hosts or phases the measurement lacks are listed, not counted (nor their epochs);
    where a config's batch size, backbone or fast step is not the one measured, it is said."""
    seconds, missing, unlike = 0.0, set(), set()
    epochs = 0
    for cfg in bases:
        host = m["hosts"].get(cfg.host)
        for phase, n in phase_epochs(cfg).items():
            if host is None or phase not in host["phases"]:
                missing.add(f"{cfg.host} {phase}" if host else cfg.host)
                continue
            seconds, epochs = seconds + n * host["phases"][phase]["epoch_s"], epochs + n
        if host is not None and (cfg.batch_size, cfg.backbone, cfg.fast_step) != (host["batch_size"], host["backbone"],
                                                                                   host["fast_step"]):
            unlike.add(f"{cfg.host} (measured at batch {host['batch_size']}, {host['backbone']}, fast_step "
                       f"{host['fast_step']}; here batch {cfg.batch_size}, {cfg.backbone}, fast_step {cfg.fast_step})")
    gain = packing_gain(m)
    return {"alone_h": seconds / 3600, "packed_h": None if gain is None else seconds / 3600 / gain, "gain": gain,
            "epochs": epochs, "missing": sorted(missing), "unlike": sorted(unlike)}


def packing_gain(m: dict[str, Any]) -> float | None:
    """Base epochs per GPU-second, k packed against one alone: the baseline's, fast_step off (None unmeasured)."""
    off = m.get("trials", {}).get("off")
    if not off or not off.get("packed", {}).get("epoch_s"):
        return None
    return off["packed"]["k"] * off["alone"]["epoch_s"] / off["packed"]["epoch_s"]


def line(bases: list[Config], dataset: str, m: dict[str, Any] | None) -> str:
    """The GPU-hours line: measured when `m` is a measurement and `dataset` one it stands for, else the estimate."""
    if m is None or dataset not in MEASURED_DATASETS:
        epochs = sum(c.base_epochs for c in bases)
        why = ("no measurement (studies/gpu_measured.json; docs/gpu.md)" if m is None
               else f"measured on {', '.join(MEASURED_DATASETS)} only")
        return (f"estimate (not measured on {dataset} here: {why}): {GPU_H_PER_100_EPOCHS[0] * epochs / 100:.0f}-"
                f"{GPU_H_PER_100_EPOCHS[1] * epochs / 100:.0f} GPU hours for {epochs} base epochs to train, from the "
                "studies' figure of 1-2 h for a 100-epoch trial on one GPU, counting base sessions the parts share "
                "(base_cache) once per part; docs/gpu.md's H200 throughput for the baseline (~3,300 images/s) would make "
                "it several times less, and SAVC, ALICE and OrCo, which train several views per image, more")
    got = measured(bases, m)
    card = m["versions"]["card"]
    out = (f"measured on one {card} ({m.get('date', 'undated')}, `{m.get('command', 'bench/gpu.py --compare')}`): "
           f"{got['alone_h']:.1f} GPU hours for {got['epochs']} base epochs to train, one trial at a time")
    if got["packed_h"] is not None:
        k = m["trials"]["off"]["packed"]["k"]
        out += f", {got['packed_h']:.1f} with {k} trials packed on each GPU ({got['gain']:.2f}x the trials/hour)"
    setting = ", ".join(sorted({h["fast_step"] for h in m["hosts"].values()}))
    out += (f". Measured: each host's base epoch per phase on its CIFAR-100 paper preset at CIFAR-100's size, alone "
            f"(fast_step {setting})"
            + (f", and the baseline packed {m['trials']['off']['packed']['k']} at once" if got["packed_h"] is not None
               else "") + ". Extrapolated: the epochs beyond the two measured (warm-up left out), the incremental "
            "sessions left out" + (", the baseline's packing gain applied to every host" if got["packed_h"] is not None
                                   else ""))
    if got["missing"]:
        out += f". Not measured, not counted: {', '.join(got['missing'])}"
    if got["unlike"]:
        out += f". Settings unlike the measured ones: {'; '.join(got['unlike'])}"
    return out
