"""Moved to adbs_lab/stores/serve.py; this old address only says so (adbs_lab/moved.py)."""

from adbs_lab.moved import moved

moved("adbs_lab.serve", __name__)
