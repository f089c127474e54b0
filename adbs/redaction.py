"""Credentials in URLs: the one rule for everything the platform prints, logs, tags, pickles or refuses.

One parser (`_spans`) finds what is secret in a text; `redact` replaces it with ***, and `carries_secret` is
`redact(text) != text`, so the two cannot disagree. It splits a URL as urllib.parse does where urllib.parse can
read it (the query after the first '?', the fragment after the first '#'; names and values %-decoded with its
unquote; tests/adbs/test_redaction_shapes.py checks that what is kept reads the same to urlsplit), and goes on
where it cannot (a password holding '/', '#' or whitespace; a URL inside a message). What counts as secret, in
every URL `scheme://...` of a text:

- the user information of a URL with a password, user and password both: s3://KEY:SECRET@bucket,
  postgresql://user:pw@host/db and http://user:token@mlflow-host:5000 show as scheme://***@host. The user name is
  the text after "scheme://" up to the first ':' (without whitespace, '/', '?', '#', '[' or ']'); the password runs
  from there to the LAST '@' before the same "scheme://user:" comes again (a message that quotes the URL twice),
  else to the text's last '@': a password may hold any character, raw or %-encoded, whitespace, '/', ':', '@', '?'
  and '#' included (libpq and SQLAlchemy take postgresql://u:s3cr/et@x@h/db). When in doubt more is masked, never
  less: in `http://host:80/a@b` or `http://host:80 ... bob@example.org` everything from the host to the last '@'
  shows as ***.
- the user of an http(s) or ws(s) URL, alone too: https://TOKEN@github.com shows as https://***@github.com. A
  database's or an object store's user alone is kept (the studies' database URLs name their user,
  postgresql://USER@DBHOST/mlflow, and take the password from ~/.pgpass or PGPASSWORD).
- the value of a query or fragment field (after '?' or '#', fields split at '&' and ';') whose name, %-decoded,
  lower-cased and without separators, holds a secret word (`SECRET_WORDS`: password, token, secret, apikey as in
  X-Api-Key, privatekey as in private_key, auth as in Authorization, ...) or is one (`SECRET_NAMES`: key, sig,
  pwd, session, ...):
  s3://b/runs?secret_key=***, #token=***, ?X-Amz-Signature=***. It runs to the next '&', '#' or whitespace, past
  an '@' in it too (http://h:5000/x?token=a@b, which also reads as user h, password 5000/x?token=a, host b).
- a URL inside another's field: raw (?endpoint_override=http://u:p@h shows as ...=http://***@h) or %-encoded
  (the whole field value shows as ***); so too a %-encoded field value that holds secret fields of its own, split at
  '&' and ';' (an ODBC connection string: mssql+pyodbc:///?odbc_connect=DRIVER%3D...%3BPWD%3Dpw shows as
  ?odbc_connect=***).

A reference without a scheme (the /path?token=... an HTTP library quotes) is read the same way. In a text a URL
ends at whitespace, except that its password may hold some (see above); `redact_url` reads its whole argument as
one URL (a query value then runs to '&' or '#' only). Not seen: a secret in a URL's path, a user name holding
whitespace, '/', '?', '#', '[' or ']', and a field value that is secret by its content alone.

`SecretUrl` is a URL that redacts itself: its text (what str(), repr(), format(), json, pickle and MLflow tags see)
is the redacted URL; the real one comes only from `reveal`, called where a store is opened.

Standard library only: the light commands (mlflow/serve.py, studies/submit.py) import it without torch, and it
imports nothing of adbs.
"""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import unquote, unquote_plus

MASK = "***"
SECRET_WORDS = ("password", "passwd", "passphrase", "secret", "token", "credential", "signature", "auth", "jwt",
                "bearer", "cookie", "apikey", "accesskey", "privatekey", "accountkey", "sharedkey", "sessid")
"""A field whose normalised name (%-decoded, lower case, letters and digits only) holds one of these is secret."""
SECRET_NAMES = ("key", "sig", "se", "sv", "pwd", "pw", "pass", "session", "sessionid", "sid")
"""A field whose normalised name is one of these is secret (Azure SAS: sig, the signature, and se/sv it signs)."""
TOKEN_USER_SCHEMES = ("http", "https", "ws", "wss")
"""Schemes (the part after the last '+': git+https) whose user alone is a secret: a token as the user."""
_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://")
_USER = re.compile(r"[^\s/?#:\[\]]*")
_FIELD = re.compile(r"[?&;#]([^=?&;#]*)=")
_STARTS = re.compile(r"[?#]")
_SPACE = re.compile(r"\s")
_NOT_WORD = re.compile(r"[^a-z0-9]")
_DECODES = 4  # %-decoding rounds for a field's name or value (%2525 is twice-encoded '%')

Span = tuple[int, int]


def _decoded(text: str) -> str:
    """`text` %-decoded until nothing changes (at most _DECODES rounds): as a store reads a field (SQLAlchemy
    decodes ?pass%77ord= to password=); '+' is kept (a decoded '+' is no space)."""
    for _ in range(_DECODES):
        plain = unquote(text)
        if plain == text:
            break
        text = plain
    return text


