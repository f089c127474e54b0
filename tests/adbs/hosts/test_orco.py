"""OrCo (adbs/hosts/orco.py): its losses, pseudo-targets and schedules by hand or against an independent
formula, the LARS step, the phases it lists, and a tiny run end to end (with and without ADBS, twice)."""

import itertools
import math

import pytest
import torch
import torch.nn.functional as F

from adbs.config import ConfigError, from_dict, preset
from adbs.data import build_data
from adbs.hosts import get_host
from adbs.hosts.orco import (
    LARS,
    assign_targets,
    orthogonality_loss,
    perturbed_targets,
    solo_contrastive_loss,
    split_cross_entropy,
    spread_targets,
    supcon_loss,
    warmup_cosine,
)
from adbs.trial import run_trial


def _supcon_by_loops(view1, view2, labels, t):
    """Khosla et al.'s L_out (models/orco/supcon.py, contrast_mode all), one anchor at a time."""
    feats, y = torch.cat([view1, view2]), labels.repeat(2)
    per_anchor = []
    for i in range(len(feats)):
        others = [j for j in range(len(feats)) if j != i]
        denom = sum(math.exp(float(feats[i] @ feats[j]) / t) for j in others)
        pos = [j for j in others if y[j] == y[i]]
        if pos:
            per_anchor.append(-sum(math.log(math.exp(float(feats[i] @ feats[p]) / t) / denom) for p in pos) / len(pos))
    return sum(per_anchor) / len(per_anchor)


def test_supcon_by_hand():
    # Two unit vectors, one image of one class: each anchor's only other row is its positive, so the loss is 0.
    e = torch.eye(2)
    assert supcon_loss(e[:1], e[:1], torch.tensor([0]), 0.5).item() == pytest.approx(0.0, abs=1e-7)
    # Two images of different classes, orthogonal views: anchor a1 = (1, 0) meets a2 = (1, 0) (its positive,
    # cos 1) and b1 = b2 = (0, 1) (cos 0): -log(e^2 / (e^2 + 2)) at t = 0.5, the same for every anchor.
    v = torch.tensor([[1.0, 0.0], [0.0, 1.0]])
    by_hand = -math.log(math.exp(2) / (math.exp(2) + 2))
    assert supcon_loss(v, v, torch.tensor([0, 1]), 0.5).item() == pytest.approx(by_hand, rel=1e-6)


def test_supcon_matches_the_loop_formula():
    g = torch.Generator().manual_seed(0)
    f1, f2 = (F.normalize(torch.randn(6, 4, generator=g), dim=1) for _ in range(2))
    y = torch.tensor([0, 1, 0, 2, 1, 3])  # class 3 has only its two views; class 2 too
    assert supcon_loss(f1, f2, y, 0.07).item() == pytest.approx(_supcon_by_loops(f1, f2, y, 0.07), rel=1e-5)


def test_solo_contrastive_by_hand():
    # Two pairs of identical unit vectors, orthogonal to each other. Row 0: its positive row 1 (s = 1/t), the
    # other rows 2 and 3 (s = 0): log((e^{1/t} + 2) / e^{1/t}); every row alike by symmetry.
    z = torch.tensor([[1.0, 0.0], [1.0, 0.0], [0.0, 1.0], [0.0, 1.0]])
    t = 0.2
    by_hand = math.log((math.exp(1 / t) + 2) / math.exp(1 / t))
    assert solo_contrastive_loss(z, torch.tensor([0, 0, 1, 1]), t).item() == pytest.approx(by_hand, abs=1e-6)
    # One id for all four rows: every other row is a positive, so each row's term is log(1) = 0.
    assert solo_contrastive_loss(z, torch.tensor([0, 0, 0, 0]), t).item() == pytest.approx(0.0, abs=1e-6)


def test_orthogonality_term_by_hand():
    # One class in the batch (label 0, mean along x), assigned targets of classes 0 and 1 (class 1's along y,
    # absent from the batch, so it enters), one free target along -x: v = [x, y, -x].
    feats = torch.tensor([[2.0, 0.0], [1.0, 0.0]])
    assigned = torch.tensor([[0.6, 0.8], [0.0, 1.0]])
    free = torch.tensor([[-1.0, 0.0]])
    loss = orthogonality_loss(feats, torch.tensor([0, 0]), assigned, torch.tensor([0, 1]), free)
    # Gram matrix rows: x: (1, 0, -1), y: (0, 1, 0), -x: (-1, 0, 1)
    row_x = math.log(math.e + 1 + math.exp(-1))
    row_y = math.log(1 + math.e + 1)
    by_hand = (2 * row_x + row_y) / 3
    assert loss.item() == pytest.approx(by_hand, rel=1e-6)


