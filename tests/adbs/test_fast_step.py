"""Config.fast_step: the CPU numbers are the same with it off and on, the base-session key takes it on CUDA only,
bad values are refused, and Runtime applies it on CUDA only (adbs/runtime.py: speed_up), in place."""

from __future__ import annotations

import pytest
import torch

from adbs import runtime
from adbs.cache import base_key
from adbs.config import Config, ConfigError, from_dict, preset
from adbs.data import build_data
from adbs.runtime import Runtime
from adbs.trainer import NumericalError, read
from adbs.trial import run_trial

TINY = dict(base_epochs=2, base_images_per_class=8, val_fraction=0.02, novel_val_per_class=4, sessions=2,
            finetune_epochs=2, threads=1)
SETTINGS = ("off", "compile", "cuda_graphs")


def tiny(**kw) -> Config:
    return preset("smoke", **{**TINY, **kw})


@pytest.fixture(scope="module")
def data():
    return build_data(tiny())


def untimed(x):
    """A result without its wall times (the keys ending in _s), which no two runs share."""
    if isinstance(x, dict):
        return {k: untimed(v) for k, v in x.items() if not k.endswith("_s")}
    if isinstance(x, list):
        return [untimed(v) for v in x]
    return x


def test_cpu_numbers_are_the_same_to_the_digit_with_the_setting_off_and_on(data):
    got = {s: run_trial(tiny(fast_step=s), data=data) for s in SETTINGS}
    off = got["off"]
    assert len(off.base_curve) == 2 and {"train_loss", "train_acc", "val_acc", "boundary_mean"} <= set(off.base_curve[0])
    for s in SETTINGS[1:]:
        assert untimed(got[s].base_curve) == untimed(off.base_curve), s  # base/train_loss etc. per epoch, exactly
        assert got[s].sessions == off.sessions and got[s].boundaries == off.boundaries, s
        assert untimed(got[s].summary) == untimed(off.summary), s


def test_a_nan_stops_the_trial_with_its_reason_when_the_figures_come_back_at_once(data):
    for s in ("off", "compile"):
        with pytest.raises(NumericalError, match="base training loss became NaN/inf at base epoch 1"):
            run_trial(tiny(base_lr=1e30, fast_step=s), data=data)


def test_the_key_takes_the_setting_on_cuda_only():
    cfgs = {s: Config(fast_step=s) for s in SETTINGS}
    assert len({base_key(c, "cpu") for c in cfgs.values()}) == 1  # CPU: the same numbers, one base session
    assert len({base_key(c, "cuda") for c in cfgs.values()}) == 3  # CUDA: compiled kernels round differently
    # off adds nothing to the CUDA settings: a CUDA entry trained before the setting existed keeps its key
    assert "fast_step" not in runtime.settings(cfgs["off"], "cuda")
    assert runtime.settings(cfgs["cuda_graphs"], "cuda")["fast_step"] == "cuda_graphs"


def test_a_bad_value_is_refused_with_the_choices():
    with pytest.raises(ConfigError, match="unknown fast_step 'graphs'; valid choices: off, compile, cuda_graphs"):
        from_dict({"fast_step": "graphs"}).validate()


def test_on_cpu_the_step_stays_eager_and_the_header_says_so():
    cfg = Config(device="cpu", fast_step="cuda_graphs", threads=1)
    rt = Runtime(cfg)
    assert rt.fast_step == "off" and rt.one_transfer
    m = torch.nn.Linear(2, 2)
    assert rt.speed_up(m) is m and "forward" not in m.__dict__
    assert "fast_step=cuda_graphs is CUDA only: not applied on CPU" in runtime.describe(cfg, "cpu")
    assert "fast_step" not in runtime.describe(Config(device="cpu"), "cpu")
    assert not Runtime(Config(device="cpu", threads=1)).one_transfer


@pytest.mark.parametrize("setting", ["compile", "cuda_graphs"])
def test_speed_up_replaces_the_forward_in_place_and_graphs_training_only(monkeypatch, setting):
    # a unit test of the dispatch: torch.compile stands in for a recorder (what it compiles is torch's business)
    calls, modes = [], []

    def compile_(fn, **kw):
        modes.append(kw)

        def compiled(*a, **k):
            calls.append("compiled")
            return fn(*a, **k)
        return compiled

    monkeypatch.setattr(torch, "compile", compile_)
    rt = Runtime(Config(device="cpu", threads=1))
    rt.fast_step = setting  # as on CUDA
    m = torch.nn.Sequential(torch.nn.Linear(3, 2), torch.nn.BatchNorm1d(2))
    keys = list(m.state_dict())
    x = torch.randn(4, 3)
    eager = m(x)
    rt.speed_up(m)
    assert list(m.state_dict()) == keys  # checkpoints and cache entries unchanged
    assert modes == [{"dynamic": False}] if setting == "compile" else [{"mode": "reduce-overhead", "dynamic": False}]
    m.eval()
    m(x)
    assert calls == (["compiled"] if setting == "compile" else [])  # graphs: evaluation keeps its features eager
    m.train()
    assert torch.equal(m(x), eager) and calls[-1] == "compiled"


def test_read_at_once_gives_the_floats_item_gives():
    g = torch.Generator().manual_seed(0)
    values = {f"v{i}": torch.randn((), generator=g) * 10 ** i for i in range(-3, 8)}
    values.update(count=torch.tensor(2**40 + 3), flag=torch.tensor(True), f32=torch.tensor(0.1, dtype=torch.float32))
    one, each = read(values, at_once=True), read(values, at_once=False)
    assert one == each and one["count"] == 2**40 + 3 and one["flag"] == 1.0
    assert one == {k: float(v.item()) for k, v in values.items()}


@pytest.mark.slow
def test_the_compiled_step_trains_as_eager_does_on_cpu(data, monkeypatch):
    """torch.compile of the backbone for real (inductor's CPU code, about 2 minutes of compiling on a 2-core machine),
    through train_base with the CUDA rule forced on the CPU, in training and in the validation passes: it trains, the
    state_dict keys stay, and the base curve is eager's within 1e-3 relative (fused kernels round differently)."""
    plain = Runtime.__init__

    def as_on_cuda(self, cfg):
        plain(self, cfg)
        self.fast_step = cfg.fast_step

    from adbs.loops import train_base

    eager = train_base(tiny(), data)
    monkeypatch.setattr(Runtime, "__init__", as_on_cuda)
    fast = train_base(tiny(fast_step="compile"), data)
    assert list(fast.backbone_state) == list(eager.backbone_state)
    for a, b in zip(eager.curve, fast.curve):
        assert b["train_loss"] == pytest.approx(a["train_loss"], rel=1e-3)
        assert b["boundary_mean"] == pytest.approx(a["boundary_mean"], rel=1e-3)
