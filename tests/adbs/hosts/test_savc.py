"""SAVC (adbs/hosts/savc.py): its contrastive loss, joint labels and test-time rule on hand-worked cases."""

import math

import pytest
import torch
import torch.nn.functional as F

from adbs.config import from_dict, preset
from adbs.data import build_data
from adbs.hosts import get_host
from adbs.hosts.interface import Head, copy_average, copy_means, joint_labels
from adbs.hosts.savc import fantasy, small_crop_keys, supcon_queue_loss
from adbs.runtime import Runtime


def test_supcon_with_queue_by_hand():
    """Positives: the key and the queued keys of the same label; an empty slot (-1) is a negative."""
    q = torch.tensor([[1.0, 0.0]])
    k = torch.tensor([[1.0, 0.0]])
    queue = torch.tensor([[0.0, 1.0], [-1.0, 0.0], [1.0, 0.0]])
    queue_labels = torch.tensor([3, 5, -1])
    loss = supcon_queue_loss(q, k, torch.tensor([3]), queue, queue_labels, temperature=1.0)
    # logits [1 (key), 0 (label 3), -1 (label 5), 1 (empty)]; positives l = 1 and 0, negatives -1 and 1
    by_hand = 0.5 * (math.log(1 + math.exp(-1 - 1) + math.exp(1 - 1)) + math.log(1 + math.exp(-1 - 0) + math.exp(1 - 0)))
    assert loss.item() == pytest.approx(by_hand, rel=1e-6)
    # plain InfoNCE (CE with the key as the only positive) is another number: the queue's labels matter
    infonce = F.cross_entropy(torch.tensor([[1.0, 0.0, -1.0, 1.0]]), torch.tensor([0]))
    assert loss.item() != pytest.approx(infonce.item(), rel=1e-3)


def test_supcon_uses_joint_labels_and_temperature():
    """A queued key of the same class under the other fantasy copy is a negative (joint label y * M + j)."""
    q = k = F.normalize(torch.tensor([[1.0, 1.0]]), dim=1)
    queue = F.normalize(torch.tensor([[1.0, 0.9]]), dim=1)
    y = joint_labels(torch.tensor([4]), 2)[:1]  # class 4, copy 0 -> 8
    same_copy = supcon_queue_loss(q, k, y, queue, torch.tensor([8]), temperature=0.07)
    other_copy = supcon_queue_loss(q, k, y, queue, torch.tensor([9]), temperature=0.07)
    cos = (q @ queue.t()).item()
    t = 0.07
    assert same_copy.item() == pytest.approx(0.5 * (math.log(1) + math.log(1)), abs=1e-6)  # no negatives at all
    assert other_copy.item() == pytest.approx(math.log(1 + math.exp((cos - 1) / t)), rel=1e-5)


def test_fantasy_copies_and_joint_labels():
    x = torch.arange(2 * 3 * 2 * 2, dtype=torch.float32).view(2, 3, 2, 2)
    f = fantasy(x, "rotation2")
    assert f.shape == (4, 3, 2, 2)
    assert torch.equal(f[0], x[0]) and torch.equal(f[1], torch.rot90(x[0], 2, (1, 2))) and torch.equal(f[2], x[1])
    assert joint_labels(torch.tensor([3, 0]), 2).tolist() == [6, 7, 0, 1]
    f12 = fantasy(x, "rot_color_perm12")
    assert f12.shape == (24, 3, 2, 2) and torch.equal(f12[1], x[0][[1, 2, 0]])


def test_test_time_average_over_fantasy_copies_by_hand():
    """Class c's score is the mean over copies j of copy j's logit for row c * M + j."""
    a = [1.0, 2.0, 3.0, 4.0]  # copy 0's logits for rows (c0,j0) (c0,j1) (c1,j0) (c1,j1)
    b = [10.0, 20.0, 30.0, 40.0]  # copy 1's
    scores = copy_average(torch.tensor([[a, b]]))
    assert scores.tolist() == [[(1.0 + 20.0) / 2, (3.0 + 40.0) / 2]]
    host = get_host("savc")
    assert torch.equal(host.predict(None, torch.tensor([[a, b]])), scores)


