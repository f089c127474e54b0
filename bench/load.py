"""Load check: M studies at once on one tracking store and one Optuna storage, with studies/report.py and the MLflow
UI reading them meanwhile; then counts what survived. Exit 1 if anything was lost.

    python bench/load.py                                   # 4 studies x 25 trials, SQLite then PostgreSQL, real trials
    python bench/load.py --tracking-only                   # trials report a real trial's volume in about a second
    python bench/load.py --tracking-only --kill            # SIGKILL one grid and one sampled driver mid-study, resume
    python bench/load.py --studies 2 --trials 5 --backends sqlite --tracking-only   # a short run
    python bench/load.py --postgres postgresql://USER:PW@HOST/postgres              # an existing server (creates 2 DBs)
    python bench/load.py --backends postgres --studies 1 --trials 5 --tracking-only --pg-set idle_session_timeout=1s
    python bench/load.py --backends postgres --studies 1 --trials 5 --tracking-only --outage restart   # or away

Backends: (a) sqlite: the studies write one MLflow SQLite file and one Optuna SQLite file themselves (the project's
default, one writer process per study); the UI is `mlflow/serve.py` on the same file. (b) postgres: an `mlflow server`
on a PostgreSQL database (mlflow/serve.py) that the studies log to over HTTP, and a second database as the Optuna
storage (docs/clusters.md's setup). Without --postgres, a temporary PostgreSQL server is started (testing/postgres.py;
needs Debian's postgresql package and psycopg, the [postgres] extra).

Studies alternate between a grid (5 alphas x seeds, bench/load_study.py) and a TPE search (--num-samples, one seed).
Per backend it prints: trials planned, ended by state, MLflow runs, params and metric points per run against what the
trials reported (each trial's result.json), Optuna trials against Tune trials, lock waits and errors, wall time.
With --kill it also checks: no grid point ran twice, the sampler did not restart its random start-up (no two Optuna
trials with the same alpha), and each complete trial has exactly one finished MLflow run.

The temporary PostgreSQL server (postgres backend, no --postgres) can be made to go away mid-study: --pg-set NAME=VALUE
starts it with a server setting (idle_session_timeout=1s closes every session idle for a second, as a lab's server or
proxy does after an hour); --outage restart restarts it (pg_ctl restart -m fast) once a third of the first study's trials
ended; --outage away stops it then, waits until every study stopped (each must exit 1 with the --resume command, after
the bounded wait of docs/clusters.md), starts it again and resumes them. --outage-of optuna|mlflow: only that store's
server goes away (the other store is on a second server that stays up). Either way the count is the same: nothing lost,
no grid point twice. With --outage the readers are off (report.py would wait out the outage in MLflow's own retries).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

from adbs import exits  # noqa: E402
from load_check import Backend, StudyRun, check, print_summary  # noqa: E402


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--studies", type=int, default=4, help="studies at once (default 4)")
    p.add_argument("--trials", type=int, default=25, help="trials per study (default 25; a grid rounds up to 5 x seeds)")
    p.add_argument("--backends", nargs="+", default=["sqlite", "postgres"], choices=["sqlite", "postgres"])
    p.add_argument("--tracking-only", action="store_true",
                   help="each trial reports a real trial's volume (about 350 metric points) in about a second")
    p.add_argument("--kill", action="store_true", help="SIGKILL a grid and a sampled driver mid-study, then --resume them")
    p.add_argument("--max-concurrent", type=int, default=2, help="trials at once per study (default 2)")
    p.add_argument("--postgres", default=None, help="URL of an existing PostgreSQL server's database where two databases "
                                                     "may be created (default: start a temporary server)")
    p.add_argument("--out", type=Path, default=None, help="working folder (default a temporary one, removed)")
    p.add_argument("--timeout", type=float, default=3600, help="seconds a backend may take before it counts as failed")
    p.add_argument("--pg-set", action="append", default=[], metavar="NAME=VALUE",
                   help="a setting of the temporary PostgreSQL server (e.g. idle_session_timeout=1s); repeatable")
    p.add_argument("--outage", choices=["restart", "away"], default=None,
                   help="the temporary PostgreSQL server restarts, or stops until the studies stopped, mid-study")
    p.add_argument("--outage-of", choices=["both", "optuna", "mlflow"], default="both",
                   help="whose server goes away: both stores' (one server, default), or only the Optuna storage's or "
                        "the MLflow store's (the other store on a second server that stays up)")
    return p


def study_cmd(i: int, a: argparse.Namespace, b: Backend, address: str) -> list[str]:
    grid = i % 2 == 0
    # the smoke preset's tiny trials under the study's own names, which the checks read (--smoke would also name the
    # folders and experiment load-smoke-...: adbs_lab/stores/paths.py, SMOKE)
    cmd = [sys.executable, str(REPO / "bench" / "load_study.py"), "--preset", "smoke", "--name", f"s{i}",
           "--storage", str(b.runs), "--tracking-uri", b.tracking_uri, "--optuna-storage", b.optuna_url, "--address", address,
           "--gpus-per-trial", "0", "--cpus-per-trial", "1", "--max-concurrent", str(a.max_concurrent),
           "--max-failures", "0"]
    if grid:
        cmd += ["--seeds", *map(str, range(math.ceil(a.trials / 5)))]
    else:
        cmd += ["--num-samples", str(a.trials), "--seeds", "0", "--sampler-seed", str(i)]
    return cmd + (["--tracking-only"] if a.tracking_only else [])


def planned(i: int, a: argparse.Namespace) -> int:
    return 5 * math.ceil(a.trials / 5) if i % 2 == 0 else a.trials


class Readers(threading.Thread):
    """studies/report.py and the UI's run search, in turn, until stopped: what a lab does while studies run."""

    def __init__(self, b: Backend) -> None:
        super().__init__(daemon=True)
        self.b, self.stop = b, threading.Event()
        self.reports = self.report_errors = self.ui_reads = self.ui_errors = 0
        self.last_error = ""

    def _ui(self) -> None:
        body = json.dumps({"experiment_ids": self.b.experiment_ids(), "max_results": 1000}).encode()
        req = urllib.request.Request(f"{self.b.ui}/ajax-api/2.0/mlflow/runs/search", data=body,
                                     headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=60) as r:
                json.load(r)
            self.ui_reads += 1
        except Exception as e:  # noqa: BLE001 - counted and shown
            self.ui_errors += 1
            self.last_error = f"UI: {e}"

    def _report(self) -> None:
        r = subprocess.run([sys.executable, str(REPO / "studies" / "report.py"), "load", "--tracking-uri",
                            self.b.tracking_uri, "--out", str(self.b.root / "report")],
                           capture_output=True, text=True, timeout=300)
        if r.returncode == 0:
            self.reports += 1
        elif "no finished" not in r.stderr and "no trial" not in r.stderr.lower():  # nothing to report yet is fine
            self.report_errors += 1
            self.last_error = f"report.py: {(r.stderr.strip().splitlines() or ['?'])[-1][:300]}"

    def run(self) -> None:
        n = 0
        while not self.stop.wait(2.0):
            if self.b.experiment_ids():
                self._ui()
                if n % 10 == 0:
                    self._report()
                n += 1


