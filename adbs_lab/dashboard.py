"""Moved to adbs_lab/stores/dashboard.py; this old address only says so (adbs_lab/moved.py)."""

from adbs_lab.moved import moved

moved("adbs_lab.dashboard", __name__)
