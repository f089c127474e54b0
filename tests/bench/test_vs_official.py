"""bench/vs_official.py (the package bench/side_by_side/): the side-by-side check against the authors'
released code.

Unit tests (fast): patches (each applied exactly once, clear errors), the input checks (before any
compute), the benchmark writer (bytes, index lists, both codes' loaders), both parsers, the CI arithmetic,
the commands, the report. The end-to-end run on the CPU (both codes trained at tiny settings through the
tool's own command) is marked slow; a GPU variant is marked gpu.

Tests that need the authors' code use ../shared/reference/adbs-official (or $ADBS_OFFICIAL) and skip
without it: its code is never copied into this repository, so no fixture holds its text.
"""

from __future__ import annotations

import importlib.util
import json
import math
import os
import pickle
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from adbs_lab.stats.intervals import mean_t

REPO = Path(__file__).resolve().parents[2]
OFFICIAL = Path(os.environ.get("ADBS_OFFICIAL", REPO.parent / "shared" / "reference" / "adbs-official"))
needs_official = pytest.mark.skipif(not (OFFICIAL / "models" / "adbs" / "fscil_trainer.py").is_file(),
                                    reason=f"the authors' ADBS code is not at {OFFICIAL} (set ADBS_OFFICIAL)")


sys.path.insert(0, str(REPO / "bench"))
import side_by_side as sbs  # noqa: E402  (bench/vs_official.py's package, one module a step: sbs.<module>.<name>)

for _module in ("cli", "commands", "data", "logs", "patches", "report", "reuse", "run", "stats"):
    importlib.import_module(f"side_by_side.{_module}")


@pytest.fixture
def released_copy(tmp_path: Path) -> Path:
    d = tmp_path / "released"
    sbs.patches.copy_released(OFFICIAL, d)
    return d


def _files(root: Path) -> dict[str, str]:
    return {f: (root / f).read_text() for f in sbs.patches.RELEASED_FILES}


# --- patches --------------------------------------------------------------------------------------------------


@needs_official
@pytest.mark.parametrize("device,sessions", [("cuda", 8), ("cpu", 8), ("cpu", 2)])
def test_every_patch_applies_exactly_once(released_copy: Path, device: str, sessions: int):
    before = _files(released_copy)
    patches = sbs.patches.released_patches(device, sessions)
    sbs.patches.apply_patches(released_copy, patches)
    after = _files(released_copy)
    names = {p.name for p in patches}
    assert {"md5-train", "md5-meta", "numpy2", "print-epoch", "print-base", "print-session"} <= names
    assert ("cpu-device" in names) == ("cpu-workers" in names) == (device == "cpu")
    assert ("sessions" in names) == (sessions != 8)
    for p in patches:
        assert before[p.file].count(p.old) == p.count, p.describe()
        assert after[p.file].count(p.new) == before[p.file].count(p.new) + p.count, p.describe()  # once per site
    for f in sbs.patches.RELEASED_FILES:  # the patched files still compile; nothing outside the listed files changed
        compile(after[f], f, "exec")
        if f not in {p.file for p in patches}:
            assert after[f] == before[f]
    if device == "cpu":  # every CUDA call of the code the run executes is gone
        for f in ("models/adbs/fscil_trainer.py", "models/adbs/helper.py", "models/adbs/Network.py",
                  "models/resnet12.py"):
            assert "cuda" not in after[f], f
        assert "num_workers=8" not in after["dataloader/data_utils.py"]
    if sessions != 8:
        assert f"args.sessions = {1 + sessions}" in after["dataloader/data_utils.py"]
    # the original checkout is never touched
    assert _files(OFFICIAL) == before


@needs_official
def test_patching_twice_is_refused(released_copy: Path):
    sbs.patches.apply_patches(released_copy, sbs.patches.released_patches("cpu", 8))
    snapshot = _files(released_copy)
    with pytest.raises(sbs.patches.PatchError, match="already patched"):
        sbs.patches.apply_patches(released_copy, sbs.patches.released_patches("cpu", 8))
    assert _files(released_copy) == snapshot


@needs_official
def test_a_missing_patch_target_is_a_clear_error_and_writes_nothing(released_copy: Path):
    f = released_copy / "models/adbs/fscil_trainer.py"
    f.write_text(f.read_text().replace("self.model.mode = 'avg_cos'", "self.model.mode = 'something_else'"))
    snapshot = _files(released_copy)
    with pytest.raises(sbs.patches.PatchError) as e:
        sbs.patches.apply_patches(released_copy, sbs.patches.released_patches("cuda", 8))
    msg = str(e.value)
    assert "patch print-base" in msg and "models/adbs/fscil_trainer.py" in msg and "found 0" in msg
    assert "a09f41e" in msg
    assert _files(released_copy) == snapshot  # checked before any file is written


def test_the_patches_are_data(monkeypatch, tmp_path: Path):
    """patches.yaml: the groups chosen by device and sessions, the session count filled in, a bad entry named."""
    names = [p.name for p in sbs.patches.released_patches("cuda", 8)]
    assert names == ["md5-train", "md5-meta", "numpy2", "print-epoch", "print-base", "print-session"]
    cpu = sbs.patches.released_patches("cpu", 3)
    assert [p.name for p in cpu].count("cpu-device") == 7 and cpu[-1].name == "sessions"
    assert "args.sessions = 4  # vs_official: --sessions 3" in cpu[-1].new and "-> 4 (base + 3" in cpu[-1].why
    assert all("$" not in p.old + p.new + p.why for p in cpu)
    bad = tmp_path / "patches.yaml"
    bad.write_text("always:\n  - {name: x, file: y, find: a, put: b, count: 1}\n")
    monkeypatch.setattr(sbs.patches, "PATCH_FILE", bad)
    with pytest.raises(ValueError, match=r"the entry 'x' has keys .*expected \['count', 'file', 'find', 'name', "
                                         r"'put', 'why'\]"):
        sbs.patches.released_patches("cuda", 8)


