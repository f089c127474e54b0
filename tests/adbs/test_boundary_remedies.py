"""Boundary diagnostics (adbs.metrics) and the remedy fields (Config, adbs.loops), each on a small case.

Every remedy test compares against the released behaviour on the same input, so it fails if the
field did nothing; diagnostics are checked on cases worked out by hand.
"""

import math

import pytest
import torch

import adbs
from adbs.config import Config, ConfigError, preset
from adbs.data import build_data
from adbs.metrics import boundary_stats, collapse_warnings, prediction_stats
from adbs.loops import train_base
from adbs.sessions import new_boundaries as _new_boundaries, run_sessions
from adbs.state import BaseSession

TINY = dict(base_epochs=2, base_images_per_class=8, val_fraction=0.02, novel_val_per_class=4, sessions=2,
            finetune_epochs=2, threads=1)


def tiny(**kw) -> Config:
    return preset("smoke", **{**TINY, **kw})


@pytest.fixture(scope="module")
def data():
    return build_data(tiny())


# --- diagnostics ---------------------------------------------------------------------------------------


def test_boundary_stats_by_hand():
    m = torch.tensor([-2.0, 1.0, 0.5, -0.25, 3.0])  # 3 base, 2 novel
    s = boundary_stats(m, 3)
    assert s["boundary_negative"] == 2
    assert s["boundary_mean"] == pytest.approx(2.25 / 5) and s["boundary_min"] == -2.0 and s["boundary_max"] == 3.0
    assert (s["boundary_base_abs_min"], s["boundary_base_abs_mean"], s["boundary_base_abs_max"]) == \
        pytest.approx((0.5, 3.5 / 3, 2.0))
    assert (s["boundary_novel_abs_min"], s["boundary_novel_abs_mean"], s["boundary_novel_abs_max"]) == \
        pytest.approx((0.25, 1.625, 3.0))
    assert s["boundary_base_mean"] == pytest.approx(-0.5 / 3) and s["boundary_novel_mean"] == pytest.approx(1.375)
    base_only = boundary_stats(m[:3], 3)
    assert math.isnan(base_only["boundary_novel_abs_mean"]) and math.isnan(base_only["boundary_novel_mean"])


def test_prototype_and_image_geometry_by_hand():
    from adbs.metrics import class_separation, novel_image_geometry, prototype_geometry

    # two orthogonal base rows, a novel row at 45 degrees to the first one
    rows = torch.tensor([[1.0, 0.0], [0.0, 2.0], [1.0, 1.0]])
    g = prototype_geometry(rows, n_base=2)
    assert g["base_mean_cos"] == pytest.approx(0.0)
    assert g["novel_nearest_base_cos"] == pytest.approx(2 ** -0.5)
    # D_cs: mean of 1 - cos over all 9 ordered pairs; cosines 1,0,s / 0,1,s / s,s,1 with s = 1/sqrt(2)
    assert class_separation(rows) == pytest.approx((9 - 3 - 4 * 2 ** -0.5) / 9)
    # novel images (label 2): one on its own row, one on base row 0
    feats = torch.tensor([[1.0, 1.0], [1.0, 0.0], [0.0, 1.0]])
    out = novel_image_geometry(feats, torch.tensor([2, 2, 1]), rows, n_base=2)
    assert out["novel_own_cos"] == pytest.approx((1 + 2 ** -0.5) / 2)
    assert out["novel_best_base_cos"] == pytest.approx((2 ** -0.5 + 1) / 2)
    assert out["novel_own_wins"] == pytest.approx(50.0)
    assert math.isnan(prototype_geometry(rows[:2], n_base=2)["novel_nearest_base_cos"])
    assert math.isnan(novel_image_geometry(feats, torch.tensor([0, 1, 1]), rows, n_base=2)["novel_own_wins"])


def test_prediction_stats_by_hand():
    pred = torch.tensor([0, 0, 1, 4, 4, 0])  # 3 base (0-2), 2 novel (3, 4): class 2 and 3 never predicted
    s = prediction_stats(pred, n_base=3, n_seen=5)
    assert s["pred_novel_share"] == pytest.approx(100 * 2 / 6)
    assert s["unpredicted_classes"] == 2
    assert math.isnan(prediction_stats(pred[:3], n_base=3, n_seen=3)["pred_novel_share"])


def test_collapse_warnings():
    def row(t, novel, unpredicted=0.0):
        return {"session": t, "n_classes": 60 + 5 * t, "test_novel_acc": novel, "test_unpredicted_classes": unpredicted}

    healthy = [row(0, math.nan), row(1, 12.0), row(2, 0.0)]
    assert collapse_warnings(healthy) == []
    collapsed = [row(0, math.nan), row(1, 0.0), row(2, 0.0, unpredicted=10.0)]
    w = collapse_warnings(collapsed)
    assert w == ["novel accuracy 0.00 in every incremental session (2)",
                 "10 of 70 seen classes never predicted (session 2)"]
    assert collapse_warnings([row(0, math.nan, unpredicted=3.0)]) == ["3 of 60 seen classes never predicted (session 0)"]


def test_trial_reports_diagnostics_and_warnings(data):
    """The diagnostics reach the base curve, every session row and the trial's warnings."""
    cfg = tiny()
    result = run_sessions(cfg, data, train_base(cfg, data))
    assert {"boundary_negative", "boundary_base_abs_mean"} <= set(result.base_curve[0])
    for r in result.sessions:
        for k in ("test_pred_novel_share", "test_unpredicted_classes", "boundary_negative",
                  "boundary_base_abs_min", "boundary_novel_abs_max"):
            assert k in r
        m = torch.tensor(result.boundaries[int(r["session"])])
        assert r["boundary_negative"] == (m < 0).sum().item()
    assert result.warnings == collapse_warnings(result.sessions)
    assert result.summary["collapse_warning"] == float(bool(result.warnings))


