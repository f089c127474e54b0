"""A config value's one text and its value back (adbs_lab/records/value_text.py), and a column of them kept apart
from a missing value and written to parquet and read back (adbs_lab/records/config_values.py), over generated
columns of mixed values."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pandas as pd
import pytest

from adbs_lab.records import config_values as cv
from adbs_lab.records.value_text import label, text, value
from tests.helpers.values import KINDS, SHAPES as VALUE_SHAPES, TRICKY, draw, same

@pytest.mark.parametrize("kind", KINDS)
def test_every_value_has_one_text_that_reads_back_as_it(kind):
    rng = np.random.default_rng(KINDS.index(kind))
    for _ in range(200):
        v = draw(kind, rng)
        assert same(value(text(v)), v) and type(value(text(v))) is type(v), (v, text(v))
        assert text(np.float64(v)) == text(v) if kind == "float" else True


def test_two_values_never_share_a_text_or_a_label():
    rng = np.random.default_rng(0)
    values = [*TRICKY, None, True, False, 0, 1, 80, 80.5, 0.05, 0.012345678, 0.0123456789,
              *(draw(k, rng) for k in KINDS for _ in range(50))]
    by_text: dict[str, object] = {}
    for v in values:
        assert same(by_text.setdefault(text(v), v), v), (v, by_text[text(v)])
    by_label: dict[str, object] = {}
    for v in values:
        assert same(by_label.setdefault(label(v), v), v), (v, by_label[label(v)])
    assert label(0.05) == "0.05" and label(16.0) == "16" and label(0.012345678) == "0.012345678"  # the tables' rows


SHAPES = [*VALUE_SHAPES, ("str",), ("bool",), ("none",)]


@pytest.mark.parametrize("shape", SHAPES, ids=["-".join(s) for s in SHAPES])
@pytest.mark.parametrize("gone", [False, True], ids=["every value", "one missing"])
def test_a_column_of_any_values_keeps_them_apart_from_a_missing_one_through_parquet(shape, gone, tmp_path):
    """Generated columns (each kind of the shape drawn anew per row, a missing cell where `gone`): the column holds
    each value as given, `missing` finds only the missing cell (None is a value), and the parquet file gives every
    value back, beside columns pandas and pyarrow hold as they are."""
    rng = np.random.default_rng(len(shape) + 7 * gone)
    cells = [draw(shape[i % len(shape)], rng) for i in range(12)] + ([cv.MISSING] if gone else [])
    col = cv.column(cells)
    assert all(cv.is_missing(c) if cv.is_missing(v) else same(c, v) for c, v in zip(col, cells)), (list(col), cells)
    assert cv.missing(col).tolist() == [cv.is_missing(v) for v in cells] and cv.texts(col).isna().sum() == int(gone)
    frame = pd.DataFrame({"base_images_per_class": col, "alpha": np.linspace(0.1, 1, len(cells)),
                          "label": [f"r{i}" for i in range(len(cells))]})
    cv.write_parquet(frame, tmp_path / "t.parquet", ["base_images_per_class", "alpha"])
    back = cv.read_parquet(tmp_path / "t.parquet")
    got = back["base_images_per_class"]
    assert cv.missing(got).tolist() == cv.missing(col).tolist()
    assert all(same(a, b) for a, b, m in zip(got, col, cv.missing(col)) if not m), (list(got), list(col))
    pd.testing.assert_frame_equal(back[["alpha", "label"]], frame[["alpha", "label"]])
    assert cv.TEXT_COLUMNS not in back.attrs


def test_a_column_pandas_holds_as_it_is_is_written_as_pandas_writes_it(tmp_path):
    """Columns of one type (a study's every column but a searched one with None or mixed values) are not encoded:
    trials.parquet reads in pandas as before."""
    frame = pd.DataFrame({"alpha": [0.1, 0.2], "shots": [5, 5], "variant": ["adb", "adb+ic"], "amp": [False, True],
                          "ways": [None, None]})
    cv.write_parquet(frame, tmp_path / "a.parquet", list(frame))
    frame.to_parquet(tmp_path / "b.parquet", index=False)
    pd.testing.assert_frame_equal(pd.read_parquet(tmp_path / "a.parquet"), pd.read_parquet(tmp_path / "b.parquet"))
    assert not pd.read_parquet(tmp_path / "a.parquet").attrs


def test_a_missing_cell_is_nan_na_or_nat_and_never_none():
    assert [cv.is_missing(v) for v in (math.nan, np.float64("nan"), pd.NA, pd.NaT, None, "nan", [math.nan], 0)] == \
        [True, True, True, True, False, False, False, False]
    # pandas alone reads [None, NaN] as two NaN: a column is made by cv.column (adbs_lab/records/trial_records.py: frames)
    frame = pd.DataFrame({"a": cv.column([None, math.nan]), "b": [1.0, math.nan]})
    assert list(itertools.chain(*cv.missing(frame).to_numpy())) == [False, False, True, True]
