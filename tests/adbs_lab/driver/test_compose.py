"""adbs_lab/driver/compose.py: several studies as one, the order and codes of its parts (each part's own run is
replaced by a stand-in; studies/paper.py runs the real thing in tests/studies/test_paper.py)."""

from __future__ import annotations

from dataclasses import dataclass, replace

import pytest

from adbs import exits
from adbs_lab.driver import outcome
from adbs_lab.driver import compose
from adbs_lab.driver.plan import Plan


@dataclass(frozen=True)
class _Opts:
    resume: bool = False

    def replace(self, **changes) -> "_Opts":
        return replace(self, **changes)


def _whole(states: dict[str, str | None]) -> tuple[compose.Composite, list[compose.Checked]]:
    parts = [compose.Part(name, Plan(name=name, space={}, space_source="test"), _Opts(), title=f"the {name} part")
             for name in states]
    whole = compose.Composite("paper", "embedded", parts, shown="/runs", tracking_uri="sqlite:///m.db")
    return whole, [compose.Checked(p, trials=2, base_epochs=4, state=states[p.name]) for p in parts]


def _stand_in(monkeypatch, ends: dict[str, int]) -> list[tuple[str, bool]]:
    """Each part's run ends with the code `ends` gives it: a part named exit_* by SystemExit (as the driver ends a
    refusal, a failure after the start or an interruption), the others by returning it (a study whose trial
    failed returns its Outcome with code 1)."""
    ran = []

    def run(plan, opts):
        ran.append((plan.name, opts.resume))
        code = ends.get(plan.name, exits.OK)
        if code != exits.OK and plan.name.startswith("exit"):
            raise SystemExit(code)
        return type("Out", (), {"code": code})()

    monkeypatch.setattr(compose, "run", run)
    return ran


def test_finished_parts_are_reused_interrupted_ones_continued_and_a_failed_one_does_not_stop_the_others(
        monkeypatch, capsys):
    whole, checked = _whole({"a": compose.FINISHED, "exit_b": None, "c": compose.UNFINISHED, "d": None})
    ran = _stand_in(monkeypatch, {"exit_b": exits.REFUSED, "d": exits.FAILED})
    codes = whole.run(checked)
    assert ran == [("exit_b", False), ("c", True), ("d", False)]
    assert codes == {"exit_b": exits.REFUSED, "c": exits.OK, "d": exits.FAILED}
    assert outcome.worst(codes.values()) == exits.FAILED
    out = capsys.readouterr().out
    assert "paper: a finished earlier in /runs; reused" in out and "paper: c (the c part)" in out


def test_an_interrupted_part_stops_the_whole_at_once(monkeypatch, capsys):
    whole, checked = _whole({"a": None, "exit_b": None, "c": None})
    ran = _stand_in(monkeypatch, {"exit_b": exits.INTERRUPTED})
    with pytest.raises(SystemExit) as e:
        whole.run(checked)
    assert e.value.code == exits.INTERRUPTED and [name for name, _ in ran] == ["a", "exit_b"]
    assert "paper: interrupted in exit_b; rerun the same command to continue" in capsys.readouterr().err


def test_the_cost_lines_count_what_runs(capsys):
    whole, checked = _whole({"a": compose.FINISHED, "b": None})
    whole.print_cost(checked, lambda c: f"~{c.base_epochs} epochs", seeds=(0, 1))
    whole.print_dry_run(checked)
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "paper (embedded): 2 studies, 4 trials, 2 to run (seeds 0 1), into /runs"
    assert out[1].split() == ["a", "2", "trials", "~4", "epochs", "[finished", "earlier:", "reused]"]
    assert out[2].split()[-2:] == ["[to", "run]"]
    assert out[3] == ("dry run: study paper (embedded), 4 trials in 2 studies checked; nothing was started and no "
                      "result written")
