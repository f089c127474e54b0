"""Exit codes are named: adbs/exits.py holds them (OK, FAILED, REFUSED, INTERRUPTED) and the one exit exception
`Exit`; no command returns or exits with a number typed in place.

The rule, checked over the AST of every .py file under adbs/, adbs_lab/, studies/, bench/ and mlflow/ except
adbs/exits.py itself. A *code literal* is an integer literal (`2`, `-1`; not True/False), also as a branch of a
conditional expression (`0 if ok else 1`) or an operand of `and`/`or`. Flagged:

1. an exit call with a code literal as its code: `sys.exit(...)`, `exit(...)`, `quit(...)`, `os._exit(...)`,
   `SystemExit(...)`, `Exit(...)` (its first argument or `code=`);
2. `return <code literal>` in a function that returns an exit status: one named `main`; one decorated with
   `entry` or passed to `status` (adbs/exits.py); one whose call is the code of an exit call (`sys.exit(main())`,
   `SystemExit(helper(...))`); and, within the same module, one whose call a function of these returns
   (`return _start(args) if ... else _stop(args)`), transitively;
3. a parameter named `code` whose default is a code literal (`def fail(msg, code=2)`).

Not flagged: argparse's own exit 2 on a usage error (`p.error(...)`, which is argparse's code, not ours); a message
passed to sys.exit/SystemExit (`sys.exit("bench: ... failed")`: Python prints it and exits 1, as documented for
sys.exit); a code that is not a literal (`proc.returncode`, `out.code`, `exits.worst(...)`); integer returns of
functions that return counts or sizes (neither named main nor reached from an exit as above).
"""

from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SCANNED = ("adbs", "adbs_lab", "studies", "bench", "mlflow")
OWNER = Path("adbs/exits.py")
EXIT_CALLS = {"exit", "quit", "_exit", "SystemExit", "Exit"}
"""Names (a bare name or an attribute: sys.exit, os._exit, exits.Exit) of the calls whose argument is an exit code."""
STATUS_WRAPPERS = {"status", "entry"}


def _name(node: ast.AST) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return None


def _literal(node: ast.AST | None) -> bool:
    if isinstance(node, ast.Constant):
        return isinstance(node.value, int) and not isinstance(node.value, bool)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        return _literal(node.operand)
    if isinstance(node, ast.IfExp):
        return _literal(node.body) or _literal(node.orelse)
    if isinstance(node, ast.BoolOp):
        return any(_literal(v) for v in node.values)
    return False


def _code_arg(call: ast.Call) -> ast.AST | None:
    """The exit code an exit call is given (its first argument or `code=`), or None when it is not an exit call."""
    if _name(call.func) not in EXIT_CALLS:
        return None
    if call.args:
        return call.args[0]
    return next((k.value for k in call.keywords if k.arg == "code"), None)


def _called(node: ast.AST | None) -> set[str]:
    """Names of the functions whose call is `node`, through conditional expressions."""
    if isinstance(node, ast.Call):
        name = _name(node.func)
        return {name} if name else set()
    if isinstance(node, ast.IfExp):
        return _called(node.body) | _called(node.orelse)
    return set()


def _own_returns(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> list[ast.Return]:
    """The return statements of `fn` itself, not of functions or lambdas nested in it."""
    found, todo = [], list(fn.body)
    while todo:
        node = todo.pop()
        if isinstance(node, ast.Return):
            found.append(node)
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            todo.extend(ast.iter_child_nodes(node))
    return found


def problems(tree: ast.AST, where: str) -> list[str]:
    """Every place in one module that breaks the rule of this file's docstring, as `where:line: what`."""
    functions: dict[str, list[ast.FunctionDef | ast.AsyncFunctionDef]] = {}
    status_fns = {"main"}
    found = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            functions.setdefault(node.name, []).append(node)
            if any(_name(d) in STATUS_WRAPPERS for d in node.decorator_list):
                status_fns.add(node.name)
            args = node.args
            positional = [*args.posonlyargs, *args.args]
            pairs = [*zip(positional[len(positional) - len(args.defaults):], args.defaults),
                     *zip(args.kwonlyargs, args.kw_defaults)]
            found += [f"{where}:{node.lineno}: parameter {a.arg}={ast.unparse(d)}" for a, d in pairs
                      if a.arg == "code" and _literal(d)]
        elif isinstance(node, ast.Call):
            code = _code_arg(node)
            if _literal(code):
                found.append(f"{where}:{node.lineno}: {ast.unparse(node)[:80]}")
            status_fns |= _called(code)
            if _name(node.func) in STATUS_WRAPPERS and node.args:
                status_fns |= {n for n in [_name(node.args[0])] if n}
    todo = list(status_fns)
    while todo:  # what an exit-status function returns the call of returns an exit status too
        for fn in functions.get(todo.pop(), []):
            for ret in _own_returns(fn):
                new = _called(ret.value) & set(functions) - status_fns
                status_fns |= new
                todo += new
    for name in status_fns:
        for fn in functions.get(name, []):
            found += [f"{where}:{ret.lineno}: return {ast.unparse(ret.value)} in {name}" for ret in _own_returns(fn)
                      if _literal(ret.value)]
    return sorted(found, key=lambda line: int(line.split(":")[1]))


def repo_problems(root: Path) -> list[str]:
    found = []
    for top in SCANNED:
        for path in sorted((root / top).rglob("*.py")):
            rel = path.relative_to(root)
            if rel == OWNER or ".venv" in rel.parts:
                continue
            found += problems(ast.parse(path.read_text(), str(rel)), str(rel))
    return found


def test_no_exit_code_is_a_literal():
    found = repo_problems(REPO)
    assert not found, ("exit codes typed as numbers; use adbs/exits.py (OK, FAILED, REFUSED, INTERRUPTED; raise "
                       "Exit(code, message) below a command's main):\n" + "\n".join(found))


BROKEN = '''
import sys, os
from adbs import exits

def main(argv=None):
    if argv:
        return 2
    return _start() if argv else _stop()

def _start():
    print("error: x", file=sys.stderr)
    return 1

def _stop():
    return exits.OK if os.environ else 0

def helper(p):
    return 2

def fail(msg, code=2):
    raise SystemExit(code)

def count():
    return 0

def run():
    sys.exit(3)

def parts():
    raise SystemExit(helper(None))

def later():
    os._exit(130)

@exits.entry
def serve():
    return 0

def checked():
    return 1

def cli():
    return exits.status(checked)

if __name__ == "__main__":
    raise SystemExit(main())
'''


def test_each_form_of_the_rule_is_caught():
    """The check finds each kind it names (so the repository-wide test can fail), and not an int that is no code."""
    found = problems(ast.parse(BROKEN), "m")
    assert [line.split(": ", 1)[1] for line in found] == [
        "return 2 in main", "return 1 in _start", "return exits.OK if os.environ else 0 in _stop",
        "return 2 in helper", "parameter code=2", "sys.exit(3)", "os._exit(130)", "return 0 in serve",
        "return 1 in checked"], found
    assert not any("count" in line for line in found)
