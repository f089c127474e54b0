"""adbs_lab/driver/launch.py: _fit: whatever Tune raises after the study started (Ray's memory monitor, a lost node)
ends in the study's own summary, exit 1 with the --resume command, instead of a raw traceback out of the driver."""

from __future__ import annotations

from types import SimpleNamespace

from adbs_lab.driver import launch

# launch._fit and launch._results_so_far are private: the only way to make Tune's fit() raise what a memory monitor
# raises, without a study that fills the machine's memory.


class _Where:
    def tune_location(self):
        return "unused", None

    def tune_experiment(self):
        return "/nonexistent/experiment"


class _Tuner:
    def __init__(self, error: BaseException):
        self.error = error

    def fit(self):
        raise self.error


def test_an_unexpected_error_from_tune_is_a_failure_with_its_cause(capsys, monkeypatch):
    monkeypatch.setattr(launch, "_results_so_far", lambda where, fs: ["kept"])
    p = SimpleNamespace(where=_Where())
    got = launch._fit(p, _Tuner(RuntimeError("Task was killed due to the node running low on memory.")))
    assert got["results"] == ["kept"] and got["interrupted"] is None
    assert got["failed"] == "Ray Tune stopped: RuntimeError: Task was killed due to the node running low on memory."
    assert "Traceback" in capsys.readouterr().err  # the cause, once


def test_a_full_disk_is_still_named_as_one(monkeypatch):
    monkeypatch.setattr(launch, "_results_so_far", lambda where, fs: [])
    got = launch._fit(SimpleNamespace(where=_Where()), _Tuner(OSError(28, "No space left on device")))
    assert got["failed"].startswith("no space left in")
