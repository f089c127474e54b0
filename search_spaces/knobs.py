"""knobs: ADBS's own knobs, searched together by TPE (studies/knobs.py).

Knobs that shape the base session (alpha, boundary_lr_scale, boundary_warmup_epochs, boundary_weight_decay,
temperature: adbs/config/schema.py marks them Base) make every new value a new base session to train; the others
(new_boundary_init, finetune_epochs, finetune_lr, abs_base_boundary) act on the incremental sessions only, so a
trial that repeats a base setting loads its base session from the cache (adbs/cache.py) and costs seconds.

CPU_SPACE (the default on the CPU presets): each base knob takes two values, three of them searched, so at most 8
base settings are trained and every other sample only reruns the incremental sessions; the session knobs range
freely. SPACE (the paper's datasets, GPU): every knob over its range.
"""

from optuna.distributions import CategoricalDistribution, FloatDistribution, IntDistribution

from adbs.config import NEW_BOUNDARY_INITS

SESSION_KNOBS = {
    "new_boundary_init": CategoricalDistribution(NEW_BOUNDARY_INITS),
    "abs_base_boundary": CategoricalDistribution((False, True)),
    "finetune_epochs": IntDistribution(0, 20),
    "finetune_lr": FloatDistribution(0.001, 0.1, log=True),
}

CPU_SPACE = {
    "variant": "adb+ic",
    # two values each (the official code's and one that departs from it): few base sessions to train
    "alpha": CategoricalDistribution((0.01, 0.05)),  # official default, the paper's value
    "boundary_lr_scale": CategoricalDistribution((0.1, 1.0)),
    "boundary_weight_decay": CategoricalDistribution((True, False)),
    **SESSION_KNOBS,
}

SPACE = {
    "variant": "adb+ic",
    "alpha": FloatDistribution(0.01, 0.1, log=True),  # the paper's robustness range
    "boundary_lr_scale": FloatDistribution(0.01, 1.0, log=True),
    "boundary_warmup_epochs": IntDistribution(0, 5),
    "boundary_weight_decay": CategoricalDistribution((True, False)),
    "temperature": CategoricalDistribution((8.0, 16.0, 32.0)),
    **SESSION_KNOBS,
}
