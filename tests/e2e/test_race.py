"""--seeds auto on a sampled search through the real driver (Ray Tune, Optuna's TPE, MLflow) with a fake trial
function whose validation accuracy rises with alpha: three samples on seed 0, the best two race on fresh seeds,
the leader is the larger alpha and is resolved; best_config.json marks its test figures post-selection, and the
Optuna record says which seeds each told value covers. The driver is SIGKILLed once a race trial finished and
--resume'd: it reaches the same verdicts and reruns no finished trial."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import optuna
import pandas as pd
import pytest

from adbs_lab.records import metrics_keys as K

REPO = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.slow

SCRIPT = textwrap.dedent("""
    import time
    from dataclasses import dataclass
    from optuna.distributions import FloatDistribution
    from adbs_lab import study
    from adbs_lab.driver import options

    @dataclass
    class FakeResult:
        summary: dict

    def fake_trial(cfg, *, hooks):
        hooks.on_base_epoch({"epoch": 1, "train_loss": 1.0, "train_acc": 50.0, "val_acc": 50.0, "lr": 0.1,
                             "boundary_mean": 1.0, "boundary_min": 1.0, "boundary_max": 1.0})
        time.sleep(SLEEP)
        # validation rises with alpha (10 to 100 points), a seed's noise of +-0.3 shared by every configuration and
        # one of +-0.05 of its own (a difference that never spreads resolves nothing: adbs_lab/stats/verdicts.py)
        val = 1000.0 * cfg.alpha + 0.3 * ((cfg.seed * 7) % 3 - 1) + 0.1 * (((cfg.seed + 1) * cfg.alpha * 1e4) % 1.0 - 0.5)
        for s in range(2):
            acc = val - 2 * s
            hooks.on_session({"session": s, "n_classes": 60 + 5 * s, "val_acc": acc, "val_base_acc": acc,
                              "val_novel_acc": float("nan") if s == 0 else acc, "val_hmean": acc, "test_acc": acc,
                              "test_base_acc": acc, "test_novel_acc": acc, "test_hmean": acc, "boundary_mean": 1.0,
                              "boundary_min": 1.0, "boundary_max": 1.0, "boundary_base_mean": 1.0,
                              "boundary_novel_mean": 1.0})
        return FakeResult({"val_avg_acc": val, "test_avg_acc": val, "val_last_acc": val - 2,
                           "test_last_acc": val - 2, "d_cs": 0.9, "wall_time_s": 0.1})

    opts, _ = options.parse("race test", options.Defaults(pruner="none", sample_on_request=True))
    plan = study.Plan(name="race", space={"variant": "adb+ic", "alpha": FloatDistribution(0.01, 0.1, log=True)},
                      space_source="tests/e2e/test_race.py", trial_fn=fake_trial)
    study.main(plan, opts)
