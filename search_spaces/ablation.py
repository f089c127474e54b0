"""ablation: the paper's ablation rows (docs/method.md, "Ablations the paper reports") and finer toggles.

Rows are named sets of Config overrides, not a Cartesian product: IC without ADB is empty
(with m = 1 every IC term is 0), so it is not a row.
"""

from typing import Any

SPACE: dict[str, Any] = {}  # fixed values shared by every row (none: the preset decides)

ROWS: dict[str, dict[str, Any]] = {
    "baseline": {"variant": "baseline"},  # fixed boundary m = 1, no boundary fine-tuning
    "adb": {"variant": "adb"},  # learnable boundaries, alpha = 0
    "adb+ic": {"variant": "adb+ic"},  # full ADBS
}

# Finer toggles (`--toggles NAME ...`): each adds a row = full ADBS with one change.
TOGGLES: dict[str, dict[str, Any]] = {
    "abs_boundary": {"variant": "adb+ic", "abs_boundary": False},  # signed m in logits
    "new_boundary_init": {"variant": "adb+ic", "new_boundary_init": "one"},  # new boundaries start at 1.0
    "boundary_weight_decay": {"variant": "adb+ic", "boundary_weight_decay": False},  # no weight decay on m
    "finetune": {"variant": "adb+ic", "finetune_epochs": 0},  # no incremental boundary fine-tuning
    "ic_sum": {"variant": "adb+ic", "ic_reduction": "sum"},  # the paper's sum instead of the code's mean
}

BASELINE = "baseline"

# The row each row adds one change to: besides the baseline, each row is compared with it (the paper's ablation credits
# IC with adb -> adb+ic; docs/method.md, "Ablations the paper reports"). A toggle row "adb+ic -NAME" adds one to adb+ic.
PARENTS: dict[str, str] = {"adb": "baseline", "adb+ic": "adb"}
TOGGLE_PARENT = "adb+ic"
