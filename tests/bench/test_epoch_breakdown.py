"""bench/epoch_breakdown.py at tiny sizes on the CPU: it runs, splits the epoch and compares the batches."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_breakdown_on_cpu(tmp_path: Path):
    r = subprocess.run([sys.executable, "bench/epoch_breakdown.py", "--device", "cpu", "--quick", "--epochs", "2",
                        "--out", str(tmp_path)], check=False, cwd=REPO, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "device batches vs the CPU path's: 0 of" in r.stdout and "training steps" in r.stdout
    res = json.loads((tmp_path / "breakdown.json").read_text())
    assert res["batches"]["differing"] == 0  # on a CPU the "device" path is the host path's code on CPU tensors
    e = res["epoch"]
    assert len(e["epoch_s"]) == 2 and e["loader_alone_s"] > 0 and 0 < e["steps_s"] < e["epoch_s_median_after_first"]


def test_breakdown_refuses_one_epoch(capsys):
    sys.path.insert(0, str(REPO / "bench"))
    import epoch_breakdown

    with pytest.raises(SystemExit) as e:
        epoch_breakdown.main(["--epochs", "1"])
    assert e.value.code == 2 and "--epochs must be >= 2" in capsys.readouterr().err
