"""The data of the paper's feature figures (adbs.metrics.embedding_sample), its compact form in the study's
results (adbs_lab.records.metrics_keys.encode_embeddings) and the two figures drawn from it (adbs_lab.results.figures)."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
import torch
import torch.nn.functional as F

from adbs.metrics import class_separation, embedding_sample
from adbs_lab.results import figures
from adbs_lab.records import metrics_keys
from adbs_lab.results import run_files


def _data(n_classes=20, per_class=8, d=12, seed=0):
    g = torch.Generator().manual_seed(seed)
    labels = torch.arange(n_classes).repeat_interleave(per_class)
    features = torch.randn(len(labels), d, generator=g)
    prototypes = torch.randn(n_classes, d, generator=g)
    return features, labels, prototypes


def test_the_same_evenly_spaced_classes_the_first_images_and_the_cosines():
    f, y, p = _data()
    e = embedding_sample(f, y, p, n_base=12, per_class=5)
    assert e["classes"] == [0, 2, 4, 6, 8, 10, 12, 14, 16, 18]  # 6 of the 12 base, 4 of the 8 novel classes
    assert e["n_base"] == 12 and e["n_seen"] == 20
    assert e["labels"] == [c for c in e["classes"] for _ in range(5)]  # the first 5 test images of each
    cos = F.normalize(p, dim=-1) @ F.normalize(p, dim=-1).t()
    assert np.allclose(e["similarity"], cos.numpy(), atol=1e-4)
    # D_cs from the kept similarities is the trial's D_cs (adbs.metrics.class_separation)
    assert abs(float((1 - np.asarray(e["similarity"])).mean()) - class_separation(p)) < 1e-4
    json.dumps(e)  # plain lists: the result JSON of python -m adbs.run holds it


def test_the_pca_reduction_keeps_the_distances_between_the_normalised_features():
    f, y, p = _data(d=12)
    e = embedding_sample(f, y, p, n_base=12, per_class=8, dims=50)  # 50 >= rank: nothing is discarded
    keep = torch.cat([torch.nonzero(y == c).flatten()[:8] for c in e["classes"]])
    x = F.normalize(f[keep], dim=-1)
    z = torch.tensor(e["features"])
    assert z.shape == (80, 12)
    assert torch.allclose(torch.cdist(z, z), torch.cdist(x, x), atol=1e-3)
    few = embedding_sample(f, y, p, n_base=12, per_class=8, dims=3)
    assert len(few["features"][0]) == 3


def test_fewer_classes_than_asked_and_no_novel_classes():
    f, y, p = _data(n_classes=5)
    e = embedding_sample(f[:40], y[:40], p[:5], n_base=5)
    assert e["classes"] == [0, 1, 2, 3, 4] and e["n_seen"] == 5  # session 0 only: base classes alone


def test_encode_decode_keeps_the_sample_to_float16_precision():
    f, y, p = _data()
    e = embedding_sample(f, y, p, n_base=12, per_class=5)
    text = metrics_keys.encode_embeddings(e)
    back = metrics_keys.decode_embeddings(text)
    assert back["classes"] == e["classes"] and back["labels"] == e["labels"]
    assert np.allclose(back["features"], np.asarray(e["features"]), atol=2e-3)
    assert np.allclose(back["similarity"], np.asarray(e["similarity"]), atol=1e-3)
    assert len(text) < len(json.dumps(e))  # the compact form is what travels in Tune's result


def test_embedding_figures_one_panel_per_row_in_the_study_order(tmp_path):
    f, y, p = _data()
    enc = [metrics_keys.encode_embeddings(embedding_sample(f + 0.1 * k, y, p, n_base=12, per_class=8)) for k in range(3)]
    trials = pd.DataFrame({"state": ["COMPLETE", "COMPLETE", "COMPLETE", "PRUNED"],
                           "label": ["adb+ic", "baseline", "adb+ic", "adb"], "seed": [1, 0, 0, 0],
                           "embeddings": [enc[0], enc[1], enc[2], enc[0]]})
    # private (adbs_lab/results/figures.py): which trial each panel draws, checked without drawing
    rows = figures._embedding_rows(trials, order=["baseline", "adb", "adb+ic"])
    # a pruned trial draws nothing; each row shows its lowest seed, and its panel's title says which
    assert [lab for lab, _ in rows] == ["baseline (seed 0)", "adb+ic (seed 0)"]
    assert np.allclose(rows[1][1]["features"], metrics_keys.decode_embeddings(enc[2])["features"])
    paths = figures.embedding_figures(trials, tmp_path / "figs", order=["baseline", "adb", "adb+ic"])
    assert [x.name for x in paths] == ["tsne.png", "prototype_similarity.png"]
    assert all(x.stat().st_size > 10_000 for x in paths)
    assert figures.embedding_figures(trials.assign(embeddings=None), tmp_path / "none") == []


@pytest.mark.parametrize("study,drawn", [("ablation", True), ("my_study", False)])
def test_only_the_ablation_draws_them(study, drawn, tmp_path):
    f, y, p = _data()
    enc = metrics_keys.encode_embeddings(embedding_sample(f, y, p, n_base=12, per_class=4))
    trials = pd.DataFrame({"state": ["COMPLETE"], "label": ["baseline"], "seed": [0], "embeddings": [enc]})
    sessions = pd.DataFrame({"state": ["COMPLETE"], "label": ["baseline"], "session": [0], "test_acc": [1.0]})
    out = run_files.study_figures(study, sessions, trials, tmp_path)
    assert f"{study}_sessions.png" in {x.name for x in out}
    assert ("tsne.png" in {x.name for x in out}) is drawn
