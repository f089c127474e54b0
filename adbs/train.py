"""Former home of the trainer, kept as names only.

The trainer is split by concern: adbs/loops.py (base session and incremental sessions, any host),
adbs/trial.py (a trial: loops + cache + checkpoints + resume), adbs/state.py (what is saved). This
module only re-exports their public names, so code written against `adbs.train` (studies and
notebooks outside this repository, branches started before the split) keeps working; nothing in this
repository imports it, and no logic lives here.
"""

from adbs.loops import Hooks, NumericalError, resolve_device, run_sessions, train_base  # noqa: F401
from adbs.state import BaseSession, TrialResult  # noqa: F401
from adbs.trial import run_trial  # noqa: F401
