"""How the platform's own cost grows with a study: one study of N tracking-only trials per (N, backend), measured
from outside while it runs, then read back; nothing may be lost.

    python bench/scale.py --quick                                  # SQLite, N = 10 and 100 at once (a test run)
    python bench/scale.py                                          # N = 10, 100, 1000, 5000 on SQLite, then PostgreSQL
    python bench/scale.py --sizes 1000 --backends postgres --out DIR   # one (N, backend); again with DIR: resumes
    python bench/scale.py --postgres postgresql://USER:PW@HOST/postgres   # an existing server (creates 2 databases)

The study is bench/scale_study.py: a grid of alpha x finetune_lr (two searched settings, one seed) whose trials
train nothing and report a real trial's keys and volume (about 350 metric points, bench/load_study.py) in about
a second, so what grows is the platform's (Ray Tune's driver loop, the searcher, the MLflow tracker, the study's
end), not training. Backends are those of bench/load.py (bench/load_check.py: `Backend`): (a) sqlite, the
project's default, the study writing one MLflow SQLite file and one Optuna SQLite file itself; (b) postgres, an
`mlflow server` on a PostgreSQL database that the study logs to over HTTP and a second database as the Optuna
storage. Ray is started once by this script (its GCS and raylet are measured apart); the study connects to it.

Per (N, backend), from /proc every half second (Linux): the driver process's CPU seconds per trial while trials
end (between 10% and 90% of them ended, so the study's start and end are apart) and its peak RSS and RSS growth
per trial over the same window; the peak RSS of Ray's GCS and raylet. After the study: its end (last trial ended
to the driver's exit), the sizes of the Optuna database, the MLflow store and Tune's experiment state, the time of
`studies/report.py scale`, and the REST calls the MLflow UI makes to list the study's runs (the first page of 100
and every run in pages of 1000) and optuna-dashboard's study API (the study list and the study with its trials),
timed over HTTP. Nothing lost is counted as bench/load.py counts it (bench/load_check.py: `check`).

Results go to OUT/results.json, one entry per (N, backend), written as each ends; a rerun with the same --out
skips those entries and resumes an unfinished study with --resume (its entry then says `resumed`). Exit 1 when
anything was lost or a study failed, 2 for bad arguments.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

from adbs import exits  # noqa: E402
from load_check import Backend, StudyRun, check  # noqa: E402

SIZES = (10, 100, 1000, 5000)
QUICK = (10, 100)
# --quick runs both Ns at once. N = 100's trial phase waits on the driver's round trips (each of a trial's 37 reports
# waits until the driver has handled it; on an idle machine its ~28 s of driver CPU spread over ~54 s at 4 slots), so
# 6 slots fill the driver's gaps; N = 10, which the run does not wait for, gets 2, since each slot is a Ray worker
# process spending 4-5 s of CPU on its imports (measured per process)
QUICK_CONCURRENT = {10: 2, 100: 6}
TICK = os.sysconf("SC_CLK_TCK")
PAGE = os.sysconf("SC_PAGE_SIZE")


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--sizes", type=int, nargs="+", default=None, help=f"trials per study (default {' '.join(map(str, SIZES))})")
    p.add_argument("--backends", nargs="+", default=None, choices=["sqlite", "postgres"],
                   help="default: sqlite postgres")
    p.add_argument("--quick", action="store_true",
                   help=f"SQLite, N = {' and '.join(map(str, QUICK))} (what the tests run): both studies at once, "
                        f"{' and '.join(f'{c} trials at once at N = {n}' for n, c in QUICK_CONCURRENT.items())}, "
                        "each N's MLflow UI with one worker process started while its study runs, an N's readers at "
                        "once; its times are those of a shared machine, not the measurement")
    p.add_argument("--max-concurrent", type=int, default=None,
                   help="trials at once (default 4, --quick as said there; trials sleep, not compute)")
    p.add_argument("--postgres", default=None, help="URL of an existing PostgreSQL server's database where two databases "
                                                     "may be created (default: start a temporary server)")
    p.add_argument("--out", type=Path, default=None, help="working folder (default a temporary one, removed when "
                                                          "nothing was lost); results.json in it")
    p.add_argument("--timeout", type=float, default=6 * 3600, help="seconds one study may take (default 6 h)")
    return p


def parse(argv: list[str] | None) -> argparse.Namespace:
    p = parser()
    a = p.parse_args(argv)
    if a.quick and (a.sizes or a.backends):
        p.error("--quick is SQLite at N = 10 and 100; pass --sizes/--backends without --quick for other runs")
    a.sizes = list(QUICK if a.quick else a.sizes or SIZES)
    a.backends = ["sqlite"] if a.quick else (a.backends or ["sqlite", "postgres"])
    if any(n < 2 for n in a.sizes):
        p.error(f"--sizes: each at least 2 trials, got {a.sizes}")
    if a.max_concurrent is not None and a.max_concurrent < 1:
        p.error(f"--max-concurrent must be >= 1, got {a.max_concurrent}")
    a.concurrent = {n: a.max_concurrent or (QUICK_CONCURRENT[n] if a.quick else 4) for n in a.sizes}
    return a


# -- measuring a process from /proc --------------------------------------------------------------------------------


def cpu_s(pid: int) -> float | None:
    """User + system CPU seconds of one process (its own, not its children's); None once it is gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / TICK  # utime, stime (proc(5): fields 14 and 15)


def rss_bytes(pid: int) -> int | None:
    try:
        return int(Path(f"/proc/{pid}/statm").read_text().split()[1]) * PAGE
    except OSError:
        return None


def ray_processes() -> dict[str, int]:
    """This script's GCS server and raylet (Ray started by ray.init here: they are its descendants)."""
    out: dict[str, int] = {}
    me = os.getpid()
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            comm = (d / "comm").read_text().strip()
            ppid = int((d / "stat").read_text().rsplit(")", 1)[1].split()[1])
        except OSError:
            continue
        if comm in ("gcs_server", "raylet") and _descends(ppid, me):
            out[comm] = int(d.name)
    return out


def _descends(pid: int, ancestor: int) -> bool:
    for _ in range(32):
        if pid == ancestor:
            return True
        if pid <= 1:
            return False
        try:
            pid = int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
        except OSError:
            return False
    return False


@dataclass
class Sample:
    t: float
    ended: int
    cpu: float
    rss: int


class Watch(threading.Thread):
    """Samples the driver (CPU, RSS, trials ended) and Ray's processes' RSS every half second until stopped."""

    def __init__(self, pid: int, study_dir: Path, ray: dict[str, int]) -> None:
        super().__init__(daemon=True)
        self.pid, self.study_dir, self.ray = pid, study_dir, ray
        self.samples: list[Sample] = []
        self.ray_peak: dict[str, int] = {}
        self.stop = threading.Event()

    def _ended(self) -> int:
        try:
            return len(json.loads((self.study_dir / "mlflow_runs.json").read_text()).get("ended", {}))
        except (OSError, ValueError):
            return self.samples[-1].ended if self.samples else 0

    def run(self) -> None:
        while not self.stop.wait(0.5):
            cpu, rss = cpu_s(self.pid), rss_bytes(self.pid)
            if cpu is None or rss is None:
                return
            self.samples.append(Sample(time.time(), self._ended(), cpu, rss))
            for name, pid in self.ray.items():
                self.ray_peak[name] = max(self.ray_peak.get(name, 0), rss_bytes(pid) or 0)


def window(samples: list[Sample], n: int) -> dict:
    """Driver CPU s and RSS growth per trial between the first samples with >= 10% and >= 90% of n ended."""
    lo = next((s for s in samples if s.ended >= max(1, n // 10)), None)
    hi = next((s for s in samples if s.ended >= max(2, 9 * n // 10)), None)
    if lo is None or hi is None or hi.ended <= lo.ended:
        return {"cpu_s_per_trial": None, "rss_kb_per_trial": None, "window_trials": 0}
    k = hi.ended - lo.ended
    return {"cpu_s_per_trial": (hi.cpu - lo.cpu) / k, "rss_kb_per_trial": (hi.rss - lo.rss) / 1024 / k,
            "window_trials": k}


# -- after the study: sizes, report.py, the UIs' REST calls ----------------------------------------------------------


def _size(p: Path) -> int:
    if p.is_file():
        return p.stat().st_size
    return sum(f.stat().st_size for f in p.rglob("*") if f.is_file()) if p.is_dir() else 0


def store_sizes(b: Backend, study_dir: Path) -> dict:
    tune = study_dir / "tune"
    state = sum(f.stat().st_size for f in tune.glob("experiment_state*.json")) if tune.is_dir() else 0
    if b.name == "sqlite":
        optuna_db = _size(b.root / "optuna.db")
        mlflow_db = _size(b.root / "mlflow.db") + _size(b.root / "mlflow.db-wal")
    else:
        optuna_db, mlflow_db = (_pg_size(u) for u in (b.optuna_url, b.mlflow_db))
    return {"optuna_db_mb": optuna_db / 2**20, "mlflow_db_mb": mlflow_db / 2**20,
            "mlflow_artifacts_mb": _size(b.root / "artifacts") / 2**20, "tune_state_mb": state / 2**20,
            "tune_folder_mb": _size(tune) / 2**20}


def _pg_size(url: str) -> int:
    import sqlalchemy

    eng = sqlalchemy.create_engine(url)
    try:
        with eng.connect() as con:
            return int(con.execute(sqlalchemy.text("SELECT pg_database_size(current_database())")).scalar())
    finally:
        eng.dispose()


def timed_report(b: Backend, name: str) -> dict:
    t0 = time.time()
    r = subprocess.run([sys.executable, str(REPO / "studies" / "report.py"), name, "--tracking-uri", b.tracking_uri,
                        "--out", str(b.root / f"report-{name}")], capture_output=True, text=True, timeout=3600)
    return {"report_s": time.time() - t0, "report_rc": r.returncode,
            "report_error": "" if r.returncode == 0 else (r.stderr.strip().splitlines() or ["?"])[-1][:300]}


def _post(url: str, body: dict) -> dict:
    req = urllib.request.Request(url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=600) as r:
        return json.load(r)


def _get(url: str) -> dict:
    with urllib.request.urlopen(url, timeout=600) as r:
        return json.load(r)


def mlflow_ui_calls(b: Backend) -> dict:
    """The UI's run list: runs/search over the study's experiment, first page (100, the UI's default) and all."""
    b.wait_ui()
    url = f"{b.ui}/ajax-api/2.0/mlflow/runs/search"
    body = {"experiment_ids": b.experiment_ids(), "order_by": ["attributes.start_time DESC"]}
    t0 = time.time()
    _post(url, {**body, "max_results": 100})
    first = time.time() - t0
    t0, runs, token = time.time(), 0, None
    while True:
        page = _post(url, {**body, "max_results": 1000, **({"page_token": token} if token else {})})
        runs += len(page.get("runs", []))
        token = page.get("next_page_token")
        if not token:
            break
    return {"ui_first_page_s": first, "ui_all_runs_s": time.time() - t0, "ui_runs_listed": runs}


def dashboard_calls(b: Backend, study_name: str) -> dict:
    """optuna-dashboard's study API (python -m adbs_lab.stores.dashboard, read-only): the list and one study."""
    from load_check import _free_port, _wait_listening  # private: the same server start as the MLflow UI's

    port = _free_port()
    log = open(b.root / "dashboard.log", "w")
    proc = subprocess.Popen([sys.executable, "-m", "adbs_lab.stores.dashboard", b.optuna_url, "--port", str(port)],
                            stdout=log, stderr=subprocess.STDOUT, cwd=REPO)
    try:
        _wait_listening(port, proc)
        base = f"http://127.0.0.1:{port}/api/studies"
        t0 = time.time()
        studies = _get(base)["study_summaries"]
        listed = time.time() - t0
        sid = next(s["study_id"] for s in studies if s["study_name"] == study_name)
        t0 = time.time()
        trials = len(_get(f"{base}/{sid}?after=0")["trials"])
        return {"dashboard_studies_s": listed, "dashboard_study_s": time.time() - t0, "dashboard_trials": trials}
    finally:
        proc.terminate()
        proc.wait(30)
        log.close()


# -- one (N, backend) -------------------------------------------------------------------------------------------------


def study_cmd(n: int, a: argparse.Namespace, b: Backend, address: str, folder: str) -> list[str]:
    # the smoke preset under the study's own names (--smoke would name them scale-smoke-...: adbs_lab/stores/paths.py)
    return [sys.executable, str(REPO / "bench" / "scale_study.py"), "--preset", "smoke", "--trials", str(n), "--name", folder,
            "--storage", str(b.runs), "--tracking-uri", b.tracking_uri, "--optuna-storage", b.optuna_url,
            "--address", address, "--gpus-per-trial", "0", "--cpus-per-trial", "1",
            "--max-concurrent", str(a.concurrent[n]), "--max-failures", "0"]


def run_one(n: int, a: argparse.Namespace, b: Backend, address: str, resumed: bool) -> dict:
    folder = f"scale-n{n}"
    cmd = study_cmd(n, a, b, address, f"n{n}") + (["--resume"] if resumed else [])
    env = {**os.environ, "RAY_AUTH_MODE": "disabled",
           "PYTHONPATH": os.pathsep.join([str(REPO), *filter(None, [os.environ.get("PYTHONPATH")])])}
    log = open(b.root / "study.log", "a")
    t0 = time.time()
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env, cwd=REPO)
    watch = Watch(proc.pid, b.runs / folder, ray_processes())
    watch.start()
    run = StudyRun(0, folder, cmd, n, log, proc)
    try:
        run.returncode = proc.wait(a.timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        run.returncode, run.timed_out = proc.wait(), True
    wall = time.time() - t0
    watch.stop.set()
    watch.join()
    log.close()
    last_end = next((s.t for s in watch.samples if s.ended >= n), None)
    out = {"n": n, "backend": b.name, "resumed": resumed, "rc": run.returncode, "wall_s": wall,
           "study_end_s": (t0 + wall - last_end) if last_end else None,
           "driver_cpu_s": watch.samples[-1].cpu if watch.samples else None,
           "driver_peak_rss_mb": max((s.rss for s in watch.samples), default=0) / 2**20,
           **{f"{k}_peak_rss_mb": v / 2**20 for k, v in watch.ray_peak.items()},
           **window(watch.samples, n), **store_sizes(b, b.runs / folder)}
    t0 = time.time()
    out["problems"] = check(b, [run], kill=False).problems
    out["check_s"] = time.time() - t0
    return out


def read_back(out: dict, b: Backend, quick: bool) -> None:
    """After a study that ran to its end: its readers' times into `out`, and a failed report.py as a problem."""
    if out["rc"] != 0:
        return
    t0 = time.time()
    try:
        out.update(readers(b, f"scale-n{out['n']}", together=quick))
    except Exception as e:  # noqa: BLE001 - a reader that failed is a problem of this entry, not of the whole run
        out["problems"].append(f"reading the stores back failed: {e.__class__.__name__}: {e}"[:400])
    out["readers_s"] = time.time() - t0
    if out.get("report_rc", 0) != 0:
        out["problems"].append(f"studies/report.py exited {out['report_rc']}: {out['report_error']}")


def readers(b: Backend, folder: str, together: bool) -> dict:
    """report.py, the MLflow UI's run list and optuna-dashboard's study API over the study's stores: one after the
    other (each timed alone), or, `together` (--quick: a test run, whose readers' times are not the measurement),
    at once."""
    jobs = [lambda: timed_report(b, "scale"), lambda: mlflow_ui_calls(b), lambda: dashboard_calls(b, folder)]
    out: dict = {}
    if not together:
        for job in jobs:
            out.update(job())
        return out
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(len(jobs)) as pool:
        for done in [pool.submit(job) for job in jobs]:
            out.update(done.result())
    return out


# -- the whole run -------------------------------------------------------------------------------------------------


COLUMNS = [("n", "N", "{}"), ("backend", "backend", "{}"), ("wall_s", "wall s", "{:.0f}"),
           ("cpu_s_per_trial", "driver CPU s/trial", "{:.3f}"), ("driver_peak_rss_mb", "driver peak MB", "{:.0f}"),
           ("rss_kb_per_trial", "driver KB/trial", "{:.1f}"), ("gcs_server_peak_rss_mb", "GCS MB", "{:.0f}"),
           ("raylet_peak_rss_mb", "raylet MB", "{:.0f}"), ("optuna_db_mb", "Optuna MB", "{:.1f}"),
           ("mlflow_db_mb", "MLflow MB", "{:.1f}"), ("tune_state_mb", "Tune state MB", "{:.2f}"),
           ("study_end_s", "study end s", "{:.1f}"), ("report_s", "report.py s", "{:.1f}"),
           ("ui_first_page_s", "UI 100 runs s", "{:.2f}"), ("ui_all_runs_s", "UI all runs s", "{:.2f}"),
           ("dashboard_study_s", "dashboard study s", "{:.2f}")]


def table(results: list[dict]) -> str:
    def cell(r: dict, key: str, fmt: str) -> str:
        v = r.get(key)
        return "-" if v is None else fmt.format(v)

    rows = [[h for _, h, _ in COLUMNS]] + [[cell(r, k, f) for k, _, f in COLUMNS] for r in results]
    widths = [max(len(row[i]) for row in rows) for i in range(len(COLUMNS))]
    lines = ["| " + " | ".join(c.rjust(w) for c, w in zip(row, widths)) + " |" for row in rows]
    lines.insert(1, "|" + "|".join("-" * (w + 1) + ":" for w in widths) + "|")
    return "\n".join(lines)


def load_results(path: Path) -> list[dict]:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return []


def empty_store(root: Path) -> subprocess.Popen:
    """--quick: an empty MLflow SQLite store with MLflow's tables, made once while Ray starts and copied into each
    N's folder (`seed_store`). --quick starts the UI while the study runs, and a UI and a study that both find the
    file new both create its tables (alembic's migrations on SQLite rename temporary tables: the loser exits with
    "table _alembic_tmp_experiments already exists"); the full run starts the UI first, which makes them. Made as
    the UI would make them: experiment 0's artifacts under the server's `mlflow-artifacts:/`."""
    code = ("import sys; from mlflow.store.tracking.sqlalchemy_store import SqlAlchemyStore; "
            "SqlAlchemyStore('sqlite:///' + sys.argv[1], 'mlflow-artifacts:/')")
    (root / "empty-mlflow.db").unlink(missing_ok=True)
    with open(root / "empty-mlflow.log", "w") as log:  # the child holds its own copy of the file
        return subprocess.Popen([sys.executable, "-c", code, str(root / "empty-mlflow.db")], stdout=subprocess.DEVNULL,
                                stderr=log)


def seed_store(made: subprocess.Popen | None, root: Path, where: Path) -> None:
    """A fresh SQLite N's folder gets the empty store `empty_store` made (waited for here, once)."""
    if made is None:
        return
    if made.wait() != 0:
        raise SystemExit(f"error: making an empty MLflow store failed (exit {made.returncode}): "
                         f"{(root / 'empty-mlflow.log').read_text()[-2000:]}")
    where.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(root / "empty-mlflow.db", where / "mlflow.db")


def run_backend(name: str, a: argparse.Namespace, root: Path, pg_url: str | None, address: str,
                results: list[dict], results_file: Path, made: subprocess.Popen | None = None) -> None:
    """Each N in turn; --quick, every N at once, one thread each (its own stores, study and readers: what --quick
    checks is that nothing is lost, and its times are those of studies sharing the machine)."""
    done = {(r["n"], r["backend"]) for r in results if r["rc"] == 0 and not r["problems"]}
    todo = []
    for n in a.sizes:
        if (n, name) in done:
            print(f"{name} N={n}: done in an earlier run ({results_file})", flush=True)
        else:
            todo.append(n)
    lock = threading.Lock()

    def one(n: int) -> None:
        r = run_size(n, name, a, root, pg_url, address, made)
        with lock:
            record(r, name, a.quick, results, results_file)

    if not a.quick:
        for n in todo:
            one(n)
        return
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max(1, len(todo))) as pool:
        for job in [pool.submit(one, n) for n in todo]:
            job.result()  # a thread's error (a failed store start) raised here, after the others have ended


def run_size(n: int, name: str, a: argparse.Namespace, root: Path, pg_url: str | None, address: str,
             made: subprocess.Popen | None) -> dict:
    """One (N, backend): its stores started, the study run and measured, its stores read back; the entry."""
    where = root / name / f"n{n}"
    # a temporary PostgreSQL server's databases die with it: only SQLite files and --postgres servers resume
    resumed = (where / "runs" / f"scale-n{n}").is_dir() and (name == "sqlite" or a.postgres is not None)
    if (where / "runs").is_dir() and not resumed:
        os.replace(where, where.with_name(f"n{n}-aside-{int(time.time())}"))
    print(f"{name} N={n}: {'resuming' if resumed else 'running'} ({where})", flush=True)
    if name == "sqlite" and not resumed:
        seed_store(made, root, where)
    t0 = time.time()
    # --quick: the UI starts while the study runs (SQLite: the study writes the file itself); else before it
    with Backend.start(name, where, pg_url, experiment="scale", databases=f"scale_n{n}", fresh=not resumed,
                       ui_later=a.quick, ui_workers=1 if a.quick else None) as b:
        started = time.time() - t0
        r = run_one(n, a, b, address, resumed)
        read_back(r, b, a.quick)
    r["stores_s"], r["total_s"] = started, time.time() - t0
    return r


def record(r: dict, name: str, quick: bool, results: list[dict], results_file: Path) -> None:
    """One (N, backend)'s entry into results.json (replacing an earlier one), and its table and times printed."""
    results[:] = [x for x in results if (x["n"], x["backend"]) != (r["n"], name)] + [r]
    tmp = results_file.with_suffix(".tmp")
    tmp.write_text(json.dumps(results, indent=1))
    tmp.replace(results_file)
    print(table([r]), flush=True)
    ui = " (the UI later)" if quick else " and the UI"
    print(f"  seconds: stores{ui} started {r['stores_s']:.0f}, study {r['wall_s']:.0f} (its end "
          f"{r['study_end_s'] or 0:.0f}), nothing-lost check {r['check_s']:.0f}, readers "
          f"{r.get('readers_s', 0):.0f}; {r['total_s']:.0f} in all", flush=True)
    for p in r["problems"]:
        print(f"  LOST OR WRONG: {p}", flush=True)


def main(argv: list[str] | None = None) -> int:
    a = parse(argv)
    import ray

    root = Path(a.out or tempfile.mkdtemp(prefix="adbs-scale-"))
    root.mkdir(parents=True, exist_ok=True)
    results_file = root / "results.json"
    results = load_results(results_file)
    os.environ["RAY_AUTH_MODE"] = "disabled"
    began = time.time()
    made = empty_store(root) if a.quick else None
    cpus = sum(a.concurrent.values()) if a.quick else max(a.concurrent.values())  # --quick: the studies at once
    ctx = ray.init(address="local", num_cpus=cpus, include_dashboard=False, object_store_memory=100 * 1024 * 1024,
                   logging_level="WARNING")
    print(f"Ray started in {time.time() - began:.0f} s", flush=True)
    pg = None
    try:
        for name in a.backends:
            pg_url = a.postgres
            if name == "postgres" and pg_url is None:
                from testing.postgres import PgServer, missing

                why = missing()
                if why:
                    raise SystemExit(f"error: no PostgreSQL: {why}; or pass --postgres URL")
                pg = PgServer().start()
                pg_url = pg.url()
            run_backend(name, a, root, pg_url, ctx.address_info["address"], results, results_file, made)
    finally:
        ray.shutdown()
        if pg is not None:
            pg.stop()
    mine = [r for r in results if r["backend"] in a.backends and r["n"] in a.sizes]
    print("\n" + table(sorted(mine, key=lambda r: (r["backend"] != "sqlite", r["n"]))))
    print(f"{time.time() - began:.0f} s in all, load average {' '.join(f'{x:.1f}' for x in os.getloadavg())}")
    lost = any(r["problems"] or r["rc"] != 0 for r in mine)
    if lost:
        print(f"LOST OR WRONG: see above; logs in {root}", file=sys.stderr)
    elif a.out is None:
        shutil.rmtree(root, ignore_errors=True)
    return exits.FAILED if lost else exits.OK


if __name__ == "__main__":
    raise SystemExit(main())