def test_hungarian_assignment_by_hand_and_by_brute_force():
    targets = torch.eye(3)
    # Greedy would give class 0 target 0 (cos 0.9) and leave class 1 target 2; the best total is 0.8 + 0.85 + 1.
    means = torch.tensor([[0.9, 0.8, 0.0], [0.85, 0.0, 0.1], [0.0, 0.0, 1.0]])
    assert assign_targets(means, targets).tolist() == [1, 0, 2]
    g = torch.Generator().manual_seed(1)
    means, targets = torch.randn(4, 5, generator=g), torch.randn(6, 5, generator=g)
    cos = F.normalize(means, dim=1) @ F.normalize(targets, dim=1).t()
    best = max(itertools.permutations(range(6), 4), key=lambda p: sum(cos[i, c].item() for i, c in enumerate(p)))
    assert assign_targets(means, targets).tolist() == list(best)


def test_spreading_targets_lowers_their_pairwise_cosine():
    g = torch.Generator().manual_seed(0)
    start = F.normalize(torch.randn(20, 8, generator=torch.Generator().manual_seed(0)), dim=1)
    spread = spread_targets(20, 8, 200, g)  # the same first draw as `start`
    off = ~torch.eye(20, dtype=torch.bool)
    assert torch.allclose(spread.norm(dim=1), torch.ones(20), atol=1e-5)  # unit vectors
    before, after = (start @ start.t())[off], (spread @ spread.t())[off]
    assert after.max() < before.max() and after.mean() < before.mean()
    assert after.mean().item() == pytest.approx(-1 / 19, abs=0.02)  # 20 points in 8-d: mean cos -> -1/(n-1)
    plain = spread_targets(20, 8, 200, torch.Generator().manual_seed(0), accumulate=False)
    assert not torch.allclose(plain, spread)  # OrCo's loop keeps the gradient; plain descent is another path


def test_perturbed_targets_cover_every_target_before_repeating():
    targets, labels = F.normalize(torch.randn(5, 4), dim=1), torch.arange(5) + 60
    (v1, v2), tl = perturbed_targets(targets, labels, 3, 0.0, 0.5, torch.Generator().manual_seed(0))
    assert len(set(tl.tolist())) == 3 and torch.allclose(v1, v2)  # no perturbation: the targets themselves
    (v1, v2), tl = perturbed_targets(targets, labels, 12, 1e-2, 0.5, torch.Generator().manual_seed(0))
    assert sorted(set(tl.tolist())) == list(range(60, 65)) and len(tl) == 12
    assert torch.allclose(v1.norm(dim=1), torch.ones(12)) and not torch.allclose(v1, v2)
    assert ((v1 * targets[tl - 60]).sum(1) > 0.999).all()  # a small perturbation of each one's own target


def test_split_cross_entropy_by_hand():
    logits = torch.tensor([[2.0, 0.0, 0.0], [0.0, 0.0, 1.0], [0.0, 1.0, 0.0]])
    y = torch.tensor([0, 2, 2])  # base class 0; novel class 2 (n_base = 2)
    def ce(r, c):  # -log softmax of row r at column c, from the numbers
        return -math.log(math.exp(logits[r, c].item()) / sum(math.exp(v) for v in logits[r].tolist()))
    by_hand = 0.5 * (ce(1, 2) + ce(2, 2)) / 2 + 0.25 * ce(0, 0)
    assert split_cross_entropy(logits, y, 2, 0.5, 0.25).item() == pytest.approx(by_hand, rel=1e-6)
    assert split_cross_entropy(logits[1:], y[1:], 2, 0.5, 0.25).item() == pytest.approx(0.5 * (ce(1, 2) + ce(2, 2)) / 2,
                                                                                         rel=1e-6)


def test_warmup_cosine_schedule_by_hand():
    # 10 epochs, 2 of warm-up from 0.003 to 0.8, then a cosine to 0 over the 8 others.
    assert warmup_cosine(0, 10, 2, 0.8, 0.003, 0.0) == pytest.approx(0.003)
    assert warmup_cosine(1, 10, 2, 0.8, 0.003, 0.0) == pytest.approx(0.8)
    assert warmup_cosine(2, 10, 2, 0.8, 0.003, 0.0) == pytest.approx(0.8)
    assert warmup_cosine(6, 10, 2, 0.8, 0.003, 0.0) == pytest.approx(0.4)
    assert warmup_cosine(9, 10, 0, 0.8, 0.003, 0.1) == pytest.approx(0.1 + 0.35 * (1 + math.cos(math.pi * 0.9)))


