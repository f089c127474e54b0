"""The deciding design through the real driver (Ray Tune, Optuna, MLflow) with a fake trial function: a study pauses
at its cap with one comparison open and prints the command that continues it; `--more-seeds` takes that study (the
same folder, MLflow parent run and Optuna study) on the next unused seeds to its next pause, then to its horizon,
where the open comparison is "inconclusive at the horizon" and no continuation is offered; one more `--more-seeds`
is refused before anything starts (adbs_lab/driver/more_seeds.py)."""

from __future__ import annotations

import re
import subprocess
import textwrap
from pathlib import Path

import pandas as pd
import pytest

from adbs_lab.records import metrics_keys as K

REPO = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.slow

SCRIPT = textwrap.dedent("""
    from dataclasses import dataclass
    from adbs_lab import study
    from adbs_lab.driver import options

    # last-session test accuracy by row (its alpha) and seed: a - ref is 10 +- 0.1 (better at the first look),
    # b - ref swings by 6 points around +0.9 (open at every look up to the horizon)
    LAST = {0.1: [50.0] * 8, 0.2: [60.0, 60.1, 59.9, 60.0, 60.0, 60.0, 60.0, 60.0],
            0.3: [53.9, 47.9, 53.9, 47.9, 53.9, 47.9, 53.9, 47.9]}

    @dataclass
    class FakeResult:
        summary: dict

    def fake_trial(cfg, *, hooks):
        hooks.on_base_epoch({"epoch": 1, "train_loss": 1.0, "train_acc": 50.0, "val_acc": 50.0, "lr": 0.1,
                             "boundary_mean": 1.0, "boundary_min": 1.0, "boundary_max": 1.0})
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

    opts, _ = options.parse("more seeds test", options.Defaults(seeds=(0, 1, 2), decide=True))
    plan = study.Plan(name="more", space={"variant": "adb+ic"}, space_source="tests/e2e/test_more_seeds.py",
                      rows={"ref": {"alpha": 0.1}, "a": {"alpha": 0.2}, "b": {"alpha": 0.3}}, baseline="ref",
                      order=["ref", "a", "b"], trial_fn=fake_trial)
    study.main(plan, opts)
""")


def _seeds(storage: Path) -> dict[str, list[int]]:
    t = pd.read_parquet(storage / "more-smoke" / "trials.parquet")
    assert (t["state"] == K.COMPLETE).all()
    return {row: sorted(g["seed"]) for row, g in t.groupby("label")}


def _parent(out: str) -> str:
    return re.search(r"parent run ([0-9a-f]{32})", out).group(1)  # type: ignore[union-attr]


def test_a_paused_study_continues_to_its_horizon_and_no_further(study_cmd, storage, tmp_path):
    script = tmp_path / "more_study.py"
    script.write_text(SCRIPT)
    # --smoke keeps the fake study apart from a real one; the design's default follows --max-seeds 3 (horizon 6)
    cmd = study_cmd("x", "--smoke", "--seeds", "auto", "--max-seeds", "3", "--max-concurrent", "2",
                    "--cpus-per-trial", "0.5")
    cmd[1] = str(script)

    def run(*more: str) -> subprocess.CompletedProcess:
        return subprocess.run(cmd + list(more), capture_output=True, text=True, timeout=300, cwd=REPO)

    first = run()
    assert first.returncode == 0, first.stdout[-4000:] + first.stderr[-3000:]
    assert "3 seeds reached with 1 of 2 comparisons open; more seeds would help them" in first.stdout
    more = [line for line in first.stdout.splitlines() if line.startswith("more seeds: ")]
    assert len(more) == 1 and more[0].split(" continues this study")[0].endswith("--more-seeds"), more
    assert "to 5 a row" in more[0] and _seeds(storage) == {"a": [0, 1, 2], "b": [0, 1, 2], "ref": [0, 1, 2]}

    second = run("--more-seeds")
    assert second.returncode == 0, second.stdout[-4000:] + second.stderr[-3000:]
    assert "continuing the study in " in second.stdout and "to 5 seeds a row: 9 trials ended" in second.stdout
    assert _seeds(storage) == {"a": [0, 1, 2], "b": [0, 1, 2, 3, 4], "ref": [0, 1, 2, 3, 4]}  # the next unused seeds
    assert _parent(second.stdout) == _parent(first.stdout) and "to 6 a row" in second.stdout

    third = run("--more-seeds")
    assert third.returncode == 0, third.stdout[-4000:] + third.stderr[-3000:]
    assert _seeds(storage) == {"a": [0, 1, 2], "b": list(range(6)), "ref": list(range(6))}
    assert "the horizon of 6 seeds was reached with 1 of 2 comparisons inconclusive" in third.stdout
    assert "more seeds: " not in third.stdout and _parent(third.stdout) == _parent(first.stdout)
    b = [line for line in third.stdout.splitlines() if line.startswith("b vs ref: ")]
    assert b and "n=6" in b[-1] and b[-1].endswith("not resolved"), b

    refused = run("--more-seeds")
    assert refused.returncode == 2 and "nothing to continue" in refused.stderr, refused.stderr[-2000:]
    assert "inconclusive" in refused.stderr and "Ray" not in refused.stdout
