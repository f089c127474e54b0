"""A study's seed policy: which seeds each configuration runs, what happens once trials end, how finished trials are
replayed on --resume and in the summary, and the lines it prints. The package imports nothing.

    policy          the protocol and its vocabulary: Ended, Look, Standing, Opening
    engine          the one sequential engine (a table's pairs; a leader's), a pure function of the trials that ended
    fixed           a fixed list of seeds (the default)
    until_resolved  --seeds auto on a grid: seeds added in batches until the table's comparisons are resolved
    race            --seeds auto on a sampled search: the best samples race on fresh seeds
"""

__all__ = ["policy", "engine", "fixed", "until_resolved", "race"]
