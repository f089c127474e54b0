"""Credentials in URLs have one owner, adbs/redaction.py: what a study logs, what the store checks and the MLflow
launcher print, and what studies/submit.py refuses follow the same rule."""

from __future__ import annotations

import copy
import importlib.util
import json
import pickle
import re
import string
import subprocess
import sys
from pathlib import Path
from urllib.parse import quote

import pytest

from adbs.redaction import SecretUrl, carries_secret, redact, redact_url, reveal
from adbs_lab.stores import tracking_store
from adbs_lab.driver.preflight import logged_argv

REPO = Path(__file__).resolve().parents[2]

URLS = {  # url -> what may be shown: the password and secret query values as ***, the rest kept
    "s3://AKIA:hunter2@b/runs?endpoint_override=h:9000": "s3://***@b/runs?endpoint_override=h:9000",
    "s3://b/runs?secret_key=hunter2&region=eu": "s3://b/runs?secret_key=***&region=eu",
    "postgresql://alice:hunter2@db:5432/optuna": "postgresql://***@db:5432/optuna",
    "https://bob:hunter2@mlflow.example.org": "https://***@mlflow.example.org",
    "postgresql://alice@db/mlflow": "postgresql://alice@db/mlflow",
    "postgresql://u:s3cr/et@h/db": "postgresql://***@h/db",  # '/' in the password: once shown whole
    "postgresql://u:s3cr/et@x@h:5432/db": "postgresql://***@h:5432/db",  # '@' in it: once cut at the first
    "https://h/o?X-Amz-Signature=hunter2&X-Amz-Credential=AKIA%2F1&sig=hunter2":
        "https://h/o?X-Amz-Signature=***&X-Amz-Credential=***&sig=***",
    "s3://bucket/key@v1": "s3://bucket/key@v1",  # an '@' in a path is no user information
    "sqlite:////abs/mlflow.db": "sqlite:////abs/mlflow.db",
    "/shared/runs": "/shared/runs",
}


@pytest.mark.parametrize("url", list(URLS))
def test_every_printer_shows_the_same(url):
    from adbs.redaction import redact as light_redact

    assert redact(url) == tracking_store.redact_uri(url) == light_redact(url) == URLS[url]


def test_a_studys_logged_command_holds_no_database_or_server_password():
    """study.json and MLflow's adbs.command keep the command: every URL in it is cut, not only object stores'."""
    argv = ("studies/alpha_sweep.py", "--optuna-storage", "postgresql://alice:hunter2@db/optuna",
            "--tracking-uri=https://bob:hunter2@mlflow.example.org", "--storage", "s3://b/r?secret_key=hunter2")
    logged = " ".join(logged_argv(argv))
    assert "hunter2" not in logged and "postgresql://***@db/optuna" in logged
    assert "https://***@mlflow.example.org" in logged


@pytest.mark.parametrize("url", ["postgresql://alice:hunter2@127.0.0.1:1/nodb",  # nothing listens on port 1
                                 "http://bob:hunter2@127.0.0.1:1",  # MLflow's error quotes the URL it was given
                                 "nosuchstore://bob:hunter2@h/x"])
def test_a_store_error_message_loses_its_password(url):
    with pytest.raises(tracking_store.TrackingError) as e:
        tracking_store.tracking_problem(SecretUrl(url))
    assert "hunter2" not in str(e.value) and "***@" in str(e.value), str(e.value)


@pytest.mark.parametrize("text, secret", [
    ("https://bob:hunter2@mlflow.example.org", True),
    ("postgresql://u:s3cr/et@x@h/db", True),  # '/' and '@' in the password (studies/submit.py refuses it)
    ("s3://b/runs?secret_key=hunter2", True),
    ("--storage=s3://b/runs?session_token=abc", True),
    ("postgresql://alice@db/mlflow", False),  # a user name alone: the password comes from elsewhere
    ("s3://b/runs?endpoint_override=h:9000", False),
    ("/shared/runs", False),
])
def test_what_carries_a_secret(text, secret):
    assert carries_secret(text) is secret


def test_submit_refuses_a_secret_query_value_in_the_study_arguments(monkeypatch):
    spec = importlib.util.spec_from_file_location("adbs_submit", REPO / "studies" / "submit.py")
    submit = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(submit)
    monkeypatch.chdir(REPO)
    argv = ["--address", "http://head:8265", "--", "studies/alpha_sweep.py", "--storage", "/shared/runs",
            "--tracking-uri", "http://mlflow:5000", "--optuna-storage", "postgresql://db/optuna?password=hunter2"]
    with pytest.raises(submit.SubmitError, match="secret query or fragment value"):
        submit.validate(submit.parse(argv), {})


def test_the_light_commands_get_the_rule_without_torch():
    """The MLflow launcher, the store checks and studies/submit.py stay free of torch: adbs/__init__.py loads its
    names on first use, so adbs.redaction comes without the config or torch."""
    code = ("import sys; import adbs_lab.stores.serve, adbs_lab.stores.sqlite_kind, adbs_lab.stores.tracking_store; "
            "from adbs.redaction import redact; assert redact('s3://k:s@b') == 's3://***@b'; "
            "print(sorted(m for m in ('torch', 'adbs.config') if m in sys.modules))")
    r = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120,
                       env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"})
    assert r.returncode == 0 and r.stdout.strip() == "[]", r.stdout + r.stderr


