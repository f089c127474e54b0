"""The docstring of every Config field and host option, read from the source: what --help and the docs print."""

from __future__ import annotations

import ast
import functools
import inspect

from adbs.config.schema import Config
from adbs.hosts import options_class


@functools.cache  # parsing a class's source takes tens of milliseconds, and --help asks for each field
def read_field_docs(cls: type) -> dict[str, str]:
    """{field: its docstring} of a dataclass whose fields carry a string literal after them (read once per class;
    do not change the returned dict)."""
    tree = ast.parse(inspect.getsource(cls))
    docs: dict[str, str] = {}
    body = tree.body[0].body  # type: ignore[attr-defined]
    for prev, node in zip(body, body[1:]):
        if (
            isinstance(prev, ast.AnnAssign)
            and isinstance(node, ast.Expr)
            and isinstance(node.value, ast.Constant)
            and isinstance(node.value.value, str)
            and isinstance(prev.target, ast.Name)
        ):
            docs[prev.target.id] = " ".join(node.value.value.split())
    return docs


_FIELD_DOCS = read_field_docs(Config)


def field_doc(name: str) -> str:
    """The docstring of a Config field, or of a host option `<host>.<option>`."""
    if "." in name:
        host, option = name.split(".", 1)
        return read_field_docs(options_class(host)).get(option, "")
    return _FIELD_DOCS.get(name, "")
