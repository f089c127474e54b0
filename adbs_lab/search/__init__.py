"""The search: which configurations the trials run and how one trial runs. The package imports nothing.

    space           a study's search space (search_spaces/<study>.py) and a trial's Config from its point
    searcher        Optuna behind Ray Tune: configurations asked once, the seeds their policy names, pruning, how trials
                    ended
    optuna_storage  the Optuna storage by URL: patient with a database server, the study created once, `tell`
    seeds           the seed policies: a fixed list, --seeds auto's looks over a grid, a race of a sampled search
    samplers        the sampled search's TPE, each trial's draws seeded from (sampler seed, trial number), its settings
                    named
    orphans         the Optuna trials a killed driver left behind, taken back by the resumed searcher
    old_state       a searcher pickled by earlier code, as this code holds it
    auto_seeds      AutoPlan, what a --seeds auto searcher held before the seed policies (old_state reads it)
    racing          RacePlan, what a raced searcher held before them
    path            the ablation path's greedy steps and their confirmation
    shadows         the shadows of pruned trials, --pruner auto, the pruning premise, the pruners
    trainable       one Ray Tune trial: adbs/trial.py's run_trial, its reports and checkpoints
    tune_staging    a staging folder of its own for each study on one Ray cluster
"""

__all__ = ["space", "searcher", "optuna_storage", "seeds", "samplers", "orphans", "old_state", "auto_seeds", "racing",
           "path", "shadows", "trainable", "tune_staging"]