def test_lars_step_by_hand():
    # A 2-d weight with |p| = 5 and |g| = 1, lr 1, wd 0, eta 0.02: trust ratio 0.02 * 5 / 1 = 0.1 (< 1 / lr), so
    # the step is 0.1 * g; a bias takes the plain step lr * g.
    w = torch.nn.Parameter(torch.tensor([[3.0, 4.0]]))
    b = torch.nn.Parameter(torch.tensor([1.0]))
    w.grad, b.grad = torch.tensor([[0.6, 0.8]]), torch.tensor([0.5])
    LARS([w, b], lr=1.0, momentum=0.0).step()
    torch.testing.assert_close(w.detach(), torch.tensor([[3.0 - 0.06, 4.0 - 0.08]]))
    torch.testing.assert_close(b.detach(), torch.tensor([0.5]))


def tiny_cfg(**kw):
    return from_dict({**preset("smoke").to_dict(), "host": "orco", "base_epochs": 2, "base_images_per_class": 6,
                      "val_fraction": 0.02, "novel_val_per_class": 3, "sessions": 2, "finetune_epochs": 2,
                      "threads": 1, "orco.pretrain_epochs": 1, "orco.session_epochs": 2, "orco.target_steps": 50,
                      "orco.proj_hidden": 64, "orco.proj_dim": 32, **kw})


def test_options_are_checked_with_one_line_errors():
    with pytest.raises(ConfigError, match="unknown orco.reserve 'some'; valid choices: all, full"):
        from_dict({"host": "orco", "orco.reserve": "some"}).validate()
    with pytest.raises(ConfigError, match="orco.pretrain_views must be >= 2"):
        from_dict({"host": "orco", "orco.pretrain_views": 1}).validate()
    with pytest.raises(ConfigError, match="orco.simclr_weight must be in"):
        from_dict({"host": "orco", "orco.simclr_weight": 2.0}).validate()
    cfg = tiny_cfg(**{"orco.reserve": "full", "orco.proj_dim": 16})
    with pytest.raises(ConfigError, match="orco.reserve=full gives 16 targets"):
        get_host("orco")(cfg, build_data(cfg), None)


def test_phases_follow_the_options():
    cfg = tiny_cfg()
    data = build_data(cfg)
    phases = get_host("orco")(cfg, data, None).phases()
    assert [(p.name, p.epochs, p.select) for p in phases] == [("pretrain", 1, False), ("align", 2, True)]
    cfg = tiny_cfg(**{"orco.pretrain_epochs": 0})
    assert [p.name for p in get_host("orco")(cfg, data, None).phases()] == ["align"]  # CUB200: no phase 1


@pytest.mark.slow  # three tiny trials: ~50 s on the 2-core CPU with other jobs (each re-embeds every val/test image per session)
def test_tiny_run_with_and_without_adbs_is_reproducible():
    cfg = tiny_cfg()
    data = build_data(cfg)
    runs = {v: run_trial(cfg.replace(variant=v), data=data) for v in ("baseline", "adb+ic")}
    again = run_trial(cfg.replace(variant="adb+ic"), data=data)
    assert again.sessions == runs["adb+ic"].sessions and again.boundaries == runs["adb+ic"].boundaries
    for r in runs.values():
        assert [s["n_classes"] for s in r.sessions] == [60, 65, 70]
        assert all(s["test_acc"] == s["test_acc"] for s in r.sessions)  # finite
    assert set(runs["baseline"].boundaries[-1]) == {1.0}
    assert runs["adb+ic"].boundaries[-1][60:] != runs["adb+ic"].boundaries[-1][:1] * 10


def test_too_few_targets_for_the_classes_is_refused_before_any_trial(tmp_path, capsys):
    """reserve=full makes one target per projector dimension: 8 cannot cover the 100 classes. The preflight of the
    run and of its dry run (Config.validate: Host.check_dataset) refuse it; before, every trial failed."""
    import sys

    from tests.helpers.scripts import in_process

    flags = ["--preset", "smoke", "--host", "orco", "--orco.reserve", "full", "--orco.proj-dim", "8",
             "--out", str(tmp_path / "o.json")]
    for extra in (["--dry-run"], []):
        r = in_process(capsys, [sys.executable, "-m", "adbs.run", *flags, *extra], cwd=tmp_path)
        assert r.returncode == 2, (extra, r.stderr[-2000:])
        assert ("orco.reserve=full gives 8 targets (one per orco.proj_dim) for the 100 classes of dataset synthetic"
                in r.stderr) and "Traceback" not in r.stderr and "base epoch" not in r.stdout
    with pytest.raises(ConfigError, match="raise orco.proj_dim to at least 100 or use orco.reserve=all"):
        from_dict({"host": "orco", "orco.reserve": "full", "orco.proj_dim": 8}).validate()
    from_dict({"host": "orco", "orco.reserve": "full", "orco.proj_dim": 100}).validate()
