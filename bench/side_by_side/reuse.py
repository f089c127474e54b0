"""--released-from: the released runs of an earlier results folder, reused when only ours changes.

The released code's runs do not depend on anything of ours, so a factor of ours (--ours-set) can be checked
against released runs made before on the same data: same REUSE_ARGS, every seed asked for present, and the
written data's sha256 the same (checked after the data are written: check_reused_data).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from . import ToolError

REUSE_ARGS = ("epochs", "sessions", "device", "synthetic_version", "synthetic_seed", "split_seed", "train_per_class",
              "test_per_class")
"""Options an earlier run must share for --released-from to reuse its released runs (the data are checked too)."""


def load_released_runs(folder: Path, a: argparse.Namespace) -> dict[str, Any]:
    """The earlier results (vs_official.json in `folder`) whose released runs --released-from reuses."""
    f = folder / "vs_official.json"
    if not f.is_file():
        raise ToolError(f"--released-from {folder}: no vs_official.json there; pass the --out folder of an earlier "
                        "run of this tool")
    try:
        prev = json.loads(f.read_text())
        prev_args, runs = prev["args"], prev["released"]
        have = {int(r["seed"]): r for r in runs}
    except (ValueError, KeyError, TypeError) as e:
        raise ToolError(f"--released-from {folder}: {f.name} is not this tool's output ({e!r})") from None
    bad = [f"--{k.replace('_', '-')} {getattr(a, k)} (there: {prev_args.get(k)})" for k in REUSE_ARGS
           if prev_args.get(k) != getattr(a, k)]
    if bad:
        raise ToolError(f"--released-from {folder}: its released runs were made with other settings: {'; '.join(bad)}; "
                        "reuse only runs on the same data and settings")
    missing = [s for s in a.seeds if s not in have]
    if missing:
        raise ToolError(f"--released-from {folder}: no released run of seed(s) {' '.join(map(str, missing))} there "
                        f"(it has {' '.join(map(str, sorted(have))) or 'none'}); ask for those seeds or run them")
    return {"folder": str(folder.resolve()), "data": prev["data"], "runs": [have[s] for s in a.seeds]}


def check_reused_data(reused: dict[str, Any], data: dict[str, Any]) -> None:
    """The data the reused released runs trained on are the bytes just written (sha256 of the pickles)."""
    if reused["data"].get("sha256") != data["sha256"]:
        raise ToolError(f"--released-from {reused['folder']}: its data differ from the data written now (sha256 of "
                        "the pickles); the embedded benchmark changed since, so run the released code again")
