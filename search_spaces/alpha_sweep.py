"""alpha_sweep: the IC loss weight alpha over the paper's robustness range [0.01, 0.1], full ADBS.

docs/paper-vs-code.md: the paper reports robustness over [0.01, 0.1] with the best at 0.05 on CUB200
and says 0.05 was used everywhere; the official code's default is 0.01.
"""

from optuna.distributions import FloatDistribution

# --num-samples N: TPE samples alpha log-uniformly over the paper's range.
SPACE = {
    "variant": "adb+ic",
    "alpha": FloatDistribution(0.01, 0.1, log=True),  # log-uniform, sampled by TPE
}

# The default: four of the paper's points, spread evenly on a log scale over its range, so that with three
# seeds each (12 trials of about 35 s on 2 cores) the curve and its error bars come in about 5 minutes.
DEFAULT_GRID = {
    "variant": "adb+ic",
    "alpha": [0.01, 0.02, 0.05, 0.1],
}

# --grid: the paper's points (supplement's alpha-sensitivity figure).
GRID = {
    "variant": "adb+ic",
    "alpha": [0.01, 0.02, 0.05, 0.08, 0.1],
}

SMOKE_GRID = {"variant": "adb+ic", "alpha": [0.01, 0.1]}
