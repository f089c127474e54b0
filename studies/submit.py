"""submit: run a study on a Ray cluster as a Ray Job (Ray's Job Submission API), from any machine.

    python studies/submit.py --address http://HEAD:8265 -- studies/alpha_sweep.py \\
        --storage /shared/adbs-runs --tracking-uri http://MLFLOW_HOST:5000 --gpus-per-trial 1
    python studies/submit.py --address http://HEAD:8265 --wait --env MLFLOW_TRACKING_TOKEN -- \\
        studies/kshot_grid.py --smoke --storage /mnt/shared/adbs-runs --tracking-uri https://mlflow.example.org

Everything after `--` is the study command, exactly as on a laptop. The project folder is the
job's working directory (uploaded, without .venv, .git, runs, results, the MLflow store) and the
project's dependencies from pyproject.toml are the job's pip runtime environment (Ray installs
them on each node once, on top of the cluster's packages; `--deps installed` skips that when the
cluster image already holds them). The study runs on the head node with `--address auto` and
spreads its trials over the cluster; it refuses node-local storage or a file tracking store on a
multi-node cluster (adbs_lab/cluster/checks.py).

Secrets (MLFLOW_TRACKING_TOKEN, MLFLOW_TRACKING_PASSWORD, AWS keys, ...) travel only as environment
variables of the job: `--env NAME` copies NAME from this shell. They are never put in the command,
printed, or logged as MLflow params; a URI that carries credentials (user:password@, a token as an http(s)
user, a secret query or fragment value: adbs/redaction.py) is refused, in the study's arguments and in --address.
On a cluster with token authentication (every Ray cluster from Ray 2.61), give this command the cluster's token:
RAY_AUTH_TOKEN (or RAY_AUTH_TOKEN_PATH) in this shell, which turns RAY_AUTH_MODE=token on unless set (docs/clusters.md,
"Token authentication"); the job itself runs with the cluster's own.
Prints the job id and the commands to follow and stop it; `--wait` streams the logs and exits
with the job's status (0 = SUCCEEDED). Submitting takes seconds (upload ~1 MB).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))  # run from any cwd without installing

from adbs import light  # noqa: E402
light.guard(__name__)  # from here on SIGINT and SIGTERM end it with exit 130 and one line (adbs/light.py)

import argparse  # noqa: E402
import asyncio  # noqa: E402
import re  # noqa: E402
import shlex  # noqa: E402
import time  # noqa: E402
from typing import TYPE_CHECKING  # noqa: E402

from adbs import exits  # noqa: E402
from adbs_lab.cluster import auth  # noqa: E402
from adbs_lab.driver import outcome  # noqa: E402
from adbs.redaction import carries_secret, redact  # noqa: E402

if TYPE_CHECKING:
    from ray import exceptions as ray_exceptions
    from ray import job_submission
else:  # Ray's client: loaded at its first use, once the arguments are checked (adbs/light.py)
    job_submission = light.lazy("ray.job_submission")
    ray_exceptions = light.lazy("ray.exceptions")  # AuthenticationError: a cluster that wants its token

# Never uploaded: environments, VCS, local results and stores (gitignore syntax, relative to REPO).
EXCLUDES = ["/.venv/", ".git/", "/runs/", "/results/", "/test-artifacts/", "/mlflow/mlflow.db",
            "/mlflow/artifacts/", "/.patches/", "__pycache__/", "*.egg-info/", ".pytest_cache/", "*.pyc"]
# Ray is the cluster's own; a job environment must not install a different one on top.
SKIP_DEPS = re.compile(r"^\s*ray([\[<>=!~ ;]|$)", re.I)
TERMINAL = ("SUCCEEDED", "FAILED", "STOPPED")


class SubmitError(ValueError):
    """Bad submit arguments, found before anything is sent; the message says what to change."""


def parse(argv: list[str]) -> argparse.Namespace:
    p = build_parser()
    if "--" not in argv:
        if "-h" in argv or "--help" in argv:
            p.parse_args(["--help"])  # prints the help and exits 0
        raise SubmitError("put the study command after `--`, e.g. "
                          "submit.py --address http://HEAD:8265 -- studies/alpha_sweep.py --storage /shared/runs ...")
    cut = argv.index("--")
    args = p.parse_args(argv[:cut])
    args.study = argv[cut + 1:]
    return args


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter,
                                usage="%(prog)s --address http://HEAD:8265 [options] -- studies/NAME.py [study options]")
    p.add_argument("--address", default=os.environ.get("RAY_API_SERVER_ADDRESS") or os.environ.get("RAY_ADDRESS"),
                   help="Ray dashboard / Jobs API address, http://HEAD:8265 (default $RAY_API_SERVER_ADDRESS)")
    p.add_argument("--wait", action="store_true", help="stream the job's logs and exit with its status (0 = SUCCEEDED)")
    p.add_argument("--env", action="append", default=[], metavar="NAME[=VALUE]",
                   help="environment variable for the job, repeatable; NAME alone copies it from this shell "
                        "(use that form for secrets: MLFLOW_TRACKING_TOKEN, MLFLOW_TRACKING_PASSWORD, AWS_SECRET_ACCESS_KEY)")
    p.add_argument("--deps", choices=["pyproject", "installed"], default="pyproject",
                   help="pyproject: install the project's dependencies (pyproject.toml, minus ray) as the job's pip "
                        "environment; installed: use the cluster's packages as they are (an image built from the project)")
    p.add_argument("--pip", action="append", default=[], metavar="REQ",
                   help="extra pip requirement for the job, repeatable (e.g. --pip 'psycopg2-binary')")
    p.add_argument("--python", default=None,
                   help="the Python the job runs the study with (default: for a cluster on this machine, --address "
                        "http://127.0.0.1:PORT, the Python running this script, e.g. .venv/bin/python; for a remote "
                        "cluster, `python` on its PATH)")
    p.add_argument("--job-id", default=None, help="submission id (default: Ray generates one)")
    return p


def _flag(study_args: list[str], name: str) -> str | None:
    """Value of `--name V` or `--name=V` in the study's arguments (last one wins, as argparse)."""
    value = None
    for i, a in enumerate(study_args):
        if a == name and i + 1 < len(study_args):
            value = study_args[i + 1]
        elif a.startswith(name + "="):
            value = a.split("=", 1)[1]
    return value


