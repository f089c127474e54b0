"""Attack on --plan of a raced sampled search (adbs_lab/driver/run.py: seed_plan): its dry run promises "its verdicts
and seed plan", but on a finished race it printed only "no comparisons to plan (... or it samples its
configurations)": the race's verdicts against its leader, which the study printed, are not mentioned."""

from __future__ import annotations

import pandas as pd

from adbs_lab.driver import options, preflight, run
from studies import alpha_sweep
from tests.helpers.recorded import write_record

SAMPLED = options.Defaults(pruner="none", pruner_when=(("num_samples", "median"),), sample_on_request=True,
                           seeds=(0, 1, 2), smoke_seeds=(0,), seeds_when=(("num_samples", (0,)),))
VALUES = {"alpha=0.05": [50.0, 60.0, 60.2, 59.8], "alpha=0.02": [90.0, 50.0, 50.1, 49.9], "alpha=0.01": [10.0]}


def test_plan_of_a_finished_race_prints_its_verdicts_or_says_where_they_are(tmp_path, capsys):
    opts = options.parse("t", SAMPLED, argv=["--smoke", "--num-samples", "3", "--seeds", "auto", "--max-seeds", "3",
                                             "--race-top", "2", "--gpus-per-trial", "0", "--storage",
                                             str(tmp_path)])[0]
    p = preflight.study(*alpha_sweep.plan(opts))
    trials, sessions = [], []
    for lab, vs in VALUES.items():
        for s, v in enumerate(vs):
            tid = f"{lab}-{s}"
            trials.append({"trial_id": tid, "state": "COMPLETE", "label": lab, "seed": s, "val_avg_acc": v,
                           "alpha": float(lab.split("=")[1]), "started_at": 0.0, "finished_at": 10.0})
            sessions += [{"trial_id": tid, "label": lab, "seed": s, "session": k, "test_acc": v - k,
                          "state": "COMPLETE"} for k in (0, 1)]
    p.dir.mkdir(parents=True, exist_ok=True)
    pd.DataFrame(trials).to_parquet(p.dir / "trials.parquet")
    pd.DataFrame(sessions).to_parquet(p.dir / "sessions.parquet")
    write_record(p)
    run.seed_plan(p)
    out = capsys.readouterr().out
    assert "(race leader)" in out or "table.txt" in out, out
