"""What a trial, the tracker and the tables agree on: the contract at the bottom of adbs_lab/. The package imports
nothing, so `from adbs_lab.records import metrics_keys` is the module.

    metrics_keys   metric names (base/..., session/..., summary/...), trial states, Tune's config keys
    trial_records  a trial's rows (sessions, summary, config columns) as the tables and the store read them
    attempts       one record per trial: a trial's identity, and which of its attempts (a rerun after --resume) counts
    config_values  a config column's values as they ran (None a value, a missing one not), trials.parquet's texts
    value_text     the one text of a config value, its value back, a value in a row label (standard library only)
    objectives     what --objectives names, parsed once (Objective, parse, the pruner's premise, the run tag)
"""

__all__ = ["metrics_keys", "trial_records", "attempts", "config_values", "value_text", "objectives"]
