"""Stop a Ray cluster started on this machine with its own --temp-dir, and nothing else.

    python -m adbs_lab.local_cluster stop /tmp/adbs-ray-head /tmp/adbs-ray-worker

`ray stop` stops every Ray instance of the user on the machine (other studies' local Ray, a colleague's cluster
under the same account). The processes of one `ray start --temp-dir=DIR` (GCS, raylet, dashboard, workers, log
monitor) all name DIR in their command lines; this stops exactly those: SIGTERM, then SIGKILL after GRACE_S. The
default temp dir (/tmp/ray) is refused, since every cluster started without --temp-dir shares it.
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


def _names(arg: str, folder: str) -> bool:
    for value in (arg, arg.split("=", 1)[-1]):
        if value == folder or value.startswith(folder + "/"):
            return True
    return False


def processes(folder: str | Path) -> list[int]:
    """Ids of this user's processes whose command line names `folder` (or a path inside it)."""
    folder = str(Path(folder).resolve())
    me, uid, out = os.getpid(), os.getuid(), []
    for p in Path("/proc").iterdir():
        if not p.name.isdigit() or int(p.name) == me:
            continue
        try:
            if p.stat().st_uid != uid:
                continue
            args = (p / "cmdline").read_bytes().decode(errors="replace").split("\0")
        except OSError:
            continue
        if any(_names(a, folder) for a in args if a):
            out.append(int(p.name))
    return out


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
        if Path(f).resolve() == SHARED or Path(f).resolve() == Path("/"):
            print(f"error: {f} is Ray's default temp dir, shared by every cluster started without --temp-dir; "
                  "stopping its processes would stop those too. Start your cluster with its own --temp-dir.",
                  file=sys.stderr)
            return 2
        if not Path(f).is_dir():
            print(f"error: {f} is not a folder: pass the --temp-dir your `ray start` was given", file=sys.stderr)
            return 2
    n = stop(args.temp_dir)
    print(f"stopped {n} processes of the Ray cluster in {', '.join(args.temp_dir)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
