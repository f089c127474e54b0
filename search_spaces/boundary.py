"""boundary: the released boundary recipe, each remedy for its collapse, and the fixed-boundary baseline.

Rows are named sets of Config overrides (docs/boundary-dynamics.md says what each one answers).
Every ADBS row states all remedy fields, so a preset that turns a remedy on cannot leak into the
row that is meant to be the released code. Values of the two numeric remedies are set here once,
not tuned: an lr an order of magnitude below the backbone's, and m frozen for the first two base
epochs (the released recipe's boundaries cross zero in the first epoch).
"""

from typing import Any

RELEASED: dict[str, Any] = {
    "variant": "adb+ic",
    "new_boundary_init": "mean",  # signed mean of the old boundaries
    "finetune_abs_boundary": False,  # signed m in the fine-tuning loop
    "abs_base_boundary": False,  # signed base m carried into the sessions
    "boundary_lr_scale": 1.0,  # m shares the backbone's lr
    "boundary_warmup_epochs": 0,  # m trains from the first step
}

REMEDIES: dict[str, dict[str, Any]] = {
    "abs_mean_init": {"new_boundary_init": "abs_mean"},  # new m = mean |m| (the paper's "mean boundary")
    "finetune_abs": {"finetune_abs_boundary": True},  # |m| in the fine-tuning loop, as at evaluation
    "abs_base": {"abs_base_boundary": True},  # |m| of the base boundaries before the sessions
    "lr_scale=0.1": {"boundary_lr_scale": 0.1},  # m learns ten times slower than the backbone
    "warmup=2": {"boundary_warmup_epochs": 2},  # m frozen at 1 for the first two base epochs
}

ROWS = {
    "released": RELEASED,
    **{name: {**RELEASED, **change} for name, change in REMEDIES.items()},
    "all_remedies": {**RELEASED, **{k: v for change in REMEDIES.values() for k, v in change.items()}},
    "baseline": {"variant": "baseline"},  # fixed boundary m = 1, no boundary fine-tuning
}

BASELINE = "baseline"

# Each remedy row (and all of them together) changes the released recipe: besides the baseline, it is compared with
# the released row, the one comparison that says what the remedy does.
PARENTS: dict[str, str] = {name: "released" for name in [*REMEDIES, "all_remedies"]}

SPACE: dict[str, Any] = {}  # nothing sampled: every row over every seed
