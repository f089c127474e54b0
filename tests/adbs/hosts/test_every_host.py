"""Every registered host through the whole pipeline: with and without ADBS, the base-session cache,
resume from checkpoints, a stopping hook (how pruning stops a trial); and the seam itself (registry,
several base phases, training in a session) on a toy host."""

import copy

import pytest
import torch
import torch.nn.functional as F

from adbs.config import ConfigError, from_dict, preset
from adbs.data import build_data
from adbs.hosts import HOSTS, NoOptions, get_host, host_names, options_class, register_host
from adbs.hosts.interface import Host, Phase, Step
from adbs.hosts.savc_options import Options as SavcOptions
from adbs.trainer import Hooks
from adbs.trial import run_trial

TINY = dict(base_epochs=2, base_images_per_class=8, val_fraction=0.02, novel_val_per_class=4, sessions=2,
            finetune_epochs=2, threads=1, eval_batch_size=256)
HOST_NAMES = host_names()


def tiny(host: str, **kw):
    return from_dict({**preset("smoke").to_dict(), **TINY, "host": host, **kw})


@pytest.fixture(scope="module")
def data():
    return build_data(tiny("baseline"))


def _untimed(curve):
    return [{k: v for k, v in r.items() if k != "epoch_time_s"} for r in curve]


def test_registry():
    assert HOST_NAMES[0] == "baseline" and {"savc", "alice", "orco"} <= set(HOST_NAMES)
    # the registry names a host by its module (adbs/hosts/__init__.py), the class by its `name`: the two agree
    assert all(get_host(h).name == h for h in HOST_NAMES)
    assert options_class("baseline") is NoOptions and options_class("savc") is SavcOptions
    with pytest.raises(ValueError, match="already registered"):
        register_host(type("Other", (Host,), {"name": "savc"}))
    with pytest.raises(ConfigError, match="unknown host 'icarl'; valid choices: baseline"):
        get_host("icarl")


@pytest.mark.slow
@pytest.mark.parametrize("host", HOST_NAMES)
@pytest.mark.parametrize("variant", ["baseline", "adb+ic"])
def test_smoke_trial_with_and_without_adbs(host, variant, data):
    result = run_trial(tiny(host, variant=variant), data=data)
    copies = get_host(host)(tiny(host), data, None).copies if host == "savc" else 1
    assert [r["session"] for r in result.sessions] == [0, 1, 2]
    assert [r["n_classes"] for r in result.sessions] == [60, 65, 70]
    assert len(result.boundaries[-1]) == 70 * copies  # one boundary per row
    for key in ("val_avg_acc", "test_avg_acc", "test_last_acc", "test_pd", "d_cs"):
        assert result.summary[key] == result.summary[key], key  # finite, not NaN
    assert {"boundary_negative", "boundary_base_abs_mean"} <= set(result.base_curve[0])
    assert {"test_pred_novel_share", "test_unpredicted_classes"} <= set(result.sessions[1])
    if variant == "baseline":
        assert set(result.boundaries[-1]) == {1.0}, "without ADBS m = 1 everywhere"
    else:
        assert result.boundaries[0] != [1.0] * len(result.boundaries[0]), "ADBS learns the base boundaries"
        n = len(result.boundaries[0])
        mean_rows = [sum(result.boundaries[0]) / n] * (len(result.boundaries[1]) - n)
        assert result.boundaries[1][n:] != mean_rows, "and fine-tunes new ones"


