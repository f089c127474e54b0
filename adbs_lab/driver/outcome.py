"""A study's exit code from how its trials ended (`study_code`, `why_failed`), several combined (`worst`:
studies/paper.py's parts), a finished Ray job's (`exit_code_of_job`: studies/submit.py --wait), and the lines that
name a trial's error. The codes and what each means: adbs/exits.py (docs/studies.md, "Exit codes").
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from adbs.exits import FAILED, INTERRUPTED, OK, REFUSED
from adbs_lab.records import metrics_keys as K

__all__ = ["study_code", "why_failed", "worst", "error_line", "trial_error", "exit_code_of_job"]

_SEVERITY = {OK: 0, FAILED: 2, REFUSED: 1, INTERRUPTED: 3}
"""Which code wins when several parts end differently: an interruption stops everything, an error after a start
outweighs a part refused at its own checks."""


def study_code(counts: Mapping[str, int], *, unfinished: int = 0) -> int:
    """The exit code of a study that ran (an interrupted one exits INTERRUPTED before it gets here)."""
    if counts.get(K.FAILED, 0) or unfinished or not counts.get(K.COMPLETE, 0):
        return FAILED
    return OK


def why_failed(counts: Mapping[str, int]) -> str:
    """One phrase: why study_code said FAILED of a study whose trials all ended."""
    if counts.get(K.FAILED, 0):
        n = counts[K.FAILED]
        return f"{n} trial{'s' * (n != 1)} raised an error"
    return "no trial completed"


def worst(codes: Iterable[int]) -> int:
    """The code of several runs together (studies/paper.py: its parts)."""
    return max(codes, key=lambda c: _SEVERITY.get(c, 2), default=OK)


def error_line(text: str | None) -> str:
    """The line that names an error (`ValueError: ...`): the last non-empty line of its traceback."""
    lines = [ln.strip() for ln in str(text or "").strip().splitlines() if ln.strip()]
    return lines[-1][:300] if lines else "an error without a message"


def trial_error(trial) -> str | None:
    """The tracebacks of the errors of Ray Tune trial `trial`, the latest last (Tune's error.txt: the driver's copy,
    written before Tune calls its callbacks, else the one in the study's storage), or None."""
    from pathlib import Path

    try:
        local = trial.error_file
        text = Path(local).read_text() if local and Path(local).is_file() else trial.get_error()
    except Exception:  # noqa: BLE001 - an unreadable error file: the caller says so
        return None
    return (str(text).strip() or None) if text is not None else None


def exit_code_of_job(message: str | None, status: str) -> int:
    """The study's own exit code from a finished Ray job (studies/submit.py --wait): Ray's message for a failed
    entrypoint names it ("... failed with exit code 2 ..."); a stopped job counts as interrupted."""
    import re

    if status == "SUCCEEDED":
        return OK
    if status == "STOPPED":
        return INTERRUPTED
    found = re.search(r"exit code (-?\d+)", message or "")
    code = int(found.group(1)) if found else FAILED
    return code if code in (FAILED, REFUSED, INTERRUPTED) else FAILED
