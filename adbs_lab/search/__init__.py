"""The search: which configurations the trials run and how one trial runs. The package imports nothing.

    space         a study's search space (search_spaces/<study>.py) and a trial's Config from its point
    searcher      Optuna behind Ray Tune: the study created once, seeds of one configuration, pruning, how trials ended
    samplers      the sampled search's TPE, each trial's draws seeded from (sampler seed, trial number), its settings named
    orphans       the Optuna trials a killed driver left behind, taken back by the resumed searcher
    trainable     one Ray Tune trial: adbs/trial.py's run_trial, its reports and checkpoints
    tune_staging  a staging folder of its own for each study on one Ray cluster
"""

__all__ = ["space", "searcher", "samplers", "orphans", "trainable", "tune_staging"]