def test_no_other_module_holds_a_credential_pattern():
    """The rule lives in adbs/redaction.py alone: no other module matches user:secret@ or secret query keys."""
    pattern = re.compile(r"://\[\^[^\]]*@|\"secret_key\"|SECRET_QUERY|rfind\(\"@\"")
    holders = sorted(str(p.relative_to(REPO)) for top in ("adbs", "adbs_lab", "studies", "bench", "mlflow")
                     for p in (REPO / top).rglob("*.py") if pattern.search(p.read_text(encoding="utf-8")))
    assert holders == ["adbs/redaction.py"], holders


# Every printable character a password may hold, raw where a URL can carry it (no whitespace) and %-encoded always:
# the property "the password never shows, the host and database always do", over a generated table (one password
# per character, each between other characters, and a few of several specials at once).
SPECIALS = "/:@?#%&=+;'\"<>`\\[]{}|^~!$*(),"
PASSWORDS = ([f"a{c}b" for c in string.printable if not c.isspace()]
             + [f"{c}x{c}" for c in SPECIALS] + ["s3cr/et@x", "p@ss:w/rd?#@", "@@//::", "a#b@c?d/e"])


@pytest.mark.parametrize("password", PASSWORDS + [quote(p, safe="") for p in PASSWORDS] + [" spaced pw "])
def test_no_password_shows_whatever_it_holds(password):
    for url in (f"postgresql://alice:{password}@db.example:5432/optuna",
                f"https://bob:{password}@mlflow.example.org/api?x=1"):
        host = url.split("@")[-1]
        shown = redact_url(url)
        assert password not in shown and shown.endswith(host) and "://***@" in shown, shown
        assert carries_secret(url)
        if not any(c.isspace() for c in password):  # in a text a URL ends at whitespace (a URL cannot hold one)
            text = redact(f"error: connecting to '{url}' failed: {url}")
            assert password not in text and text.count(host) == 2, text


@pytest.mark.parametrize("value", [f"x{c}y" for c in string.printable if not c.isspace() and c not in "&;"])
def test_no_secret_query_value_shows_whatever_it_holds(value):
    for key in ("password", "token", "secret_key", "sig", "X-Amz-Signature"):
        url = f"s3://b/runs?region=eu&{key}={quote(value, safe='')}&scheme=http"
        assert quote(value, safe="") not in redact(url) and redact(url).endswith("&scheme=http"), redact(url)


def test_a_secret_url_shows_only_its_redacted_form_wherever_it_goes():
    """str, repr, format, json, logging, pickling, copying: the redacted URL; reveal(): the URL itself."""
    real = "postgresql://u:s3cr/et@x@db:5432/optuna"
    url = SecretUrl(real)
    shown = "postgresql://***@db:5432/optuna"
    assert str(url) == f"{url}" == "%s" % url == json.loads(json.dumps(url)) == shown and repr(url) == repr(shown)
    assert "s3cr" not in pickle.dumps({"url": url}).decode("latin1") and pickle.loads(pickle.dumps(url)) == shown
    assert copy.deepcopy(url).reveal() == SecretUrl(url).reveal() == reveal(url) == real and url.startswith("postgresql:")
    with_user = SecretUrl("postgresql://alice@db/mlflow")  # nothing secret: the same text, so it connects as is
    assert str(with_user) == with_user.reveal() == "postgresql://alice@db/mlflow"


def test_a_studys_url_options_are_secret_urls():
    from adbs_lab.driver.options import StudyOptions

    opts = StudyOptions(optuna_storage="postgresql://u:s3cr/et@x@db/o", tracking_uri="https://b:s3cr/et@x@m/")
    assert "s3cr" not in repr(opts) and "s3cr" not in pickle.dumps(opts).decode("latin1")
    assert reveal(opts.replace(name="n").optuna_storage) == "postgresql://u:s3cr/et@x@db/o"
    assert reveal(tracking_store.tracking_uri(opts.tracking_uri)) == "https://b:s3cr/et@x@m/"


def test_a_database_error_names_the_user_and_host_never_the_password():
    from adbs_lab.stores.sqlite_kind import database_error

    url = SecretUrl("postgresql://alice:s3cr/et@x@db.example:5433/optuna")
    said = database_error(url, RuntimeError("FATAL: password authentication failed for user"))
    assert said.startswith("db.example:5433 refused the credentials of user 'alice'") and "s3cr" not in said, said


@pytest.mark.parametrize("key", ["pass%77ord", "%70assword", "secret%5Fkey", "X-Amz-%53ignature", "to%6Ben", "si%67"])
def test_a_percent_encoded_secret_query_name_is_a_secret_query_name(key):
    """A store decodes a query's names before it reads them (SQLAlchemy's make_url turns ?pass%77ord=x into
    password=x, passed to the driver), so the rule judges the decoded name."""
    url = f"postgresql://alice@db/optuna?region=eu&{key}=hunter2"
    assert carries_secret(url) and "hunter2" not in redact(url) and "hunter2" not in str(SecretUrl(url)), redact(url)


def test_the_readme_lists_the_secret_field_names_the_rule_reads():
    """docs/security.md names the field names counted as secret: the rule's own lists, neither more nor fewer."""
    from adbs.redaction import SECRET_NAMES, SECRET_WORDS

    text = (REPO / "docs" / "security.md").read_text(encoding="utf-8")
    section = text[text.index("# Security"):]
    holds, is_one = re.search(r"separators, holds(.*?), or is(.*?)\(`\?secret_key", section, re.S).groups()
    assert set(re.findall(r"`(\w+)`", holds)) == set(SECRET_WORDS)
    assert set(re.findall(r"`(\w+)`", is_one)) == set(SECRET_NAMES)
