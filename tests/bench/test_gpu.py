"""bench/gpu.py: its figures' arithmetic (fast), the whole command at tiny CPU sizes (slow), and on a GPU (gpu)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "bench"))

import gpu as bench  # noqa: E402

NUMBER = r"(\d+\.\d\d|nan)"


def test_epoch_figures_and_ratio():
    out = {"base_curve": [{"epoch_time_s": 7.0}, {"epoch_time_s": 2.0}, {"epoch_time_s": 1.0}, {"epoch_time_s": 1.5}]}
    f = bench.epoch_figures(out, 900)
    assert f == {"epoch_s": 1.5, "first_epoch_s": 7.0, "warmup_s": 5.5, "images_per_s": 600.0}
    assert bench.ratio(3.0, 4.0) == "0.75" and bench.ratio(1.0, 0.0) == "nan"


def test_bad_arguments_are_refused_before_any_work(capsys, tmp_path):
    for args, msg in ((["--epochs", "1"], "--epochs must be >= 2"), (["--official", "/nonexistent"], "not a folder"),
                      (["--official", str(tmp_path)], f"--official {tmp_path}: ")):
        with pytest.raises(SystemExit):
            bench.main(["--device", "cpu", *args])
        assert msg in capsys.readouterr().err
    if not torch.cuda.is_available():
        with pytest.raises(SystemExit):
            bench.main(["--device", "cuda"])
        assert "no CUDA GPU" in capsys.readouterr().err


def _check_report(text: str, device: str) -> dict:
    lines = text.splitlines()

    def line(prefix: str) -> str:
        hits = [x for x in lines if x.startswith(prefix)]
        assert hits, f"no line starting {prefix!r} in:\n{text}"
        return hits[0]

    assert re.search(r"images/s", line("train step alone"))
    m = re.search(rf"images/s per base epoch .*, {NUMBER}x the train step alone", line("one trial:"))
    assert m and m.group(1) != "nan", line("one trial:")
    assert re.search(r"first-epoch warm-up: -?\d+\.\d s", line("first-epoch warm-up"))
    line("peak GPU memory per trial")
    assert line("packing:")
    m = re.search(rf"one trial per GPU: {NUMBER}x", line("trials/hour:"))
    assert m and m.group(1) != "nan"
    line("authors' code:")
    targets = line("targets:")
    assert re.search(r"trial_vs_step \d+\.\d\dx \(target 0\.80x\) (met|NOT met)", targets)
    assert re.search(r"packed_vs_single \d+\.\d\dx \(target 3\.00x\) (met|NOT met)", targets)
    assert f"({device})" in line("device:")
    return {"lines": lines}


@pytest.mark.slow
def test_quick_cpu_run_prints_every_figure(tmp_path):
    r = subprocess.run([sys.executable, "bench/gpu.py", "--device", "cpu", "--quick", "--out", str(tmp_path)],
                       cwd=REPO, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    _check_report(r.stdout, "cpu")
    assert "authors' code: not run" in r.stdout and "peak GPU memory per trial: not measured (no GPU)" in r.stdout
    res = json.loads((tmp_path / "gpu.json").read_text())
    assert res["one_trial"]["images_per_s"] > 0 and res["trials_per_hour"]["k"] == 2
    assert set(res["ratios"]) == {"trial_vs_step", "packed_vs_single"}


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_gpu_run(tmp_path):
    """The real thing, briefly: ResNet-12, 2 base epochs, packing from the measured peak; the authors' code when
    its checkout is there."""
    official = REPO.parent / "shared/reference/adbs-official"
    extra = ["--official", str(official)] if official.is_dir() else []
    r = subprocess.run([sys.executable, "bench/gpu.py", "--epochs", "2", "--max-per-gpu", "4", "--out", str(tmp_path),
                        *extra], cwd=REPO, capture_output=True, text=True, timeout=1200)
    assert r.returncode == 0, r.stdout + r.stderr
    _check_report(r.stdout, "cuda")
    res = json.loads((tmp_path / "gpu.json").read_text())
    mem = res["one_trial"]["memory"]
    assert 0 < mem["peak_allocated"] <= mem["peak_reserved"] < mem["total"]
    assert "AMP choice" in r.stdout
    print(r.stdout)
