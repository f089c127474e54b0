"""The trainable's report contract: base/*, session/*, summary/*; the objective key in every report."""

from __future__ import annotations

import math

import pytest
import ray.tune

from adbs_lab.records import metrics_keys as K
from adbs_lab.search.space import resolve_trial
from adbs_lab.records.tune_keys import CONFIG_KEY
from adbs_lab.search.trainable import make_trainable


class _Result:
    summary = {"val_avg_acc": 50.0, "test_avg_acc": 48.0}


def _fake(cfg, *, hooks):
    assert cfg.seed == cfg.split_seed == 3 and cfg.alpha == 0.05
    hooks.on_base_epoch({"epoch": 1, "val_acc": 10.0, "train_loss": 2.0})
    hooks.on_session({"session": 0, "test_acc": 40.0, "val_novel_acc": float("nan")})
    return _Result()


@pytest.mark.slow
def test_reports_follow_the_metric_contract(monkeypatch):
    reports = []
    monkeypatch.setattr(ray.tune, "report", lambda metrics, **kw: reports.append(metrics))
    fn = make_trainable(trial_fn=_fake)
    config = {"alpha": 0.05, "trial_seed": 3, "_optuna_trial": 0}
    fn({**config, CONFIG_KEY: resolve_trial(config)})  # the Config the driver resolved (StudySearch.suggest)
    base, session, summary = reports
    assert base[K.REPORT_KIND] == K.KIND_BASE and base["base/val_acc"] == 10.0 and base[K.BASE_STEP] == 1
    assert session[K.REPORT_KIND] == K.KIND_SESSION and session["session/test_acc"] == 40.0
    assert summary[K.REPORT_KIND] == K.KIND_SUMMARY and summary[K.OBJECTIVE] == 50.0
    assert all(K.OBJECTIVE in r for r in reports)  # strict metric checking
    assert math.isnan(base[K.OBJECTIVE]) and math.isnan(session[K.OBJECTIVE])  # placeholder, never told
    assert not any(k.startswith(K.SUMMARY) for k in base if k != K.OBJECTIVE)


def test_a_stopped_trials_systemexit_in_a_gc_callback_is_not_printed():
    """Ray's SIGTERM handler raising SystemExit inside a weakref callback printed "Exception ignored ..."
    into the study's output when the pruner stopped a trial; other unraisable exceptions still reach the
    hook that was there before."""
    import gc
    import sys
    import weakref

    # private (adbs_lab/search/trainable.py): the hook itself, tested directly
    from adbs_lab.search.trainable import _quiet_stop

    saved = sys.unraisablehook
    seen = []
    sys.unraisablehook = lambda u: seen.append(type(u.exc_value).__name__)
    try:
        _quiet_stop()
        _quiet_stop()  # idempotent: one hook, not a chain

        class Obj:
            pass

        for exc in (SystemExit(1), ValueError("shown")):
            o = Obj()

            def cb(_ref, exc=exc):
                raise exc

            r = weakref.ref(o, cb)  # noqa: F841 - the callback runs when o is collected
            del o
            gc.collect()
        assert seen == ["ValueError"]
    finally:
        sys.unraisablehook = saved


def test_a_damaged_trial_checkpoint_is_named_and_never_resumed_from(tmp_path, capsys):
    """A restarted trial once loaded its checkpoint as it found it: bytes changed in place went into the resumed
    trial in silence, and an unreadable file failed every restart. Now its SHA-256 is checked: a damaged state
    is named in one line and the trial starts again from its beginning (to the same numbers)."""
    import torch

    from adbs_lab.search.trainable import CHECKPOINT_DIGEST, CHECKPOINT_FILE, load_checkpoint, write_checkpoint

    from adbs.state import FORMAT

    state = {"format": FORMAT, "phase": "base", "epoch": 3, "model": {"w": torch.arange(100000, dtype=torch.float32)}}
    write_checkpoint(state, str(tmp_path))
    got = load_checkpoint(str(tmp_path))
    assert got["epoch"] == 3 and torch.equal(got["model"]["w"], state["model"]["w"])
    assert capsys.readouterr().err == ""
    path = tmp_path / CHECKPOINT_FILE
    blob = bytearray(path.read_bytes())
    blob[len(blob) // 2] ^= 0xFF  # one tensor byte changed in place: torch.load alone would take it
    path.write_bytes(bytes(blob))
    assert load_checkpoint(str(tmp_path)) is None
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"trial checkpoint {path} is damaged" in err[0] and "starts again" in err[0], err
    path.write_bytes(b"cut short")
    (tmp_path / CHECKPOINT_DIGEST).unlink()  # a checkpoint from before the digest: load-checked only
    assert load_checkpoint(str(tmp_path)) is None and "is damaged" in capsys.readouterr().err
    write_checkpoint(state, str(tmp_path))
    (tmp_path / CHECKPOINT_DIGEST).unlink()
    assert load_checkpoint(str(tmp_path))["epoch"] == 3


def test_a_trial_checkpoint_from_an_older_version_starts_the_trial_over(tmp_path, capsys):
    """A trial Tune restarted from a checkpoint written before checkpoints carried a format (adbs/state.py: FORMAT)
    failed: run_trial refuses that state (StateFormatError), so every restart failed the same way. Now the trainable
    names it in one line and the trial starts again from its beginning (to the same numbers), as for a damaged one."""
    import torch

    from adbs.state import FORMAT
    from adbs_lab.search.trainable import CHECKPOINT_FILE, load_checkpoint, write_checkpoint

    old = {"phase": "base", "epoch": 3, "model": {"w": torch.zeros(4)}}  # format 1: no "format" key
    write_checkpoint(old, str(tmp_path))
    assert load_checkpoint(str(tmp_path)) is None
    err = capsys.readouterr().err.strip().splitlines()
    path = tmp_path / CHECKPOINT_FILE
    assert len(err) == 1 and f"trial checkpoint {path}" in err[0] and "older version" in err[0], err
    assert "starts again" in err[0] and f"format {FORMAT}" in err[0], err
    write_checkpoint({**old, "format": FORMAT}, str(tmp_path))  # this version's: resumed from
    assert load_checkpoint(str(tmp_path))["epoch"] == 3 and capsys.readouterr().err == ""
