"""A dataset of one's own (docs/datasets.md, examples/toy_dataset.py): registered by a module named in the
config (`--dataset MODULE:NAME`), so a single run and every trial of a study read it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from adbs.config import ConfigError
from adbs.overrides import from_dict
from adbs.data import DATASETS, READERS, DataError, DatasetSpec, check_data, register_dataset

REPO = Path(__file__).resolve().parents[1]
EXAMPLES = REPO / "examples"


@pytest.fixture(scope="module")
def toy_root(tmp_path_factory):
    sys.path.insert(0, str(EXAMPLES))
    import toy_dataset

    root = tmp_path_factory.mktemp("data")
    toy_dataset.write(root)
    yield root
    # leave the registry as other tests expect it (tests/test_data.py lists the built-in datasets)
    sys.path.remove(str(EXAMPLES))
    sys.modules.pop("toy_dataset", None)
    DATASETS.pop("toy", None)
    READERS.pop("toy", None)


def _env():
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(EXAMPLES), str(REPO)])}


def test_module_colon_name_registers_and_checks_the_dataset(toy_root):
    cfg = from_dict({"dataset": "toy_dataset:toy", "data_root": str(toy_root), "sessions": 2}).validate()
    check_data(cfg)  # the layout, the classes, the protocol: before any compute
    with pytest.raises(DataError, match="does not hold the toy layout: .* lacks toy/; expected DATA_ROOT/toy/ holding "
                                        "train.npz, test.npz"):
        check_data(cfg.replace(data_root=str(toy_root.parent)))


def test_a_module_that_cannot_be_imported_or_registers_nothing_is_one_line(toy_root):
    root = str(toy_root)
    with pytest.raises(ConfigError, match="cannot import module 'no_such_module'.*on PYTHONPATH"):
        from_dict({"dataset": "no_such_module:toy", "data_root": root}).validate()
    with pytest.raises(ConfigError, match="module 'json' registers no dataset 'nope'"):
        from_dict({"dataset": "json:nope", "data_root": root}).validate()
    with pytest.raises(ConfigError, match="toys"):
        from_dict({"dataset": "toys", "data_root": root}).validate()


def test_register_dataset_checks_what_a_reader_needs():
    spec = DatasetSpec(name="nofolder", num_classes=4, base_classes=2, default_ways=1, default_shots=1, image_size=8,
                       mean=(0.5, 0.5, 0.5), std=(0.5, 0.5, 0.5), train_transform="none", test_transform="none",
                       download_hint="-")
    with pytest.raises(DataError, match="a reader needs DatasetSpec.folder"):
        register_dataset(spec, reader=lambda spec, folder: None)
    with pytest.raises(DataError, match="'cifar100' is already registered"):
        register_dataset(DatasetSpec(**{**spec.__dict__, "name": "cifar100"}))


@pytest.mark.slow
def test_a_single_run_on_the_registered_dataset(toy_root, tmp_path):
    out = tmp_path / "run.json"
    r = subprocess.run([sys.executable, "-m", "adbs.run", "--dataset", "toy_dataset:toy", "--data-root", str(toy_root),
                        "--preset", "smoke", "--quiet", "--out", str(out)], capture_output=True, text=True, timeout=600,
                       env=_env(), cwd=tmp_path)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    res = json.loads(out.read_text())
    assert res["config"]["dataset"] == "toy_dataset:toy"
    assert [s["n_classes"] for s in res["sessions"]] == [10, 15, 20]


@pytest.mark.slow
def test_a_study_on_the_registered_dataset(toy_root, tmp_path):
    """The trials run in Ray's worker processes: they import the module from the config themselves."""
    storage = tmp_path / "runs"
    r = subprocess.run([sys.executable, str(REPO / "studies" / "ablation.py"), "--smoke", "--dataset",
                        "toy_dataset:toy", "--data-root", str(toy_root), "--max-concurrent", "1",
                        "--storage", str(storage), "--tracking-uri",
                        f"sqlite:///{tmp_path / 'mlflow.db'}"], capture_output=True, text=True, timeout=900,
                       env=_env(), cwd=tmp_path)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert "3 trials (3 complete, 0 pruned, 0 failed)" in r.stdout, r.stdout[-3000:]
