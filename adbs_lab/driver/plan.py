"""A study's plan: what it searches and how its table reads. A study script builds one and hands it to
adbs_lab/study.py (`study.main(plan, opts)`), or several to adbs_lab/driver/compose.py."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

__all__ = ["Plan"]


@dataclass
class Plan:
    name: str
    """Study name = MLflow experiment = Optuna study name = storage folder."""
    space: dict[str, Any]
    """Search space (see adbs_lab.search.space): fixed values, grid axes (lists), Optuna distributions."""
    space_source: str
    """Where the space is defined, e.g. search_spaces/alpha_sweep.py:SPACE (MLflow tag adbs.search_space)."""
    rows: dict[str, dict] | None = None
    """Named rows of Config overrides (a grid axis `row`), for studies that are not a product."""
    cpu_defaults: dict[str, Any] = field(default_factory=dict)
    """Config overrides applied on the default CPU preset only, to fit the CPU budget."""
    baseline: str | dict[str, str] | None = None
    """Label of the baseline row (Delta_last column), or {row: its reference row}; every row is compared with its
    reference (a verdict each: adbs_lab/results/comparisons.py)."""
    parents: dict[str, str] | None = None
    """{row: the row it adds one change to}, compared too where that is not its reference (the ablation's adb+ic
    against adb, each toggle row against adb+ic)."""
    reference_axis: str | None = None
    """A grid axis whose value in the base config names the reference row (alpha_sweep: each alpha against the
    preset's alpha); `--reference LABEL` names another row."""
    conditions: tuple[str, ...] = ()
    """Grid axes that are data conditions, not knobs (kshot_grid: ways, shots): no configuration is named best
    across them, and the importance analysis ranks none of them."""
    reference_value: Any = None
    """With `reference_axis`: the axis value of every row's reference (kshot_grid: variant baseline, in the same
    cell); None: the base config's value (alpha_sweep: the preset's alpha)."""
    order: list[str] | None = None
    """Row order of the paper table."""
    axis_flags: dict[str, str] = field(default_factory=dict)
    """Study flags that pick part of a grid axis, e.g. {"ways": "--ways"} (named when --set on that axis is refused)."""
    points_to_evaluate: list[dict] | None = None
    """Configurations Optuna runs first (sampled studies)."""
    est_trial_s: float = 45.0
    """Rough seconds per trial on the default CPU preset, 2 trials sharing 2 cores (printed estimate; the studies'
    figures are kept in studies/times.json)."""
    est_smoke_trial_s: float = 35.0
    """The same with --smoke."""
    est_load: float = 0.0
    """The load average est_trial_s was measured at (studies/times.json; the start line scales the estimate to the
    load it finds: adbs_lab/driver/launch.py: load_factor)."""
    trial_fn: Callable | None = None
    """Test hook: replaces adbs.trial.run_trial inside the trainable."""