def test_patches_on_a_tree_that_is_not_the_released_code(tmp_path: Path):
    for f in sbs.patches.RELEASED_FILES:
        (tmp_path / f).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / f).write_text("# another FSCIL code base\n")
    (tmp_path / "train.py").write_text("parser.add_argument('-margin')  # models.%s.fscil_trainer\n")
    sbs.patches.check_released_checkout(tmp_path)  # the files are there ...
    with pytest.raises(sbs.patches.PatchError, match=r"patch md5-train: expected 1 occurrence\(s\).*cifar\.py, found 0"):
        sbs.patches.apply_patches(tmp_path, sbs.patches.released_patches("cuda", 8))  # ... but not the released code


def test_checkout_checks(tmp_path: Path):
    with pytest.raises(sbs.ToolError, match="no such folder"):
        sbs.patches.check_released_checkout(tmp_path / "nowhere")
    (tmp_path / "file").write_text("x")
    with pytest.raises(sbs.ToolError, match="not a folder"):
        sbs.patches.check_released_checkout(tmp_path / "file")
    with pytest.raises(sbs.ToolError, match="is not the ADBS code: it lacks train.py"):
        sbs.patches.check_released_checkout(REPO)  # this project is not the authors' code


# --- input checks: before any compute -----------------------------------------------------------------------


def _main_error(capsys, tmp_path: Path, *argv: str) -> str:
    out = tmp_path / "out"
    t0 = time.monotonic()
    rc = sbs.cli.main([*argv, "--out", str(out)])
    err = capsys.readouterr().err
    assert rc == 2, err
    assert time.monotonic() - t0 < 30
    assert not out.exists()  # failed before it made anything
    return err


def test_bad_inputs_fail_before_any_compute(capsys, tmp_path: Path):
    off = str(OFFICIAL)
    assert "no such folder" in _main_error(capsys, tmp_path, "--official", str(tmp_path / "missing"))
    assert "is not the ADBS code" in _main_error(capsys, tmp_path, "--official", str(REPO))
    if not (OFFICIAL / "train.py").is_file():
        return
    cpu = ("--official", off, "--device", "cpu")
    assert "treats seed 0 as 'no seed'" in _main_error(capsys, tmp_path, *cpu, "--seeds", "0", "1")
    assert "a seed is repeated" in _main_error(capsys, tmp_path, *cpu, "--seeds", "2", "2")
    assert "--epochs 0" in _main_error(capsys, tmp_path, *cpu, "--epochs", "0")
    assert "--sessions 9" in _main_error(capsys, tmp_path, *cpu, "--sessions", "9")
    assert "--train-per-class 3" in _main_error(capsys, tmp_path, *cpu, "--train-per-class", "3")
    assert "--test-per-class 101" in _main_error(capsys, tmp_path, *cpu, "--test-per-class", "101")
    assert "--synthetic-version 4" in _main_error(capsys, tmp_path, *cpu, "--synthetic-version", "4")
    assert "set by the tool (--seeds)" in _main_error(capsys, tmp_path, *cpu, "--ours-set", "seed=4")
    assert "unknown config key 'alhpa'" in _main_error(capsys, tmp_path, *cpu, "--ours-set", "alhpa=0.1")
    assert "must be a bool" in _main_error(capsys, tmp_path, *cpu, "--ours-set", "amp=maybe")
    assert "expected KEY=VALUE" in _main_error(capsys, tmp_path, *cpu, "--ours-set", "amp")
    assert "--released-only runs no ours" in _main_error(capsys, tmp_path, *cpu, "--released-only", "--ours-set",
                                                         "amp=false")
    assert "no vs_official.json there" in _main_error(capsys, tmp_path, *cpu, "--released-from", str(tmp_path))
    import torch

    if not torch.cuda.is_available():
        err = _main_error(capsys, tmp_path, "--official", off)  # --device cuda is the default
        assert "torch sees no CUDA GPU" in err and "--device cpu" in err


# --- the benchmark writer ------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def written(tmp_path_factory) -> tuple[Path, dict]:
    root = tmp_path_factory.mktemp("bench")
    info = sbs.data.write_benchmark(root, version=2, synthetic_seed=0, train_per_class=30, test_per_class=7, split_seed=3)
    return root, info


def test_written_pickles_hold_the_embedded_benchmark_bytes(written):
    from adbs.data.synthetic import synthetic_pools

    root, info = written
    train, test = synthetic_pools(0, 2)
    for split, pool, k in (("train", train, 30), ("test", test, 7)):
        with open(root / "cifar-100-python" / split, "rb") as fh:
            d = pickle.load(fh, encoding="latin1")
        labels = np.asarray(pool.labels)
        keep = np.concatenate([np.flatnonzero(labels == c)[:k] for c in range(100)])
        assert d["data"].dtype == np.uint8 and d["data"].shape == (100 * k, 3072)
        assert d["data"].tobytes() == pool.images.numpy()[keep].tobytes()
        assert d["fine_labels"] == labels[keep].tolist() == np.repeat(np.arange(100), k).tolist()
    with open(root / "cifar-100-python" / "meta", "rb") as fh:
        assert len(pickle.load(fh)["fine_label_names"]) == 100
    assert info["train_images"] == 3000 and info["test_images"] == 700
    assert info["sha256"]["train"] == sbs.data._sha256(root / "cifar-100-python" / "train")


