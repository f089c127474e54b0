"""Pickle-aware editing for the tests of --resume across a move of the code (adbs_lab/driver/resume.py: moved_code):
a pickle saved by a version whose modules had other paths, made from one saved by this version."""

from __future__ import annotations

import pickle
import pickletools
import struct


def renamed(data: bytes, rename) -> bytes:
    """`data` with every string `rename` changes (a module path) rewritten with its new length, and without FRAME
    opcodes, which only group opcodes for reading and whose lengths the new strings would break (an unframed
    pickle loads the same)."""
    ops = list(pickletools.genops(data))
    out = bytearray()
    for i, (op, arg, pos) in enumerate(ops):
        end = ops[i + 1][2] if i + 1 < len(ops) else len(data)
        if op.name == "FRAME":
            continue
        new = rename(arg) if op.name in ("SHORT_BINUNICODE", "BINUNICODE", "BINUNICODE8", "UNICODE") else None
        if op.name == "GLOBAL":
            module, name = arg.split(" ", 1)
            if rename(module) != module:
                out += b"c" + f"{rename(module)}\n{name}\n".encode()
                continue
        if new is None or new == arg:
            out += data[pos:end]
            continue
        raw = new.encode()
        out += (bytes([pickle.SHORT_BINUNICODE[0], len(raw)]) if len(raw) < 256 else
                pickle.BINUNICODE + struct.pack("<I", len(raw))) + raw
    return bytes(out)


def flattened(value):
    """An adbs_lab module path as it was before adbs_lab/ became packages: adbs_lab.search.searcher ->
    adbs_lab.search (where StudySearch was), adbs_lab.records.objectives -> adbs_lab.objectives; other values
    unchanged."""
    if isinstance(value, str) and value.startswith("adbs_lab.") and value.count(".") == 2:
        _, package, module = value.split(".")
        return f"adbs_lab.{package}" if package == "search" else f"adbs_lab.{module}"
    return value