def test_rows_per_copy():
    f = torch.tensor([[[1.0, 0.0], [0.0, 1.0]], [[3.0, 0.0], [0.0, 3.0]], [[5.0, 5.0], [7.0, 7.0]]])  # (3, 2 copies, 2)
    rows = copy_means(f, torch.tensor([0, 0, 1]), [0, 1])
    assert rows.tolist() == [[2.0, 0.0], [0.0, 2.0], [5.0, 5.0], [7.0, 7.0]]  # class-major, copy-minor


@pytest.fixture(scope="module")
def tiny():
    cfg = from_dict({**dict(preset("smoke", base_images_per_class=4, threads=1).to_dict()), "host": "savc",
                     "savc.queue_size": 16, "savc.small_crops": 1})
    return cfg, build_data(cfg)


def test_base_step_is_ce_plus_contrastive_terms_and_fills_the_queue(tiny):
    cfg, data = tiny
    torch.manual_seed(0)
    rt = Runtime(cfg)
    host = get_host("savc")(cfg, data, rt)
    model = host.build(rt.module(__import__("adbs.backbones", fromlist=["x"]).create_backbone(cfg.backbone)))
    head = Head(model.head, torch.ones(len(model.head)), host.scale)
    x = torch.randn(6, 3, 32, 32)
    y = torch.tensor([0, 1, 2, 0, 1, 2])
    with_contrast = host.base_step(model, head, x, y, torch.Generator().manual_seed(1))
    assert model.queue_labels[:12].tolist() == joint_labels(y, 2).tolist()  # keys enqueued with joint labels
    assert (model.queue_labels[12:] == -1).all()
    # the same step with both contrastive weights at 0 is CE on the joint labels alone
    host.opt.global_weight, host.opt.small_weight = 0.0, 0.0
    model.queue_labels.fill_(-1)
    model.queue_ptr.zero_()
    ce_only = host.base_step(model, head, x, y, torch.Generator().manual_seed(1))
    assert with_contrast.loss.item() > ce_only.loss.item()  # the contrastive terms are positive
    assert ce_only.scores.shape == (6, data.base_classes)


def test_small_crops_meet_their_own_copys_key_or_savcs_pairing_by_hand():
    # 1 image, 2 small crops, 2 copies: crops listed (crop 0 copy 0, crop 0 copy 1, crop 1 copy 0, crop 1 copy 1)
    assert small_crop_keys(1, 2, 2, "copy").tolist() == [0, 1, 0, 1]
    # SAVC's reshape: rows of 2 crops against key rows 0 (copy 0) and 1 (copy 1): half meet the other copy
    assert small_crop_keys(1, 2, 2, "official").tolist() == [0, 0, 1, 1]
    assert small_crop_keys(2, 1, 2, "copy").tolist() == [0, 1, 2, 3]


def test_queue_is_a_ring_of_keys_with_their_labels():
    from adbs.hosts.savc import SAVCModel

    backbone = torch.nn.Linear(3, 3)
    backbone.out_dim = 3
    model = SAVCModel(backbone, torch.nn.Parameter(torch.zeros(2, 3)), proj_dim=2, queue_size=3)
    keys = torch.eye(2)[[0, 1, 0, 1, 0]]
    model.enqueue(keys[:2], torch.tensor([7, 8]))
    model.enqueue(keys[2:4], torch.tensor([9, 10]))  # wraps: slot 2, then slot 0
    assert model.queue_labels.tolist() == [10, 8, 9] and int(model.queue_ptr) == 1
    model.enqueue(torch.eye(2)[[0, 1, 0, 1]], torch.tensor([1, 2, 3, 4]))  # more keys than slots: the last 3
    assert sorted(model.queue_labels.tolist()) == [2, 3, 4] and int(model.queue_ptr) == 2