@pytest.mark.slow
@pytest.mark.parametrize("host", HOST_NAMES)
def test_cache_and_resume_give_identical_numbers(host, data, tmp_path):
    cfg = tiny(host)
    states = []
    hooks = Hooks(on_checkpoint=lambda s: states.append(copy.deepcopy(s)), checkpoint_every=1)
    full = run_trial(cfg, data=data, hooks=hooks, cache=tmp_path / "cache")
    # over every base phase (OrCo: pretraining + alignment)
    epochs = sum(p.epochs for p in get_host(host)(cfg, data, None).phases())
    assert [(s["phase"], s.get("epoch", s.get("session"))) for s in states] == [
        *(("base", e) for e in range(1, epochs + 1)), ("sessions", 0), ("sessions", 1), ("sessions", 2)]
    again = run_trial(cfg, data=data, cache=tmp_path / "cache")  # the base session comes from the cache
    assert again.summary["base_reused"] == 1.0 and again.sessions == full.sessions and again.boundaries == full.boundaries
    resumed = run_trial(cfg, data=data, resume=states[0])  # mid base session, without the cache
    assert resumed.sessions == full.sessions and resumed.boundaries == full.boundaries
    assert _untimed(resumed.base_curve) == _untimed(full.base_curve)
    seen = []
    from_session = run_trial(cfg, data=data, resume=states[epochs + 1], cache=tmp_path / "cache",
                             hooks=Hooks(on_session=seen.append))
    assert from_session.sessions == full.sessions and [r["session"] for r in seen] == [2]


@pytest.mark.parametrize("host", HOST_NAMES)
def test_a_stopping_hook_stops_the_trial_in_the_base_session(host, data):
    """Pruning: the study's stopper ends a trial at a base-epoch report; here the report hook raises."""
    class Pruned(Exception):
        pass

    epochs, sessions = [], []

    def prune(row):
        epochs.append(row["epoch"])
        raise Pruned

    with pytest.raises(Pruned):
        run_trial(tiny(host), data=data, hooks=Hooks(on_base_epoch=prune, on_session=sessions.append))
    assert epochs == [1] and sessions == []


# --- the seam: a toy host with two base phases and training in the sessions ------------------------------
class _Toy(Host):
    """Phase 1 trains the backbone alone with its own optimiser; phase 2 the head; each session rescales the
    features (a stand-in for a host that retrains a projector every session, as OrCo's third phase)."""

    name = "_toy"

    def build(self, backbone):
        model = torch.nn.Module()
        model.backbone = backbone
        model.head = torch.nn.Parameter(torch.randn(self.n_base, backbone.out_dim, device=self.rt.device))
        model.register_buffer("gain", torch.ones((), device=self.rt.device))
        return model

    def phases(self):
        def optimizer(groups):  # its own: plain SGD on the backbone alone
            opt = torch.optim.SGD(groups[:1], lr=0.05)
            return opt, torch.optim.lr_scheduler.StepLR(opt, 1)

        pre = Phase("pretrain", 1, self.base_step, trainable=lambda m: list(m.backbone.parameters()),
                    optimizer=optimizer, select=False)
        return [pre, Phase("base", 2, self.base_step)]

    def base_step(self, model, head, x, y, g):
        logits = head.logits(model.backbone(x))
        return Step(F.cross_entropy(logits, y), logits, y)

    def embed(self, model, x):
        return (model.backbone(x) * model.gain).unsqueeze(1)

    def session_step(self, model, session):
        model.gain.mul_(1.5)
        return True


@pytest.fixture
def toy():
    HOSTS["_toy"] = _Toy
    yield
    HOSTS.pop("_toy")


@pytest.mark.slow
def test_several_base_phases_and_session_training_resume_bit_identically(toy, data):
    cfg = tiny("_toy")
    states = []
    full = run_trial(cfg, data=data, hooks=Hooks(on_checkpoint=lambda s: states.append(copy.deepcopy(s)),
                                                 checkpoint_every=1))
    assert [r["epoch"] for r in full.base_curve] == [1, 2, 3]  # 1 pretraining + 2 base epochs
    assert full.summary["best_base_epoch"] in (2, 3)  # chosen among the selecting phase's epochs
    assert states[3]["session_model"] is None and states[4]["session_model"]["gain"] == 1.5
    for state in (states[1], states[4]):  # mid second phase; after a session that trained
        resumed = run_trial(cfg, data=data, resume=state)
        assert resumed.sessions == full.sessions and resumed.boundaries == full.boundaries
