"""--seeds auto through the real driver (Ray Tune, Optuna, MLflow) with a fake trial function: one comparison is
resolved at the first look and the other at the second, the study stops there with the trials each row needed; a
driver SIGKILLed after the first batch and --resume'd takes the same looks, reaches the same verdicts and reruns no
finished trial."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import textwrap
import time
from pathlib import Path

import pandas as pd
import pytest

from adbs_lab.records import metrics_keys as K

REPO = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.slow

SCRIPT = textwrap.dedent("""
    import time
    from dataclasses import dataclass
    from adbs_lab import study
    from adbs_lab.driver import options

    # last-session test accuracy by row (its alpha) and seed: a - ref is 10 +- 0.1 (better at the first look),
    # b - ref is 3, 6, 9, 6, 6 (better at the second)
    LAST = {0.1: [50.0] * 8, 0.2: [60.0, 60.1, 59.9, 60.0, 60.0, 60.0, 60.0, 60.0],
            0.3: [53.0, 56.0, 59.0, 56.0, 56.0, 56.0, 56.0, 56.0]}

    @dataclass
    class FakeResult:
        summary: dict

    def fake_trial(cfg, *, hooks):
        hooks.on_base_epoch({"epoch": 1, "train_loss": 1.0, "train_acc": 50.0, "val_acc": 50.0, "lr": 0.1,
                             "boundary_mean": 1.0, "boundary_min": 1.0, "boundary_max": 1.0})
        time.sleep(SLEEP)
        last = LAST[round(cfg.alpha, 2)][cfg.seed]
        for s in range(2):
            acc = last + 3 * (1 - s)
            hooks.on_session({"session": s, "n_classes": 60 + 5 * s, "val_acc": acc, "val_base_acc": acc,
                              "val_novel_acc": float("nan") if s == 0 else acc, "val_hmean": acc, "test_acc": acc,
                              "test_base_acc": acc, "test_novel_acc": acc, "test_hmean": acc, "boundary_mean": 1.0,
                              "boundary_min": 1.0, "boundary_max": 1.0, "boundary_base_mean": 1.0,
                              "boundary_novel_mean": 1.0})
        return FakeResult({"val_avg_acc": last + 1.5, "test_avg_acc": last + 1.5, "val_last_acc": last,
                           "test_last_acc": last, "d_cs": 0.9, "wall_time_s": 0.1})

    opts, _ = options.parse("seeds auto test", options.Defaults())
    plan = study.Plan(name="auto", space={"variant": "adb+ic"}, space_source="tests/e2e/test_seeds_auto.py",
                      rows={"ref": {"alpha": 0.1}, "a": {"alpha": 0.2}, "b": {"alpha": 0.3}}, baseline="ref",
                      order=["ref", "a", "b"], trial_fn=fake_trial)
    study.main(plan, opts)
""")


def _script(tmp_path: Path, sleep: float) -> Path:
    path = tmp_path / "auto_study.py"
    path.write_text(SCRIPT.replace("SLEEP", repr(sleep)))
    return path


def _trials(storage: Path) -> dict[str, list[int]]:
    t = pd.read_parquet(storage / "auto-smoke" / "trials.parquet")
    assert (t["state"] == K.COMPLETE).all()
    return {row: sorted(g["seed"]) for row, g in t.groupby("label")}


def _verdicts(out: str) -> list[str]:
    """Each comparison's sentence (above the table and again at the end), once."""
    return list(dict.fromkeys(line.strip() for line in out.splitlines() if " vs ref: " in line))


def test_seeds_auto_stops_when_resolved_and_resumes_to_the_same_verdicts(study_cmd, storage, tmp_path, empty_mlflow_db):
    cmd = study_cmd("x", "--smoke", "--seeds", "auto", "--max-seeds", "5", "--max-concurrent", "2",
                    "--cpus-per-trial", "0.5")
    cmd[1] = str(_script(tmp_path, 0.05))
    # The same study again under another name, in a folder and MLflow store of its own, its driver SIGKILLed once the
    # first look was taken, then --resume'd. It runs beside the uninterrupted study, not after it: the two share
    # nothing but the Ray cluster (each 2 trials x 0.5 CPU, of its 2), and the trials sleep, so most of either
    # run's time is waiting that the other fills.
    other = storage.parent / "again"
    (tmp_path / "mlflow-again").mkdir()
    shutil.copy(empty_mlflow_db, tmp_path / "mlflow-again" / "mlflow.db")
    killed = [a if a != str(storage) else str(other) for a in cmd]
    killed[killed.index("--tracking-uri") + 1] = f"sqlite:///{tmp_path / 'mlflow-again' / 'mlflow.db'}"
    killed[1] = str(_script(tmp_path, 0.6))
    with open(tmp_path / "uninterrupted.out", "w+") as log:
        first = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, text=True, cwd=REPO)
        try:
            before, again = _killed_then_resumed(killed)
        finally:
            first.wait(300)
        log.seek(0)
        out = log.read()
    assert first.returncode == 0, out[-6000:]
    assert "9 to 15 trials" in out and "--seeds auto: first batch 3 seeds, up to 5" in out
    assert "look 1 of at most 2 at 3 seeds: 1 of 2 comparisons resolved; next: rows ref, b to 5 seeds" in out \
        or "look 1 of at most 2 at 3 seeds: 1 of 2 comparisons resolved; next: rows b, ref to 5 seeds" in out
    assert "stopped after look 2: all 2 comparisons resolved at look 2 (5 seeds); 13 trials in all" in out
    assert _trials(storage) == {"ref": [0, 1, 2, 3, 4], "a": [0, 1, 2], "b": [0, 1, 2, 3, 4]}
    verdicts = _verdicts(out)
    # the plan's looks: 3 and 5 seeds to its cap, then 7, 9 and 10 that a continuation (--more-seeds) may take
    assert len(verdicts) == 2 and "reached at look 1 of 5, 3 seeds): better" in verdicts[0]
    assert "reached at look 2 of 5, 5 seeds): better" in verdicts[1]

    finished = [line.split("]", 1)[1].split(": finished", 1)[0].strip() for line in before.splitlines()
                if ": finished:" in line]
    assert again.returncode == 0, again.stdout[-3000:] + again.stderr[-3000:]
    assert "resuming the study in " in again.stdout and "13 trials in all" not in before  # killed mid-study
    assert not [f for f in finished if f"{f}: started" in again.stdout], again.stdout
    assert _trials(other) == {"ref": [0, 1, 2, 3, 4], "a": [0, 1, 2], "b": [0, 1, 2, 3, 4]}
    assert _verdicts(again.stdout) == verdicts
    assert "13 trials in all" in again.stdout


def _killed_then_resumed(cmd: list[str]) -> tuple[str, subprocess.CompletedProcess]:
    """Start the study, SIGKILL its driver once the first look was taken and Tune saved its state, then run it with
    --resume: the killed run's output and the resumed run."""
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=REPO)
    seen: list[str] = []
    deadline = time.time() + 240
    for line in proc.stdout:  # type: ignore[union-attr]
        seen.append(line)
        if "look 1 of at most 2" in line:
            break
        assert time.time() < deadline, "".join(seen)[-3000:]
    time.sleep(4)  # Tune saves its experiment state every 2 s
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    return "".join(seen), subprocess.run(cmd + ["--resume"], capture_output=True, text=True, timeout=300, cwd=REPO)
