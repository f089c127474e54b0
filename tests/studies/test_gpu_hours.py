"""studies/gpu_hours.py and the paper study's GPU-hours line: a unit test of the reading and the formatting, on a
fabricated measurement file (the numbers below are made up for the arithmetic; no GPU measured them)."""

from __future__ import annotations

import json

import pytest

from adbs.config import from_dict
from adbs.config.presets import host_preset
from studies import gpu_hours, paper

FAKE = {  # bench/gpu.py --compare's gpu_compare.json, in the fields the line reads; made-up figures
    "command": "bench/gpu.py --compare --fast-step cuda_graphs", "dry": False, "date": "2000-01-01",
    "versions": {"card": "Fabricated Card 80GB"},
    "trials": {"off": {"alone": {"epoch_s": 1.0}, "packed": {"k": 8, "epoch_s": 4.0}}},
    "hosts": {"baseline": {"phases": {"base": {"epoch_s": 3.6}}, "batch_size": 128, "backbone": "resnet12",
                           "fast_step": "off"},
              "orco": {"phases": {"pretrain": {"epoch_s": 20.0}, "align": {"epoch_s": 6.0}}, "batch_size": 128,
                       "backbone": "resnet12", "fast_step": "off"}},
}


def paper_config(host: str, **kw):
    return from_dict({**host_preset(host, "cifar100_paper"), **kw})


def test_phases_are_the_hosts_own():
    assert gpu_hours.phase_epochs(paper_config("baseline")) == {"base": 100}
    assert gpu_hours.phase_epochs(paper_config("orco")) == {"pretrain": 300, "align": 10}  # OrCo's phase 1 counts


def test_measured_hours_say_what_was_measured_and_what_extrapolated():
    bases = [paper_config("baseline"), paper_config("baseline", seed=1), paper_config("orco"), paper_config("savc")]
    got = gpu_hours.measured(bases, FAKE)
    # 2 x 100 x 3.6 s + 300 x 20 s + 10 x 6 s = 6,780 s; gain 8 x 1.0 / 4.0 = 2; SAVC not measured, not counted
    assert got["alone_h"] == pytest.approx(6780 / 3600) and got["gain"] == 2.0
    assert got["packed_h"] == pytest.approx(6780 / 3600 / 2) and got["missing"] == ["savc"] and not got["unlike"]
    line = gpu_hours.line(bases, "cifar100", FAKE)
    assert line.startswith("measured on one Fabricated Card 80GB (2000-01-01, `bench/gpu.py --compare")
    assert "1.9 GPU hours for 510 base epochs to train, one trial at a time, 0.9 with 8 trials packed" in line
    assert "Measured: each host's base epoch per phase" in line and "Extrapolated:" in line
    assert "the baseline's packing gain applied to every host" in line and "Not measured, not counted: savc" in line
    assert "estimate" not in line


def test_other_settings_than_the_measured_ones_are_said():
    line = gpu_hours.line([paper_config("baseline", batch_size=64)], "cifar100", FAKE)
    assert "Settings unlike the measured ones: baseline (measured at batch 128, resnet12, fast_step off; here batch 64" in line


def test_without_a_measurement_or_on_another_dataset_it_is_the_estimate():
    bases = [paper_config("baseline")]
    none = gpu_hours.line(bases, "cifar100", None)
    assert none.startswith("estimate (not measured on cifar100 here: no measurement (studies/gpu_measured.json")
    assert "1-2 GPU hours for 100 base epochs" in none
    other = gpu_hours.line(bases, "mini_imagenet", FAKE)
    assert other.startswith("estimate (not measured on mini_imagenet here: measured on cifar100 only)")


def test_the_file_is_read_and_a_file_that_is_no_measurement_is_refused(tmp_path):
    path = tmp_path / "gpu_measured.json"
    assert gpu_hours.load(path) is None
    path.write_text(json.dumps(FAKE))
    assert gpu_hours.load(path) == FAKE
    for bad, why in (({**FAKE, "dry": True}, "--dry"), ({**FAKE, "hosts": {}}, "no host epoch times"), ("{", "not JSON")):
        path.write_text(bad if isinstance(bad, str) else json.dumps(bad))
        with pytest.raises(gpu_hours.MeasurementError, match=why):
            gpu_hours.load(path)


def test_the_paper_study_prints_the_measured_line_from_the_file(tmp_path, monkeypatch, capsys):
    from adbs_lab.driver import options

    opts, _ = options.parse("paper", options.Defaults(seeds=(0,)), argv=["--dataset", "cifar100", "--data-root", "x"])
    assert not gpu_hours.FILE.exists()  # the repository holds no measurement yet (docs/gpu.md)
    monkeypatch.setattr(gpu_hours, "FILE", tmp_path / "none.json")
    assert paper._measurement("cifar100", opts) is None
    monkeypatch.setattr(gpu_hours, "FILE", tmp_path / "m.json")
    (tmp_path / "m.json").write_text(json.dumps({**FAKE, "dry": True}))
    assert paper._measurement("cifar100", opts) is None and "the time below is the estimate" in capsys.readouterr().out
    (tmp_path / "m.json").write_text(json.dumps(FAKE))
    m = paper._measurement("cifar100", opts)
    assert m == FAKE and paper._measurement("cub200", opts) is None
    part = type("Checked", (), {"state": None, "bases": [paper_config("baseline")], "trials": 1, "fewest": None,
                                "base_epochs": 100, "name": "ablation"})()
    paper._print_gpu_hours([part], "cifar100", m)
    assert capsys.readouterr().out.startswith("measured on one Fabricated Card 80GB")
    assert paper._estimate(opts, "cifar100", m)(part) == ("~0.1 GPU h alone (measured epoch times on Fabricated Card "
                                                          "80GB, extrapolated)")
    assert "estimate" in paper._estimate(opts, "cifar100", None)(part)
