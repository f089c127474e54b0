"""kshot_grid: the paper's "practical settings", ways {5, 10} x shots {1, 5, 10, 15, 20, 50}.

Each cell is the full pipeline. On the embedded synthetic benchmark (40 novel classes)
ways 10 gives 4 incremental sessions and ways 5 gives 8 (sessions = None: all novel classes).
"""

GRID = {
    "variant": "adb+ic",
    "ways": [5, 10],
    "shots": [1, 5, 10, 15, 20, 50],
}

SMOKE_GRID = {"variant": "adb+ic", "ways": [5, 10], "shots": [1, 5]}

# Ways and shots are data conditions, not knobs: each cell asks "does ADBS help at k shots?", so every cell runs the
# baseline (fixed boundary m = 1) beside full ADBS, and each adb+ic row is compared with the baseline of its own cell.
VARIANTS = ["baseline", "adb+ic"]
SMOKE_VARIANTS = ["adb+ic"]  # --smoke checks the pipeline in seconds: one variant unless --variants says otherwise
REFERENCE_VARIANT = "baseline"
CONDITIONS = ("ways", "shots")
