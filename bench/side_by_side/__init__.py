"""Side by side with the authors' released ADBS code, on identical data, over seeds.

The package behind bench/vs_official.py (its docstring has the commands and what a run does). One job
per module, in the order a run uses them:

    patches.py, patches.yaml   check the checkout, copy it, patch the copy (the patches are data)
    data.py                    write the embedded benchmark in the CIFAR-100 layout, with index lists
    commands.py                the two codes' command lines; the released run's settings as Config fields
    reuse.py                   --released-from: the released runs of an earlier results folder
    run.py                     run the jobs (one at a time or --jobs), echo progress, stop on a failure
    logs.py                    read the released log and ours' result JSON
    stats.py                   means, 95% CIs, ours - released with Welch CIs
    report.py                  the report text and the files written to --out
    cli.py                     the options, their checks, main

This module holds what they share: the protocol's figures and the tool's error.
"""

from __future__ import annotations

# CIFAR-100 FSCIL (docs/protocols.md): 60 base classes, 8 sessions of 5 ways x 5 shots.
BASE_CLASSES, NUM_CLASSES, WAYS, SHOTS, ALL_SESSIONS = 60, 100, 5, 5, 8


class ToolError(RuntimeError):
    """A bad input or a failed step; the message says what to do (exit status 2)."""
