"""Every URL a command prints, raises, logs or tags goes through the one redaction rule (adbs/redaction.py).

By AST over adbs/, adbs_lab/, studies/ and mlflow/serve.py (ROOTS). A sink is a call to print, a `raise X(...)`, a logging or
warnings call, an MLflow tag or param write (set_tag, set_experiment_tag, log_param(s)), or a dict whose keys
are the study's tags ("adbs.*", "mlflow.*"). What a sink is given must not hold, unredacted:

- a URL-like value: a name or attribute called uri, url, storage, address, dest(ination), store, location,
  endpoint (or ending in _uri, _url, ...), or argv (a command line as typed: sys.argv, opts.argv), or anything made
  of one (uri[9:], uri.strip(), st.join(url, name), shlex.join(sys.argv[1:]));
- the text of an exception caught around a use of such a value (`except Exception as e` around MlflowClient(uri):
  MLflow's message quotes the URL it was given), unless every class the handler catches is one of this
  repository's (ROOTS): their messages are made at raise sites this check reads.

Redacted: the result of a call in REDACTING (each redacts what it returns); an attribute in SELF_REDACTING (a
SecretUrl or a StudyFolder by construction, whose text is redacted: checked below at run time); a local name
every assignment of which in its function is itself redacted or URL-free (`shown = redact(uri)`,
`where = "outside the project"`). The check reads names, not types: it is a tripwire for a new print site, and the
tests of tests/adbs/test_redaction_shapes.py check what the sites print.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
ROOTS = ("adbs", "adbs_lab", "studies", "mlflow/serve.py")
URL_NAME = re.compile(r"(^|_)(uri|url|urls|storage|address|addr|dest|destination|store|location|endpoint|argv)$")
REDACTING = {"redact", "redact_url", "redact_uri", "display", "logged_argv", "_first_line", "ui_command", "SecretUrl",
             "secret_url", "tracking_uri", "command_tag"}
"""Functions whose result is redacted, or a SecretUrl (checked below at run time)."""
NO_TEXT = {"len", "type", "bool", "isinstance", "scheme", "is_url", "is_server"}
"""Functions whose result holds no text of their argument (a length, a type, a URL's scheme)."""
REDACTING_ERRORS = {"TrackingError"}
"""Exceptions whose message is redacted when made (checked below at run time): a raise of one is no sink."""
SELF_REDACTING = {"tracking_uri", "optuna_url", "optuna_storage", "backend_store_uri", "where"}
SINK_METHODS = {"set_tag", "set_tags", "set_experiment_tag", "log_param", "log_params", "warn", "warning", "info",
                "error", "exception", "debug", "critical"}
PASSING = {"str", "repr", "format", "quote", "join", "strip", "rstrip", "lstrip", "splitlines", "split", "partition",
           "replace", "lower", "upper"}


def _name(e: ast.AST) -> str | None:
    return e.id if isinstance(e, ast.Name) else e.attr if isinstance(e, ast.Attribute) else None


class _Scan:
    def __init__(self, tree: ast.Module, own: frozenset[str]):
        self.parents = {c: p for p in ast.walk(tree) for c in ast.iter_child_nodes(p)}
        self.own = own
        self.found: list[tuple[int, str]] = []

    def _scope(self, node: ast.AST) -> ast.AST:
        while node in self.parents and not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            node = self.parents[node]
        return node

    def _caught(self, name: str, at: ast.AST) -> bool:
        """Whether `name` is the exception of an `except ... as name` around `at` whose try uses a URL-like value."""
        node = at
        while node in self.parents:
            node, child = self.parents[node], node
            if isinstance(child, ast.ExceptHandler) and child.name == name and isinstance(node, ast.Try):
                types = child.type.elts if isinstance(child.type, ast.Tuple) else [child.type]
                if all(_name(t) in self.own for t in types):
                    return False  # raised by this repository's code with a checked message
                return any(self._url_like(x) for s in node.body for x in ast.walk(s))
        return False

    @staticmethod
    def _url_like(e: ast.AST) -> bool:
        n = _name(e)
        return n is not None and bool(URL_NAME.search(n.lower())) and n not in SELF_REDACTING

    def _safe_local(self, name: str, at: ast.AST, seen: frozenset = frozenset()) -> bool:
        """Whether every assignment of `name` in the function around `at` (else the module) is redacted."""
        scope = self._scope(at)
        values = [v for node in ast.walk(scope) for t, v in _assignments(node) if t == name]
        if not values and scope in self.parents:
            return self._safe_local(name, self.parents[scope], seen)
        return bool(values) and name not in seen and all(self._redacted(v, seen | {name}) for v in values)

    def _tainted(self, name: str, at: ast.AST, seen: frozenset) -> bool:
        """Whether a local `name` of the function around `at` is assigned something that leaks (`args =
        shlex.join(sys.argv[1:])`, then `print(args)`)."""
        if name in seen:
            return False
        scope = self._scope(at)
        if scope not in self.parents:  # a module-level name: its constants and imports
            return False
        return any(self._carries(v, seen | {name}) for node in ast.walk(scope) for t, v in _assignments(node)
                   if t == name)

    def _carries(self, e: ast.AST, seen: frozenset) -> bool:
        """Whether `e` is a URL-like value passed through text operations only (PASSING: a join, a strip, a
        format, a slice), so that its text is the URL's; a call of anything else is not followed."""
        if isinstance(e, (ast.Name, ast.Attribute)):
            return bool(self.leaks(e, seen))
        if isinstance(e, ast.Subscript):
            return self._carries(e.value, seen)
        if isinstance(e, ast.Call):
            f = _name(e.func)
            parts = [*e.args, *(k.value for k in e.keywords)]
            parts += [e.func.value] if isinstance(e.func, ast.Attribute) else []
            return f in PASSING and any(self._carries(a, seen) for a in parts)
        if isinstance(e, (ast.GeneratorExp, ast.ListComp)):  # by its elements: (a for a in argv), not redact(a)
            names = {t.id for g in e.generators if self._carries(g.iter, seen) for t in ast.walk(g.target)
                     if isinstance(t, ast.Name)}
            return self._carries(e.elt, seen) or isinstance(e.elt, ast.Name) and e.elt.id in names
        if isinstance(e, (ast.JoinedStr, ast.FormattedValue, ast.BinOp, ast.Tuple, ast.List, ast.Starred)):
            return any(self._carries(c, seen) for c in ast.iter_child_nodes(e))
        return False

    def _redacted(self, e: ast.AST, seen: frozenset) -> bool:
        """Whether `e` is known to hold no unredacted URL: made only of redacting calls, self-redacting attributes,
        constants and names that are so (a call this check does not know may return a URL: st.join(storage, x))."""
        if isinstance(e, ast.Constant):
            return True
        if isinstance(e, ast.Name):
            return not self.leaks(e, seen)
        if isinstance(e, ast.Attribute):
            return e.attr in SELF_REDACTING
        if isinstance(e, ast.Call):
            f = _name(e.func)
            if f in REDACTING or f in NO_TEXT:
                return True
            parts = [*e.args, *(k.value for k in e.keywords)]
            parts += [e.func.value] if isinstance(e.func, ast.Attribute) else []
            return f in PASSING and all(self._redacted(a, seen) for a in parts)
        if isinstance(e, ast.IfExp):
            return self._redacted(e.body, seen) and self._redacted(e.orelse, seen)
        if isinstance(e, (ast.JoinedStr, ast.FormattedValue, ast.BinOp, ast.BoolOp, ast.Tuple, ast.List)):
            return all(self._redacted(c, seen) for c in ast.iter_child_nodes(e) if isinstance(c, ast.expr))
        return False

    def leaks(self, e: ast.AST, seen: frozenset = frozenset()) -> list[str]:
        """The parts of expression `e` that are URL-like or a caught exception's text, unredacted."""
        if isinstance(e, ast.Name):
            bad = ((self._url_like(e) or self._caught(e.id, e) or self._tainted(e.id, e, seen))
                   and not self._safe_local(e.id, e, seen))
            return [e.id] if bad else []
        if isinstance(e, ast.Attribute):
            return [ast.unparse(e)] if self._url_like(e) else []
        if isinstance(e, ast.Subscript):
            return self.leaks(e.value, seen)
        if isinstance(e, ast.Call):
            f = _name(e.func)
            if f in REDACTING or f in NO_TEXT:
                return []
            inner = [*e.args, *(k.value for k in e.keywords)]
            if isinstance(e.func, ast.Attribute) and (f in PASSING or not inner):
                inner.append(e.func.value)  # a method of the value: url.rstrip("/"), ", ".join(urls)
            return [x for a in inner for x in self.leaks(a, seen)]
        if isinstance(e, ast.IfExp):  # its test is not shown
            return self.leaks(e.body, seen) + self.leaks(e.orelse, seen)
        if isinstance(e, (ast.Lambda, ast.Constant, ast.Compare)):
            return []
        return [x for c in ast.iter_child_nodes(e) if isinstance(c, ast.expr) for x in self.leaks(c, seen)]


def _assignments(node: ast.AST):
    if isinstance(node, ast.Assign):
        for t in node.targets:
            if isinstance(t, ast.Name):
                yield t.id, node.value
            elif isinstance(t, ast.Tuple) and isinstance(node.value, ast.Tuple) and len(t.elts) == len(node.value.elts):
                yield from ((x.id, v) for x, v in zip(t.elts, node.value.elts) if isinstance(x, ast.Name))
            elif isinstance(t, ast.Tuple):
                yield from ((x.id, node.value) for x in t.elts if isinstance(x, ast.Name))
    elif isinstance(node, (ast.AnnAssign, ast.NamedExpr)) and isinstance(node.target, ast.Name) and node.value:
        yield node.target.id, node.value


def _sinks(tree: ast.Module):
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            f = node.func
            if (isinstance(f, ast.Name) and f.id == "print") or (isinstance(f, ast.Attribute) and f.attr in SINK_METHODS):
                yield node, [*node.args, *(k.value for k in node.keywords if k.arg not in ("file", "flush", "end"))]
        elif (isinstance(node, ast.Raise) and isinstance(node.exc, ast.Call)
              and _name(node.exc.func) not in REDACTING_ERRORS):
            yield node, [*node.exc.args, *(k.value for k in node.exc.keywords)]
        elif isinstance(node, ast.Dict):
            tags = [v for k, v in zip(node.keys, node.values)
                    if isinstance(k, ast.Constant) and isinstance(k.value, str) and k.value.startswith(("adbs.", "mlflow."))]
            if tags:
                yield node, tags


def own_errors() -> frozenset[str]:
    """The names of the classes defined in ROOTS (their raise sites are checked)."""
    return frozenset(node.name for path in _files() for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
                     if isinstance(node, ast.ClassDef))


def _files() -> list[Path]:
    return [p for root in ROOTS for p in (sorted((REPO / root).rglob("*.py")) if (REPO / root).is_dir() else [REPO / root])]


def unredacted(source: str, own: frozenset[str] = frozenset({"OwnError"})) -> list[str]:
    """`line: expression` for each URL-like value a sink of `source` is given unredacted."""
    tree = ast.parse(source)
    scan = _Scan(tree, own)
    found = [(node.lineno, x) for node, args in _sinks(tree) for a in args for x in scan.leaks(a)]
    return [f"{line}: {x}" for line, x in sorted(dict.fromkeys(found))]


def test_the_reader_finds_an_unredacted_url_and_passes_a_redacted_one():
    bad = ("def f(uri, p, e):\n"
           "    print(f'store {uri}')\n"
           "    raise ValueError(f'cannot open {p.storage}: ...')\n"
           "    print('x ' + st.join(url, 'a').rstrip('/'))\n"
           "    client.set_tag(run, 'adbs.x', args.address)\n"
           "    tags = {'adbs.storage': storage_url}\n"
           "    addr = shlex.quote(args.address)\n"
           "    print(addr)\n"
           "    uri = _flag(rest, '--tracking-uri')\n"
           "    print(f'{uri!r}')\n"
           "def g(uri):\n"
           "    try:\n"
           "        MlflowClient(uri)\n"
           "    except Exception as e:\n"
           "        raise Exit(2, f'cannot open it ({str(e).splitlines()[0]})')\n"
           "    except OwnError as e:\n"
           "        raise Exit(2, f'{e}')\n"
           "def h():\n"
           "    args = shlex.join(sys.argv[1:])\n"
           "    print(f'run: python -m new {args}')\n"
           "    shown = ' '.join(a for a in opts.argv)\n"
           "    print(shown)\n")
    assert unredacted(bad) == ["2: uri", "3: p.storage", "4: url", "5: args.address", "6: storage_url", "8: addr",
                               "10: uri", "15: e", "20: args", "22: shown"]
    good = ("def f(uri, p, e, path):\n"
            "    print(f'store {redact(uri)} {p.tracking_uri} {where}, {path}: {e}')\n"
            "    shown = redact(uri)\n"
            "    where = 'outside the project'\n"
            "    addr = shlex.quote(redact(p.address))\n"
            "    print(f'{addr} {uri!r}' if (uri := p.tracking_uri) else addr)\n"
            "    print(shown, where, len(uri))\n"
            "    tags = {'adbs.command': shlex.join(logged_argv(argv)), 'adbs.storage': str(p.where)}\n"
            "    try:\n"
            "        open(path)\n"
            "    except OSError as e:\n"
            "        print(f'{path}: {e}')\n"
            "    print(f'{\"cluster\" if p.address else \"\"} {len(uri)} {scheme(uri)!r}')\n"
            "    args = shlex.join(redact(a) for a in sys.argv[1:])\n"
            "    print(f'run: {args}')\n")
    assert unredacted(good) == []


def test_every_print_raise_log_and_tag_of_a_url_is_redacted():
    found, own = [], own_errors()
    for path in _files():
        found += [f"{path.relative_to(REPO)}:{x}" for x in unredacted(path.read_text(encoding="utf-8"), own)]
    assert not found, ("a URL (or the error of a call that used one) printed, raised, logged or tagged without "
                       "adbs/redaction.py's redact (or redact_url; a SecretUrl prints redacted itself): "
                       + "; ".join(found))


def test_the_self_redacting_attributes_are_so():
    """SELF_REDACTING's attributes hold a SecretUrl (or a StudyFolder, whose text is redacted) wherever the check
    lets them through: the study's options, what the preflight prepares, serve.py's store."""
    from adbs.redaction import SecretUrl
    from adbs_lab.driver.options import StudyOptions
    from adbs_lab.stores import serve, tracking_store
    from adbs_lab.stores.study_folder import StudyFolder

    secret = "postgresql://u:hunter2@db/x"
    opts = StudyOptions(optuna_storage=secret, tracking_uri=secret)
    assert isinstance(opts.optuna_storage, SecretUrl) and isinstance(opts.tracking_uri, SecretUrl)
    assert isinstance(tracking_store.tracking_uri(secret), SecretUrl)
    assert isinstance(serve.parser().parse_args(["--backend-store-uri", secret]).backend_store_uri, SecretUrl)
    folder = StudyFolder.__new__(StudyFolder)  # its text, without opening the object store
    folder.remote, folder.url, folder.storage = True, "s3://k:hunter2@b/runs/s", "s3://k:hunter2@b/runs"
    assert "hunter2" not in f"{folder} {folder.display('x')}"
    assert set(SELF_REDACTING) == {"tracking_uri", "optuna_url", "optuna_storage", "backend_store_uri", "where"}


def test_the_redacting_functions_and_errors_are_so():
    """REDACTING's functions return redacted text (or a SecretUrl), REDACTING_ERRORS' messages are redacted
    (tracking_store's _first_line, the first line of a store's error, through tracking_problem's messages:
    tests/adbs/test_redaction_shapes.py)."""
    from adbs.redaction import SecretUrl, redact, redact_url, secret_url
    from adbs_lab.driver.preflight import logged_argv
    from adbs_lab.stores import tracking_store

    url = "postgresql://u:hunter2@db/x?token=hunter2"
    from studies.ablation_path import command_tag

    said = [redact(url), redact_url(url), tracking_store.redact_uri(url), " ".join(logged_argv(("--x", url))),
            command_tag(("--x", url)),
            tracking_store.ui_command(url),
            str(SecretUrl(url)), str(secret_url(url)), str(tracking_store.tracking_uri(url)),
            str(tracking_store.TrackingError(f"tracking URI {url} is unreachable"))]
    assert not [s for s in said if "hunter2" in s], said
    assert {"redact", "redact_url", "redact_uri", "display", "logged_argv", "_first_line", "ui_command", "SecretUrl",
            "secret_url", "tracking_uri", "command_tag"} == REDACTING and REDACTING_ERRORS == {"TrackingError"}
