"""A dataset of one's own (docs/datasets.md, examples/toy_dataset.py): registered by a module named in the
config (`--dataset MODULE:NAME`), so a single run and every trial of a study read it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from adbs.config import ConfigError, from_dict
from adbs.data import DATASETS, READERS, DataError, DatasetSpec, check_data, register_dataset

REPO = Path(__file__).resolve().parents[3]
EXAMPLES = REPO / "examples"


@pytest.fixture(scope="module")
def toy_root(tmp_path_factory):
    sys.path.insert(0, str(EXAMPLES))
    import toy_dataset

    root = tmp_path_factory.mktemp("data")
    toy_dataset.write(root)
    yield root
    # leave the registry as other tests expect it (tests/adbs/data/test_data.py lists the built-in datasets)
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


# --- a dataset of one's own that cannot give a run: refused by the run's preflight, the same in --dry-run -----------

_MODULE = '''
import numpy as np, torch
from pathlib import Path
from adbs.data import CIFAR_MEAN, CIFAR_STD, DatasetSpec, ImagePool, register_dataset

SPEC = DatasetSpec(name="{name}", num_classes=20, base_classes={base}, default_ways=5, default_shots=2, image_size=32,
                   mean=CIFAR_MEAN, std=CIFAR_STD, train_transform="{train}", test_transform="none",
                   download_hint="-", folder="{name}", files=("data.txt",))

def read(spec, folder):
    {body}
    g = np.random.default_rng(0)
    labels = np.repeat(np.arange(20), 20) + {shift}
    images = torch.from_numpy(g.integers(0, 256, (len(labels), 3, {side}, {side}), dtype=np.uint8))
    return ImagePool(labels, images=images, name="train"), ImagePool(labels.copy(), images=images.clone(), name="test")

register_dataset(SPEC, reader=read)
'''


@pytest.fixture
def own_dataset(tmp_path, monkeypatch):
    """make(**kw) writes a module registering dataset `ownN` with the given spec/reader parts and returns the
    adbs.run flags for it; the registry is left as it was."""
    made = []
    monkeypatch.syspath_prepend(str(tmp_path))

    def make(base=10, train="random_crop(32,pad=4)+hflip", body="pass", shift=0, side=32):
        name = f"own{len(made)}_{os.getpid()}"
        (tmp_path / f"{name}.py").write_text(_MODULE.format(name=name, base=base, train=train, body=body, shift=shift,
                                                            side=side))
        (tmp_path / "data" / name).mkdir(parents=True)
        (tmp_path / "data" / name / "data.txt").write_text("x")
        made.append(name)
        return ["--dataset", f"{name}:{name}", "--data-root", str(tmp_path / "data"), "--preset", "smoke",
                "--sessions", "1", "--novel-val-per-class", "1", "--shots", "2", "--out", str(tmp_path / "o.json")]

    yield make
    for name in made:
        sys.modules.pop(name, None)
        DATASETS.pop(name, None)
        READERS.pop(name, None)


def _refused(capsys, flags, fragment):
    """--dry-run and the run both refuse with exit 2 and one line holding `fragment`, before any training."""
    from tests.helpers.scripts import in_process

    for extra in (["--dry-run"], []):
        r = in_process(capsys, [sys.executable, "-m", "adbs.run", *flags, *extra])
        assert r.returncode == 2, (extra, r.returncode, r.stdout[-1500:], r.stderr[-3000:])
        assert fragment in r.stderr and "Traceback" not in r.stderr and "base epoch" not in r.stdout, r.stderr
    return r


def test_the_own_dataset_passes_the_preflight(own_dataset, capsys):
    from tests.helpers.scripts import in_process

    r = in_process(capsys, [sys.executable, "-m", "adbs.run", *own_dataset(), "--dry-run"])
    assert r.returncode == 0 and "dry run:" in r.stdout, r.stderr


def test_a_transform_with_a_bad_part_is_refused(own_dataset, capsys):
    _refused(capsys, own_dataset(train="random_crop(32,pad=4)+flip"),
             "DatasetSpec.train_transform: bad transform 'random_crop(32,pad=4)+flip' (part 'flip')")


def test_images_smaller_than_the_crop_are_refused(own_dataset, capsys):
    _refused(capsys, own_dataset(train="random_crop(32)+hflip", side=24),
             "train_transform 'random_crop(32)+hflip' cannot run on 400 of the 400 training images: random_crop(32) "
             "is larger than the image")


def test_a_reader_that_raises_is_one_line_naming_it(own_dataset, capsys):
    flags = own_dataset(body="raise KeyError('no column named labels')")
    name = flags[1].split(":")[0]
    _refused(capsys, flags, f"the reader of dataset '{name}' ({name}.read) failed on ")
    r = _refused(capsys, flags, "KeyError: 'no column named labels'")
    assert r.stderr.count("\n") == 1


def test_labels_outside_the_classes_are_named_as_such(own_dataset, capsys):
    _refused(capsys, own_dataset(shift=7), "have labels out of range: 140 images with labels 20..26, for 20 classes "
                                           "(labels 0..19)")


def test_more_base_classes_than_classes_is_refused_with_the_spec_field(own_dataset, capsys):
    _refused(capsys, own_dataset(base=30), "DatasetSpec.base_classes=30 is invalid; expected at most num_classes=20")


def test_a_host_that_cannot_make_its_views_with_the_transform_is_refused(own_dataset, capsys):
    flags = own_dataset(train="resize(36)+random_crop(32)")
    _refused(capsys, [*flags, "--host", "savc"], "host savc makes its classification view with the train transform")


def test_a_reader_listing_a_file_twice_or_in_both_pools_is_refused(tmp_path):
    """Every reader's pools (a dataset of one's own reading files): adbs/data/sources.py: check_pools."""
    from adbs.data import ImagePool, get_spec
    from adbs.data.sources import check_pools

    spec = get_spec("cifar100")  # 100 classes; only the counts matter here
    p = lambda *names: [str(tmp_path / n) for n in names]  # noqa: E731
    pool = lambda paths: ImagePool(np.zeros(len(paths), np.int64), paths=paths)  # noqa: E731
    check_pools(spec, tmp_path, pool(p("a.jpg", "b.jpg")), pool(p("c.jpg")))
    with pytest.raises(DataError, match=r"lists 1 training image files more than once \(e.g. a.jpg\)"):
        check_pools(spec, tmp_path, pool(p("a.jpg", "b.jpg", "./a.jpg")), pool(p("c.jpg")))
    with pytest.raises(DataError, match=r"lists 1 files as both training and test images \(e.g. b.jpg\)"):
        check_pools(spec, tmp_path, pool(p("a.jpg", "b.jpg")), pool(p("c.jpg", "b.jpg")))
