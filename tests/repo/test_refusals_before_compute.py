"""Bad input that needs no Ray to refuse: each input ends in a one-line error before any compute
(what is wrong, what is allowed, how to fix it), a correct run, or a line the user cannot miss. Real files,
real MLflow/Optuna SQLite stores in tmp_path and the real command-line entry points; the CLIs run as a user
types them where that is quick."""

from __future__ import annotations

import json
import pickle
import sqlite3
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from tests.helpers.scripts import in_process

from adbs.config import ConfigError, from_dict, resolve
from adbs.data import DataError, check_data
from adbs_lab import study
from adbs_lab.records import metrics_keys as K
from adbs_lab.driver import options
from adbs_lab.stores import tracking_store
from adbs_lab.driver import preflight

REPO = Path(__file__).resolve().parents[2]
PLAN = study.Plan(name="t", space={"variant": "adb+ic"}, space_source="tests")
no_cuda = pytest.mark.skipif(torch.cuda.is_available(), reason="checks a machine without a CUDA GPU")


def _opts(*flags: str) -> options.StudyOptions:
    return options.parse("t", argv=list(flags))[0]


def _cifar(root: Path, train_classes=range(100), test_classes=range(100), per_class: int = 12) -> Path:
    """A CIFAR-100 copy in torchvision's pickle layout holding images of the given classes only."""
    d = root / "cifar-100-python"
    d.mkdir(parents=True)
    rng = np.random.default_rng(0)
    for split, classes, n in (("train", train_classes, per_class), ("test", test_classes, 3)):
        labels = np.repeat(np.asarray(list(classes)), n)
        with open(d / split, "wb") as fh:
            pickle.dump({"data": rng.integers(0, 256, (len(labels), 3072), dtype=np.uint8),
                         "fine_labels": labels.tolist()}, fh)
    return root


def _cifar_cfg(root: Path, **kw):
    return from_dict(resolve("smoke", None, {"dataset": "cifar100", "data_root": str(root), **kw}))


def _adbs_run(capsys, *argv: str):
    """`python -m adbs.run <argv>` in this process (tests/helpers/scripts.py): each of these is refused before training."""
    return in_process(capsys, [sys.executable, "-m", "adbs.run", *argv], cwd=REPO)


# -- data: missing classes, empty index lists, a data root without its dataset ------------------------


def test_a_test_split_without_the_novel_classes_is_refused(tmp_path):
    root = _cifar(tmp_path, test_classes=range(60))
    with pytest.raises(DataError, match=r"the test split of cifar100 at .* has no images of classes 60\.\.69 .*"
                                        r"sessions would be scored on the base classes only"):
        check_data(_cifar_cfg(root))
    check_data(_cifar_cfg(root, sessions=0))  # a base session alone needs only the base classes
    with pytest.raises(study.StudyInputError, match="test split of cifar100"):  # a study: before Ray
        study.validate(PLAN, _opts("--smoke", "--dataset", "cifar100", "--data-root", str(root)))


def test_a_copy_with_20_classes_names_the_missing_classes(tmp_path, capsys):
    root = _cifar(tmp_path, train_classes=range(20), test_classes=range(20))
    with pytest.raises(DataError, match=r"training split of cifar100 at .* has no images of classes 20\.\.69 "
                                        r"\(50 of the 70 classes the sessions use"):
        check_data(_cifar_cfg(root))  # smoke: the 60 base classes and 2 sessions of 5
    r = _adbs_run(capsys, "--preset", "smoke", "--dataset", "cifar100", "--data-root", str(root))
    assert r.returncode == 2 and "has no images of classes 20..69" in r.stderr and "Traceback" not in r.stderr
    assert "round(val_fraction" not in r.stderr


