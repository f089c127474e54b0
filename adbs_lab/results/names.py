"""The names a report's flags take, in a module that loads no table library, so studies/report.py builds its parser
and refuses a bad flag before pandas or MLflow load: the table formats, and the dataset label of a paper study on
the embedded benchmark."""

from __future__ import annotations

__all__ = ["EXT", "EMBEDDED"]

EXT = {"text": "txt", "markdown": "md", "latex": "tex", "csv": "csv"}
"""Table format (`--format`) -> the extension of the file it is written to (table.<ext>)."""

EMBEDDED = "embedded"
"""The dataset label of a paper study without --dataset (the embedded benchmark; its adbs.dataset tag is empty)."""
