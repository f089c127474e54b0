"""A verdict for every comparison of a study's table, with an error guarantee: the lowest layer of adbs_lab/
(numpy and scipy only, never pandas, torch, ray, optuna or mlflow). The package imports nothing, so
`from adbs_lab.stats import verdicts` is the module. The methods and their references: docs/statistics.md.

    intervals    every t-interval printed: paired (Student), unpaired (Welch), a table cell's mean ± half-width
    looks        the planned looks (n0, n0 + b, ..., N seeds, then a continuation's up to a horizon) and the error
                 rate spent at each (Lan & DeMets 1983)
    continuation where a study pauses, "continue" or "inconclusive at the horizon", the α split over the metrics
    forecast     where the plan would resolve an open comparison (posterior predictive), and the time it implies
    confseq      an anytime-valid confidence sequence for a paired mean (Wang & Ramdas 2023), the route not taken
    workflow     simulated studies followed as their output advises, for the tests and
                 bench/continuation_simulation.py
    verdicts     one comparison's verdict from its interval, Bonferroni over the table
    policy       a study's verdict policy: its family, α (the level it prints), δ, its looks; its MLflow tags
    planner      how many seeds would settle a comparison (Browne 1995's upper bound on σ, c4), and their cost
    sequential   seeds added in batches until every comparison is resolved: which rows run next, or done
    simulate     simulated studies (normal and heavy-tailed noise) for the tests and bench/verdict_simulation.py
    corners      the corners' simulated data and truths: grid accuracies (ties), t(3), task levels, unequal spreads
    aggregate    over tasks: per-seed differences (IQM, expanded percentile bootstrap; mean of task means),
                 paired P(X > Y) (Clopper-Pearson)
    premise      does base accuracy predict the objective: weighted Spearman rho (Bonett & Wright 2000), pruning regret,
                 --pruner auto's checks at fixed trial counts
"""

__all__ = ["intervals", "looks", "verdicts", "policy", "planner", "sequential", "simulate", "corners", "aggregate", "premise",
           "continuation", "forecast", "confseq", "workflow"]
