"""The one exception type of adbs.data."""

from __future__ import annotations


class DataError(ValueError):
    """A dataset, split file or data setting is unusable.

    Every message says what was wrong, what is expected or allowed, and how to fix it.
    """