def _ended(study_dir: Path) -> int:
    try:
        return len(json.loads((study_dir / "mlflow_runs.json").read_text()).get("ended", {}))
    except (OSError, ValueError):
        return 0


def kill_targets(targets: list[StudyRun], b: Backend, env: dict, deadline: float) -> None:
    """SIGKILL each target's driver mid-study (after max(1, planned / 3) trials ended), then start it with --resume."""
    waiting = list(targets)
    while waiting and time.time() < deadline:
        for r in list(waiting):
            if r.proc.poll() is not None:  # ended before it could be killed: reported as not killed
                waiting.remove(r)
            elif _ended(b.runs / r.folder) >= max(1, r.planned // 3):
                r.proc.send_signal(signal.SIGKILL)
                r.proc.wait()
                r.killed = True
                waiting.remove(r)
                time.sleep(2)
                r.proc = subprocess.Popen(r.cmd + ["--resume"], stdout=r.log, stderr=subprocess.STDOUT, env=env,
                                          cwd=REPO)
        time.sleep(0.3)


def outage(a: argparse.Namespace, runs: list[StudyRun], b: Backend, env: dict, deadline: float) -> None:
    """--outage: once a third of the first study's trials ended, its server restarts, or stops until every study
    stopped (each run's exit and whether it printed the --resume command kept in `outage`), then starts again and
    the studies are resumed."""
    first = runs[0]
    while time.time() < deadline and first.proc.poll() is None and _ended(b.runs / first.folder) < max(1, first.planned // 3):
        time.sleep(0.2)
    if first.proc.poll() is not None or time.time() >= deadline:
        return
    if a.outage == "restart":
        b.pg.restart()
        for r in runs:
            r.outage = "restarted" if r.proc.poll() is None else ""
        return
    b.pg.halt()
    t0 = time.time()
    for r in runs:
        try:
            r.proc.wait(max(1.0, deadline - time.time()))
        except subprocess.TimeoutExpired:
            continue
        r.log.flush()
        said = "continue with: " in (b.root / f"s{r.index}.log").read_text(errors="replace")
        r.outage = f"away: exit {r.proc.returncode}{', --resume' if said else ''}"
    print(f"the database server stayed away {time.time() - t0:.0f} s, until every study stopped", flush=True)
    b.pg.resume()
    for r in runs:
        if r.outage.startswith("away"):
            r.proc = subprocess.Popen(r.cmd + ["--resume"], stdout=r.log, stderr=subprocess.STDOUT, env=env, cwd=REPO)


def run_backend(a: argparse.Namespace, b: Backend, address: str) -> list[StudyRun]:
    env = {**os.environ, "RAY_AUTH_MODE": "disabled", "PYTHONPATH": os.pathsep.join(
        [str(REPO), *filter(None, [os.environ.get("PYTHONPATH")])])}
    runs = []
    for i in range(a.studies):
        log = open(b.root / f"s{i}.log", "w")
        cmd = study_cmd(i, a, b, address)
        runs.append(StudyRun(i, f"load-s{i}", cmd, planned(i, a), log,
                             subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env, cwd=REPO)))
    readers = Readers(b)
    if not a.outage:
        readers.start()
    deadline = time.time() + a.timeout
    if a.kill:  # a grid study and a sampled one, each as soon as a third of its trials ended (watched together)
        kill_targets(runs[:2], b, env, deadline)
    if a.outage:
        outage(a, runs, b, env, deadline)
    for r in runs:
        try:
            r.proc.wait(max(1.0, deadline - time.time()))
        except subprocess.TimeoutExpired:
            r.proc.kill()
            r.proc.wait()
            r.timed_out = True
        r.log.close()
        r.returncode = r.proc.returncode
    readers.stop.set()
    if readers.is_alive():
        readers.join(60)
    b.readers = readers
    return runs


def main(argv: list[str] | None = None) -> int:
    a = parser().parse_args(argv)
    settings = dict(kv.split("=", 1) for kv in a.pg_set)
    if (settings or a.outage) and (a.backends != ["postgres"] or a.postgres):
        parser().error("--pg-set and --outage need --backends postgres and the temporary server (no --postgres)")
    import ray

    root = Path(a.out or tempfile.mkdtemp(prefix="adbs-load-"))
    root.mkdir(parents=True, exist_ok=True)
    os.environ["RAY_AUTH_MODE"] = "disabled"
    ctx = ray.init(address="local", num_cpus=a.studies * a.max_concurrent, include_dashboard=False,
                   object_store_memory=100 * 1024 * 1024, logging_level="WARNING")
    address = ctx.address_info["address"]
    lost = False
    try:
        for name in a.backends:
            steady = {"optuna": "mlflow", "mlflow": "optuna"}.get(a.outage_of)
            with Backend.start(name, root / name, a.postgres, pg_settings=settings, steady=steady) as b:
                t0 = time.time()
                runs = run_backend(a, b, address)
                wall = time.time() - t0
                result = check(b, runs, kill=a.kill, outage=a.outage)
                print_summary(name, a, b, runs, result, wall)
                lost |= bool(result.problems)
    finally:
        ray.shutdown()
        if a.out is None and not lost:
            import shutil

            shutil.rmtree(root, ignore_errors=True)
    if lost:
        print(f"LOST OR WRONG: see above; logs in {root}", file=sys.stderr)
    return exits.FAILED if lost else exits.OK


if __name__ == "__main__":
    raise SystemExit(main())
