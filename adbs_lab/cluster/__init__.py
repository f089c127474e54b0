"""Where the trials run: the checks before a study runs on a Ray cluster, trials packed onto GPUs, and a local
cluster of two nodes for trying a multi-node run on one machine. The package imports nothing.

    checks         the checks before a study runs its trials on a Ray cluster (shared storage, nodes, resources)
    packing        how many trials share one GPU (a memory probe, then `decide`)
    local_cluster  `python -m adbs_lab.cluster.local_cluster start|stop`: a head and a worker on one machine
    auth           Ray's token authentication: the mode the commands give Ray, what they say when a cluster refuses
"""

__all__ = ["checks", "packing", "local_cluster", "auth"]