def test_an_empty_session_file_is_a_data_error_not_an_index_error(tmp_path, capsys):
    root = _cifar(tmp_path)
    lists = tmp_path / "lists"
    lists.mkdir()
    (lists / "session_1.txt").write_text("\n".join(str(c * 12 + k) for c in range(60) for k in range(12)))
    (lists / "session_2.txt").write_text("\n\n")
    with pytest.raises(DataError, match=r"session_2.txt is empty; expected one image per line"):
        check_data(_cifar_cfg(root, index_list=str(lists), shots=5, sessions=1))
    r = _adbs_run(capsys, "--preset", "smoke", "--dataset", "cifar100", "--data-root", str(root), "--index-list", str(lists))
    assert r.returncode == 2 and "session_2.txt is empty" in r.stderr and "IndexError" not in r.stderr
    with pytest.raises(study.StudyInputError, match="session_2.txt is empty"):
        study.validate(PLAN, _opts("--smoke", "--dataset", "cifar100", "--data-root", str(root),
                                   "--set", f"index_list={lists}"))


def test_a_data_root_without_its_dataset_is_refused(tmp_path, capsys):
    root = _cifar(tmp_path)
    with pytest.raises(DataError, match="data_root=.* was given for dataset 'synthetic'.*--dataset cifar100"):
        check_data(from_dict(resolve("smoke", None, {"data_root": str(root)})))
    r = _adbs_run(capsys, "--preset", "smoke", "--data-root", str(root))
    assert r.returncode == 2 and "the embedded benchmark, which reads no files" in r.stderr
    with pytest.raises(study.StudyInputError, match="was given for dataset 'synthetic'"):
        study.validate(PLAN, _opts("--smoke", "--data-root", str(root)))


# -- python -m adbs.run ---------------------------------------------------------------------------


def test_old_and_new_name_of_a_flag_together_are_refused(capsys):
    r = _adbs_run(capsys, "--abs-boundary", "true", "--abs-margin", "false")
    assert r.returncode == 2 and "--abs-margin is the old name of --abs-boundary; give only --abs-boundary" in r.stderr


def test_a_host_option_given_twice_is_refused_and_typed_options_add_to_the_preset(capsys):
    r = _adbs_run(capsys, "--host", "savc", "--host-options", '{"queue_size": 512}', "--savc.queue-size", "64")
    assert r.returncode == 2 and "savc.queue_size is given twice" in r.stderr
    # host_options typed by the user adds to (and wins over) the preset's options, as --savc.<option> does
    got = json.loads(resolve("cifar100", None, {"host": "savc", "host_options": '{"queue_size": 512}'})["host_options"])
    assert got == {"queue_size": 512, "small_crops": 4}


def test_a_preset_of_another_host_is_refused():
    with pytest.raises(ConfigError, match="preset savc_cpu is host savc's, but host is alice"):
        resolve("savc_cpu", None, {"host": "alice"})
    assert resolve("savc_cpu", None, {"host": "savc"})["host"] == "savc"


@no_cuda
def test_device_cuda_without_a_gpu_is_refused_before_compute(capsys):
    r = _adbs_run(capsys, "--device", "cuda")
    assert r.returncode == 2 and "device=cuda but torch sees no CUDA GPU" in r.stderr and "base epoch" not in r.stdout
    with pytest.raises(study.StudyInputError, match="device=cuda but torch sees no CUDA GPU"):
        study.validate(PLAN, _opts("--set", "device=cuda"))
    with pytest.raises(study.StudyInputError, match="device=cuda but --gpus-per-trial 0"):
        study.validate(PLAN, _opts("--set", "device=cuda", "--gpus-per-trial", "0"))


# -- study options ------------------------------------------------------------------------------------


@pytest.mark.parametrize("key", ["seed", "split_seed"])
def test_set_seed_beside_seeds_is_refused(key):
    with pytest.raises(study.StudyInputError, match=f"--set {key}=3: a study sets seed and split_seed from --seeds"
                                                    ".*use --seeds 3 instead"):
        study.validate(PLAN, _opts("--seeds", "0", "1", "--set", f"{key}=3"))
    grid = study.Plan(name="t", space={"seed": [1, 2]}, space_source="tests:GRID")
    with pytest.raises(study.StudyInputError, match="search space tests:GRID sets seed"):
        study.validate(grid, _opts())