# --- remedies ------------------------------------------------------------------------------------------


def test_new_boundary_init_abs_mean():
    old = torch.tensor([-2.0, 1.0, 3.0, -1.0])
    released = _new_boundaries(Config(new_boundary_init="mean"), old, 2)
    paper = _new_boundaries(Config(new_boundary_init="abs_mean"), old, 2)
    torch.testing.assert_close(released, torch.tensor([0.25, 0.25]))  # signed mean
    torch.testing.assert_close(paper, torch.tensor([1.75, 1.75]))  # mean of |m|
    torch.testing.assert_close(_new_boundaries(Config(new_boundary_init="one"), old, 2), torch.ones(2))


def test_finetune_with_abs_boundary_differs_from_signed_when_old_m_is_negative():
    g = torch.Generator().manual_seed(0)
    feats, w = torch.randn(6, 8, generator=g), torch.randn(5, 8, generator=g)
    labels = torch.tensor([3, 3, 3, 4, 4, 4])
    kw = dict(n_old=3, alpha=0.01, lr=0.1, epochs=5)
    negative = torch.tensor([-1.5, 1.2, 0.8, 0.9, 0.9])
    signed = adbs.finetune_boundaries(feats, labels, w, negative, **kw)
    absolute = adbs.finetune_boundaries(feats, labels, w, negative, **kw, absolute=True)
    assert not torch.allclose(signed[3:], absolute[3:])
    torch.testing.assert_close(signed[:3], negative[:3])  # old boundaries untouched either way
    positive = negative.abs()  # while every m > 0 the two agree (the released loop equals |m| there)
    kw["lr"] = 0.001
    torch.testing.assert_close(adbs.finetune_boundaries(feats, labels, w, positive, **kw),
                               adbs.finetune_boundaries(feats, labels, w, positive, **kw, absolute=True))


def _negative_base(data, cfg) -> BaseSession:
    base = train_base(cfg, data)
    m = torch.linspace(-3.0, 1.0, len(base.boundaries))  # the largest |m| are negative: they dominate |m| logits
    return BaseSession(base.backbone_state, base.prototypes, m, base.curve, base.best_epoch)


@pytest.mark.slow
def test_abs_base_boundary_and_finetune_abs_reach_the_sessions(data):
    cfg = tiny()
    base = _negative_base(data, cfg)
    released = run_sessions(cfg, data, base)
    assert min(released.boundaries[0]) < 0  # the signed m enters the sessions
    remedied = run_sessions(cfg.replace(abs_base_boundary=True), data, base)
    assert min(remedied.boundaries[0]) >= 0
    torch.testing.assert_close(torch.tensor(remedied.boundaries[0]), torch.tensor(released.boundaries[0]).abs())
    assert remedied.sessions[0]["boundary_negative"] == 0 and released.sessions[0]["boundary_negative"] > 0
    # finetune_abs_boundary changes the novel boundaries the fine-tuning produces (old m has negatives)
    fabs = run_sessions(cfg.replace(finetune_abs_boundary=True), data, base)
    n_base = len(base.boundaries)
    assert fabs.boundaries[1][:n_base] == released.boundaries[1][:n_base]
    assert fabs.boundaries[1][n_base:] != released.boundaries[1][n_base:]
    # abs_mean init: the new boundaries start at the mean |m| (no fine-tuning, to read the init itself)
    init = run_sessions(cfg.replace(new_boundary_init="abs_mean", finetune_epochs=0), data, base)
    assert init.boundaries[1][n_base:] == pytest.approx([base.boundaries.abs().mean().item()] * 5)


@pytest.mark.slow
def test_boundary_lr_scale_and_warmup_act_on_the_base_session(data):
    cfg = tiny(base_epochs=2)
    released = train_base(cfg, data)
    frozen = train_base(cfg.replace(boundary_lr_scale=0.0), data)
    torch.testing.assert_close(frozen.boundaries, torch.ones_like(frozen.boundaries))  # lr 0: m never moves
    doubled = train_base(cfg.replace(boundary_lr_scale=2.0), data)
    assert not torch.allclose(doubled.boundaries, released.boundaries)
    warm = train_base(cfg.replace(boundary_warmup_epochs=1), data)
    first = warm.curve[0]
    assert first["boundary_min"] == first["boundary_max"] == 1.0  # frozen during epoch 1
    assert released.curve[0]["boundary_min"] != released.curve[0]["boundary_max"]
    assert warm.curve[1]["boundary_min"] != warm.curve[1]["boundary_max"]  # trains from epoch 2
    all_warm = train_base(cfg.replace(boundary_warmup_epochs=2), data)
    torch.testing.assert_close(all_warm.boundaries, torch.ones_like(all_warm.boundaries))


@pytest.mark.parametrize("field,value,fragment", [
    ("boundary_lr_scale", -1.0, "boundary_lr_scale must be a finite number >= 0"),
    ("boundary_lr_scale", float("nan"), "boundary_lr_scale must be a finite number >= 0"),
    ("boundary_warmup_epochs", 9, "boundary_warmup_epochs must be in 0..base_epochs"),
    ("new_boundary_init", "abs", "valid choices: mean, abs_mean, one"),
])
def test_remedy_fields_are_checked(field, value, fragment):
    with pytest.raises(ConfigError, match=fragment):
        Config(**{field: value}).validate()


def test_remedies_documented_in_help_with_what_they_depart_from():
    from adbs.config import BOUNDARY_REMEDIES
    from adbs.config.docs import field_doc

    for name in BOUNDARY_REMEDIES:
        assert "released code" in field_doc(name), name
