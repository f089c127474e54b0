"""The credential rule of adbs/redaction.py and its SecretUrl for the light commands, without importing adbs.

The MLflow launcher (adbs_lab/serve.py, via mlflow/serve.py), the store checks it uses (adbs_lab/stores.py,
adbs_lab/tracking_store.py) and studies/submit.py start in well under a second; importing `adbs.redaction` would run
adbs/__init__.py, which loads torch (seconds). adbs/redaction.py is standard library only, so this module loads that
file by its path: one rule, the one in adbs/.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path


def _rule():
    if "adbs.redaction" in sys.modules:  # already imported with the package: the same module
        return sys.modules["adbs.redaction"]
    name = "adbs_lab._adbs_redaction"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, Path(__file__).resolve().parents[1] / "adbs" / "redaction.py")
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]


redact = _rule().redact
redact_url = _rule().redact_url
carries_secret = _rule().carries_secret
SecretUrl = _rule().SecretUrl
reveal = _rule().reveal
secret_url = _rule().secret_url
user_of = _rule().user_of

__all__ = ["redact", "redact_url", "carries_secret", "SecretUrl", "reveal", "secret_url", "user_of"]
