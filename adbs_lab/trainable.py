"""The Tune function trainable: one Tune trial = one config + one seed = the full FSCIL pipeline.

Reports, all through `tune.report` (Ray 2.60: never `ray.train.report` inside Tune):
- after each base epoch: `base/*` (step key base/epoch);
- after each session: `session/*` (step key session/session, 0 = base);
- at the end: `summary/*`.
Every report carries the objective key (strict metric checking), as NaN until the summary;
StudySearch never tells that placeholder to Optuna (it checks REPORT_KIND).
"""

from __future__ import annotations

from typing import Any, Callable

from adbs_lab import metrics_keys as K
from adbs_lab.space import resolve


def make_trainable(*, cpus_per_trial: float, rows: dict[str, dict] | None = None,
                   trial_fn: Callable | None = None) -> Callable[[dict[str, Any]], None]:
    """`trial_fn(cfg, hooks=...)` defaults to adbs.train.run_trial (tests may pass a fake)."""
    threads = max(1, int(cpus_per_trial))

    def adbs_trial(config: dict[str, Any]) -> None:
        import torch
        from ray import tune

        from adbs.train import Hooks

        # Ray sets OMP_NUM_THREADS only when unset; torch's pool must follow the trial's CPUs.
        torch.set_num_threads(threads)
        cfg = resolve(config, rows)
        placeholder = {K.OBJECTIVE: float("nan")}

        def on_base_epoch(m: dict[str, float]) -> None:
            tune.report({**K.base(m), **placeholder, K.REPORT_KIND: K.KIND_BASE})

        def on_session(m: dict[str, float]) -> None:
            tune.report({**K.session(m), **placeholder, K.REPORT_KIND: K.KIND_SESSION})

        fn = trial_fn
        if fn is None:
            from adbs.train import run_trial as fn
        result = fn(cfg, hooks=Hooks(on_base_epoch=on_base_epoch, on_session=on_session))
        summary = K.summary(result.summary)
        summary.setdefault(K.OBJECTIVE, float("nan"))
        tune.report({**summary, K.REPORT_KIND: K.KIND_SUMMARY})

    return adbs_trial