def env_vars(specs: list[str], environ: dict[str, str]) -> dict[str, str]:
    out = {}
    for spec in specs:
        name, sep, value = spec.partition("=")
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
            raise SubmitError(f"--env {name!r}: not an environment variable name")
        if not sep:
            if name not in environ:
                raise SubmitError(f"--env {name}: {name} is not set in this shell; export it first "
                                  f"(or pass --env {name}=VALUE for a value that is not a secret)")
            value = environ[name]
        out[name] = value
    return out


def validate(args: argparse.Namespace, environ: dict[str, str] | None = None) -> dict[str, str]:
    """Everything checkable before anything is sent; returns the job's environment variables."""
    environ = dict(os.environ if environ is None else environ)
    if not args.address:
        raise SubmitError("--address is required: the Ray dashboard of the cluster, e.g. http://HEAD:8265 "
                          "(the Jobs API; from a laptop, tunnel it: ssh -L 8265:localhost:8265 HEAD)")
    if carries_secret(args.address):
        raise SubmitError(f"--address {redact(args.address)!r}: the address carries credentials, which the submit "
                          "output and its `ray job` commands would show; pass the dashboard's address without them "
                          "(reach a dashboard behind a login through a tunnel: ssh -L 8265:localhost:8265 HEAD)")
    if not re.fullmatch(r"https?://[^/\s:]+(:\d+)?/?", args.address):
        raise SubmitError(f"--address {redact(args.address)!r}: expected the dashboard's http address, http://HEAD:8265; "
                          "ray:// (Ray Client) and HOST:6379 (GCS) addresses are not the Jobs API")
    if not args.study:
        raise SubmitError("no study after `--`: e.g. -- studies/alpha_sweep.py --storage /shared/runs ...")
    script = Path(args.study[0])
    full = (script if script.is_absolute() else Path.cwd() / script).resolve()
    if not full.is_file() and (REPO / script).is_file():
        full = (REPO / script).resolve()
    if not full.exists():
        raise SubmitError(f"study script {args.study[0]!r} not found; name one of {', '.join(study_scripts())}")
    if REPO not in full.parents:
        raise SubmitError(f"{full} is outside the project {REPO}: only the project folder is uploaded")
    if full == Path(__file__).resolve():
        raise SubmitError("submit.py cannot submit itself; name a study script after `--`")
    if full.relative_to(REPO).as_posix() not in study_scripts():
        raise SubmitError(f"{args.study[0]!r} is not a study script; submit.py runs studies (each one has a "
                          f"search space in search_spaces/): {', '.join(study_scripts())}")
    args.script = full.relative_to(REPO).as_posix()
    rest = args.study[1:]
    if any(a in ("-h", "--help") for a in rest):
        raise SubmitError(f"--help: run `python {args.script} --help` locally to see the study's options")
    env = env_vars(args.env, environ)

    _check_storage(_flag(rest, "--storage"))
    uri = _flag(rest, "--tracking-uri") or env.get("MLFLOW_TRACKING_URI")
    if uri is None:
        raise SubmitError("the study needs --tracking-uri (an MLflow server, e.g. http://MLFLOW_HOST:5000) or "
                          "--env MLFLOW_TRACKING_URI: its default SQLite file would be inside the job's temporary "
                          "working directory and lost")
    if uri.startswith("sqlite:") and not uri.startswith("sqlite:////"):
        raise SubmitError(f"--tracking-uri {redact(uri)!r} is relative to the job's temporary working directory; "
                          "use an MLflow server (http://MLFLOW_HOST:5000)")
    address = _flag(rest, "--address")
    if address not in (None, "auto"):
        raise SubmitError(f"study option --address {redact(address)!r}: a submitted study runs on the cluster and connects "
                          "to it itself; drop the option (submit.py adds --address auto)")
    args.study[1:] = rest = project_config(args, rest)
    for a in [*rest, *args.pip]:
        if carries_secret(a):
            raise SubmitError(f"{redact(a)}: a URI with credentials (user:password@, a token as an http(s) URL's "
                              "user, a secret query or fragment value: secret_key=, token=, #token=, ...) in the "
                              "study arguments would be printed, kept in the job's entrypoint and logged to MLflow; "
                              "pass credentials as --env MLFLOW_TRACKING_USERNAME --env MLFLOW_TRACKING_PASSWORD (or "
                              "MLFLOW_TRACKING_TOKEN) instead")
        for name, value in env.items():
            if len(value) >= 6 and value in a and name not in ("MLFLOW_TRACKING_URI",):
                raise SubmitError(f"the value of {name} appears in the study arguments; secrets travel only as "
                                  f"--env {name}, never in the command")
    return env


