"""adbs_lab/cluster/packing.py: trials per GPU and CPUs per trial from a trial's measured GPU memory.

The decision is pure arithmetic and is checked with made-up machines; `plan` with a stand-in probe;
the probe itself (one short base epoch on a GPU) in the `gpu`-marked test.
"""

from __future__ import annotations

import pytest
import torch

from adbs.config import preset
from adbs_lab.cluster import packing
from adbs_lab.cluster.packing import GiB, decide

H200 = 139 * GiB


def test_memory_bounds_the_trials_per_gpu():
    p = decide(gpu_total_bytes=H200, trial_bytes=30 * GiB, cluster_cpus=16, cluster_gpus=1, trials=100)
    assert p.trials_per_gpu == 3  # 0.8 * 139 / 30 = 3.7
    assert p.gpus_per_trial == 0.3333 and 3 * p.gpus_per_trial <= 1.0
    assert p.cpus_per_trial == 5.0  # 16 CPUs // 3 trials
    assert "bounded by memory" in p.reason and "peak 30.0 GiB" in p.reason


def test_cap_cpus_and_trials_bound_it():
    small = dict(gpu_total_bytes=H200, trial_bytes=2 * GiB, cluster_gpus=1)
    p = decide(**small, cluster_cpus=16, trials=100)
    assert (p.trials_per_gpu, p.gpus_per_trial, p.cpus_per_trial) == (8, 0.125, 2.0) and "the cap" in p.reason
    p = decide(**small, cluster_cpus=3, trials=100)
    assert (p.trials_per_gpu, p.cpus_per_trial) == (3, 1.0) and "CPUs" in p.reason
    p = decide(**small, cluster_cpus=16, trials=2)
    assert (p.trials_per_gpu, p.gpus_per_trial, p.cpus_per_trial) == (2, 0.5, 8.0)
    p = decide(**small, cluster_cpus=16, trials=100, cpus_per_trial=4)  # user's CPUs kept, and they bound k
    assert (p.trials_per_gpu, p.cpus_per_trial) == (4, 4)


def test_several_gpus_share_the_trials_and_cpus():
    p = decide(gpu_total_bytes=80 * GiB, trial_bytes=5 * GiB, cluster_cpus=32, cluster_gpus=4, trials=12)
    assert p.trials_per_gpu == 3 and p.cpus_per_trial == 2.0  # 12 trials over 4 GPUs; 32 CPUs // 12


def test_a_trial_larger_than_the_share_still_gets_a_whole_gpu():
    p = decide(gpu_total_bytes=80 * GiB, trial_bytes=70 * GiB, cluster_cpus=16, cluster_gpus=1, trials=5)
    assert (p.trials_per_gpu, p.gpus_per_trial, p.cpus_per_trial) == (1, 1.0, 16.0)


def test_failed_probe_means_one_per_gpu_with_the_reason():
    p = decide(gpu_total_bytes=1, trial_bytes=None, cluster_cpus=16, cluster_gpus=1, trials=5,
               probe_error="OutOfMemoryError: boom")
    assert (p.trials_per_gpu, p.gpus_per_trial) == (1, 1.0)
    line = p.line()
    assert line.startswith("packing: 1 trial per GPU (the memory probe failed: OutOfMemoryError: boom")
    assert line.endswith("override with --gpus-per-trial/--cpus-per-trial")


@pytest.mark.parametrize("bad, match", [
    (dict(cluster_gpus=0), "needs a GPU"), (dict(cluster_cpus=0), "at least one CPU"),
    (dict(trials=0), "at least one trial"), (dict(trial_bytes=0), "trial_bytes must be > 0"),
])
def test_bad_input_is_refused(bad, match):
    args = {**dict(gpu_total_bytes=H200, trial_bytes=GiB, cluster_cpus=16, cluster_gpus=1, trials=4), **bad}
    with pytest.raises(ValueError, match=match):
        decide(**args)


