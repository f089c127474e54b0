"""Per-epoch progress lines of running trials: throttled, first and last always, s/epoch, ETA, one study estimate."""

from __future__ import annotations

from types import SimpleNamespace

from adbs_lab.records import metrics_keys as K
from adbs_lab.driver.progress import Progress
from adbs_lab.records.trial_records import classify


class Clock:
    def __init__(self):
        self.t = 1000.0

    def __call__(self):
        return self.t


def _epoch(epoch, secs, n=10, val=40.0, reused=0.0):
    return {K.REPORT_KIND: K.KIND_BASE, K.BASE_STEP: epoch, "base/epochs": n, "base/epoch_time_s": secs,
            K.BASE_PRUNE_VALUE: val, "base/reused": reused}


def _progress(clock, **kw):
    return Progress(study="s", total=4, varying=["alpha"], ended=lambda t: classify(t.last_result), max_concurrent=2,
                    clock=clock, **kw)


def test_lines_are_throttled_per_trial_with_first_and_last_epoch_always(capsys):
    clock = Clock()
    p = _progress(clock)
    trial = SimpleNamespace(trial_id="a", config={"alpha": 0.05, "base_epochs": 10})
    for epoch in range(1, 11):  # 20 s per epoch: lines at epochs 1, 3 (40 s after 1), 5, 7, 9 and the last
        clock.t += 20.0 if epoch > 1 else 90.0
        p.on_trial_result(0, [trial], trial, _epoch(epoch, 90.0 if epoch == 1 else 20.0))
    lines = [x for x in capsys.readouterr().out.splitlines() if "base epoch" in x]
    assert [int(x.split("base epoch ")[1].split("/")[0]) for x in lines] == [1, 3, 5, 7, 9, 10]
    assert lines[0] == "[s 01:30] alpha=0.05: base epoch 1/10, val acc 40.00, 90.0 s/epoch, trial ETA 14 min + its " \
                       "incremental sessions"
    assert "20.0 s/epoch, trial ETA 20 s" in lines[-2]  # epoch 9: the first epoch's set-up left out of s/epoch
    assert lines[-1].endswith("base epoch 10/10, val acc 40.00, 20.0 s/epoch")


def test_study_estimate_once_and_reused_base_sessions_print_no_epochs(capsys):
    clock = Clock()
    p = _progress(clock)
    a = SimpleNamespace(trial_id="a", config={"alpha": 0.05})
    b = SimpleNamespace(trial_id="b", config={"alpha": 0.1})
    p.on_trial_result(0, [a, b], a, _epoch(1, 120.0, n=100))
    p.on_trial_result(0, [a, b], b, _epoch(1, 120.0, n=100))
    p.on_trial_result(0, [a, b], b, {K.REPORT_KIND: K.KIND_SESSION, "session/session": 1})  # not an epoch
    out = capsys.readouterr().out
    estimate = [x for x in out.splitlines() if "estimate from this epoch" in x]
    assert len(estimate) == 1 and "base session ~3.3 h per trial (100 epochs x 120.0 s)" in estimate[0]
    assert "4 trials, 2 at a time: ~6.7 h of base sessions in all" in estimate[0]
    c = SimpleNamespace(trial_id="c", config={"alpha": 0.2})
    for epoch in range(1, 4):
        p.on_trial_result(0, [c], c, _epoch(epoch, 0.01, n=3, reused=1.0))
    out = capsys.readouterr().out.splitlines()  # one line says the base session came from the cache, no epochs
    assert len(out) == 1 and out[0].startswith("[s 00:00] alpha=0.2: base session from cache")
    c.status = "TERMINATED"
    _ended(p, [c], c, _done(50.0))
    assert "finished: val avg acc 50.00, test avg acc 49.00 (base session from cache)" in capsys.readouterr().out


def _ended(p, trials, trial, result):
    trial.last_result = result
    p.on_trial_complete(0, trials, trial)


def _done(val, **summary):
    return {K.OBJECTIVE: val, "summary/test_avg_acc": val - 1, **{K.SUMMARY + k: v for k, v in summary.items()},
            K.REPORT_KIND: K.KIND_SUMMARY}