def test_threads_and_cpus_per_trial_must_agree():
    with pytest.raises(study.StudyInputError, match="--set threads=2 and --cpus-per-trial 1 disagree"):
        study.validate(PLAN, _opts("--set", "threads=2", "--cpus-per-trial", "1", "--gpus-per-trial", "0"))
    study.validate(PLAN, _opts("--set", "threads=2", "--cpus-per-trial", "2", "--gpus-per-trial", "0"))


def test_smoke_keeps_a_host_preset_and_refuses_a_paper_preset():
    base = _opts("--smoke", "--preset", "savc_cpu").base_config()
    assert base["host"] == "savc" and base["base_epochs"] == 2  # savc's smoke run, not the baseline host's
    with pytest.raises(study.StudyInputError, match="--smoke .* cannot shorten --preset cifar100"):
        _opts("--smoke", "--preset", "cifar100").check()
    with pytest.raises(study.StudyInputError, match="--preset savc_cpu is host savc's, but --host is alice"):
        _opts("--smoke", "--preset", "savc_cpu", "--host", "alice").check()


def test_a_300_character_name_is_one_line_error(capsys):
    with pytest.raises(study.StudyInputError, match="--name is 300 characters long; at most 100"):
        _opts("--name", "n" * 300).check()
    r = in_process(capsys, [sys.executable, str(REPO / "studies" / "alpha_sweep.py"), "--smoke", "--name", "n" * 300],
                   cwd="/")
    assert r.returncode == 2 and "at most 100" in r.stderr and "Traceback" not in r.stderr


