"""alpha_sweep: the IC loss weight alpha over the paper's robustness range [0.01, 0.1], full ADBS.

docs/paper-vs-code.md: the paper reports robustness over [0.01, 0.1] with the best at 0.05 on CUB200
and says 0.05 was used everywhere; the official code's default is 0.01.
"""

from optuna.distributions import FloatDistribution

SPACE = {
    "variant": "adb+ic",
    "alpha": FloatDistribution(0.01, 0.1, log=True),  # log-uniform, sampled by TPE
}

# --grid: the paper's points (supplement's alpha-sensitivity figure).
GRID = {
    "variant": "adb+ic",
    "alpha": [0.01, 0.02, 0.05, 0.08, 0.1],
}

SMOKE_GRID = {"variant": "adb+ic", "alpha": [0.01, 0.1]}
