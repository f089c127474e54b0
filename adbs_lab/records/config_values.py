"""A configuration's values in a table's columns: None (a value: "all images" for base_images_per_class, "the
dataset's standard" for ways) kept apart from a value that is missing (a trial whose record lacks the field, e.g. an
MLflow run logged before the field existed), each value's type kept, and trials.parquet holding them all.

pandas reads both as missing: `pd.DataFrame` makes [80, None] the floats [80.0, NaN], pandas 3's `astype(str)`
keeps None missing, and `nunique`, `value_counts` and `groupby` drop it; pyarrow writes None as the null of a
missing value, and refuses a column of mixed types (an int beside a text). Every reader of the config columns
(adbs_lab/results/importance.py, compare.py's swept columns, comparisons.py, pareto.py, tables.py's best
configuration, trials.parquet's readers) goes through here instead, and through the one text of a value
(adbs_lab/records/value_text.py):

- `column`: a config column made from the records' values (adbs_lab/records/trial_records.py: frames), None kept as
  None and each value's type kept where pandas would change them; MISSING where a record lacks the field;
- `missing`: the cells without a value (never None);
- `texts`: a column's values as their texts (value_text.text), None where a cell has no value: what readers count,
  group and order configurations by;
- `write_parquet` and `read_parquet`: trials.parquet and sessions.parquet; a config column that pyarrow cannot hold
  as it is (None beside other values, mixed types) is written as the texts of its values and read back to them
  (the frame's `attrs`, in the file's pandas metadata, name those columns: TEXT_COLUMNS).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Iterable

import pandas as pd

from adbs_lab.records.value_text import plain, text, value

__all__ = ["MISSING", "TEXT_COLUMNS", "is_missing", "missing", "texts", "column", "write_parquet", "read_parquet"]

MISSING = math.nan
"""A config cell without a value (a trial whose record lacks the field), as pandas fills an absent key."""
TEXT_COLUMNS = "adbs.text_columns"
"""The frame's `attrs` key (in trials.parquet's pandas metadata) naming the columns written as texts."""


def is_missing(v: Any) -> bool:
    """Whether the cell `v` holds no value: NaN, pandas' NA or NaT, never None (None is a value)."""
    if v is None or isinstance(v, (str, int, bytes, list, tuple, dict)):  # int: bools too
        return False
    if isinstance(v, float):  # numpy's float64 too
        return v != v
    try:
        return bool(pd.isna(v))
    except (TypeError, ValueError):  # an array-like cell
        return False


def missing(cells: pd.Series | pd.DataFrame) -> pd.Series | pd.DataFrame:
    """The cells of a column (or a frame) without a value (`is_missing`); None is a value."""
    if isinstance(cells, pd.DataFrame):
        return cells.apply(missing) if len(cells.columns) else cells.astype(bool)
    if cells.dtype != object:  # numbers, booleans, pandas' str: pandas' own missing values are the only ones
        return cells.isna()
    return cells.map(is_missing).astype(bool)


def texts(cells: pd.Series) -> pd.Series:
    """The texts of a column's values (`text`), None where a cell has no value (`missing`): what counting distinct
    values, grouping and ordering configurations read."""
    gone = missing(cells).to_numpy()
    return pd.Series([None if g else text(v) for v, g in zip(cells.array, gone)], index=cells.index, dtype=object)


def _kinds(cells: Iterable[Any]) -> tuple[set[type], bool]:
    """(the types of the cells' values, None's among them; whether a cell has no value)."""
    kinds, gone = set(), False
    for v in cells:
        if is_missing(v):
            gone = True
        else:
            kinds.add(type(plain(v)))
    return kinds, gone


def _as_pandas_holds(kinds: set[type], gone: bool) -> bool:
    """Whether pandas (and pyarrow) hold cells of these kinds as they are: one type of number (or ints and floats,
    read as floats), or texts, or booleans or None alone without a missing cell."""
    return (kinds <= {int, float} or kinds == {str} or (kinds in ({bool}, {type(None)}) and not gone)) and bool(kinds)


def column(cells: list[Any], index: Any = None) -> pd.Series:
    """A config column of `cells` (MISSING where a record lacks the field): as pandas reads them where that keeps
    every value, else the values themselves (object dtype: None stays None, 80 stays 80 beside None, a text beside
    a number stays a text)."""
    kinds, gone = _kinds(cells)
    if _as_pandas_holds(kinds, gone) or not kinds:
        return pd.Series(cells, index=index)
    return pd.Series(cells, index=index, dtype=object)


def write_parquet(frame: pd.DataFrame, path: Path | str, columns: Iterable[str]) -> None:
    """`frame` as a parquet file, each of `columns` (its config columns) whose values pyarrow cannot hold as they
    are (`column`) written as their texts (`texts`; a missing value null) and named in the file's pandas metadata
    (TEXT_COLUMNS), so `read_parquet` gives every value back."""
    encoded = [c for c in columns if c in frame and frame[c].dtype == object
               and not _as_pandas_holds(*_kinds(frame[c].array))]
    if not encoded:
        frame.to_parquet(path, index=False)
        return
    out = frame.assign(**{c: texts(frame[c]) for c in encoded})
    out.attrs = {**frame.attrs, TEXT_COLUMNS: encoded}
    out.to_parquet(path, index=False)


def read_parquet(path: Path | str) -> pd.DataFrame:
    """A parquet file `write_parquet` wrote, the columns it wrote as texts read back to their values (MISSING where
    there was none); any other parquet file as pandas reads it."""
    frame = pd.read_parquet(path)
    encoded = frame.attrs.pop(TEXT_COLUMNS, [])
    for c in encoded:
        frame[c] = column([MISSING if t is None or is_missing(t) else value(t) for t in frame[c].array], frame.index)
    return frame