def test_index_lists_follow_the_projects_protocol(written):
    from adbs.data import build_data
    from adbs.config import from_dict

    root, _ = written
    lists = {t: [int(v) for v in (root / "lists" / f"session_{t}.txt").read_text().split()] for t in range(1, 10)}
    assert lists[1] == list(range(60 * 30))  # every base image, as the released CIFAR loader trains on
    for t in range(2, 10):
        idx = np.array(lists[t])
        assert len(idx) == 25 and len(set(idx)) == 25
        assert sorted(set((idx // 30).tolist())) == list(range(60 + 5 * (t - 2), 65 + 5 * (t - 2)))  # 5 ways
        assert np.bincount(idx // 30).max() == 5  # 5 shots each
    # the shots are the ones our seeded protocol draws itself (same split_seed, default validation sizes)
    seeded = build_data(from_dict({"dataset": "cifar100", "data_root": str(root), "split_seed": 3}))
    for t in range(1, 9):
        assert seeded.sessions[t].train.tolist() == lists[t + 1]
    # ... and what ours reads from the lists: the same shots, base = session_1 minus the validation carve-out
    listed = build_data(from_dict({"dataset": "cifar100", "data_root": str(root), "index_list": str(root / "lists")}))
    base = listed.sessions[0]
    assert sorted(base.train.tolist() + base.val.tolist()) == lists[1]
    assert len(base.val) == 60 * round(0.05 * 30)
    for t in range(1, 9):
        assert listed.sessions[t].train.tolist() == lists[t + 1]


@pytest.mark.slow
@needs_official
def test_the_released_loader_reads_the_written_benchmark(written, tmp_path: Path):
    """The patched copy's own CIFAR100 class (md5 and numpy-2 patches) on the written pickles and lists."""
    root, _ = written
    copy = tmp_path / "released"
    sbs.patches.copy_released(OFFICIAL, copy)
    sbs.patches.apply_patches(copy, sbs.patches.released_patches("cpu", 8))
    code = f"""
import numpy as np
from adbs_lab.stats.intervals import mean_t
import dataloader.cifar100.cifar as C
root = {str(root)!r}
tr = C.CIFAR100(root=root, train=True, download=True, index=np.arange(60), base_sess=True)
te = C.CIFAR100(root=root, train=False, download=False, index=np.arange(60), base_sess=True)
print(len(tr), len(te), sorted(set(tr.targets.tolist())) == list(range(60)))
for t in range(2, 10):
    lines = open(root + '/lists/session_%d.txt' % t).read().splitlines()
    s = C.CIFAR100(root=root, train=True, download=False, index=lines, base_sess=False)
    assert sorted(set(s.targets.tolist())) == list(range(60 + 5 * (t - 2), 65 + 5 * (t - 2))), t
    assert len(s) == 25 and np.bincount(s.targets).max() == 5, t
print('sessions ok')
"""
    r = subprocess.run([sys.executable, "-c", code], cwd=copy, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.split()[-5:] == ["1800", "420", "True", "sessions", "ok"]


# --- parsers ----------------------------------------------------------------------------------------------------

# A released train.py log as the patched copy writes it (stdout and stderr together; tqdm redraws with \r).
RELEASED_LOG = (
    "manual seed: 1\n{'auto_augment': [],\n 'milestones': [60, 70],\n 'num_crops': [1, 1],\n 'test_batch_size': 100}\n"
    "use gpu: [0]\nnew classes for this session:\n [ 0  1  2  3\n 4  5 58 59]\n"
    "\r  0%|          | 0/19 [00:00<?, ?it/s]\rSession 0, epo 0, lrc=0.1000,total loss=4.2181 acc=0.0000:   5%|"
    "▌         | 1/19 [00:04<01:21,  4.52s/it]\r\n"
    "epo 0, test, loss=4.8092 acc=0.0283\n"
    'VS_EPOCH {"epoch": 0, "train_s": 74.7, "test_s": 1.25, "negative": 6, "test_acc": 2.8333}\n'
    "best epoch 0, best test acc=2.833\nThis epoch takes 76 seconds \n"
    'VS_EPOCH {"epoch": 1, "train_s": 70.1, "test_s": 1.5, "negative": 9, "test_acc": 4.5}\n'
    "epo 0, test, loss=7.0211 acc=0.0133\n"
    "VS_BASE_MARGINS [0.5, -0.25, 1.0, -2.0]\nVS_SESSION_ACC 0 1.333333303531011\n"
    "training session: [1]\n  test acc=1.333\nVS_SESSION_ACC 1 1.333333303531011\n"
    "VS_SESSION_MARGINS 1 [0.5, -0.25, 1.0, -2.0, 0.1]\n"
    "training session: [2]\n  test acc=1.100\nVS_SESSION_ACC 2 1.1\nVS_SESSION_MARGINS 2 [0.5, -0.25, 1.0, -2.0, 0.1, 0.2]\n"
    "[4.5, 1.333, 1.1]\nBase Session Best epoch: 1\nTotal time used 1.62 mins\n"
)


def test_parse_released_log():
    r = sbs.logs.parse_released_log(RELEASED_LOG)
    assert r["sessions"] == [4.5, 1.333, 1.1] and r["sessions_source"] == "trlog['max_acc']"
    assert r["s0_carried"] == pytest.approx(1.3333333)
    assert r["base_margins"] == [0.5, -0.25, 1.0, -2.0] and r["negative_base"] == 2
    assert r["base_abs_mean"] == pytest.approx(0.9375)
    assert [e["epoch"] for e in r["epochs"]] == [0, 1] and r["epochs"][1]["train_s"] == 70.1
    assert r["session_margins"][2][-1] == 0.2 and r["total_min"] == 1.62


def test_parse_released_log_without_the_final_list_and_from_the_gpu_compare_kit():
    cut = RELEASED_LOG[: RELEASED_LOG.index("[4.5, 1.333")]  # a run that died before the end
    assert sbs.logs.parse_released_log(cut)["sessions"] == pytest.approx([1.3333, 1.3333, 1.1], abs=1e-3)
    kit = ("EPOCH_TRAIN_S 0 12.5 MARGIN_MEAN 0.9 NEG 3\nEPOCH_TRAIN_S 1 11.5 MARGIN_MEAN 0.8 NEG 14\n"
           "MARGINS_BASE [0.9, -0.1, 1.2]\n  test acc=78.080\n  test acc=72.500\n[84.58, 78.08, 72.5]\n")
    r = sbs.logs.parse_released_log(kit)
    assert r["sessions"] == [84.58, 78.08, 72.5] and r["negative_base"] == 1
    assert r["epochs"] == [{"epoch": 0, "train_s": 12.5, "negative": 3}, {"epoch": 1, "train_s": 11.5, "negative": 14}]
    assert sbs.logs.parse_released_log(kit.replace("[84.58, 78.08, 72.5]\n", ""))["sessions"] == [78.08, 72.5]


def _ours_json(accs=(80.0, 70.0, 60.0), base_m=(1.0, -0.5, 0.25)) -> dict:
    from adbs.state import TrialResult

    return TrialResult(
        config={"amp": True, "val_fraction": 0.05, "alpha": 0.01},
        base_curve=[{"epoch": 1, "epoch_time_s": 3.0, "boundary_negative": 0, "val_acc": 50.0},
                    {"epoch": 2, "epoch_time_s": 2.0, "boundary_negative": 1, "val_acc": 60.0}],
        sessions=[{"session": t, "test_acc": a} for t, a in enumerate(accs)],
        boundaries=[list(base_m), [*base_m, 0.3]], summary={"best_base_epoch": 2, "wall_time_s": 9.5},
    ).to_dict()


def test_parse_ours_result():
    r = sbs.logs.parse_ours_result(json.loads(json.dumps(_ours_json())))
    assert r["sessions"] == [80.0, 70.0, 60.0] and r["negative_base"] == 1
    assert r["base_abs_mean"] == pytest.approx(1.75 / 3) and r["best_base_epoch"] == 2
    assert [e["epoch_s"] for e in r["epochs"]] == [3.0, 2.0]
    bad = _ours_json()
    del bad["boundaries"]
    with pytest.raises(sbs.ToolError, match="python -m adbs.run --out"):
        sbs.logs.parse_ours_result(bad)


# --- statistics ---------------------------------------------------------------------------------------------------


def test_welch_ci_matches_scipy():
    from scipy import stats

    a, b = [65.17, 64.61, 59.60], [67.02, 66.55, 63.84, 66.0]
    d, h = sbs.stats.welch_ci95(a, b)
    ci = stats.ttest_ind(b, a, equal_var=False).confidence_interval(0.95)
    assert d == pytest.approx(np.mean(b) - np.mean(a))
    assert (d - h, d + h) == pytest.approx((ci.low, ci.high), rel=1e-9)
    assert math.isnan(sbs.stats.welch_ci95([1.0], [1.0, 2.0])[1])
    assert sbs.stats.welch_ci95([2.0, 2.0], [3.0, 3.0]) == (1.0, 0.0)


def test_summarize():
    released = [{"sessions": [80.0, 60.0]}, {"sessions": [82.0, 58.0]}, {"sessions": [78.0, 62.0]}]
    ours = [{"sessions": [81.0, 70.0]}, {"sessions": [83.0, 71.0]}, {"sessions": [79.0, 69.0]}]
    rows = {r["figure"]: r for r in sbs.stats.summarize(released, ours)}
    assert list(rows) == ["s0", "s1", "avg", "PD"]
    assert rows["s0"]["released_mean"] == 80.0 and rows["s0"]["diff"] == pytest.approx(1.0)
    assert rows["s0"]["released_ci95"] == pytest.approx(mean_t([80.0, 82.0, 78.0])[1])
    assert rows["s0"]["within_noise"] is True and rows["s1"]["within_noise"] is False
    assert rows["avg"]["ours_mean"] == pytest.approx(np.mean([75.5, 77.0, 74.0]))
    assert rows["PD"]["released_mean"] == pytest.approx(20.0) and rows["PD"]["ours_mean"] == pytest.approx(11.0)
    one = sbs.stats.summarize(released[:1], ours[:1])
    assert one[0]["within_noise"] is None and math.isnan(one[0]["diff_ci95"])


def test_negative_counts_after_epoch_one_and_the_base_session():
    rel = sbs.logs.parse_released_log(RELEASED_LOG)
    assert sbs.stats.negative_counts(rel) == {"epoch1": 6, "base": 2}  # VS_EPOCH of epoch 0; VS_BASE_MARGINS
    ours = sbs.logs.parse_ours_result(_ours_json(base_m=(1.0, -0.5, -0.25)))
    assert sbs.stats.negative_counts(ours) == {"epoch1": 0, "base": 2}  # base curve's first epoch; carried boundaries
    kit = sbs.logs.parse_released_log("EPOCH_TRAIN_S 0 12.5\nMARGINS_BASE [0.9, -0.1]\n[84.58]\n")  # no NEG logged
    assert sbs.stats.negative_counts(kit) == {"epoch1": None, "base": 1}


def test_summarize_negatives():
    def runs(first, base):
        return [{"epochs": [{"negative": f}, {"negative": 99}], "negative_base": b} for f, b in zip(first, base)]

    released, ours = runs([9, 12, 15, 11], [14, 15, 16, 13]), runs([5, 6, 8], [8, 9, 10])
    rows = {r["figure"]: r for r in sbs.stats.summarize_negatives(released, ours)}
    assert list(rows) == ["epoch1", "base"]
    e1 = rows["epoch1"]
    assert e1["released"] == [9, 12, 15, 11] and e1["ours"] == [5, 6, 8]  # the first epoch's count, not a later one
    assert (e1["released_mean"], e1["released_ci95"]) == pytest.approx(mean_t([9, 12, 15, 11]))
    assert (e1["ours_mean"], e1["ours_ci95"]) == pytest.approx(mean_t([5, 6, 8]))
    assert (e1["diff"], e1["diff_ci95"]) == pytest.approx(sbs.stats.welch_ci95([9, 12, 15, 11], [5, 6, 8]))
    assert e1["diff"] == pytest.approx(19 / 3 - 47 / 4) and e1["within_noise"] is False
    assert rows["base"]["n_released"] == 4 and rows["base"]["n_ours"] == 3
    same = {r["figure"]: r for r in sbs.stats.summarize_negatives(released, runs([10, 14, 11, 12], [13, 16, 14, 15]))}
    assert same["epoch1"]["within_noise"] is True and same["base"]["within_noise"] is True
    # a run whose epoch count was not logged is left out of that figure, not counted as 0
    kit = [{"epochs": [{"train_s": 1.0}], "negative_base": 3}]
    one = {r["figure"]: r for r in sbs.stats.summarize_negatives(kit, runs([4], [5]))}
    assert one["epoch1"]["released"] == [] and math.isnan(one["epoch1"]["released_mean"])
    assert one["base"]["released"] == [3] and one["base"]["within_noise"] is None


# --- reusing released runs (--released-from) --------------------------------------------------------------------


def _earlier(tmp_path: Path, **changes) -> Path:
    folder = tmp_path / "earlier"
    folder.mkdir(exist_ok=True)
    args = {"epochs": 1, "sessions": 1, "device": "cpu", "synthetic_version": 1, "synthetic_seed": 0, "split_seed": 0,
            "train_per_class": 30, "test_per_class": 4, **changes}
    released = [{"seed": s, "sessions": [50.0 + s, 40.0], "negative_base": s, "epochs": [{"negative": s}],
                 "wall_s": 10.0} for s in (1, 2, 3)]
    (folder / "vs_official.json").write_text(json.dumps({"args": args, "released": released,
                                                          "data": {"sha256": {"train": "aa", "test": "bb"}}}))
    return folder


def _ns(**kw):
    import argparse

    base = {"epochs": 1, "sessions": 1, "device": "cpu", "synthetic_version": 1, "synthetic_seed": 0, "split_seed": 0,
            "train_per_class": 30, "test_per_class": 4, "seeds": [3, 1]}
    return argparse.Namespace(**{**base, **kw})


def test_released_from_takes_the_earlier_runs_of_the_seeds_asked_for(tmp_path: Path):
    reused = sbs.reuse.load_released_runs(_earlier(tmp_path), _ns())
    assert [r["seed"] for r in reused["runs"]] == [3, 1] and reused["runs"][0]["sessions"] == [53.0, 40.0]
    assert reused["folder"] == str((tmp_path / "earlier").resolve())
    sbs.reuse.check_reused_data(reused, {"sha256": {"train": "aa", "test": "bb"}})
    with pytest.raises(sbs.ToolError, match="its data differ from the data written now"):
        sbs.reuse.check_reused_data(reused, {"sha256": {"train": "aa", "test": "cc"}})


def test_released_from_refuses_runs_it_cannot_reuse(tmp_path: Path):
    with pytest.raises(sbs.ToolError, match="no vs_official.json there"):
        sbs.reuse.load_released_runs(tmp_path, _ns())
    with pytest.raises(sbs.ToolError, match=r"--epochs 2 \(there: 1\); --train-per-class 20 \(there: 30\)"):
        sbs.reuse.load_released_runs(_earlier(tmp_path), _ns(epochs=2, train_per_class=20))
    with pytest.raises(sbs.ToolError, match=r"--synthetic-version 2 \(there: 1\)"):
        sbs.reuse.load_released_runs(_earlier(tmp_path), _ns(synthetic_version=2))
    with pytest.raises(sbs.ToolError, match="no released run of seed\\(s\\) 4 5 there \\(it has 1 2 3\\)"):
        sbs.reuse.load_released_runs(_earlier(tmp_path), _ns(seeds=[1, 4, 5]))
    (tmp_path / "earlier" / "vs_official.json").write_text("{}")
    with pytest.raises(sbs.ToolError, match="is not this tool's output"):
        sbs.reuse.load_released_runs(tmp_path / "earlier", _ns())


# --- commands, differences, report ---------------------------------------------------------------------------


def test_released_command_is_the_readme_command_with_the_schedule():
    cmd = sbs.commands.released_command("python", Path("/d"), seed=2, epochs=8, device="cuda")
    s = " ".join(cmd)
    for part in ("train.py -project adbs -dataset cifar100 -dataroot /d -base_mode ft_cos -new_mode avg_cos",
                 "-lr_base 0.1 -lr_new 0.01 -decay 0.0005 -epochs_base 8 -schedule Cosine", "-margin", "-seed 2",
                 "-num_crops 1 1 -size_crops 32 32"):
        assert part in s
    assert "-num_workers" not in s
    assert sbs.commands.released_command("python", Path("/d"), seed=2, epochs=8, device="cpu")[-2:] == ["-num_workers", "0"]


def test_ours_command_resolves_to_the_intended_config(tmp_path: Path):
    from adbs.config import PRESETS, cli, coerce, from_dict
    from adbs.run import build_parser

    data = {"data_root": str(tmp_path), "index_list": str(tmp_path / "lists")}
    ours_set = sbs.commands.parse_ours_set(["amp=true", "val-fraction=0.02", "milestones=3,5"])
    ov = sbs.commands.ours_overrides(data, seed=3, epochs=2, device="cpu", sessions=2, ours_set=ours_set)
    cmd = sbs.commands.ours_command("python", ov, tmp_path / "o.json")
    assert cmd[:5] == ["python", "-m", "adbs.run", "--preset", "cifar100"]
    args = build_parser().parse_args(cmd[3:])
    cfg = from_dict({**PRESETS["cifar100"], **{k: coerce(k, v) for k, v in cli.overrides(args).items()}})
    assert (cfg.dataset, cfg.backbone, cfg.variant, cfg.seed, cfg.base_epochs, cfg.sessions) == \
           ("cifar100", "resnet12", "adb+ic", 3, 2, 2)
    assert cfg.amp is True and cfg.val_fraction == 0.02 and cfg.milestones == (3, 5) and cfg.device == "cpu"
    assert cfg.index_list == str(tmp_path / "lists") and cfg.base_images_per_class is None
    assert "sessions" not in sbs.commands.ours_overrides(data, seed=1, epochs=1, device="cpu", sessions=8, ours_set={})


def test_config_differences_name_what_departs_from_the_released_run():
    from adbs.config import PRESETS, from_dict

    cfg = from_dict({**PRESETS["cifar100"], "base_epochs": 8}).to_dict()
    gpu = sbs.commands.config_differences(cfg, "cuda")
    assert any("95% of the base images" in d for d in gpu)
    assert len(gpu) == 1  # the cifar100 preset is otherwise the released run's settings (fp32: amp is off)
    assert any("bf16 autocast" in d for d in sbs.commands.config_differences({**cfg, "amp": True}, "cuda"))
    assert not any("bf16" in d for d in sbs.commands.config_differences({**cfg, "amp": True}, "cpu"))
    cfg.update(alpha=0.05, boundary_lr_scale=0.1, amp=False)
    d = sbs.commands.config_differences(cfg, "cuda")
    assert "alpha=0.05 (released: 0.01)" in d and "boundary_lr_scale=0.1 (released: 1.0)" in d
    assert not any("bf16" in x for x in d)


def test_format_report():
    released = [{"seed": s, "sessions": [80.0 + s, 60.0], "negative_base": 10 + s, "base_abs_mean": 1.5,
                 "s0_carried": 79.0, "epochs": [{"train_s": 2.0, "test_s": 0.5}], "wall_s": 100.0} for s in (1, 2)]
    ours = [{"seed": s, "sessions": [81.0, 62.0 + s], "negative_base": 5, "base_abs_mean": 1.2,
             "epochs": [{"epoch_s": 1.5}], "wall_s": 50.0} for s in (1, 2)]
    res = {"args": {"device": "cuda", "epochs": 8, "sessions": 1, "seeds": [1, 2], "jobs": 2, "official": "/x"},
           "device_name": "NVIDIA H200", "data": {"synthetic_version": 2, "synthetic_seed": 0, "train_per_class": 150,
                                                  "test_per_class": 100, "split_seed": 0},
           "released": released, "ours": ours, "summary": sbs.stats.summarize(released, ours),
           "differences": ["amp differs"], "patches": [p.describe() for p in sbs.patches.released_patches()], "wall_s": 200.0}
    text = sbs.report.format_report(res)
    assert "device cuda (NVIDIA H200), 8 base epochs, 1 incremental sessions, seeds 1 2" in text
    assert "    s0    81.50 ±  6.35    81.00 ±   n/a" not in text  # two seeds: a CI, not n/a
    assert "    s0    81.50 ±  6.35    81.00 ±  0.00    -0.50 ±  6.35  within noise" in text
    assert "    PD    21.50 ±  6.35    17.50 ±  6.35    -4.00 ±  3.04  DIFFERS" in text
    assert "per seed: released 11 12 (mean 11.5) | ours 5 5 (mean 5)" in text
    assert "released train 2.00 + test 0.50 | ours train + validation pass 1.50" in text
    assert "  - amp differs" in text and "print-session" in text and "-num_crops 1 1 -size_crops 32 32" in text
    assert "negative base boundaries (of 60) across seeds" in text
    assert "after the base session  released  11.50 ±  6.35  ours   5.00 ±  0.00  diff  -6.50 ±  6.35  DIFFERS" \
           "  (per seed: released 11 12 | ours 5 5)" in text
    assert "after base epoch 1" not in text  # the runs above logged no per-epoch count
    assert "reused" not in text
    res["released_from"] = "/earlier"
    assert "released runs reused from /earlier" in sbs.report.format_report(res)
    alone = {**res, "ours": [], "summary": sbs.stats.summarize(released, []), "differences": [], "released_from": None}
    text = sbs.report.format_report(alone)  # --released-only
    assert "ours not run, --released-only" in text and "per seed: released 11 12 | ours -" in text


# --- running: progress, failures, timeouts ----------------------------------------------------------------------


def _job(tmp_path: Path, code: str, script: str, seed: int = 1) -> "sbs.run.Job":
    return sbs.run.Job(code, seed, [sys.executable, "-c", script], tmp_path, tmp_path / f"{code}-{seed}.log")


def test_progress_lines_are_echoed_while_a_run_runs(tmp_path: Path, capsys):
    script = ("import sys, time\nprint('VS_EPOCH {\"epoch\": 0, \"train_s\": 1.5, \"test_s\": 0.25, \"negative\": 3, "
              "\"test_acc\": 50.0}', flush=True)\nsys.stderr.write('noise\\r50%|###\\r\\n')\n"
              "print('VS_SESSION_ACC 1 42.5')\n")
    wall = sbs.run.run_job(_job(tmp_path, "released", script), env=dict(os.environ), timeout=None, stop=threading.Event())
    out = capsys.readouterr().out
    assert "[released seed 1] base epoch 1: test 50.00%  m<0: 3  train 1.5s test 0.2s" in out
    assert "[released seed 1] session 1: test 42.50%" in out and "noise" not in out
    assert f"[released seed 1] done in {wall:.1f}s" in out
    ours = "print('base epoch 1/2  loss 4.1'); print('session  classes   val_acc'); print('session 0: 60 classes')"
    sbs.run.run_job(_job(tmp_path, "ours", ours), env=dict(os.environ), timeout=None, stop=threading.Event())
    out = capsys.readouterr().out
    assert "[ours seed 1] base epoch 1/2  loss 4.1" in out and "[ours seed 1] session 0: 60 classes" in out
    assert "session  classes" not in out  # the table header is not a progress line


def test_a_failing_run_shows_the_tail_of_its_log_and_stops_the_rest(tmp_path: Path):
    bad = _job(tmp_path, "released", "import sys; print('step 1'); sys.exit('Traceback: boom')")
    later = _job(tmp_path, "ours", "print('never')", seed=2)
    with pytest.raises(sbs.ToolError) as e:
        sbs.run.run_all([bad, later], n_parallel=1, envs={"released": dict(os.environ), "ours": dict(os.environ)},
                   timeout=None)
    msg = str(e.value)
    assert "released seed 1 failed (exit status 1)" in msg and "    | step 1" in msg and "    | Traceback: boom" in msg
    assert "not started" not in msg and not later.log.exists()


def test_runs_in_parallel_stop_when_one_fails(tmp_path: Path):
    slow = _job(tmp_path, "ours", "import time; print('started', flush=True); time.sleep(60)")
    bad = _job(tmp_path, "released", "import time, sys; time.sleep(1.5); sys.exit('Traceback: boom')")
    t0 = time.monotonic()
    with pytest.raises(sbs.ToolError) as e:
        sbs.run.run_all([slow, bad], n_parallel=2, envs={"released": dict(os.environ), "ours": dict(os.environ)},
                   timeout=None)
    assert time.monotonic() - t0 < 30  # the sleeping run was killed, not waited for
    assert "released seed 1 failed" in str(e.value) and "stopped" not in str(e.value)


def test_a_run_past_its_timeout_is_killed(tmp_path: Path):
    t0 = time.monotonic()
    with pytest.raises(sbs.ToolError, match="killed after --timeout 1s"):
        sbs.run.run_job(_job(tmp_path, "ours", "import time; print('started', flush=True); time.sleep(60)"),
                   env=dict(os.environ), timeout=1, stop=threading.Event())
    assert time.monotonic() - t0 < 20


# --- end to end ---------------------------------------------------------------------------------------------------


def _run_tool(tmp_path: Path, *extra: str, timeout: int) -> tuple[subprocess.CompletedProcess, Path, float]:
    out = tmp_path / "out"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    t0 = time.monotonic()
    r = subprocess.run([sys.executable, str(REPO / "bench" / "vs_official.py"), "--official", str(OFFICIAL),
                        "--out", str(out), *extra], capture_output=True, text=True, timeout=timeout, env=env)
    return r, out, time.monotonic() - t0


def _check_outputs(r: subprocess.CompletedProcess, out: Path, seeds: list[int], sessions: int) -> dict:
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    res = json.loads((out / "vs_official.json").read_text())
    for code in ("released", "ours"):
        assert [x["seed"] for x in res[code]] == seeds
        for x in res[code]:
            assert len(x["sessions"]) == sessions + 1 and all(0 <= v <= 100 for v in x["sessions"])
            assert 0 <= x["negative_base"] <= 60 and len(x["base_margins"]) == 60
            assert x["epochs"] and x["wall_s"] > 0
        for s in seeds:
            assert (out / f"{code}-seed{s}.log").is_file()
    assert [r_["figure"] for r_ in res["summary"]] == [f"s{t}" for t in range(sessions + 1)] + ["avg", "PD"]
    for f in ("runs.csv", "summary.csv", "report.txt", "data.json"):
        assert (out / f).is_file(), f
    text = r.stdout
    for s in ("patches applied (each exactly once)", "numpy2", "md5-train", "print-epoch",
              "[released seed 1] base epoch 1:", "[ours seed 1] base epoch 1/", "ours - released",
              "negative base boundaries (of 60) after the base session", "base epoch time (s"):
        assert s in text, s
    assert (out / "report.txt").read_text().strip() in text
    return res


@needs_official
@pytest.mark.slow
def test_end_to_end_on_cpu_at_tiny_settings(tmp_path: Path):
    """Both codes trained through the tool on the CPU: 1 base epoch on 6 images per class, 1 incremental session.

    100-210 s on this project's 2-core machine shared with other work (released 67-82 s, ours 30-85 s). val_fraction=0.2
    keeps one validation image per base class for ours at 6 images per class (and exercises --ours-set).
    """
    r, out, wall = _run_tool(tmp_path, "--device", "cpu", "--epochs", "1", "--train-per-class", "6",
                             "--test-per-class", "2", "--sessions", "1", "--seeds", "1",
                             "--ours-set", "val_fraction=0.2", timeout=600)
    res = _check_outputs(r, out, [1], 1)
    assert "cpu-device" in r.stdout and "cpu-workers" in r.stdout and "sessions " in r.stdout
    assert res["released"][0]["sessions_source"] == "trlog['max_acc']" and res["released"][0]["s0_carried"] is not None
    assert any("80% of the base images" in d for d in res["differences"])
    assert "changed with --ours-set: val_fraction=0.2" in res["differences"]
    assert res["ours"][0]["config"]["val_fraction"] == 0.2 and res["ours"][0]["config"]["device"] == "cpu"
    assert not Path(res["data"]["data_root"]).parent.exists()  # the temporary copy and data are gone
    print(f"tiny CPU run: {wall:.0f}s wall")


@needs_official
@pytest.mark.gpu
@pytest.mark.skipif(not __import__("torch").cuda.is_available(), reason="needs a CUDA GPU")
def test_end_to_end_on_gpu(tmp_path: Path):
    """The GPU path at short settings: 2 seeds, 2 base epochs, all 8 sessions, two runs at a time, no cpu-* patches."""
    r, out, wall = _run_tool(tmp_path, "--epochs", "2", "--seeds", "1", "2", "--jobs", "2", timeout=900)
    res = _check_outputs(r, out, [1, 2], 8)
    assert "cpu-device" not in r.stdout and res["device_name"]
    assert not any("bf16 autocast" in d for d in res["differences"])  # amp is off by default (fp32 + TF32)
    print(f"GPU run: {wall:.0f}s wall")


# --- bench/lockstep.py: the released base step against ours, same weights and batches ------------------------------


def _load_lockstep():
    spec = importlib.util.spec_from_file_location("lockstep", REPO / "bench" / "lockstep.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules["lockstep"] = mod
    spec.loader.exec_module(mod)
    return mod


def test_lockstep_renames_the_released_encoder_into_ours():
    from torch import zeros

    from adbs.backbones import create_backbone

    ls = _load_lockstep()
    ours = create_backbone("resnet12").state_dict()
    # the released MYNET's names: encoder.layerK.0.<name>, plus parts ours has no counterpart of
    released = {f"encoder.{k.split('.', 1)[0]}.0.{k.split('.', 1)[1]}": v for k, v in ours.items()}
    released.update({"encoder.fc.weight": zeros(10, 640), "encoder.downsample_layer.0.weight": zeros(1),
                     "fc.weight": zeros(100, 640), "margin": zeros(100)})
    mapped = ls.released_encoder_to_ours(released)
    assert set(mapped) == set(ours) and all(mapped[k] is released[f"encoder.{k.split('.', 1)[0]}.0.{k.split('.', 1)[1]}"]
                                            for k in ours)
    with pytest.raises(ValueError, match="unexpected key in the released encoder: encoder.stem.weight"):
        ls.released_encoder_to_ours({"encoder.stem.weight": zeros(1)})


def test_lockstep_verdict_tells_rounding_from_a_structural_difference():
    ls = _load_lockstep()

    def rows(*dm, signs=()):
        return [{"step": t, "max_abs_dm": d, "sign_differs": int(t in signs)} for t, d in enumerate(dm, 1)]

    assert ls.verdict(rows(0.0, 0.0, 0.0), 1e-5) == ("same, bit for bit", True)
    said, same = ls.verdict(rows(0.0, 0.0, 6e-8, 1e-4, 2e-3, signs=(5,)), 1e-5)
    assert same and said == ("same up to float32 rounding: equal through step 2, then |dm| 6.0e-08 at step 3 "
                             "growing to 2.0e-03 by step 5 (signs differ at 1 step)")
    # e.g. weight decay missing on m: 0.1 x 1.9 x 5e-4 x 1 ~ 1e-4 off at the first step
    assert ls.verdict(rows(9.5e-5, 2e-4), 1e-5) == ("DIFFERS from step 1 (|dm| 9.5e-05, above rounding)", False)
    assert not ls.verdict(rows(0.0, 3e-5), 1e-5)[1]


@pytest.mark.slow
@needs_official
def test_lockstep_the_released_encoder_loaded_into_ours_computes_the_same_features(released_copy: Path):
    """Strict loading (every key of ours, nothing left over) and the same forward pass, bit for bit in NCHW."""
    sbs.patches.apply_patches(released_copy, sbs.patches.released_patches("cpu", 8))
    code = f"""
import sys, torch
sys.path.insert(0, {str(REPO)!r}); sys.path.insert(0, {str(REPO / 'bench')!r})
import lockstep
from models.resnet12 import resnet12
from adbs.backbones import create_backbone
torch.manual_seed(0)
enc = resnet12()
ours = create_backbone('resnet12')
ours.load_state_dict(lockstep.released_encoder_to_ours({{'encoder.' + k: v for k, v in enc.state_dict().items()}}))
x = torch.randn(8, 3, 32, 32)
for train in (True, False):
    enc.train(train); ours.train(train)
    f, _ = enc(x)
    print(torch.equal(torch.nn.functional.adaptive_avg_pool2d(f, 1).flatten(1), ours(x)))
"""
    r = subprocess.run([sys.executable, "-c", code], cwd=released_copy, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.split() == ["True", "True"]


@needs_official
@pytest.mark.slow
def test_lockstep_two_steps_are_the_same_function(tmp_path: Path, capsys):
    """Two base steps of each code from the same weights on the same batches: m, rows and backbone equal (NCHW).

    60-150 s on this project's shared 2-core machine."""
    ls = _load_lockstep()
    rc = ls.main(["--official", str(OFFICIAL), "--steps", "2", "--out", str(tmp_path)])
    out = capsys.readouterr().out
    assert rc == 0, out
    res = json.loads((tmp_path / "lockstep.json").read_text())
    # The same function: bit for bit, or apart by float32 rounding only (the two codes multiply T, |m| and the
    # cosine in another order, which rounds differently on some machines from the second step on); a
    # structural difference would depart by an update's size (>= 1e-5) at the step where it first acts.
    assert res["verdict"].startswith(("same, bit for bit", "same up to float32 rounding")), res["verdict"]
    assert [r["step"] for r in res["rows"]] == [1, 2]
    assert all(r["max_abs_dm"] <= 1e-6 and r["sign_differs"] == 0 for r in res["rows"])
    assert res["rows"][0]["max_abs_dm"] == 0.0  # the first step: the same arithmetic on the same numbers
    assert res["head_diff"] <= 1e-5 and res["backbone_diff"] <= 1e-5 and res["lr_diff"] == 0.0
    assert res["rows"][-1]["m_mean_released"] < 1.0  # m did train
    assert f"verdict (tol 1e-05): {res['verdict']}" in out and "schedule epoch1, ours in NCHW" in out
