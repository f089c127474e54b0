"""Start a two-node Ray cluster on this machine beside any other Ray, and stop it (and nothing else).

    python -m adbs_lab.cluster.local_cluster start /tmp/adbs-ray-head /tmp/adbs-ray-worker   # GCS :6390, dashboard :8266
    python -m adbs_lab.cluster.local_cluster stop /tmp/adbs-ray-head /tmp/adbs-ray-worker

`start` runs `ray start --head` and `ray start --address` (a second node process with its own temp dir), with every
port that Ray would otherwise take at a fixed default set to a free one: the Ray client server's 10001 and each
node's dashboard agent's 52365. Another Ray on the machine (a study's local Ray, a colleague's cluster) holds those;
a node whose agent cannot bind its port runs without one, and the Jobs API (studies/submit.py) then answers "No
available agent to submit job". The GCS and dashboard ports are the ones given (checked free before anything starts).
A node's other ports Ray picks free itself (node and object manager, metrics, runtime-env agent, the agent's gRPC:
0 or unset means a free one, ray/_private/node.py; workers take ports of 10002-19999 that the raylet finds free).

`ray stop` stops every Ray instance of the user on the machine (other studies' local Ray, a colleague's cluster
under the same account). A cluster folder is the --temp-dir given to one `ray start`: Ray keeps its sessions there
(`session_<date>` folders, `session_latest` naming the current one). The daemons of a session (GCS, raylet,
dashboard, log monitor, agents) name its session folder on their command lines; its workers (renamed `ray::...`)
are the raylet's children. This stops exactly those, the user's own, and never the process running it or one of
its ancestors (a `timeout` or `srun` wrapper): SIGTERM, then SIGKILL after GRACE_S. A folder that is not one
cluster's (no `session_latest` in it: a parent of cluster folders, the system temp folder, a session folder) is
refused, and so is Ray's default temp dir (/tmp/ray), shared by every cluster started without --temp-dir.
"""

from __future__ import annotations

import argparse
import os
import shlex
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

from adbs.exits import FAILED, OK, REFUSED, Exit, entry
from adbs.redaction import redact
from adbs_lab.cluster import auth

GRACE_S = 10.0
SHARED = Path("/tmp/ray")
LATEST = "session_latest"
"""Ray's link, in a --temp-dir, to its current session folder (ray/_private/node.py); marks a cluster folder."""
GCS_PORT = 6390
DASHBOARD_PORT = 8266
"""`start`'s defaults: beside Ray's own 6379 and 8265, which a default `ray start` or `ray.init()` takes."""


class StartError(RuntimeError):
    """A `ray start` failed; the message carries its output's tail."""


def free_ports(n: int) -> list[int]:
    """`n` distinct TCP ports nothing listens on now (the kernel's picks, all held until each is picked)."""
    held = [socket.socket() for _ in range(n)]
    try:
        for s in held:
            s.bind(("", 0))
        return [int(s.getsockname()[1]) for s in held]
    finally:
        for s in held:
            s.close()


def port_taken(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("", port))
        except OSError:
            return True
    return False


def start_commands(head: str | Path, worker: str | Path, *, port: int = GCS_PORT,
                   dashboard_port: int = DASHBOARD_PORT, num_cpus: int = 1) -> list[list[str]]:
    """The `ray start` command lines of a head and a worker node with their own temp dirs and free ports. Each node
    resource (`node_head`, `node_worker`) lets a task or a test tell the two apart."""
    ray = str(Path(sys.executable).parent / "ray")
    client, head_agent, worker_agent = free_ports(3)
    common = [f"--num-cpus={num_cpus}", "--object-store-memory=100000000", "--disable-usage-stats"]
    head_argv = [ray, "start", "--head", f"--port={port}", f"--dashboard-port={dashboard_port}",
                 "--dashboard-host=127.0.0.1", "--include-dashboard=true", f"--temp-dir={Path(head).resolve()}",
                 f"--ray-client-server-port={client}", f"--dashboard-agent-listen-port={head_agent}",
                 '--resources={"node_head": 1}', *common]
    worker_argv = [ray, "start", f"--address=127.0.0.1:{port}", f"--temp-dir={Path(worker).resolve()}",
                   f"--dashboard-agent-listen-port={worker_agent}", '--resources={"node_worker": 1}', *common]
    return [head_argv, worker_argv]