def _check_storage(storage: str | None) -> None:
    """The study's --storage: given, and shared by every node (an absolute path or an object-store URL without
    credentials)."""
    if storage is None:
        raise SubmitError("the study needs --storage on shared storage (a path every node mounts, e.g. "
                          "/shared/adbs-runs): its default, <project>/runs, would be inside the job's temporary "
                          "copy of the project on the head node and lost")
    from adbs import objstore as st

    if st.is_url(storage):
        if carries_secret(storage):
            raise SubmitError(f"--storage {redact(storage)}: the URL carries credentials, which would be visible in "
                              "the job's entrypoint (dashboard, `ray job list`); drop them from the URL and pass "
                              "them as variables: --env AWS_ACCESS_KEY_ID --env AWS_SECRET_ACCESS_KEY")
    elif "://" in storage:
        raise SubmitError(f"--storage {redact(storage)!r}: unsupported URL scheme; use a path every node mounts or an "
                          f"object-store URL ({', '.join(s + '://' for s in st.OBJECT_STORE_SCHEMES)})")
    elif not storage.startswith("/"):
        raise SubmitError(f"--storage {redact(storage)!r} must be absolute: relative paths and ~ resolve inside the job's "
                          "temporary working directory on the head node")


def study_scripts() -> list[str]:
    """The study scripts: studies/NAME.py with a search space search_spaces/NAME.py (not report.py, submit.py)."""
    return sorted(f"studies/{f.name}" for f in (REPO / "studies").glob("*.py")
                  if (REPO / "search_spaces" / f.name).is_file())


def dependencies(deps: str, extra: list[str]) -> list[str]:
    """The job's pip requirements: pyproject.toml's dependencies (minus ray) + --pip."""
    if deps == "installed":
        return list(extra)
    import tomllib

    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    return [d for d in project.get("dependencies", []) if not SKIP_DEPS.match(d)] + list(extra)


