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