def start(head: str | Path, worker: str | Path, *, port: int = GCS_PORT, dashboard_port: int = DASHBOARD_PORT,
          num_cpus: int = 1, echo: bool = True) -> str:
    """Start the two nodes; returns the dashboard's URL (the Jobs API's --address). StartError if a node fails to
    start, after stopping what did start. With a token in the environment (RAY_AUTH_TOKEN), token authentication on
    (adbs_lab/cluster/auth.py)."""
    auth.set_default()
    for argv in start_commands(head, worker, port=port, dashboard_port=dashboard_port, num_cpus=num_cpus):
        if echo:
            print("+ " + redact(shlex.join(argv)), flush=True)  # a command line, printed by the one rule
        r = subprocess.run(argv, capture_output=True, text=True, timeout=180)
        if r.returncode != 0:
            stop([head, worker], grace_s=3)
            raise StartError(f"`ray start` exited {r.returncode}:\n{(r.stdout + r.stderr)[-3000:]}")
    return f"http://127.0.0.1:{dashboard_port}"


def cluster_problem(folder: str | Path) -> str | None:
    """Why `folder` is not exactly one cluster's --temp-dir (what `stop` accepts), or None."""
    p = Path(folder)
    if p.resolve() == SHARED:
        return (f"{folder} is Ray's default temp dir, shared by every cluster started without --temp-dir; "
                "stopping its processes would stop those too. Start your cluster with its own --temp-dir.")
    if not p.is_dir():
        return f"{folder} is not a folder: pass the --temp-dir your `ray start` was given"
    if not (p / LATEST).exists():
        return (f"{folder} is not a Ray cluster's folder (it has no {LATEST}): pass the --temp-dir one `ray start` "
                "was given, which holds that cluster's session folders, not a folder above or inside it")
    return None


def _names_session(arg: str, prefix: str) -> bool:
    return any(value.startswith(prefix) for value in (arg, arg.split("=", 1)[-1]))


def _table() -> dict[int, tuple[int, int, list[str]]]:
    """pid -> (parent pid, uid, command line) of every process this user can read."""
    table = {}
    for p in Path("/proc").iterdir():
        if not p.name.isdigit():
            continue
        try:
            ppid = int((p / "stat").read_text().rsplit(")", 1)[1].split()[1])
            uid = p.stat().st_uid
            args = (p / "cmdline").read_bytes().decode(errors="replace").split("\0")
        except (OSError, IndexError, ValueError):
            continue
        table[int(p.name)] = (ppid, uid, [a for a in args if a])
    return table


def _ancestors(table: dict[int, tuple[int, int, list[str]]]) -> set[int]:
    """This process and its parent chain (a wrapper naming the folder on its command line is one)."""
    chain, pid = set(), os.getpid()
    while pid > 1 and pid not in chain:
        chain.add(pid)
        pid = table[pid][0] if pid in table else 0
    return chain


def _spellings(folder: Path) -> set[str]:
    """The paths a cluster's daemons may name `folder` by: Ray names its sessions under the --temp-dir as `ray start`
    was given it, links unresolved (its `session_latest` link records that spelling), so a folder reached through a
    link (/tmp on macOS, a scratch link) is matched as given, resolved and as Ray recorded it."""
    found = {os.path.abspath(folder), str(folder.resolve())}
    try:
        found.add(os.path.dirname(os.readlink(folder / LATEST)))
    except OSError:
        pass
    return found


