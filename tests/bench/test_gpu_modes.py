"""bench/gpu.py --profile and --compare (bench/gpu_profile.py, bench/gpu_compare.py): their refusals and the profile's
split (fast), the host reads of the base step counted on the CPU (fast), and both commands end to end in their CPU
dry mode (slow)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from adbs import loops
from adbs.config import preset
from adbs.data import build_data

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "bench"))

import gpu as bench  # noqa: E402
import gpu_compare  # noqa: E402
import gpu_profile  # noqa: E402


@pytest.mark.parametrize("args,fragment", [
    (["--profile"], "give --out DIR"),
    (["--profile", "--compare", "--out", "X"], "give one"),
    (["--profile", "--dry", "--device", "cuda", "--out", "X"], "--dry runs on the CPU"),
    (["--compare", "--dry", "--fast-step", "off", "--out", "X"], "'off' is 'before' already"),
    (["--compare", "--dry", "--hosts", "icarl", "--out", "X"], "--hosts icarl: unknown"),
    (["--profile", "--dry", "--epochs", "3", "--out", "X"], "fix their sizes"),
    (["--profile", "--dry", "--official", "X", "--out", "X"], "do not run it"),
    (["--dry"], "go with --profile or --compare"),
    (["--profile", "--dry", "--parts", "hosts", "--out", "X"], "--compare's"),
    (["--profile", "--device", "cpu", "--out", "X"], "run them with --dry"),
])
def test_bad_arguments_are_refused_before_any_work(capsys, tmp_path, args, fragment):
    args = [str(tmp_path / "out") if a == "X" else a for a in args]
    with pytest.raises(SystemExit) as e:
        bench.main(args)
    assert e.value.code == 2 and fragment in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_compare_refuses_a_folder_holding_other_figures(capsys, tmp_path):
    (tmp_path / "gpu_compare.json").write_text(json.dumps({"dry": False, "versions": {"card": "Some Card"}}))
    with pytest.raises(SystemExit) as e:
        bench.main(["--compare", "--dry", "--out", str(tmp_path)])
    assert e.value.code == 2 and "holds a GPU run's figures; give another --out" in capsys.readouterr().err


def test_the_split_of_a_profile():
    # fabricated events (name, device type, duration, self host time; microseconds): 2 steps of 5 ms wall each,
    # 6 kernels of 0.5 ms (1.5 ms a step: 30% busy), 3 launches and 1 synchronisation a step
    evts = [("ProfilerStep#4", "CPU", 5000.0, 100.0), ("ProfilerStep#5", "CPU", 5000.0, 100.0)]
    evts += [("void conv_kernel<float>", "CUDA", 500.0, 0.0)] * 6 + [("cudaLaunchKernel", "CPU", 10.0, 10.0)] * 6
    evts += [("cudaStreamSynchronize", "CPU", 50.0, 50.0)] * 2 + [("aten::conv2d", "CPU", 800.0, 300.0)] * 2
    got = gpu_profile.split(evts, 2, "cuda")
    assert got["wall_ms_per_step"] == 5.0 and got["kernel_ms_per_step"] == 1.5 and got["gpu_busy_share"] == 0.3
    assert got["bound_by"] == "the host (launches, Python)" and got["kernels_per_step"] == 3
    assert got["launches_per_step"] == 3 and got["sync_calls_per_step"] == 1 and got["graph_launches_per_step"] == 0
    assert got["top_ops_ms_per_step"] == {"aten::conv2d": 0.3} and got["top_kernels_ms_per_step"] == {
        "void conv_kernel<float>": 1.5}
    busy = gpu_profile.split([e if e[1] != "CUDA" else (e[0], "CUDA", 1500.0, 0.0) for e in evts], 2, "cuda")
    assert busy["gpu_busy_share"] == 0.9 and busy["bound_by"] == "the GPU's kernels"
    cpu = gpu_profile.split([e for e in evts if e[1] == "CPU"], 2, "cpu")
    assert cpu["gpu_busy_share"] is None and cpu["kernel_ms_per_step"] is None


def test_the_base_step_reads_nothing_on_the_host_and_an_epoch_reads_once_with_the_setting_on(monkeypatch):
    """HostReads over the real base step (adbs/loops.py: base_step) and the epoch's read-backs (loops.read, the
    figures; loops.check_finite, the finiteness checks), on the CPU: on a GPU each read is a host-device
    synchronisation."""
    counts: dict[str, list[int]] = {}

    def counted(name, original):
        def wrapper(*args, **kwargs):
            reads = gpu_profile.HostReads()
            with reads:
                got = original(*args, **kwargs)
            counts.setdefault(name, []).append(sum(reads.seen.values()))
            return got
        return wrapper

    for name in ("base_step", "read", "check_finite"):
        monkeypatch.setattr(loops, name, counted(name, getattr(loops, name)))
    cfg = preset("smoke", base_epochs=2, base_images_per_class=4, val_fraction=0.02, threads=1, batch_size=60)
    data = build_data(cfg)
    loops.train_base(cfg.replace(fast_step="compile"), data)
    assert len(counts["base_step"]) == 8 and set(counts["base_step"]) == {0}  # 240 images, batch 60, 2 epochs
    assert counts["read"] == [1, 1] and "check_finite" not in counts  # one transfer an epoch
    counts.clear()
    loops.train_base(cfg, data)  # off: one read a figure and a finiteness check apart, as before the setting
    assert set(counts["base_step"]) == {0} and counts["check_finite"] == [1, 1, 1, 1]
    assert counts["read"] == [11, 11]  # loss, correct, validation accuracy, 8 boundary statistics


@pytest.mark.slow
def test_profile_dry_through_the_session_script_runs_every_part_at_tiny_sizes(tmp_path):
    """bench/gpu_session.sh, the runbook's one command, with DRY=1: the profile's CPU plumbing, under its limit, every
    file under $OUT."""
    env = {**os.environ, "DRY": "1", "OUT": str(tmp_path), "LIMIT_S": "600", "PYTHON": sys.executable}
    r = subprocess.run(["bash", "bench/gpu_session.sh", "profile"], cwd=REPO, capture_output=True, text=True,
                       timeout=900, env=env)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    log = (tmp_path / "profile.log").read_text()
    assert "expected device time ~" in log.splitlines()[0] and log.splitlines()[-1].startswith("exit 0 after ")
    assert (tmp_path / "nvidia-smi.txt").is_file() and not (tmp_path / "compare").exists()
    out = tmp_path / "profile"
    res = json.loads((out / "profile.json").read_text())
    assert res["dry"] and res["tests"]["returncode"] == 0 and "collected" in res["tests"]["summary"]
    assert "test_loader_device" in (out / "tests.log").read_text()
    assert res["figures"]["one_trial"]["images_per_s"] > 0 and res["figures"]["trials_per_hour"]["k"] == 2
    t = res["trace"]
    assert t["steps"] == gpu_profile.SCHEDULE["active"] and t["wall_ms_per_step"] > 0 and t["aten_calls_per_step"] > 0
    assert t["host_reads_per_step"] == 0 and t["config"]["device"] == "cpu"
    assert (out / "trace.json").stat().st_size > 1000 and "aten::" in (out / "ops.txt").read_text()
    assert "trace of the ADBS base step" in log and "tensor reads on the host inside the step: 0.0" in log
    bad = subprocess.run(["bash", "bench/gpu_session.sh", "everything"], cwd=REPO, capture_output=True, text=True,
                         env={**env, "OUT": str(tmp_path / "x")})
    assert bad.returncode == 2 and "usage" in bad.stderr and not (tmp_path / "x").exists()


@pytest.mark.slow
def test_compare_dry_runs_before_and_after_and_every_host(tmp_path):
    r = subprocess.run([sys.executable, "bench/gpu.py", "--compare", "--dry", "--out", str(tmp_path)], cwd=REPO,
                       capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert "expected device time ~" in r.stdout.splitlines()[0]
    res = json.loads((tmp_path / "gpu_compare.json").read_text())
    assert res["dry"] and set(res["trials"]) == {"off", "cuda_graphs"}
    for t in res["trials"].values():
        assert t["alone"]["epoch_s"] > 0 and t["packed"]["k"] == gpu_compare.PACKED_DRY
    assert res["loss"]["met"] and res["loss"]["difference"] == 0.0  # on the CPU the setting is not applied
    assert len(res["loss"]["after"]) == gpu_compare.LOSS_STEPS_DRY
    assert set(res["hosts"]) == set(gpu_compare.HOSTS)
    assert set(res["hosts"]["orco"]["phases"]) == {"pretrain", "align"} and set(res["hosts"]["savc"]["phases"]) == {"base"}
    assert set(res["ratios"]) >= {"alone_epoch_speedup", "packed_trials_per_hour"} and "before/after" in r.stdout
    # a later run of one part into the same folder keeps the others' figures and adds its own
    r = subprocess.run([sys.executable, "bench/gpu.py", "--compare", "--dry", "--parts", "hosts", "--hosts", "baseline",
                        "--out", str(tmp_path)], cwd=REPO, capture_output=True, text=True, timeout=900)
    assert r.returncode == 0 and "kept from the earlier run" in r.stdout, r.stdout[-3000:] + r.stderr[-3000:]
    again = json.loads((tmp_path / "gpu_compare.json").read_text())
    assert again["trials"] == res["trials"] and again["loss"] == res["loss"] and set(again["hosts"]) == set(res["hosts"])
    assert again["hosts"]["orco"] == res["hosts"]["orco"] and again["hosts"]["baseline"] != res["hosts"]["baseline"]
    assert again["commands"] == [res["command"], "bench/gpu.py --compare --fast-step cuda_graphs --parts hosts --hosts "
                                 "baseline --dry"]