def project_config(args: argparse.Namespace, rest: list[str]) -> list[str]:
    """The study's arguments with its --config file named as the job sees it: the job gets the project folder only
    (Ray uploads it as the job's working directory, less EXCLUDES), so a file inside it travels as its path relative
    to the project (`args.shipped` notes it), and one outside it, or in a folder never uploaded, is refused."""
    import pathspec

    out, args.shipped = list(rest), []
    for i, a in enumerate(rest):
        if a == "--config" and i + 1 < len(rest):
            at, value = i + 1, rest[i + 1]
        elif a.startswith("--config="):
            at, value = i, a.split("=", 1)[1]
        else:
            continue
        full = Path(value).expanduser()
        full = (full if full.is_absolute() else Path.cwd() / full).resolve()
        if not full.is_file():
            raise SubmitError(f"--config {value}: no such file here; pass the path of the YAML file the study reads")
        rel = full.relative_to(REPO).as_posix() if REPO in full.parents else None
        if rel is None or pathspec.GitIgnoreSpec.from_lines(EXCLUDES).match_file(rel):
            where = "outside the project" if rel is None else "in a folder of the project that is never uploaded"
            raise SubmitError(f"--config {value}: {full} is {where} ({REPO}); the job gets only the project folder, "
                              "which Ray uploads as its working directory: copy the file into the project (e.g. "
                              f"{REPO / 'configs' / full.name}) and pass that path")
        out[at] = rel if a == "--config" else f"--config={rel}"
        args.shipped.append(f"--config {value} travels with the project as {rel}")
    return out


def runtime_env(args: argparse.Namespace, env: dict[str, str]) -> dict:
    from adbs_lab.stores.paths import code_version

    # The job has no .git: the code version travels with it (MLflow tag adbs.code_version).
    version = code_version()
    env = {"RAY_USAGE_STATS_ENABLED": "0", "MLFLOW_DISABLE_TELEMETRY": "true",
           **({"ADBS_CODE_VERSION": version} if version != "unknown" else {}), **env}
    excludes = list(EXCLUDES)
    storage = Path(_flag(args.study[1:], "--storage") or "/")
    if REPO in storage.parents:  # a storage folder inside the project is never uploaded
        excludes.append("/" + storage.relative_to(REPO).as_posix() + "/")
    out = {"working_dir": str(REPO), "excludes": excludes, "env_vars": env}
    pip = dependencies(args.deps, args.pip)
    if pip:
        out["pip"] = {"packages": pip, "pip_check": False}
    return out


def entrypoint(args: argparse.Namespace) -> list[str]:
    rest = list(args.study[1:])
    if _flag(rest, "--address") is None:
        rest += ["--address", "auto"]  # the job's driver runs on the head node, inside the cluster
    return [args.python or job_python(args.address), args.script, *rest]


def job_python(address: str) -> str:
    """A cluster on this machine runs the job here: with the Python that runs this script (a virtual environment's;
    `python` on the PATH of `ray start` is often the system's, without the project). A remote cluster: its `python`."""
    import socket
    from urllib.parse import urlsplit

    host = (urlsplit(address).hostname or "").lower()
    local = {"127.0.0.1", "localhost", "::1", socket.gethostname().lower()}
    return sys.executable if host in local or host.startswith("127.") else "python"


def follow(client, job_id: str) -> str:
    """Stream the job's logs until it ends; returns its final status."""

    async def tail() -> None:
        async for lines in client.tail_job_logs(job_id):
            print(lines, end="", flush=True)

    try:
        asyncio.run(tail())
    except Exception as e:  # noqa: BLE001 - the stream broke before the end: keep polling the status
        print(f"\n(log stream interrupted: {e}; polling the job status)", file=sys.stderr)
    while True:
        status = str(client.get_job_status(job_id))
        if status in TERMINAL:
            return status
        time.sleep(2)