def _secret_name(name: str) -> bool:
    n = _NOT_WORD.sub("", _decoded(name).lower())  # X-Api-Key, x_api_key, apiKey: xapikey
    return n in SECRET_NAMES or any(w in n for w in SECRET_WORDS)


def _userinfo(text: str, start: int, at_user: int) -> tuple[int, int] | None:
    """(end of the user name, index of the '@' that ends the user information) of the URL at `start` whose user
    name would start at `at_user` (just after "scheme://"), or None without user information."""
    end = _USER.match(text, at_user).end()  # type: ignore[union-attr]  # matches the empty string too
    if text.startswith(":", end):
        # user:password@: the password runs to the last '@' before the same "scheme://user:" comes again (a
        # message that quotes the URL twice), else to the last '@' of the text
        again = text.find(text[start:end + 1], end + 1)
        if (at := text.rfind("@", end + 1, len(text) if again < 0 else again)) > end:
            return end, at
    at = text.rfind("@", at_user, end)  # user@ (a user name may hold '@': alice@corp.com@host)
    return (at, at) if at >= 0 else None


def _token_user(scheme: str) -> bool:
    return scheme[:-3].lower().rsplit("+", 1)[-1] in TOKEN_USER_SCHEMES


def _merged(spans: list[Span]) -> list[Span]:
    out: list[Span] = []
    for s, e in sorted(spans):
        if out and s <= out[-1][1]:
            out[-1] = (out[-1][0], max(e, out[-1][1]))
        else:
            out.append((s, e))
    return out


def _userinfo_spans(text: str) -> list[Span]:
    spans = []
    for m in _SCHEME.finditer(text):
        found = _userinfo(text, m.start(), m.end())
        if found is None:
            continue
        user_end, at = found
        if at > user_end + 1 or (at > m.end() and _token_user(m.group())):  # a password; an http user
            spans.append((m.end(), at))
    return _merged(spans)


def _field_spans(text: str, whole: bool) -> list[Span]:
    """The secret field values of every query and fragment in `text`, those inside a URL's user information too: in
    http://h:5000/x?token=a@b the text up to the '@' reads as a user and password (a password may hold '/', '?' and
    '='), but it may as well be a host, a path and a query whose token holds an '@', so the 'b' past it is masked too
    (in doubt, more)."""
    spans, i = [], 0
    while (m := _STARTS.search(text, i)) is not None:
        start = m.start()
        space = None if whole else _SPACE.search(text, start)
        end = len(text) if space is None else space.start()
        for f in _FIELD.finditer(text, start, end):
            stop = min((j for j in (text.find("&", f.end(), end), text.find("#", f.end(), end)) if j >= 0),
                       default=end)
            value = text[f.end():stop]
            if value and (_secret_name(f.group(1)) or _encoded_secret(value)):
                spans.append((f.end(), stop))
        i = end + 1
    return spans


def _encoded_secret(value: str) -> bool:
    """Whether a field value holds a secret once %-decoded, '+' read as itself or as a space: a URL given as a field
    (?next=http%3A%2F%2Fu%3Ap%40h) or fields of its own (SQLAlchemy's mssql+pyodbc:///?odbc_connect=...%3BPWD%3D...,
    an ODBC connection string: its fields split at ';' as a query's are)."""
    return any(plain != value and _spans("?" + plain, whole=True) for plain in {_decoded(value), unquote_plus(value)})


def _spans(text: str, whole: bool) -> list[Span]:
    """The parts of `text` to mask, merged and in order: the one parser of this module."""
    if "://" not in text and "?" not in text and "#" not in text:
        return []
    info = _userinfo_spans(text)
    return _merged(info + _field_spans(text, whole))


def _masked(text: str, spans: list[Span]) -> str:
    out, i = [], 0
    for s, e in spans:
        out += [text[i:s], MASK]
        i = e
    return "".join(out) + text[i:]


def redact(text: str) -> str:
    """`text` with every secret of every URL in it (see the module's docstring) replaced by ***, for printing
    and logging; text without a URL (a folder path) unchanged."""
    return _masked(text, _spans(text, whole=False))


def redact_url(url: str) -> str:
    """One URL (the whole of `url`, spaces included) with its secrets replaced by ***."""
    return _masked(url, _spans(url, whole=True))


def carries_secret(text: str) -> bool:
    """Whether `text` (a SecretUrl: the URL it hides) holds a secret: exactly when `redact` would change it."""
    text = reveal(text)
    return redact(text) != text


def user_of(url: str) -> str | None:
    """The user name of one URL by the rule above, when it is not itself a secret (an http user is): named in
    messages (a redacted URL shows *** in its place when it has a password); None without one."""
    url = reveal(url)
    m = _SCHEME.match(url)
    found = _userinfo(url, m.start(), m.end()) if m is not None and not _token_user(m.group()) else None
    if found is None:
        return None
    user_end, at = found
    return url[m.end():min(user_end, at)]  # type: ignore[union-attr]


class SecretUrl(str):
    """A URL whose every printed form is redacted: `str`, `repr`, `format`, json, pickling and copying give the URL
    with its secrets as *** (`redact_url`); `reveal` gives the URL itself, for opening the store it names. A pickle
    (Ray Tune's searcher and callback state in a study's folder) keeps only the redacted URL: a driver that
    unpickles it binds its own (adbs_lab/stores/study_folder.py: rebind)."""

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
