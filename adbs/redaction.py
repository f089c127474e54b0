"""Credentials in URLs: the one rule for everything the platform prints, logs or refuses.

A URL carries a secret in two places: before its host (s3://KEY:SECRET@bucket, postgresql://user:pw@host/db,
http://user:token@mlflow-host:5000) and in its query string (s3://bucket/runs?secret_key=...). `redact` cuts the
first (the whole user[:secret]@) and masks the values of the second, in every URL of a text (an error message may
quote one); `carries_secret` says whether a text holds a secret at all (a user name alone is none: the studies'
database URLs name their user, postgresql://USER@DBHOST/mlflow, and take the password from elsewhere).

Standard library only: adbs_lab/serve.py loads this file by its path to stay light (importing adbs runs
adbs/__init__.py, which loads torch), so it imports nothing of adbs.
"""

from __future__ import annotations

import re
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

SECRET_QUERY = ("access_key", "secret_key", "session_token", "password", "token", "credential")
_URL = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://[^\s'\"]+")
_USERINFO = re.compile(r"://[^/@\s]+@")
_PASSWORD = re.compile(r"://[^/\s:@]+:[^/\s@]+@")


def _secret(key: str) -> bool:
    return any(w in key.lower() for w in SECRET_QUERY)


def _redact_url(url: str) -> str:
    cut = _USERINFO.sub("://", url, count=1)
    s = urlsplit(cut)
    pairs = parse_qsl(s.query)
    if not any(_secret(k) for k, _ in pairs):
        return cut
    query = [(k, "***" if _secret(k) else v) for k, v in pairs]
    return urlunsplit((s.scheme, s.netloc, s.path, urlencode(query, safe=":/"), ""))


def redact(text: str) -> str:
    """`text` with every URL in it cut of user[:secret]@ and its secret query values masked, for printing and
    logging; text without a URL (a folder path) unchanged."""
    return _URL.sub(lambda m: _redact_url(m.group()), text) if "://" in text else text


def carries_secret(text: str) -> bool:
    """Whether a URL in `text` holds a password (user:secret@) or a secret query value."""
    return bool(_PASSWORD.search(text)) or any(
        _secret(k) and v for m in _URL.finditer(text) for k, v in parse_qsl(urlsplit(m.group()).query))
