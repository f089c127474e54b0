"""Reading the runs: the released train.py log (the VS_* lines its patched copy prints), ours' result JSON,
and the progress lines echoed while a run runs.
"""

from __future__ import annotations

import ast
import json
import re
from typing import Any

import numpy as np

from . import ToolError

_LIST_RE = re.compile(r"^\[\s*-?\d+(?:\.\d*)?(?:\s*,\s*-?\d+(?:\.\d*)?)*\s*\]$")


def parse_released_log(text: str) -> dict[str, Any]:
    """Figures from a log of the released train.py (stdout and stderr together, tqdm's \\r included).

    Reads the patched copy's VS_* lines (patches.yaml: print-*) and, for logs of an earlier side-by-side
    script (patch_official.py), its EPOCH_TRAIN_S / MARGINS_BASE lines; the session accuracies come from the
    list the released trainer prints at the end (trlog['max_acc']), else from VS_SESSION_ACC / '  test acc='
    lines.
    """
    epochs: list[dict[str, float]] = []
    base_margins: list[float] | None = None
    session_acc: dict[int, float] = {}
    session_margins: dict[int, list[float]] = {}
    reported: list[float] | None = None
    test_acc_lines: list[float] = []
    total_min = None
    for raw in text.replace("\r", "\n").splitlines():
        s = raw.strip()
        if s.startswith("VS_EPOCH "):
            epochs.append(json.loads(s[len("VS_EPOCH "):]))
        elif s.startswith("VS_BASE_MARGINS "):
            base_margins = [float(v) for v in json.loads(s[len("VS_BASE_MARGINS "):])]
        elif s.startswith("VS_SESSION_ACC "):
            _, t, acc = s.split()[:3]
            session_acc[int(t)] = float(acc)
        elif s.startswith("VS_SESSION_MARGINS "):
            _, t, rest = s.split(" ", 2)
            session_margins[int(t)] = [float(v) for v in json.loads(rest)]
        elif s.startswith("MARGINS_BASE "):  # gpu-compare's patch_official.py
            base_margins = [float(v) for v in ast.literal_eval(s[len("MARGINS_BASE "):])]
        elif s.startswith("EPOCH_TRAIN_S "):  # gpu-compare: EPOCH_TRAIN_S <epoch> <s> MARGIN_MEAN <m> NEG <n>
            parts = s.split()
            row = {"epoch": int(parts[1]), "train_s": float(parts[2])}
            if "NEG" in parts:
                row["negative"] = int(parts[parts.index("NEG") + 1])
            epochs.append(row)
        elif _LIST_RE.match(s):
            reported = [float(v) for v in ast.literal_eval(s)]
        elif m := re.search(r"Total time used ([\d.]+) mins", s):
            total_min = float(m.group(1))
        elif m := re.match(r"^test acc=([\d.]+)$", s):
            test_acc_lines.append(float(m.group(1)))
    if reported is not None:
        sessions, source = reported, "trlog['max_acc']"
    elif session_acc:
        sessions, source = [session_acc[t] for t in sorted(session_acc)], "VS_SESSION_ACC"
    else:
        sessions, source = test_acc_lines, "'test acc=' lines (sessions 1..)"
    neg = None if base_margins is None else int(sum(m < 0 for m in base_margins))
    return {
        "sessions": sessions, "sessions_source": source, "s0_carried": session_acc.get(0),
        "base_margins": base_margins, "negative_base": neg,
        "base_abs_mean": None if not base_margins else float(np.mean(np.abs(base_margins))),
        "session_margins": session_margins, "epochs": epochs, "total_min": total_min,
    }


def parse_ours_result(d: dict[str, Any]) -> dict[str, Any]:
    """Figures from ours' result JSON (python -m adbs.run --out; adbs/state.py: TrialResult.to_dict)."""
    try:
        sessions = [float(r["test_acc"]) for r in d["sessions"]]
        base_margins = [float(v) for v in (d.get("boundaries") or d["margins"])[0]]  # "margins" before the rename
        epochs = [{"epoch": int(r["epoch"]), "epoch_s": float(r["epoch_time_s"]),
                   "negative": int(r["boundary_negative"]), "val_acc": float(r["val_acc"])} for r in d["base_curve"]]
        config = d["config"]
    except (KeyError, IndexError, TypeError, ValueError) as e:
        raise ToolError(f"ours' result JSON lacks {e!r}; expected the output of python -m adbs.run --out") from None
    return {
        "sessions": sessions, "base_margins": base_margins, "negative_base": int(sum(m < 0 for m in base_margins)),
        "base_abs_mean": float(np.mean(np.abs(base_margins))), "epochs": epochs,
        "best_base_epoch": d.get("summary", {}).get("best_base_epoch"),
        "wall_time_s": d.get("summary", {}).get("wall_time_s"), "config": config,
    }


def progress_line(code: str, line: str) -> str | None:
    """What to echo of one log line of a running job of `code` ("released" or "ours"); None: nothing."""
    s = line.strip()
    if code == "released":
        if s.startswith("VS_EPOCH "):
            try:
                e = json.loads(s[9:])
            except ValueError:
                return None
            return (f"base epoch {e['epoch'] + 1}: test {e['test_acc']:.2f}%  m<0: {e['negative']}  "
                    f"train {e['train_s']:.1f}s test {e['test_s']:.1f}s")
        if s.startswith("VS_SESSION_ACC "):
            _, t, acc = s.split()[:3]
            return f"session {t}: test {float(acc):.2f}%"
        return None
    if re.match(r"^(base epoch \d+/\d+|session \d+:) ", s):  # adbs.run's progress lines
        return s[:160]
    return None
