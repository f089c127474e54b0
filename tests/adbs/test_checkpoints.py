"""Typed checkpoints (adbs/state.py): written with their format, read in one place, an older format refused; and a
trial killed in the middle of a base epoch or of a session resumes from its saved checkpoint to the numbers of an
uninterrupted run."""

import copy
import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch

from adbs.cache import BaseCache
from adbs.data import build_data
from adbs.trainer import Hooks
from adbs.config import preset
from adbs.state import (FORMAT, BaseCheckpoint, BaseSession, SessionCheckpoint, StateFormatError, base_state,
                        read_checkpoint)
from adbs.trial import run_trial

ROOT = Path(__file__).resolve().parents[2]
TINY = dict(base_epochs=3, base_images_per_class=8, val_fraction=0.02, novel_val_per_class=4, sessions=2,
            finetune_epochs=2, threads=1)


def tiny():
    return preset("smoke", **TINY)


@pytest.fixture(scope="module")
def data():
    return build_data(tiny())


def _untimed(curve):
    return [{k: v for k, v in r.items() if k != "epoch_time_s"} for r in curve]


def _digits(rows) -> str:
    """Every number to its last digit, NaN included (rows read back from a file hold NaNs that are not the same
    object as the uninterrupted run's, and NaN != NaN)."""
    return json.dumps(rows, sort_keys=True)


@pytest.fixture(scope="module")
def states():
    """The saved checkpoints of one tiny trial cut short (2 base epochs, 1 session): base epoch 2, sessions 0 and 1."""
    out = []
    run_trial(tiny().replace(base_epochs=2, sessions=1, finetune_epochs=1),
              hooks=Hooks(on_checkpoint=lambda s: out.append(copy.deepcopy(s))))
    return out


def test_checkpoints_carry_their_format_and_read_back_typed(states):
    assert [(s["phase"], s.get("epoch", s.get("session"))) for s in states] == [
        ("base", 2), ("sessions", 0), ("sessions", 1)]
    assert all(s["format"] == FORMAT for s in states)
    typed = [read_checkpoint(s) for s in states]
    assert [type(c) for c in typed] == [BaseCheckpoint] + [SessionCheckpoint] * 2
    assert typed[0].epoch == 2 and typed[0].best_epoch in (1, 2) and typed[-1].session == 1
    assert isinstance(typed[-1].base, BaseSession)  # no cache: the session checkpoint carries its base session
    again = read_checkpoint(typed[0].to_dict())  # written and read in one place: the same checkpoint back
    assert again.epoch == typed[0].epoch and torch.equal(again.boundaries, typed[0].boundaries)


def test_a_checkpoint_of_the_old_format_is_refused_before_anything_runs(data, states):
    """A checkpoint written before checkpoints carried a format (its keys read by name in two places) would have
    been resumed from as it was; now it is refused with what to do, before any epoch runs."""
    ran = []
    for state in (states[0], states[-1]):
        old = {k: v for k, v in state.items() if k != "format"}  # what cd89a91 wrote
        with pytest.raises(StateFormatError, match="format 1 .*start the trial again without it"):
            run_trial(tiny(), data=data, resume=old, hooks=Hooks(on_base_epoch=ran.append, on_session=ran.append))
    assert ran == []


def test_a_base_cache_entry_of_the_old_format_is_discarded_with_a_message(tmp_path):
    said: list[str] = []
    cache = BaseCache(tmp_path, log=said.append)
    base = BaseSession(backbone_state={"w": torch.ones(3)}, prototypes=torch.ones(4, 2), boundaries=torch.ones(4),
                       curve=[{"epoch": 1}], best_epoch=1)
    cache._write("old", dict(vars(base)), None)  # an entry as cd89a91 stored it: the fields, no format
    assert cache.load("old") is None and len(said) == 1
    assert "format 1" in said[0] and "discarded" in said[0], said
    cache._write("new", base_state(base), None)
    assert torch.equal(cache.load("new").prototypes, base.prototypes)


KILLED_RUN = textwrap.dedent("""
    import os, signal, sys, torch
    sys.path.insert(0, {root!r})
    import adbs.loops, adbs.sessions
    from adbs.loops import Hooks
    from adbs.config import preset
    from adbs.trial import run_trial

    where, target = {where!r}, {target!r}
    batches, finetunes = adbs.loops.batch_generator, adbs.sessions.finetune_boundaries

    def batch_generator(seed, epoch, b):  # the base epoch's second batch: the first one has changed the model
        if where == "base" and (epoch, b) == (target, 1):
            os.kill(os.getpid(), signal.SIGKILL)
        return batches(seed, epoch, b)

    calls = []
    def finetune_boundaries(*args, **kw):  # session `target`'s fine-tuning: its rows are made, its m not yet
        calls.append(1)
        if where == "session" and len(calls) == target:
            os.kill(os.getpid(), signal.SIGKILL)
        return finetunes(*args, **kw)

    adbs.loops.batch_generator, adbs.sessions.finetune_boundaries = batch_generator, finetune_boundaries

    def save(state):  # as a tracker keeps it: atomically, in its saved form
        torch.save(state, {path!r} + ".tmp")
        os.replace({path!r} + ".tmp", {path!r})

    run_trial(preset("smoke", **{tiny!r}), hooks=Hooks(on_checkpoint=save, checkpoint_every=1))
""")


@pytest.mark.slow
@pytest.mark.parametrize("where, target, resumes_after", [("base", 2, ("base", 1)), ("session", 2, ("sessions", 1))])
def test_a_run_killed_mid_epoch_or_mid_session_resumes_to_the_same_numbers(data, tmp_path, where, target,
                                                                           resumes_after):
    """The process is killed (SIGKILL: nothing after it runs) inside base epoch 2, after its first batch changed the
    model, or inside session 2's boundary fine-tuning; the trial resumed from the checkpoint it saved last gives
    the uninterrupted run's numbers, and reports only what comes after that checkpoint."""
    path = tmp_path / "checkpoint.pt"
    script = KILLED_RUN.format(root=str(ROOT), where=where, target=target, path=str(path), tiny=TINY)
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=600)
    assert proc.returncode == -9, proc.stderr[-2000:]
    state = torch.load(path, weights_only=False)
    assert state["format"] == FORMAT
    assert (state["phase"], state.get("epoch", state.get("session"))) == resumes_after

    full = run_trial(tiny(), data=data)
    epochs, sessions = [], []
    resumed = run_trial(tiny(), data=data, resume=state,
                        hooks=Hooks(on_base_epoch=epochs.append, on_session=sessions.append))
    assert _digits(resumed.sessions) == _digits(full.sessions) and resumed.boundaries == full.boundaries
    assert _digits(_untimed(resumed.base_curve)) == _digits(_untimed(full.base_curve))
    assert resumed.summary["best_base_epoch"] == full.summary["best_base_epoch"]
    assert [r["epoch"] for r in epochs] == ([2, 3] if where == "base" else [])
    assert [r["session"] for r in sessions] == ([0, 1, 2] if where == "base" else [2])