""")


def _script(tmp_path: Path, sleep: float) -> Path:
    path = tmp_path / "race_study.py"
    path.write_text(SCRIPT.replace("SLEEP", repr(sleep)))
    return path


def _seeds(storage: Path) -> dict[str, list[int]]:
    t = pd.read_parquet(storage / "race-smoke" / "trials.parquet")
    assert (t["state"] == K.COMPLETE).all()
    return {row: sorted(int(s) for s in g["seed"]) for row, g in t.groupby("label")}


def _verdicts(out: str) -> list[str]:
    return list(dict.fromkeys(line.strip() for line in out.splitlines() if "(race leader):" in line))


def test_a_race_killed_after_its_first_race_trial_resumes_to_the_same_verdicts(study_cmd, storage, tracking_uri,
                                                                              tmp_path):
    """Three samples, the best two race, the driver SIGKILLed once a race trial finished, then --resume'd: the
    verdict an uninterrupted run reaches (the fake values fix it: the larger alpha is better on every seed), on the
    same seeds, and no finished trial run again; the leader resolved, its test figures marked post-selection, and
    the Optuna record saying which seeds each told value covers; and studies/report.py, rebuilding the table from
    the tracking store, says what the study said (the race's verdicts, the post-selection label). (One study run,
    killed and resumed, checks all three: a second, uninterrupted run would cost a minute of CI for no other check.)"""
    cmd = study_cmd("x", "--smoke", "--num-samples", "3", "--seeds", "auto", "--max-seeds", "3", "--race-top", "2",
                    "--max-concurrent", "2", "--cpus-per-trial", "0.5")
    cmd[1] = str(_script(tmp_path, 0.6))
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=REPO)
    seen: list[str] = []
    deadline = time.time() + 240
    for line in proc.stdout:  # type: ignore[union-attr]
        seen.append(line)
        if " seed=1: finished" in line:
            break
        assert time.time() < deadline, "".join(seen)[-3000:]
    time.sleep(4)  # Tune saves its experiment state every 2 s
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    before = "".join(seen)
    finished = [line.split("]", 1)[1].split(": finished", 1)[0].strip() for line in before.splitlines()
                if ": finished:" in line]
    again = subprocess.run(cmd + ["--resume"], capture_output=True, text=True, timeout=300, cwd=REPO)
    assert again.returncode == 0, again.stdout[-3000:] + again.stderr[-3000:]
    assert "resuming the study in " in again.stdout and "race stopped after look" not in before
    assert not [f for f in finished if f"{f}: started" in again.stdout], again.stdout
    seeds = _seeds(storage)
    contenders = sorted((lab for lab, s in seeds.items() if len(s) > 1), key=lambda lab: float(lab.split("=")[1]))
    assert sorted(len(s) for s in seeds.values()) == [1, 4, 4] and len(contenders) == 2
    verdicts = _verdicts(again.stdout)
    assert verdicts == [v for v in verdicts if v.startswith(f"{contenders[0]} vs {contenders[1]} (race leader)")]
    assert len(verdicts) == 1 and "n=3, reached at look 1 of 1, 3 seeds): worse" in verdicts[0]
    assert f"race stopped after look 1: the leader {contenders[1]} is resolved" in again.stdout
    assert "3 to 9 trials" in before and "--seeds auto (a race): 3 samples on seed 0" in before
    best = json.loads((storage / "race-smoke" / "best_config.json").read_text())
    assert best["config_label"] == contenders[1] and best["resolved_by_verdicts"] is True
    assert best["race"]["leader"] == contenders[1] and best["test_post_selection"]["seeds"] == [0, 1, 2, 3]
    assert "post-selection: the test figures of " + contenders[1] in (storage / "race-smoke" / "table.txt").read_text()
    study = optuna.load_study(study_name="race-smoke", storage=f"sqlite:///{storage / 'race-smoke' / 'optuna.db'}")
    raced = [t for t in study.trials if "race_of" in t.user_attrs]
    assert len(study.trials) == 5 and len(raced) == 2
    assert all(t.user_attrs["seeds"] == [1, 2, 3] and t.state.name == "COMPLETE" for t in raced)
    assert all(t.user_attrs["seeds"] == [0] for t in study.trials if t not in raced)
    out = tmp_path / "report"
    rep = subprocess.run([sys.executable, str(REPO / "studies" / "report.py"), "race", "--smoke", "--tracking-uri", tracking_uri,
                          "--out", str(out)], capture_output=True, text=True, timeout=300, cwd=REPO)
    assert rep.returncode == 0, rep.stdout[-3000:] + rep.stderr[-3000:]
    for name in ("table.txt", "report.md"):
        text = (out / name).read_text()
        assert "post-selection" in text, f"report.py's {name} shows the race leader's test figures unlabelled:\n{text}"
        assert "(race leader)" in text, f"report.py's {name} drops the race's verdicts:\n{text}"
    assert "post-selection" in rep.stdout
