"""The one text of a config value, the value back from its text, and the value in a row label (standard library only:
the row labels are made where a study's flags are checked, before pandas loads: adbs_lab/records/tune_keys.py).

- `text`: a different text for a different value: None "None", the string 'None' '"None"', True "True", 80 "80",
  80.0 "80.0", 0.1 "0.1", a list its JSON; what the tables count, group and order configurations by
  (adbs_lab/records/config_values.py: texts);
- `value`: the value of a text `text` wrote;
- `label`: a value in a row label (adbs_lab/records/tune_keys.py: describe): a float to 4 significant digits when
  they read back as the same float, every other value by its text, so no two values of a field share a label (a
  float field's 16 and 16.0 are one number: adbs/config/coercion.py makes 16 16.0).
"""

from __future__ import annotations

import json
import re
from typing import Any

__all__ = ["text", "value", "label", "plain", "is_number"]

_INT = re.compile(r"-?[0-9]+")
_FLOAT = re.compile(r"-?([0-9]+\.[0-9]*|\.[0-9]+|[0-9]+)([eE][-+]?[0-9]+)?|-?inf|nan")


def plain(v: Any) -> Any:
    """A numpy scalar as the Python value it holds."""
    return v.item() if hasattr(v, "item") and not isinstance(v, (list, tuple, dict, str)) else v


def is_number(v: Any) -> bool:
    """Whether `v` is a number: an int or a float (numpy's too), never a bool, a text or None."""
    v = plain(v)
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def text(v: Any) -> str:
    """The one text of value `v`: None, True, 80, 0.5 and 1.0 as Python writes them, a list as JSON, a string as it
    is unless it would read as another value (`value`), then as a JSON string ('"None"', '"80"')."""
    v = plain(v)
    if v is None or isinstance(v, (bool, int)):
        return str(v)
    if isinstance(v, float):
        return repr(v)
    if isinstance(v, (list, tuple)):
        return json.dumps(list(v))
    if isinstance(v, str):
        return v if value(v) == v and not v.startswith('"') else json.dumps(v)
    return str(v)


def value(t: str) -> Any:
    """The value of a text `text` wrote: "None" None, "True"/"False" a bool, an integer an int, a number a float, a
    JSON string its string, anything else the text itself (a list stays its JSON text, as the tables hold it)."""
    if t == "None":
        return None
    if t in ("True", "False"):
        return t == "True"
    if _INT.fullmatch(t):
        return int(t)
    if _FLOAT.fullmatch(t):
        return float(t)
    if t.startswith('"'):
        try:
            out = json.loads(t)
        except ValueError:
            return t
        return out if isinstance(out, str) else t
    return t


def label(v: Any) -> str:
    """Value `v` in a row label: a float to 4 significant digits when they read back as the same float (0.05, 16), else
    in full; anything else by its `text`. Two values never share a label, but for an int and the float of the same
    number (one value of a float field: adbs/config/coercion.py makes 16 16.0)."""
    v = plain(v)
    if isinstance(v, float):
        short = f"{v:.4g}"
        return short if float(short) == v else repr(v)
    return text(v)
