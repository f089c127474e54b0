"""Stop a Ray cluster started on this machine with its own --temp-dir, and nothing else.

    python -m adbs_lab.local_cluster stop /tmp/adbs-ray-head /tmp/adbs-ray-worker

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
import signal
import sys
import time
from pathlib import Path

GRACE_S = 10.0
SHARED = Path("/tmp/ray")
LATEST = "session_latest"
"""Ray's link, in a --temp-dir, to its current session folder (ray/_private/node.py); marks a cluster folder."""


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


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m adbs_lab.local_cluster", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("stop", help="stop the Ray processes started with these --temp-dir folders")
    s.add_argument("temp_dir", nargs="+", help="the --temp-dir of each `ray start` (head and worker nodes)")
    args = p.parse_args(argv)
    for f in args.temp_dir:
        problem = cluster_problem(f)
        if problem:
            print(f"error: {problem}", file=sys.stderr)
            return 2
    n = stop(args.temp_dir)
    print(f"stopped {n} processes of the Ray cluster in {', '.join(args.temp_dir)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
