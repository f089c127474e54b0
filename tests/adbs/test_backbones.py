"""Tests for adbs.backbones: every registry entry, the registry rules, local pretrained loading."""

from __future__ import annotations

import pytest
import torch
import torchvision
from torch import nn

from adbs.backbones import BACKBONES, create_backbone, load_pretrained, register_backbone

# Expected feature sizes of the paper's backbones (docs/protocols.md, "Benchmarks").
EXPECTED_OUT_DIM = {"convnet": 128, "resnet12": 640, "resnet18": 512, "resnet20": 64}

# (name, batch, size): 32x32 for every entry, plus miniImageNet's 84x84 for resnet12.
SHAPES = [(name, 4, 32) for name in BACKBONES] + [("resnet12", 2, 84)]


def _build(name: str, seed: int = 0) -> nn.Module:
    torch.manual_seed(seed)
    return create_backbone(name)


@pytest.fixture(autouse=True, scope="module")
def _few_threads():
    # The test machine has 2 shared cores.
    before = torch.get_num_threads()
    torch.set_num_threads(min(2, before))
    yield
    torch.set_num_threads(before)


@pytest.mark.parametrize(("name", "batch", "size"), SHAPES, ids=[f"{n}-{s}px" for n, _, s in SHAPES])
def test_forward_backward(name: str, batch: int, size: int):
    model = _build(name)
    assert isinstance(model.out_dim, int)
    if name in EXPECTED_OUT_DIM:
        assert model.out_dim == EXPECTED_OUT_DIM[name]
    x = torch.randn(batch, 3, size, size, generator=torch.Generator().manual_seed(1))
    out = model(x)
    assert out.shape == (batch, model.out_dim)
    assert out.dtype == torch.float32
    assert torch.isfinite(out).all()
    out.square().mean().backward()
    grads = [p.grad for p in model.parameters() if p.requires_grad]
    assert grads and all(g is not None and torch.isfinite(g).all() for g in grads)
    assert any(g.abs().sum() > 0 for g in grads)


@pytest.mark.parametrize("name", list(BACKBONES))
def test_same_seed_same_model_and_output(name: str):
    x = torch.randn(2, 3, 32, 32, generator=torch.Generator().manual_seed(1))
    a, b = _build(name, seed=3), _build(name, seed=3)
    for (ka, va), (kb, vb) in zip(a.state_dict().items(), b.state_dict().items(), strict=True):
        assert ka == kb and torch.equal(va, vb), ka
    assert torch.equal(a(x), b(x))
    assert not torch.equal(_build(name, seed=4)(x), a(x))