def test_best_so_far_follows_the_objective_and_its_direction(capsys):
    from adbs_lab.records.objectives import DEFAULT, Objective

    a = SimpleNamespace(trial_id="a", config={"alpha": 0.05}, status="TERMINATED")
    b = SimpleNamespace(trial_id="b", config={"alpha": 0.1}, status="TERMINATED")
    p = _progress(Clock())
    _ended(p, [a, b], a, _done(50.0))
    _ended(p, [a, b], b, _done(60.0))
    assert capsys.readouterr().out.splitlines()[-1].endswith("| best val avg acc 60.00 (alpha=0.1)")
    p = _progress(Clock(), objectives=(Objective("val_pd", "min"),))
    _ended(p, [a, b], a, _done(50.0, val_pd=10.0))
    _ended(p, [a, b], b, _done(60.0, val_pd=20.0))
    last = capsys.readouterr().out.splitlines()[-1]
    assert "finished: val avg acc 60.00, test avg acc 59.00; val_pd 20.00" in last
    assert last.endswith("| best val_pd 10.00 (alpha=0.05)")  # minimised: the lower one
    assert DEFAULT[0].name == "val_avg_acc"


def test_several_objectives_show_the_pareto_front_so_far(capsys):
    from adbs_lab.records.objectives import Objective

    objs = (Objective("val_last_base_acc", "max"), Objective("val_last_novel_acc", "max"))
    p = _progress(Clock(), objectives=objs)
    ts = [SimpleNamespace(trial_id=c, config={"alpha": x}, status="TERMINATED") for c, x in zip("abc", (1, 2, 3))]
    # a and b trade base for novel accuracy; c is worse than b on both
    for t, (base, novel) in zip(ts, ((70.0, 20.0), (60.0, 40.0), (55.0, 35.0))):
        _ended(p, ts, t, _done(50.0, val_last_base_acc=base, val_last_novel_acc=novel))
    lines = capsys.readouterr().out.splitlines()
    assert lines[-1].endswith("| Pareto front so far: 2 of 3 complete trials (val_last_base_acc:max, "
                              "val_last_novel_acc:max)")
    assert "val_last_base_acc 55.00, val_last_novel_acc 35.00" in lines[-1]


def test_a_trial_tune_starts_again_says_so(capsys):
    """After a failure (--max-failures) Tune starts a trial a second time: its second start line says it is a
    restart from the last checkpoint, so two start lines of one trial are never a mystery."""
    p = _progress(Clock())
    a, b = (SimpleNamespace(trial_id=i, config={"alpha": x}, status="RUNNING", last_result={}) for i, x in
            (("a", 0.05), ("b", 0.1)))
    for trial in (a, b, a):
        p.on_trial_start(0, [a, b], trial)
    events = [line.split(": ", 1)[1].split(" | ")[0] for line in capsys.readouterr().out.splitlines()]
    assert events == ["started", "started", "started again, from its last checkpoint"]


def test_long_labels_print_once_and_the_lines_name_the_trial_by_its_number(capsys):
    """A search of several knobs labels a trial with ~150 characters: its start line gives the label once, and every
    other line (its epochs, its end, the best so far) names it "trial N", so no line carries two such labels."""
    knobs = ["alpha", "boundary_lr_scale", "boundary_weight_decay", "new_boundary_init", "abs_base_boundary",
             "finetune_epochs", "finetune_lr", "seed"]
    values = [0.01, 0.1, True, "abs_mean", True, 12, 0.07718, 0]
    p = Progress(study="knobs", total=2, varying=knobs, ended=lambda t: classify(t.last_result), clock=Clock())
    a = SimpleNamespace(trial_id="a", config=dict(zip(knobs, values)), status="RUNNING")
    b = SimpleNamespace(trial_id="b", config=dict(zip(knobs, [0.05, *values[1:]])), status="RUNNING")
    p.on_trial_start(0, [a], a)
    p.on_trial_start(0, [a, b], b)
    p.on_trial_result(0, [a, b], b, _epoch(1, 2.0, n=2))
    a.status = "TERMINATED"
    _ended(p, [a, b], a, _done(50.0))
    lines = capsys.readouterr().out.splitlines()
    label = "alpha=0.01 boundary_lr_scale=0.1 boundary_weight_decay=True new_boundary_init=abs_mean " \
            "abs_base_boundary=True finetune_epochs=12 finetune_lr=0.07718 seed=0"
    assert lines[0] == f"[knobs 00:00] trial 1: started ({label}) | done 0/2, running 1, pruned 0, failed 0 | best " \
                       "val avg acc -"
    assert lines[1].startswith("[knobs 00:00] trial 2: started (alpha=0.05 boundary_lr_scale=0.1 ")
    assert lines[2].startswith("[knobs 00:00] trial 2: base epoch 1/2, val acc 40.00")
    assert lines[-1] == ("[knobs 00:00] trial 1: finished: val avg acc 50.00, test avg acc 49.00 | done 1/2, running 1, "
                         "pruned 0, failed 0 | best val avg acc 50.00 (trial 1)")
    assert sum(line.count("boundary_lr_scale=") for line in lines) == 2  # each label once, on its start line
    short = _progress(Clock())  # a short label (alpha_sweep's) is the name itself
    c = SimpleNamespace(trial_id="c", config={"alpha": 0.05}, status="RUNNING")
    short.on_trial_start(0, [c], c)
    assert capsys.readouterr().out.startswith("[s 00:00] alpha=0.05: started | done 0/4")