def processes(folder: str | Path) -> list[int]:
    """Ids of this user's processes of the cluster whose --temp-dir is `folder`: those naming one of its session
    folders (`<folder>/session_...`) and their descendants (the raylet's workers); never this process or an
    ancestor of it."""
    prefixes = [f"{spelling}/session_" for spelling in _spellings(Path(folder))]
    table, uid = _table(), os.getuid()
    found = {pid for pid, (_, owner, args) in table.items()
             if owner == uid and any(_names_session(a, prefix) for a in args for prefix in prefixes)}
    children: dict[int, list[int]] = {}
    for pid, (ppid, owner, _) in table.items():
        if owner == uid:
            children.setdefault(ppid, []).append(pid)
    todo = list(found)
    while todo:
        for child in children.get(todo.pop(), []):
            if child not in found:
                found.add(child)
                todo.append(child)
    return sorted(found - _ancestors(table))


def stop(folders: list[str | Path], grace_s: float = GRACE_S) -> int:
    """Stop the processes of the clusters started with these temp dirs; returns how many there were."""
    pids = sorted({pid for f in folders for pid in processes(f)})
    for sig, wait in ((signal.SIGTERM, grace_s), (signal.SIGKILL, 5.0)):
        for pid in pids:
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass
        deadline = time.time() + wait
        while time.time() < deadline and any(_alive(p) for p in pids):
            time.sleep(0.2)
        if not any(_alive(p) for p in pids):
            break
    return len(pids)


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0]
    except OSError:
        return False
    return state != "Z"


def _refused(folders: list[str], ports: dict[str, int] | None = None) -> str | None:
    """Why `start` cannot use these temp dirs (or ports), or None."""
    for f in folders:
        if Path(f).resolve() == SHARED or Path(f).resolve() == Path("/"):
            return (f"{f} is Ray's default temp dir, shared by every Ray started without --temp-dir (and `stop` would "
                    "refuse it); give each node a folder of its own")
    for flag, port in (ports or {}).items():
        if port_taken(port):
            return (f"{flag} {port} is in use on this machine (another Ray, or another service); pass a free one, "
                    f"e.g. {flag} {free_ports(1)[0]}")
    return None


def _start(args: argparse.Namespace) -> int:
    problem = _refused(args.temp_dir, {"--port": args.port, "--dashboard-port": args.dashboard_port})
    if len(args.temp_dir) != 2:
        problem = "start takes two folders: the head node's --temp-dir and the worker node's"
    if problem:
        raise Exit(REFUSED, f"error: {problem}")
    head, worker = args.temp_dir
    try:
        url = start(head, worker, port=args.port, dashboard_port=args.dashboard_port, num_cpus=args.num_cpus)
    except StartError as e:
        raise Exit(FAILED, f"error: {e}") from None
    print(f"Ray cluster of 2 nodes on this machine: GCS 127.0.0.1:{args.port} (a study's --address), dashboard and "
          f"Jobs API {redact(url)} (studies/submit.py --address)\n"
          f"stop it: python -m adbs_lab.cluster.local_cluster stop {shlex.quote(head)} {shlex.quote(worker)}")
    return OK


def _stop(args: argparse.Namespace) -> int:
    for f in args.temp_dir:
        problem = cluster_problem(f)
        if problem:
            raise Exit(REFUSED, f"error: {problem}")
    n = stop(args.temp_dir)
    print(f"stopped {n} processes of the Ray cluster in {', '.join(args.temp_dir)}")
    return OK


@entry
def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m adbs_lab.cluster.local_cluster", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("start", help="start a head and a worker node with these --temp-dir folders and free ports")
    s.add_argument("temp_dir", nargs="+", metavar="TEMP_DIR", help="the head node's --temp-dir, then the worker's")
    s.add_argument("--port", type=int, default=GCS_PORT, help=f"the head's GCS port (default {GCS_PORT})")
    s.add_argument("--dashboard-port", type=int, default=DASHBOARD_PORT,
                   help=f"the dashboard and Jobs API port (default {DASHBOARD_PORT})")
    s.add_argument("--num-cpus", type=int, default=1, help="CPUs of each node (default 1)")
    s = sub.add_parser("stop", help="stop the Ray processes started with these --temp-dir folders")
    s.add_argument("temp_dir", nargs="+", help="the --temp-dir of each `ray start` (head and worker nodes)")
    args = p.parse_args(argv)
    return _start(args) if args.cmd == "start" else _stop(args)


if __name__ == "__main__":
    raise SystemExit(main())
