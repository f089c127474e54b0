"""Credentials in URLs: the one rule for everything the platform prints, logs, tags, pickles or refuses.

A URL carries a secret in two places: its password (s3://KEY:SECRET@bucket, postgresql://user:pw@host/db,
http://user:token@mlflow-host:5000) and its query string (s3://bucket/runs?secret_key=..., a presigned
?X-Amz-Signature=...). `redact` replaces both with *** in every URL of a text (an error message may quote one):
user:password@ becomes ***@ (an object store's user is its access key id), user@ alone is kept (the studies' database
URLs name their user, postgresql://USER@DBHOST/mlflow, and take the password from elsewhere: ~/.pgpass, PGPASSWORD);
`carries_secret` says whether a text holds a secret.

Where the password ends: a password may hold any character, raw or %-encoded, '/', ':', '@', '?' and '#' included
(libpq and SQLAlchemy take postgresql://u:s3cr/et@x@h/db), so the user information runs from "scheme://" to the
LAST '@' whose user name (the text before the first ':') holds no '/', '?' or '#'. A URL in a text runs to the next
whitespace. When in doubt more is masked, never less: http://host:80/a@b shows as http://***@b.

`SecretUrl` is a URL that redacts itself: its text (what str(), repr(), format(), json, pickle and MLflow tags see)
is the redacted URL; the real one comes only from `reveal`, called where a store is opened.

Standard library only: adbs_lab/stores/serve.py loads this file by its path to stay light (importing adbs runs
adbs/__init__.py, which loads torch), so it imports nothing of adbs.
"""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import unquote_plus

SECRET_QUERY = ("access_key", "secret", "session_token", "password", "passwd", "token", "credential", "signature",
                "api_key", "apikey")
SECRET_QUERY_EXACT = ("sig", "pwd", "se", "sv")  # Azure SAS: sig (its signature), and the fields it signs with
MASK = "***"
_URL = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://\S+")
_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://")
_QUERY = re.compile(r"([?&;])([^=&;#\s]*)=([^&;\s]*)")


def _secret(key: str) -> bool:
    k = unquote_plus(key).lower()  # as the store reads it: SQLAlchemy decodes ?pass%77ord= to password=
    return any(w in k for w in SECRET_QUERY) or k in SECRET_QUERY_EXACT


def _userinfo(rest: str) -> tuple[str, str | None, str] | None:
    """(user, password or None, after the '@') of `rest` (a URL after its "scheme://"), or None without user
    information: the last '@' whose user name holds no '/', '?' or '#'."""
    at = len(rest)
    while (at := rest.rfind("@", 0, at)) >= 0:
        info = rest[:at]
        user, colon, password = info.partition(":")
        if not any(c in user for c in "/?#"):
            return user, (password if colon else None), rest[at + 1:]
    return None


def _split(url: str) -> tuple[str, str | None, str | None, str]:
    """(scheme://, user, password, the rest after the user information) of one URL."""
    m = _SCHEME.match(url)
    assert m is not None, url
    head, rest = m.group(), url[m.end():]
    found = _userinfo(rest)
    return (head, None, None, rest) if found is None else (head, *found)


def _mask_query(rest: str) -> str:
    return _QUERY.sub(lambda q: f"{q[1]}{q[2]}={MASK}" if _secret(q[2]) and q[3] else q.group(), rest)


def redact_url(url: str) -> str:
    """One URL (the whole of `url`, spaces included) with its password and secret query values replaced by ***."""
    if not _SCHEME.match(url):
        return url
    head, user, password, rest = _split(url)
    info = "" if user is None else f"{user}@" if not password else f"{MASK}@"  # with a password: the user too
    return head + info + _mask_query(rest)


def user_of(url: str) -> str | None:
    """The user name of one URL by the rule above (None without user information): not a secret, named in messages
    (a redacted URL shows *** in its place when it has a password)."""
    url = reveal(url)
    return _split(url)[1] if _SCHEME.match(url) else None


def redact(text: str) -> str:
    """`text` with the password and secret query values of every URL in it replaced by ***, for printing and
    logging; text without a URL (a folder path) unchanged."""
    return _URL.sub(lambda m: redact_url(m.group()), text) if "://" in text else text


def _url_secret(url: str) -> bool:
    _, _, password, rest = _split(url)
    return bool(password) or any(_secret(q[2]) and q[3] for q in _QUERY.finditer(rest))


def carries_secret(text: str) -> bool:
    """Whether a URL in `text` holds a password (user:secret@) or a secret query value."""
    text = reveal(text)
    return (_SCHEME.match(text) is not None and _url_secret(text)) or any(
        _url_secret(m.group()) for m in _URL.finditer(text))


class SecretUrl(str):
    """A URL whose every printed form is redacted: `str`, `repr`, `format`, json, pickling and copying give the URL
    with its password and secret query values as *** (`redact_url`); `reveal` gives the URL itself, for opening the
    store it names. A pickle (Ray Tune's searcher and callback state in a study's folder) keeps only the redacted
    URL: a driver that unpickles it binds its own (adbs_lab/stores/study_folder.py: rebind)."""

    _real: str

    def __new__(cls, value: str) -> "SecretUrl":
        real = reveal(value)
        obj = super().__new__(cls, redact_url(real))
        obj._real = real
        return obj

    def reveal(self) -> str:
        """The URL with its secrets: only for the call that opens the store (never printed, logged or stored)."""
        return self._real

    def __reduce__(self) -> tuple[Any, ...]:
        # a plain str of the redacted URL: no secret in the pickle, and no class to find when it is loaded)
        return (str, (str.__str__(self),))

    def __reduce_ex__(self, protocol: Any) -> tuple[Any, ...]:
        return self.__reduce__()

    def __copy__(self) -> "SecretUrl":
        return self

    def __deepcopy__(self, memo: dict) -> "SecretUrl":
        return self


def reveal(url: Any) -> Any:
    """The real URL of a SecretUrl; any other value unchanged (a path, None, a URL without a secret)."""
    method = getattr(url, "reveal", None) if isinstance(url, str) else None
    return method() if callable(method) else url


def secret_url(value: str | None) -> SecretUrl | None:
    """`value` as a SecretUrl (None stays None): for URL flags that may carry a password."""
    return None if value is None else SecretUrl(value)