def test_plan_probes_each_kind_once_and_packs_for_the_largest(monkeypatch):
    seen = []

    def fake_probe(config):
        seen.append(config["backbone"])
        size = {"resnet12": 6 * GiB, "convnet_signed": 1 * GiB}[config["backbone"]]
        return {"total": 80 * GiB, "context": GiB // 2, "peak_reserved": size, "trial_bytes": size + GiB // 2}

    monkeypatch.setattr(packing, "probe_memory", fake_probe)
    cfgs = [preset("cifar100").to_dict(), preset("cifar100", seed=1).to_dict(), preset("cpu").to_dict()]
    p, probes = packing.plan(cfgs, cluster_cpus=16, cluster_gpus=1, trials=40, cpus_per_trial=None)
    assert seen == ["resnet12", "convnet_signed"] and len(probes) == 2
    assert p.trials_per_gpu == 8 and "the cap" in p.reason  # 0.8 * 80 / 6.5 = 9.8 by memory, capped at 8
    assert p.trials_per_gpu == 8 and p.cpus_per_trial == 2.0


def test_plan_falls_back_when_the_probe_fails(monkeypatch):
    def broken(config):
        raise RuntimeError("CUDA error: out of memory\nmore")

    monkeypatch.setattr(packing, "probe_memory", broken)
    p, probes = packing.plan([preset("cifar100").to_dict()], cluster_cpus=16, cluster_gpus=2, trials=9,
                             cpus_per_trial=None)
    assert probes == [] and p.trials_per_gpu == 1 and p.cpus_per_trial == 8.0
    assert "RuntimeError: more" in p.reason


def test_study_options_default_to_packing():
    from adbs_lab.driver.options import StudyOptions, parser

    opts = StudyOptions()
    assert opts.cpus_per_trial is None and opts.gpus_per_trial is None
    opts.check()  # None is valid for both
    text = " ".join(parser(None).format_help().split())
    assert "with GPUs, packing" in text and "CPUs split between the trials packed" in text


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_probe_measures_a_real_trial():
    # private (adbs_lab/cluster/packing.py): the probe itself on a real GPU
    out = packing._probe(preset("cifar100", dataset="synthetic").to_dict())
    assert out["total"] > 0 and 0 < out["peak_allocated"] <= out["peak_reserved"] < out["total"]
    p = decide(gpu_total_bytes=out["total"], trial_bytes=out["peak_reserved"] + out["context"], cluster_cpus=16,
               cluster_gpus=1, trials=100)
    assert p.trials_per_gpu >= 1
    print(p.line(), out)


def _prepared(*args: str, configs=None, base=None):
    """A stand-in for study.Study with what study.resources reads."""
    from types import SimpleNamespace

    from adbs_lab.driver.options import StudyOptions
    from adbs_lab.driver.prepared import RunSettings

    opts = StudyOptions(**dict(args))
    return SimpleNamespace(run=RunSettings.of(opts), gpus_per_trial=opts.gpus_per_trial or 0.0, total=10,
                           threads=(base or {}).get("threads"),
                           configs=configs if configs is not None else [preset("cifar100")])


def test_study_resources_pack_only_gpu_clusters_without_flags(monkeypatch, capsys):
    from adbs_lab import study

    calls = []

    def fake_probe(config):
        calls.append(config["dataset"])
        return {"total": 80 * GiB, "context": GiB // 2, "peak_reserved": 4 * GiB, "trial_bytes": 4 * GiB + GiB // 2}

    monkeypatch.setattr(packing, "probe_memory", fake_probe)
    gpu_cluster = {"CPU": 16.0, "GPU": 1.0}
    assert study.resources(_prepared(), {"CPU": 2.0}) == (0.0, 1.0)  # CPU cluster: as before
    assert study.resources(_prepared(base={"threads": 2}), {"CPU": 2.0}) == (0.0, 2.0)  # --set threads=2: its CPUs
    assert calls == [] and capsys.readouterr().out == ""
    assert study.resources(_prepared(), gpu_cluster) == (0.125, 2.0)  # 8 of 4.5 GiB in 64 GiB: the cap
    assert calls == ["cifar100"]
    assert "packing: 8 trials per GPU" in capsys.readouterr().out
    assert study.resources(_prepared(("cpus_per_trial", 4.0)), gpu_cluster) == (0.25, 4.0)  # CPUs kept, and bound k
    assert study.resources(_prepared(("gpus_per_trial", 1.0)), gpu_cluster) == (1.0, 1.0)  # explicit GPUs: no probe
    assert study.resources(_prepared(configs=[preset("cifar100", device="cpu")]), gpu_cluster) == (0.0, 1.0)
    assert calls == ["cifar100", "cifar100"]


def test_probe_config_and_its_base_session_on_cpu():
    """The probe's config fills full training and evaluation batches in one epoch; the same base session runs
    here on CPU (the probe runs it on a GPU and reads the peak memory)."""
    import dataclasses

    from adbs.data import build_data, check_data
    from adbs.loops import train_base

    cfg = packing.probe_config(preset("cifar100", dataset="synthetic").to_dict())
    assert (cfg.device, cfg.base_epochs, cfg.backbone) == ("cuda", 1, "resnet12")
    assert cfg.base_images_per_class * 60 * (1 - cfg.val_fraction) >= max(4 * cfg.batch_size, cfg.eval_batch_size)
    check_data(cfg)
    small = packing.probe_config(preset("cpu").to_dict())
    assert small.base_images_per_class == 26 and small.base_epochs == 1  # max(4 * 64, 128) // 10 + 1, under 80
    cpu = dataclasses.replace(small, device="cpu", backbone="convnet")
    base = train_base(cpu, build_data(cpu))
    assert len(base.curve) == 1
