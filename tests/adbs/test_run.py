"""The full pipeline on a tiny embedded benchmark: CLI in a subprocess, determinism, reuse, NaN."""

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

from adbs.config import preset
from adbs.data import build_data
from adbs.trainer import Hooks, NumericalError
from adbs.trial import run_trial

ROOT = Path(__file__).resolve().parents[2]
TINY = dict(base_epochs=2, base_images_per_class=8, val_fraction=0.02, novel_val_per_class=4, sessions=2,
            finetune_epochs=2, threads=1)


def tiny(**kw):
    return preset("smoke", **{**TINY, **kw})


@pytest.fixture(scope="module")
def data():
    return build_data(tiny())


@pytest.mark.slow
def test_cli_end_to_end(tmp_path):
    out = tmp_path / "r.json"
    args = [sys.executable, "-m", "adbs.run", "--preset", "smoke", "--out", str(out)]
    for k, v in TINY.items():
        args += ["--" + k.replace("_", "-"), str(v)]
    proc = subprocess.run(args, cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    assert "session" in proc.stdout and "avg acc" in proc.stdout and "base epoch 2/2" in proc.stdout
    res = json.loads(out.read_text())
    assert [s["session"] for s in res["sessions"]] == [0, 1, 2]
    assert [s["n_classes"] for s in res["sessions"]] == [60, 65, 70]
    assert len(res["base_curve"]) == 2 and len(res["boundaries"][-1]) == 70
    for key in ("val_avg_acc", "test_avg_acc", "test_last_acc", "test_pd", "d_cs"):
        assert math.isfinite(res["summary"][key])


@pytest.mark.slow
def test_cli_help_documents_every_field():
    proc = subprocess.run([sys.executable, "-m", "adbs.run", "--help"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0
    from adbs.config import FIELDS, option_keys

    for name in FIELDS:
        assert "--" + name.replace("_", "-") in proc.stdout
    for key in option_keys():  # every host's options, e.g. --savc.queue-size
        assert "--" + key.replace("_", "-") in proc.stdout
    text = " ".join(proc.stdout.split())  # argparse wraps lines
    assert "(default: " not in text  # one default per option, not argparse's second one
    assert "[default: 1.0; the default preset cpu sets 0.1]" in text  # what a bare run uses


@pytest.mark.parametrize(
    "args,fragment",
    [
        (["--alpah", "0.1"], "unrecognized arguments"),
        (["--variant", "adbs"], "valid choices: baseline, adb, adb+ic"),
        (["--shots", "five"], "shots must be an int"),
        (["--shots", "499"], "shots"),
        (["--ways", "7"], "ways"),
        (["--dataset", "cifar100", "--data-root", "/nonexistent"], "cifar-100-python"),
        (["--preset", "cifar"], "valid presets"),
        (["--host", "icarl"], "unknown host 'icarl'; valid choices: baseline"),
        (["--host", "savc", "--savc.queue-size", "many"], "savc.queue_size must be an int"),
        (["--host", "alice", "--savc.queue-size", "8"], "option of host savc, but host is alice"),
    ],
)
def test_cli_bad_input_fails_before_compute(tmp_path, capsys, args, fragment):
    # In this process (tests/helpers/scripts.py): test_cli_exit_code_2_from_the_shell runs two of these as a process.
    from tests.helpers.scripts import in_process

    out = tmp_path / "never.json"
    proc = in_process(capsys, [sys.executable, "-m", "adbs.run", "--out", str(out), *args], cwd=tmp_path)
    assert proc.returncode == 2
    assert fragment in proc.stderr, proc.stderr
    assert "base epoch" not in proc.stdout and not out.exists()


@pytest.mark.slow
def test_cli_exit_code_2_from_the_shell(tmp_path):
    out = tmp_path / "never.json"
    for args, fragment in ((["--alpah", "0.1"], "unrecognized arguments"), (["--shots", "499"], "shots")):
        proc = subprocess.run([sys.executable, "-m", "adbs.run", "--out", str(out), *args], cwd=tmp_path,
                              capture_output=True, text=True, timeout=120)
        assert proc.returncode == 2 and fragment in proc.stderr, proc.stderr
        assert "Traceback" not in proc.stderr and "base epoch" not in proc.stdout and not out.exists()


@pytest.mark.slow
def test_same_seed_same_numbers_on_cpu(data):
    a = run_trial(tiny(), data=data)
    b = run_trial(tiny(), data=data)
    assert a.sessions == b.sessions and a.boundaries == b.boundaries
    c = run_trial(tiny(seed=1), data=data)
    assert c.sessions != a.sessions


@pytest.mark.slow
def test_variants_behave(data):
    base = run_trial(tiny(variant="baseline"), data=data)
    assert all(m == 1.0 for m in base.boundaries[-1]), "baseline keeps m = 1"
    adb = run_trial(tiny(variant="adb"), data=data)
    assert adb.boundaries[0] != [1.0] * 60, "adb learns base boundaries"
    assert adb.boundaries[1][60:] != [sum(adb.boundaries[0]) / 60] * 5, "adb fine-tunes novel boundaries"
    nofit = run_trial(tiny(variant="adb", finetune_epochs=0), data=data)
    assert nofit.boundaries[1][60:] == pytest.approx([sum(nofit.boundaries[0]) / 60] * 5), "init = mean of old"


def test_hooks_see_every_epoch_and_session(data):
    epochs, sessions = [], []
    run_trial(tiny(), data=data, hooks=Hooks(on_base_epoch=epochs.append, on_session=sessions.append))
    assert [e["epoch"] for e in epochs] == [1, 2]
    assert {"train_loss", "val_acc", "lr", "boundary_mean", "boundary_min", "boundary_max", "boundary_negative",
            "boundary_base_abs_min", "boundary_base_abs_mean", "boundary_base_abs_max"} <= set(epochs[0])
    assert [s["session"] for s in sessions] == [0, 1, 2]
    assert {"val_acc", "test_acc", "test_base_acc", "test_novel_acc", "test_hmean"} <= set(sessions[1])


def test_hook_exception_stops_the_trial(data):
    class Stop(Exception):
        pass

    def stop(_):
        raise Stop

    with pytest.raises(Stop):
        run_trial(tiny(), data=data, hooks=Hooks(on_base_epoch=stop))


def test_nan_stops_with_reason(data):
    with pytest.raises(NumericalError, match="base epoch 1"):
        run_trial(tiny(base_lr=1e30), data=data)


@pytest.mark.slow
def test_base_reuse_gives_identical_results(data, tmp_path):
    plain = run_trial(tiny(), data=data)
    first = run_trial(tiny(), data=data, cache=tmp_path)
    curve = []
    second = run_trial(tiny(), data=data, cache=tmp_path, hooks=Hooks(on_base_epoch=curve.append))
    assert first.summary["base_reused"] == 0.0 and second.summary["base_reused"] == 1.0
    assert plain.sessions == first.sessions == second.sessions
    assert [c["reused"] for c in curve] == [1.0, 1.0]
    # the frozen backbone's test/val features were stored once, beside the base session
    assert len(list(tmp_path.glob("*.features-test-*.pt"))) == 1
    assert len(list(tmp_path.glob("*.features-val-*.pt"))) == 1
    # ways/shots only change the incremental sessions: still a cache hit, and the same test set
    other = run_trial(tiny(shots=1), cache=tmp_path)
    assert other.summary["base_reused"] == 1.0
    assert len(list(tmp_path.glob("*.features-test-*.pt"))) == 1
    assert other.sessions == run_trial(tiny(shots=1)).sessions
    # a base-affecting field misses
    assert run_trial(tiny(alpha=0.02), data=data, cache=tmp_path).summary["base_reused"] == 0.0


@pytest.mark.slow
def test_resume_from_any_checkpoint_is_bit_identical(data):
    import copy

    states = []
    hooks = Hooks(on_checkpoint=lambda s: states.append(copy.deepcopy(s)), checkpoint_every=1)
    full = run_trial(tiny(), data=data, hooks=hooks)
    phases = [(s["phase"], s.get("epoch", s.get("session"))) for s in states]
    assert phases == [("base", 1), ("base", 2), ("sessions", 0), ("sessions", 1), ("sessions", 2)]
    for state in (states[0], states[3]):
        seen = []
        resumed = run_trial(tiny(), data=data, resume=state, hooks=Hooks(on_session=seen.append))
        assert resumed.sessions == full.sessions and resumed.boundaries == full.boundaries
        untimed = lambda curve: [{k: v for k, v in r.items() if k != "epoch_time_s"} for r in curve]  # noqa: E731
        assert untimed(resumed.base_curve) == untimed(full.base_curve)
        # hooks fire only for what comes after the checkpoint
        assert [r["session"] for r in seen] == ([0, 1, 2] if state["phase"] == "base" else [2])


@pytest.mark.slow
def test_session_checkpoints_refer_to_the_cached_base_session(data, tmp_path):
    import copy
    import shutil

    states = []
    hooks = Hooks(on_checkpoint=lambda s: states.append(copy.deepcopy(s)))
    full = run_trial(tiny(), data=data, cache=tmp_path / "c", hooks=hooks)
    sessions_states = [s for s in states if s["phase"] == "sessions"]
    # the base state is in the cache: session checkpoints carry its key, not another copy of it
    assert sessions_states and all("base" not in s and s["base_key"] for s in sessions_states)
    state = sessions_states[1]
    resumed = run_trial(tiny(), data=data, cache=tmp_path / "c", resume=state)
    assert resumed.sessions == full.sessions and resumed.summary["base_reused"] == 0.0
    shutil.rmtree(tmp_path / "c")  # cache gone: the base session is trained again, to the same numbers
    again = run_trial(tiny(), data=data, resume=state)
    assert again.sessions == full.sessions


# --- adbs.run's outcome: one preflight for the run and its dry run, exit codes 0/1/2/130 ------------------------


def test_dry_run_writes_nothing_and_checks_the_nearest_existing_folder(tmp_path, capsys):
    from tests.helpers.scripts import in_process

    out = tmp_path / "new" / "sub" / "o.json"
    r = in_process(capsys, [sys.executable, "-m", "adbs.run", "--preset", "smoke", "--dry-run", "--out", str(out)],
                   cwd=tmp_path)
    assert r.returncode == 0 and f"would write {out}" in r.stdout, r.stderr
    assert not (tmp_path / "new").exists() and sorted(p.name for p in tmp_path.iterdir()) == []
    (tmp_path / "afile").write_text("x")  # a file where a folder of --out would have to be made
    r = in_process(capsys, [sys.executable, "-m", "adbs.run", "--preset", "smoke", "--dry-run",
                            "--out", str(tmp_path / "afile" / "sub" / "o.json")], cwd=tmp_path)
    assert r.returncode == 2 and "is a file, not a folder" in r.stderr, r.stderr


def test_a_run_that_raises_after_it_started_exits_1_with_its_traceback_and_first_line(tmp_path, capsys, monkeypatch):
    import adbs.trial
    from tests.helpers.scripts import in_process

    def broken(cfg, **kw):
        raise RuntimeError("CUDA error: an illegal memory access\nsecond line of the message")

    monkeypatch.setattr(adbs.trial, "run_trial", broken)
    out = tmp_path / "sub" / "o.json"
    r = in_process(capsys, [sys.executable, "-m", "adbs.run", "--preset", "smoke", "--quiet", "--out", str(out)],
                   cwd=tmp_path)
    assert r.returncode == 1, r.stderr
    assert "Traceback (most recent call last)" in r.stderr
    assert r.stderr.rstrip().splitlines()[-1] == ("error: the run failed after it started: RuntimeError: CUDA error: "
                                                  "an illegal memory access (traceback above)")
    assert not out.parent.exists()


def test_sigterm_exits_130_with_one_line(tmp_path, capsys, monkeypatch):
    """A SIGTERM while the run trains: exit 130 and one line, not death by the signal. The test's own handler
    stands in for the default (which would end this process) and is back afterwards."""
    import os
    import signal
    import time

    import adbs.trial
    from tests.helpers.scripts import in_process

    class Escaped(Exception):
        pass

    def ours(signum, frame):
        raise Escaped("adbs.run did not handle SIGTERM")

    def training(cfg, **kw):
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(5)  # the handler interrupts this
        raise AssertionError("not interrupted")

    monkeypatch.setattr(adbs.trial, "run_trial", training)
    before = signal.signal(signal.SIGTERM, ours)
    try:
        r = in_process(capsys, [sys.executable, "-m", "adbs.run", "--preset", "smoke", "--quiet",
                                "--out", str(tmp_path / "o.json")], cwd=tmp_path)
        assert signal.getsignal(signal.SIGTERM) is ours  # restored
    finally:
        signal.signal(signal.SIGTERM, before)
    assert r.returncode == 130, r.stderr
    assert r.stderr.strip() == ("interrupted by SIGTERM: the run stopped before writing its result; run the same "
                                "command again to start it over")
    assert not (tmp_path / "o.json").exists()


def test_the_run_decodes_every_image_before_training(tmp_path, capsys):
    """A corrupt test image: the run itself (not only its dry run) refuses before the base session trains."""
    from tests.helpers.scripts import in_process
    from tests.helpers.datasets import MINI_WNIDS, write_mini

    root = write_mini(tmp_path / "m", train_per_class=3, test_per_class=1)
    (root / "miniimagenet/images" / f"{MINI_WNIDS[99]}00000500.jpg").write_bytes(b"not a jpeg")
    flags = ["--preset", "smoke", "--dataset", "mini_imagenet", "--data-root", str(root), "--shots", "1",
             "--novel-val-per-class", "1", "--val-fraction", "0.34", "--base-images-per-class", "2",
             "--out", str(tmp_path / "o.json")]
    for extra in (["--dry-run"], []):
        r = in_process(capsys, [sys.executable, "-m", "adbs.run", *flags, *extra], cwd=tmp_path)
        assert r.returncode == 2, (extra, r.stderr[-2000:])
        assert f"{MINI_WNIDS[99]}00000500.jpg cannot be decoded" in r.stderr and "base epoch" not in r.stdout


@pytest.mark.slow
def test_ctrl_c_exits_130(tmp_path):
    """SIGINT to a training `python -m adbs.run`: exit 130 with one line (before, it died by the signal: -2)."""
    import signal

    out = tmp_path / "o.json"
    proc = subprocess.Popen([sys.executable, "-m", "adbs.run", "--preset", "smoke", "--base-epochs", "50",
                             "--out", str(out)], cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        for line in proc.stdout:  # the first base epoch's line: training has started
            if line.startswith("base epoch 1/"):
                break
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == 130, err[-2000:]
    assert "interrupted by SIGINT" in err and "Traceback" not in err and not out.exists()


def test_a_dry_run_on_files_leaves_the_digest_memo_and_the_checks_as_they_were(tmp_path, capsys, monkeypatch):
    """The dry run decodes and hashes a dataset read from files but records neither the file digests nor the
    passed check (adbs/digests.py: read_only); a study's dry run the same (adbs_lab/driver/preflight.py)."""
    from tests.helpers.scripts import in_process
    from tests.helpers.datasets import write_mini

    from adbs.data import preflight as data_preflight

    memo = tmp_path / "cache" / "file-digests.json"
    monkeypatch.setenv("ADBS_DIGEST_MEMO", str(memo))
    root = write_mini(tmp_path / "m", train_per_class=3, test_per_class=1)
    flags = ["--preset", "smoke", "--dataset", "mini_imagenet", "--data-root", str(root), "--shots", "1",
             "--novel-val-per-class", "1", "--val-fraction", "0.34", "--base-images-per-class", "2"]
    data_preflight.forget()
    r = in_process(capsys, [sys.executable, "-m", "adbs.run", *flags, "--out", str(tmp_path / "o.json"),
                            "--dry-run"], cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-2000:]
    data_preflight.forget()
    repo = Path(__file__).resolve().parents[2]
    r = in_process(capsys, [sys.executable, str(repo / "studies" / "alpha_sweep.py"), *flags, "--storage",
                            str(tmp_path / "runs"), "--tracking-uri", f"sqlite:///{tmp_path / 'm.db'}",
                            "--dry-run"], cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-2000:]
    assert not (tmp_path / "cache").exists() and not (tmp_path / "runs").exists()