def test_a_resumed_study_counts_the_trials_that_ended_before(capsys):
    """--resume: Tune restores the trials that ended before the interruption as ended, and the progress callback
    (unpickled as the interrupted run started it) was not told of them; its lines count them all the same."""
    p = _progress(Clock())
    a = SimpleNamespace(trial_id="a", config={"alpha": 0.05}, status="TERMINATED", last_result=_done(50.0))
    b = SimpleNamespace(trial_id="b", config={"alpha": 0.1}, status="RUNNING", last_result={})
    p.on_trial_start(0, [a, b], b)
    assert capsys.readouterr().out.strip().endswith(
        "alpha=0.1: started | done 1/4, running 1, pruned 0, failed 0 | best val avg acc 50.00 (alpha=0.05)")
    p.on_trial_result(0, [a, b], b, _epoch(1, 120.0, n=100))  # the estimate counts the trials to go
    assert "; 3 trials to go, 2 at a time: ~6.7 h of base sessions in all" in capsys.readouterr().out


def test_the_front_so_far_matches_the_front_of_every_complete_trial(capsys):
    """The line compares only the last front and the newly completed trials (Progress._front): checked against
    `front` over every complete trial after each completion, with ties, NaNs and a restored trial running again."""
    import math
    import random

    from adbs_lab.records.objectives import Objective
    from adbs_lab.results.pareto import front

    rng = random.Random(0)
    objs = (Objective("val_last_base_acc", "max"), Objective("val_pd", "min"))
    for objectives in (objs, objs[1:]):
        p = Progress(study="s", total=200, varying=["alpha"], ended=lambda t: classify(t.last_result),
                     clock=Clock(), objectives=objectives)
        ts = [SimpleNamespace(trial_id=f"t{i}", config={"alpha": i}, status="TERMINATED") for i in range(200)]
        for i, t in enumerate(ts):
            if i == 120:  # the best trial is restored and runs again: it leaves the complete trials, then ends worst
                p.on_trial_start(0, ts[:i], ts[3])
                _ended(p, ts[:i], ts[3], _done(50.0, val_last_base_acc=-1.0, val_pd=99.0))
            base = rng.choice([float(rng.randint(0, 20)), math.nan]) if i % 17 == 0 else float(rng.randint(0, 20))
            pd = float(rng.randint(0, 20))
            base, pd = (30.0, -5.0) if i == 3 else (base, pd)  # better than every other trial on both
            _ended(p, ts[:i + 1], t, _done(50.0, val_last_base_acc=base, val_pd=pd))
            line = capsys.readouterr().out.splitlines()[-1]
            done = ts[:i + 1]
            values = [[t.last_result[K.SUMMARY + o.name] for o in objectives] for t in done]
            on = front(values, [o.direction for o in objectives])
            if len(objectives) > 1:
                assert line.endswith(f"Pareto front so far: {len(on)} of {len(done)} complete trials "
                                     "(val_last_base_acc:max, val_pd:min)"), line
            else:
                assert line.endswith(f"| best val_pd {values[on[0]][0]:.2f} (alpha={done[on[0]].config['alpha']})")


def test_the_estimate_counts_only_the_base_sessions_still_to_train(capsys):
    """"~57 min of base sessions in all" with 2 left to train ended 11 min later: the trials that load their base
    session from the cache (told before they start: adbs_lab/driver/base_sessions.py) are not counted."""
    p = Progress(study="s", total=24, varying=["alpha"], ended=lambda t: classify(t.last_result), max_concurrent=2,
                 clock=Clock(), to_train=2)
    a = SimpleNamespace(trial_id="a", config={"alpha": 0.05})
    p.on_trial_result(0, [a], a, _epoch(1, 120.0, n=100))
    assert ("24 trials, 2 of them training a base session (the other 22 load theirs), 2 at a time: ~3.3 h of base "
            "sessions in all") in capsys.readouterr().out
    # not told before (a sampled space): less the trials seen loading theirs so far
    q = _progress(Clock())
    c = SimpleNamespace(trial_id="c", config={"alpha": 0.2})
    p_c = [_epoch(e, 0.01, n=3, reused=1.0) for e in (1, 2, 3)]
    for r in p_c:
        q.on_trial_result(0, [a, c], c, r)
    q.on_trial_result(0, [a, c], a, _epoch(1, 120.0, n=100))
    assert "4 trials, 3 of them training a base session (the other one loads its own), 2 at a time: ~6.7 h" in \
        capsys.readouterr().out