@pytest.mark.parametrize("name", list(BACKBONES))
def test_channels_last_matches_contiguous(name: str):
    # The GPU trainer converts model and inputs to channels_last.
    model = _build(name).eval()
    x = torch.randn(2, 3, 32, 32, generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        ref = model(x)
        model = model.to(memory_format=torch.channels_last)
        out = model(x.to(memory_format=torch.channels_last))
    assert out.shape == ref.shape
    torch.testing.assert_close(out, ref, rtol=1e-4, atol=1e-5)


def test_no_classifier_head():
    for name in BACKBONES:
        model = _build(name)
        assert not any(isinstance(m, nn.Linear) for m in model.modules()), name


def test_register_duplicate_raises():
    with pytest.raises(ValueError, match="already registered"):
        register_backbone("convnet")(lambda: nn.Identity())
    assert BACKBONES["convnet"].__name__ == "convnet"  # the original entry is untouched


def test_register_new_name():
    try:

        @register_backbone("_test_identity")
        def _identity() -> nn.Module:
            m = nn.Flatten()
            m.out_dim = 3
            return m

        assert create_backbone("_test_identity") is not None
        with pytest.raises(ValueError, match="already registered"):
            register_backbone("_test_identity")(_identity)
    finally:
        BACKBONES.pop("_test_identity", None)


def test_unknown_name_lists_choices():
    with pytest.raises(ValueError, match="unknown backbone 'resnet50'") as e:
        create_backbone("resnet50")
    for name in BACKBONES:
        assert name in str(e.value)


def test_resnet18_matches_torchvision_keys():
    # Same parameter names as torchvision's resnet18 minus fc, so ImageNet files load as is.
    ours = set(create_backbone("resnet18").state_dict())
    theirs = {k for k in torchvision.models.resnet18(weights=None).state_dict() if not k.startswith("fc.")}
    assert ours == theirs


def test_resnet18_pretrained_round_trip(tmp_path):
    # A torchvision-style ImageNet state_dict, fc included (it must be ignored).
    torch.manual_seed(7)
    source = torchvision.models.resnet18(weights=None)
    with torch.no_grad():
        for p in source.parameters():
            p.add_(0.01)
        source.bn1.running_mean.fill_(0.5)
    path = tmp_path / "resnet18_imagenet.pth"
    torch.save(source.state_dict(), path)

    torch.manual_seed(0)
    model = create_backbone("resnet18", pretrained=str(path))
    loaded = model.state_dict()
    for k, v in source.state_dict().items():
        if not k.startswith("fc."):
            assert torch.equal(loaded[k], v), k

    x = torch.randn(2, 3, 32, 32)
    source.fc = nn.Identity()
    with torch.no_grad():
        torch.testing.assert_close(model.eval()(x), source.eval()(x))


def test_pretrained_checkpoint_wrappers(tmp_path):
    # {"params": DataParallel state_dict} as CEC/ADBS save; num_batches_tracked may be absent.
    torch.manual_seed(1)
    source = create_backbone("resnet20")
    state = {f"module.{k}": v for k, v in source.state_dict().items() if not k.endswith("num_batches_tracked")}
    path = tmp_path / "ckpt.pth"
    torch.save({"params": state}, path)
    model = create_backbone("resnet20", pretrained=path)
    for k, v in source.state_dict().items():
        assert torch.equal(model.state_dict()[k], v), k


def test_pretrained_missing_file(tmp_path):
    missing = tmp_path / "nope.pth"
    with pytest.raises(FileNotFoundError, match="nope.pth.*never download"):
        create_backbone("resnet18", pretrained=str(missing))


def test_pretrained_key_mismatch(tmp_path):
    path = tmp_path / "resnet20.pth"
    torch.save(create_backbone("resnet20").state_dict(), path)
    with pytest.raises(ValueError, match="does not match backbone ResNet18.*missing keys.*unexpected keys"):
        create_backbone("resnet18", pretrained=path)

    # Same keys, wrong shapes: a uniformly 64-wide convnet into the default (32, 32, 64, 128).
    path = tmp_path / "convnet64.pth"
    torch.save(create_backbone("convnet", channels=(64, 64, 64, 64)).state_dict(), path)
    shapes = r"16 shape mismatches \[features.0.weight: file \(64, 3, 3, 3\) vs model \(32, 3, 3, 3\)"
    with pytest.raises(ValueError, match=f"does not fit backbone ConvNet: {shapes}"):
        create_backbone("convnet", pretrained=path)


def test_pretrained_not_a_state_dict(tmp_path):
    path = tmp_path / "list.pth"
    torch.save([1, 2, 3], path)
    with pytest.raises(ValueError, match="does not hold a state_dict"):
        load_pretrained(create_backbone("convnet"), path)


def test_convnet_signed_is_the_convnet_without_its_last_relu():
    # Same parameters as convnet (its weights load as they are); only the feature layer's sign differs.
    torch.manual_seed(0)
    relu = create_backbone("convnet").eval()
    signed = create_backbone("convnet_signed").eval()
    signed.load_state_dict(relu.state_dict())
    with torch.no_grad():
        bn = signed.features[-3]
        bn.bias.fill_(-1.0)  # push pre-activations below zero
        relu.features[-3].bias.fill_(-1.0)
        x = torch.randn(8, 3, 32, 32, generator=torch.Generator().manual_seed(2))
        a, b = relu(x), signed(x)
    assert (a >= 0).all() and (b < 0).any()
    assert (a >= b - 1e-6).all()  # ReLU commutes with the max-pool, so the mean of ReLU'd values is never lower
    with pytest.raises(ValueError, match="last_activation"):
        create_backbone("convnet", last_activation="gelu")