@exits.entry
def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    try:
        args = parse(argv)
        env = validate(args)
        check_study_flags(args)
    except SubmitError as e:
        raise exits.Exit(exits.REFUSED, f"error: {e}") from None
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    auth.set_default()  # RAY_AUTH_TOKEN given: token auth on, which the Jobs API then needs (adbs_lab/cluster/auth.py)
    import logging

    logging.getLogger("ray").setLevel(logging.WARNING)  # packaging chatter: one line per ignored file

    cmd = entrypoint(args)
    addr = shlex.quote(redact(args.address))
    refused = ray_exceptions.AuthenticationError  # read before the try: an except clause must not load a module
    try:
        client = job_submission.JobSubmissionClient(args.address)
        light.doing(f"while submitting the job: it may have been submitted; `ray job list --address {addr}` lists "
                    "the cluster's jobs")
        job_id = client.submit_job(entrypoint=shlex.join(cmd), runtime_env=runtime_env(args, env),
                                   submission_id=args.job_id,
                                   metadata={"adbs.study": Path(args.script).stem, "adbs.env": ",".join(sorted(env))})
    except (ConnectionError, RuntimeError, ValueError, refused) as e:
        raise exits.Exit(exits.REFUSED, f"error: {redact(submit_failure(args.address, e))}") from None
    light.doing(f"after job {job_id} was submitted: it goes on; stop it with: ray job stop --address {addr} {job_id}")
    print(f"submitted job {job_id}: {shlex.join(cmd)}")
    for line in getattr(args, "shipped", []):
        print(line)
    if env:
        print(f"job environment variables (values not shown): {', '.join(sorted(env))}")
    print(f"follow logs: ray job logs --address {addr} --follow {job_id}")
    print(f"status:      ray job status --address {addr} {job_id}")
    print(f"stop it:     ray job stop --address {addr} {job_id}")
    print(f"dashboard:   {redact(args.address).rstrip('/')}/#/jobs/{job_id}", flush=True)
    if not args.wait:
        return exits.OK
    light.doing(f"while following job {job_id}: the job goes on; stop it with: ray job stop --address {addr} {job_id}")
    try:
        status = follow(client, job_id)
    except KeyboardInterrupt:  # a Python caller's Ctrl-C (run as a script, the line above is the guard's)
        print(f"\nstopped following; the job goes on. Stop it with: ray job stop --address {addr} {job_id}")
        return exits.INTERRUPTED
    info = client.get_job_info(job_id)
    print(f"\njob {job_id}: {status}" + (f" ({info.message})" if status != "SUCCEEDED" and info.message else ""))
    return outcome.exit_code_of_job(info.message, status)  # the study's own exit code (adbs/exits.py)


DEFAULT_AGENT_PORT = 52365
"""A node's dashboard agent port unless `ray start --dashboard-agent-listen-port` says otherwise
(ray/_private/ray_constants.py: DEFAULT_DASHBOARD_AGENT_LISTEN_PORT)."""
LOCAL_HOSTS = ("127.0.0.1", "localhost", "::1")
"""Dashboard addresses on this machine: where a taken agent port can be checked from here."""
NO_AGENT = "No available agent to submit job"
"""What Ray's Jobs API answers when the dashboard is up but no node's dashboard agent is (ray/dashboard/modules/job/
job_head.py): the job would run through an agent."""


def submit_failure(address: str, error: Exception) -> str:
    """What went wrong when the Jobs API refused or could not be reached, and what to do: the dashboard that answers
    without an agent is a different fault (an agent port taken) from a dashboard that does not answer."""
    first = (str(error).strip().splitlines() or [type(error).__name__])[0][:500]
    if auth.refused(error):
        return f"cannot submit to {address}: the cluster refused this client ({first[:200]}); {auth.HOW}"
    if NO_AGENT.lower() in str(error).lower():
        from urllib.parse import urlparse

        from adbs_lab.cluster.local_cluster import port_taken

        port = DEFAULT_AGENT_PORT
        here = (f"; on this machine port {port} is in use now" if urlparse(address).hostname in LOCAL_HOSTS
                and port_taken(port) else "")
        return (f"cannot submit to {address}: {first}\nThe dashboard answers, but no node's dashboard agent does, so "
                f"no job can start. Most often the agents could not take their port (--dashboard-agent-listen-port, "
                f"default {port}) because another Ray on the same machine holds it{here} (the node's "
                "session_latest/logs/dashboard_agent.log under its --temp-dir then says \"address already in use\"). "
                "Start every node with a free --dashboard-agent-listen-port: `python -m adbs_lab.cluster.local_cluster "
                "start` does that for a cluster on one machine (deploy/README.md, \"Trying it on one machine\"). A "
                "cluster started a moment ago may still be starting its agents: then try again in a minute.")
    return (f"cannot submit to {address}: {first}\n"
            "Is the dashboard up (`ray start --head --dashboard-host 0.0.0.0`, needs ray[default]) and reachable "
            f"from here? And {auth.HOW}.")


def check_study_flags(args: argparse.Namespace) -> None:
    """The study's own flags parse (its script run here with ADBS_CHECK_FLAGS_ONLY: parse, then exit), so a typo
    is refused here rather than on the cluster."""
    import subprocess

    from adbs_lab.driver.options import FLAGS_ONLY_ENV

    r = subprocess.run([sys.executable, str(REPO / args.script), *args.study[1:]], cwd=REPO, capture_output=True,
                       text=True, timeout=300, env={**os.environ, FLAGS_ONLY_ENV: "1"})
    if r.returncode != 0:
        why = (r.stderr.strip().splitlines() or [f"exit {r.returncode}"])[-1]
        raise SubmitError(f"the study's flags do not parse: {why}; run `python {args.script} --help` here to see its "
                          "options")


if __name__ == "__main__":
    raise SystemExit(main())
