"""Moved to adbs_lab/cluster/local_cluster.py; this old address only says so (adbs_lab/moved.py)."""

from adbs_lab.moved import moved

moved("adbs_lab.local_cluster", __name__)