def test_a_trailing_slash_or_relative_data_root_is_the_same_study(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    a = _opts("--dataset", "cifar100", "--data-root", str(tmp_path / "data")).base_config()
    b = _opts("--dataset", "cifar100", "--data-root", f"{tmp_path / 'data'}/").base_config()
    c = _opts("--dataset", "cifar100", "--data-root", "data").base_config()
    assert a == b == c and a["data_root"] == str(tmp_path / "data")
    # private (adbs_lab/driver/preflight.py): the study's identity that --resume compares
    assert preflight._fingerprint(PLAN, a, [0], 1) == preflight._fingerprint(PLAN, b, [0], 1)  # what --resume compares


def test_the_stop_message_counts_the_trials_that_ended():
    recs = [SimpleNamespace(state=s) for s in (K.COMPLETE, K.INTERRUPTED)]  # 1 ended, 1 stopped, 2 never started
    assert study.ended_count(recs) == 1
    assert study.ended_count([SimpleNamespace(state=s) for s in (K.COMPLETE, K.PRUNED, K.FAILED)]) == 3
    assert study.ended_count([SimpleNamespace(state=K.INTERRUPTED)]) == 0


# -- stores: one tool's database is never handed to the other ------------------------------------------


def _optuna_db(path: Path) -> str:
    import optuna

    url = f"sqlite:///{path}"
    optuna.create_study(study_name="s", storage=url)
    return url


def _tables(path: Path) -> set[str]:
    with sqlite3.connect(path) as con:
        return {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")}


def test_an_optuna_database_is_not_used_as_the_mlflow_store(tmp_path, capsys):
    from adbs_lab.stores import serve

    db = tmp_path / "optuna.db"
    _optuna_db(db)
    before = _tables(db)
    with pytest.raises(tracking_store.TrackingError, match="is an Optuna database, not an MLflow tracking store"):
        tracking_store.check_tracking_uri(f"sqlite:///{db}")
    r = in_process(capsys, [sys.executable, str(REPO / "mlflow" / "serve.py"), "--backend-store-uri",
                            f"sqlite:///{db}", "--artifacts-destination", str(tmp_path / "a"), "--port", "1"])
    assert r.returncode == 2 and "is an Optuna database" in r.stderr and "MLflow UI:" not in r.stdout
    assert _tables(db) == before  # no MLflow tables added
    mlflow_db = tmp_path / "mlflow.db"
    tracking_store.check_tracking_uri(f"sqlite:///{mlflow_db}")
    with pytest.raises(study.StudyInputError, match="is an MLflow tracking store, not an Optuna storage"):
        study.preflight(PLAN, _opts("--optuna-storage", f"sqlite:///{mlflow_db}", "--gpus-per-trial", "0",
                                    "--storage", str(tmp_path / "runs"), "--tracking-uri", f"sqlite:///{mlflow_db}"))
    assert serve.main(["--backend-store-uri", f"sqlite:///{mlflow_db}", "--dry-run"]) == 0


def test_serve_refuses_a_bogus_store_or_a_path_under_a_file_before_printing_its_url(tmp_path, capsys):
    blocker = tmp_path / "a-file"
    blocker.write_text("x")
    for uri, msg in ((f"sqlite:///{blocker}/sub/mlflow.db", "cannot create the folder"),
                     ("bogus://nowhere", "cannot open it"),
                     (f"sqlite:///{blocker}", "is not a SQLite database"),
                     (f"sqlite:///{tmp_path / 'ok.db'}", "--artifacts-destination")):
        dest = blocker / "artifacts" if uri.endswith("ok.db") else tmp_path / "a"  # a folder under a file
        r = in_process(capsys, [sys.executable, str(REPO / "mlflow" / "serve.py"), "--backend-store-uri", uri,
                                "--artifacts-destination", str(dest), "--port", "1"])
        assert r.returncode == 2 and msg in r.stderr, (uri, r.stderr)
        assert "Traceback" not in r.stderr and "MLflow UI:" not in r.stdout


def test_the_ui_command_names_a_storage_path_with_spaces_as_a_path():
    cmd = tracking_store.ui_command("sqlite:////tmp/my runs/mlflow.db")
    assert "'/tmp/my runs/artifacts'" in cmd and "%20" not in cmd


# -- --out of the tools: checked before the work ---------------------------------------------------


def test_report_out_an_existing_file(tmp_path, capsys):
    f = tmp_path / "report.txt"
    f.write_text("keep me")
    r = in_process(capsys, [sys.executable, str(REPO / "studies" / "report.py"), "any_study", "--out", str(f),
                            "--tracking-uri", f"sqlite:///{tmp_path / 'none.db'}"], cwd="/")
    assert r.returncode == 2 and f"--out {f} is a file; pass a folder" in r.stderr and "Traceback" not in r.stderr
    assert f.read_text() == "keep me"


def test_gpu_bench_out_an_existing_file_and_max_per_gpu_are_checked_before_measuring(tmp_path, capsys, monkeypatch):
    sys.path.insert(0, str(REPO / "bench"))
    import gpu as bench

    monkeypatch.setattr(bench, "step_alone", lambda *a, **k: pytest.fail("the benchmark started"))
    f = tmp_path / "gpu.json"
    f.write_text("{}")
    for args, msg in ((["--out", str(f)], f"--out {f} is a file"),
                      (["--max-per-gpu", "-1"], "--max-per-gpu must be >= 1"),
                      (["--max-per-gpu", "0"], "--max-per-gpu must be >= 1")):
        with pytest.raises(SystemExit):
            bench.main(["--device", "cpu", "--quick", *args])
        assert msg in capsys.readouterr().err


# -- report.py on a study that is still running ---------------------------------------------------


def _store_with(tmp_path: Path, parent_status: str) -> str:
    from mlflow.entities import Metric, Param
    from mlflow.tracking import MlflowClient

    from adbs.config import Config

    uri = f"sqlite:///{tmp_path / parent_status / 'mlflow.db'}"
    (tmp_path / parent_status).mkdir()
    c = MlflowClient(uri)
    exp = c.create_experiment("alpha_sweep")
    parent = c.create_run(exp, run_name="alpha_sweep now", tags={"adbs.role": "study", "adbs.study": "alpha_sweep",
                                                                  "adbs.command": "python studies/alpha_sweep.py"})
    for n, (alpha, done) in enumerate(((0.01, True), (0.1, False))):
        run = c.create_run(exp, run_name=f"alpha={alpha} seed=0", tags={
            "mlflow.parentRunId": parent.info.run_id, "adbs.role": "trial", "adbs.trial_id": f"t{n}",
            "adbs.optuna_trial": str(n), "adbs.state": K.COMPLETE if done else "RUNNING"})
        c.log_batch(run.info.run_id, params=[Param(k, json.dumps(v) if isinstance(v, list) else str(v))
                                             for k, v in Config(alpha=alpha).to_dict().items()],
                    metrics=[Metric("session/test_acc", 50.0, 0, 0), Metric("session/val_acc", 50.0, 0, 0)]
                    + ([Metric(f"summary/{k}", 50.0, 0, 0) for k in ("val_avg_acc", "test_avg_acc")] if done else []))
        if done:
            c.set_terminated(run.info.run_id, "FINISHED")
    if parent_status != "RUNNING":
        c.set_terminated(parent.info.run_id, parent_status)
        for r in c.search_runs([exp]):
            if r.info.status == "RUNNING":  # the study closed its open runs when it stopped
                c.set_terminated(r.info.run_id, "KILLED")
    return uri


def test_report_calls_running_trials_of_a_running_study_running(tmp_path, capsys):
    def report(uri):
        return in_process(capsys, [sys.executable, str(REPO / "studies" / "report.py"), "alpha_sweep",
                                   "--tracking-uri", uri, "--out", str(tmp_path / "out")], cwd="/")

    live = report(_store_with(tmp_path, "RUNNING"))
    assert live.returncode == 0, live.stderr
    assert "2 trials (1 complete, 1 running)" in live.stdout and "interrupted" not in live.stdout
    assert "this study is still running (parent run RUNNING)" in live.stdout
    stopped = report(_store_with(tmp_path, "KILLED"))
    assert stopped.returncode == 0, stopped.stderr
    assert "2 trials (1 complete, 1 interrupted)" in stopped.stdout
    assert "did not finish (parent run KILLED)" in stopped.stdout


# -- the same kind of edge elsewhere -------------------------------------------------------------------


def test_a_mini_imagenet_test_split_without_novel_classes_is_refused(tmp_path):
    import csv

    from tests.helpers.datasets import write_mini

    root = write_mini(tmp_path)
    test_csv = root / "miniimagenet" / "split" / "test.csv"
    rows = list(csv.reader(test_csv.open()))
    labels = list(dict.fromkeys(r[1] for r in rows[1:]))
    keep = [rows[0]] + [r for r in rows[1:] if labels.index(r[1]) < 60]  # the base classes only
    with open(test_csv, "w", newline="") as fh:
        csv.writer(fh).writerows(keep)
    with pytest.raises(DataError, match=r"test split of mini_imagenet at .* has no images of classes 60\.\.64"):
        check_data(from_dict({"dataset": "mini_imagenet", "data_root": str(root), "sessions": 1, "shots": 5,
                              "novel_val_per_class": 2, "base_images_per_class": None, "val_fraction": 0.1}))


@pytest.mark.slow
def test_num_samples_on_a_grid_study_is_refused(tmp_path):
    plan = study.Plan(name="t", space={"alpha": [0.01, 0.1]}, space_source="tests")
    opts = options.parse("t", options.Defaults(num_samples=4), argv=[
        "--num-samples", "9", "--storage", str(tmp_path), "--gpus-per-trial", "0",
        "--tracking-uri", f"sqlite:///{tmp_path / 'mlflow.db'}"])[0]
    opts = opts.replace(argv=("t.py", "--num-samples", "9"))
    with pytest.raises(study.StudyInputError, match="--num-samples: this run of t is a grid"):
        study.preflight(plan, opts)
    assert not (tmp_path / "t").exists()  # nothing claimed


def test_host_dataset_or_data_root_flags_clash_with_what_a_study_searches():
    rows = {"SAVC": {"host": "savc"}, "ALICE": {"host": "alice"}}
    plan = study.Plan(name="t", space={}, space_source="tests:rows", rows=rows)
    with pytest.raises(study.StudyInputError, match="--host savc: this study sweeps host itself"):
        study.validate(plan, _opts("--host", "savc", "--gpus-per-trial", "0"))
