"""The stores of bench/load.py (a backend: tracking store, Optuna storage, the UI reading them) and the count of what
survived: every number is read from the stores themselves (the MLflow database's tables, Optuna's storage) and set
against what the trials reported (each Tune trial's result.json) and what was planned."""

from __future__ import annotations

import json
import math
import socket
import subprocess
import sys
import time
from collections import Counter
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from adbs_lab.records import metrics_keys as K  # noqa: E402
from adbs_lab.records.tune_keys import SEED_KEY  # noqa: E402
from adbs_lab.stores.db_server import engine_kwargs  # noqa: E402
from adbs_lab.stores.tracking_store import LOCKED_WARNING  # noqa: E402


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class StudyRun:
    index: int
    folder: str
    cmd: list[str]
    planned: int
    log: Any
    proc: subprocess.Popen
    killed: bool = False
    outage: str = ""  # --outage: "restarted", or "away: exit N" (the run's exit while its server was away)
    timed_out: bool = False
    returncode: int | None = None


@dataclass
class Backend:
    name: str
    root: Path
    tracking_uri: str  # what the studies and report.py use
    optuna_url: str
    mlflow_db: str  # the MLflow database itself (SQLAlchemy URL), counted directly
    ui: str
    readers: Any = None
    pg: Any = None  # the temporary PostgreSQL server (testing/postgres.py: PgServer) where this run started one
    experiment: str = "load"  # the studies' name: their MLflow experiment
    _exp: list[str] = field(default_factory=list)
    _ui_starting: Any = None  # waits until the UI answers, where `start` did not (ui_later)

    def wait_ui(self) -> None:
        """The UI answers (at once where `start` waited for it)."""
        if self._ui_starting is not None:
            self._ui_starting()
            self._ui_starting = None

    @property
    def runs(self) -> Path:
        return self.root / "runs"

    def experiment_ids(self) -> list[str]:
        if not self._exp:
            import sqlalchemy

            eng = sqlalchemy.create_engine(self.mlflow_db)
            try:
                with eng.connect() as con:
                    row = con.execute(sqlalchemy.text("SELECT experiment_id FROM experiments WHERE name = :n"),
                                      {"n": self.experiment}).first()
            except Exception:  # noqa: BLE001 - tables not made yet
                row = None
            finally:
                eng.dispose()
            if row:
                self._exp.append(str(row[0]))
        return list(self._exp)

    @classmethod
    @contextmanager
    def start(cls, name: str, root: Path, pg_url: str | None, *, experiment: str = "load", databases: str = "load",
              fresh: bool = True, pg_settings: dict[str, str] | None = None, steady: str | None = None,
              ui_later: bool = False, ui_workers: int | None = None):
        """The stores under `root` and the UI on them; on PostgreSQL the databases mlflow_<databases> and
        optuna_<databases>. fresh=False keeps those databases where they exist (a resumed run of bench/scale.py);
        the default drops and creates them. `pg_settings`: the temporary server's settings (testing/postgres.py);
        `steady` ("mlflow" or "optuna"): that store's database on a second temporary server, which stays up while
        `pg` (the other store's) goes away (bench/load.py --outage-of). `ui_later` (SQLite, whose studies write the
        file, not through the server): yield while the UI starts; `wait_ui` before reading it. `ui_workers`: the
        UI's worker processes (default mlflow/serve.py's)."""
        root.mkdir(parents=True, exist_ok=True)
        (root / "runs").mkdir(exist_ok=True)
        pg = other = None
        port = _free_port()
        if name == "sqlite":
            db = f"sqlite:///{root / 'mlflow.db'}"
            b = cls(name, root, db, f"sqlite:///{root / 'optuna.db'}", db, f"http://127.0.0.1:{port}")
            store = db
        else:
            if pg_url is None:
                from testing.postgres import PgServer, missing

                why = missing()
                if why:
                    raise SystemExit(f"error: no PostgreSQL: {why}; or pass --postgres URL")
                pg = PgServer(pg_settings).start()
                pg_url = pg.url()
                other = PgServer().start() if steady else None
            urls = {"mlflow": pg_url, "optuna": pg_url, **({steady: other.url()} if other and steady else {})}
            [mlflow_db], [optuna_db] = (_create_databases(urls[k], (f"{k}_{databases}",), fresh)
                                        for k in ("mlflow", "optuna"))
            b = cls(name, root, f"http://127.0.0.1:{port}", optuna_db, mlflow_db, f"http://127.0.0.1:{port}", pg=pg)
            store = mlflow_db
        b.experiment = experiment
        log = open(root / "mlflow_server.log", "w")
        server = subprocess.Popen([sys.executable, str(REPO / "mlflow" / "serve.py"), "--backend-store-uri", store,
                                   "--artifacts-destination", str(root / "artifacts"), "--port", str(port),
                                   *(["--workers", str(ui_workers)] if ui_workers else [])],
                                  stdout=log, stderr=subprocess.STDOUT)
        try:
            if ui_later and name == "sqlite":
                b._ui_starting = lambda: _wait_listening(port, server)
            else:
                _wait_listening(port, server)
            yield b
        finally:
            server.terminate()
            try:
                server.wait(30)
            except subprocess.TimeoutExpired:
                server.kill()
            log.close()
            for server_pg in (pg, other):
                if server_pg is not None:
                    server_pg.stop()


def _create_databases(url: str, names: tuple[str, ...], fresh: bool = True) -> list[str]:
    import psycopg

    out = []
    with psycopg.connect(url.replace("postgresql+psycopg://", "postgresql://"), autocommit=True) as con:
        for n in names:
            there = con.execute("SELECT 1 FROM pg_database WHERE datname = %s", (n,)).fetchone()
            if there and fresh:
                con.execute(f'DROP DATABASE "{n}"')
            if fresh or not there:
                con.execute(f'CREATE DATABASE "{n}"')
            out.append(url.rsplit("/", 1)[0] + "/" + n)
    return out


def _wait_listening(port: int, proc: subprocess.Popen, timeout: float = 180) -> None:
    deadline = time.time() + timeout
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            if proc.poll() is not None or time.time() > deadline:
                raise SystemExit(f"error: the MLflow server did not start (exit {proc.poll()})") from None
            time.sleep(0.5)


# -- what the trials reported -----------------------------------------------------------------------------------


@dataclass
class Reported:
    trial_id: str
    alpha: float
    setting: tuple  # the searched values that make a configuration: (alpha, finetune_lr)
    seed: int
    optuna_trial: int | None
    points: int  # metric points the tracker should log: one per (key, step), finite values only


def reported(study_dir: Path) -> dict[str, Reported]:
    out = {}
    for f in sorted((study_dir / "tune").glob("*/result.json")):
        seen: set[tuple[str, int]] = set()
        cfg: dict = {}
        tid = None
        for line in f.read_text().splitlines():
            try:
                r = json.loads(line)
            except ValueError:
                continue
            tid, cfg = r.get("trial_id", tid), r.get("config", cfg)
            kind = r.get(K.REPORT_KIND)
            prefix, step = {K.KIND_BASE: (K.BASE, r.get(K.BASE_STEP)), K.KIND_SESSION: (K.SESSION, r.get(K.SESSION_STEP)),
                            K.KIND_SUMMARY: (K.SUMMARY, 0)}.get(kind, (None, None))
            if prefix is None:
                continue
            for k, v in r.items():
                if k.startswith(prefix) and k not in (K.BASE_STEP, K.SESSION_STEP) and isinstance(v, (int, float)) \
                        and math.isfinite(v):
                    seen.add((k, int(step)))
        if tid:  # a grid's seed is its own axis (SEED_KEY); the config's `seed` is the base value
            out[tid] = Reported(tid, cfg.get("alpha"), (cfg.get("alpha"), cfg.get("finetune_lr")),
                                cfg.get(SEED_KEY, cfg.get("seed")), cfg.get(K.OPTUNA_TRIAL_KEY), len(seen))
    return out


# -- what the stores hold ----------------------------------------------------------------------------------------


def mlflow_counts(db_url: str, parent: str) -> dict[str, dict]:
    """Trial runs under `parent`: run id -> status, trial id, params, metric points (read from the tables)."""
    import sqlalchemy

    eng = sqlalchemy.create_engine(db_url)
    q = sqlalchemy.text
    try:
        with eng.connect() as con:
            ids = [r[0] for r in con.execute(q("SELECT run_uuid FROM tags WHERE key = 'mlflow.parentRunId' AND "
                                                "value = :p"), {"p": parent})]
            out = {i: {"status": None, "trial_id": None, "params": 0, "points": 0, "orphaned": False} for i in ids}
            if not ids:
                return out
            sel = sqlalchemy.bindparam("ids", expanding=True)
            for rid, status in con.execute(q("SELECT run_uuid, status FROM runs WHERE run_uuid IN :ids").bindparams(sel),
                                           {"ids": ids}):
                out[rid]["status"] = status
            for rid, v in con.execute(q("SELECT run_uuid, value FROM tags WHERE key = 'adbs.trial_id' AND run_uuid IN "
                                        ":ids").bindparams(sel), {"ids": ids}):
                out[rid]["trial_id"] = v
            for (rid,) in con.execute(q("SELECT run_uuid FROM tags WHERE key = 'adbs.orphaned' AND run_uuid IN :ids")
                                      .bindparams(sel), {"ids": ids}):
                out[rid]["orphaned"] = True
            for table, key in (("params", "params"), ("metrics", "points")):
                for rid, n in con.execute(q(f"SELECT run_uuid, COUNT(*) FROM {table} WHERE run_uuid IN :ids "
                                            "GROUP BY run_uuid").bindparams(sel), {"ids": ids}):
                    out[rid][key] = n
            return out
    finally:
        eng.dispose()


@dataclass
class StudyCount:
    run: StudyRun
    tune: int = 0
    ended: Counter = field(default_factory=Counter)
    mlflow_runs: int = 0
    params_ok: int = 0
    points_ok: int = 0
    points_logged: int = 0
    points_reported: int = 0
    optuna: int = 0
    optuna_states: Counter = field(default_factory=Counter)
    lock_waits: int = 0
    errors: int = 0
    orphaned: int = 0


@dataclass
class Result:
    studies: list[StudyCount]
    problems: list[str]


def outage_problems(name: str, r: StudyRun, outage: str | None) -> list[str]:
    """--outage: the server went away while the study ran; where it stayed away, the study stopped with exit 1
    (adbs/exits.py: FAILED) and the --resume command, and was resumed (what arrived is counted as for any run)."""
    from adbs import exits

    if not outage:
        return []
    if not r.outage:
        return [f"{name}: ended before its database server went away (--outage {outage}; use more --trials)"]
    if outage == "away" and r.outage != f"away: exit {exits.FAILED}, --resume":
        return [f"{name}: while its server was away it ended '{r.outage}', not exit {exits.FAILED} with the "
                "--resume command"]
    return []


def check(b: Backend, runs: list[StudyRun], *, kill: bool, outage: str | None = None) -> Result:
    import optuna

    from adbs.config import Config

    n_params = len(Config().to_dict())
    problems: list[str] = []
    counts = []
    for r in runs:
        c = StudyCount(r)
        counts.append(c)
        name = f"{b.name} study {r.folder}"
        d = b.runs / r.folder
        log = Path(r.log.name).read_text(errors="replace")
        c.lock_waits = log.count(LOCKED_WARNING)
        c.errors = log.count("Traceback") + log.count("database is locked")
        if r.returncode != 0 or r.timed_out:
            problems.append(f"{name}: exited {r.returncode}{' (timed out)' if r.timed_out else ''}; log {r.log.name}")
        if c.errors:
            problems.append(f"{name}: {c.errors} tracebacks or 'database is locked' in its log")
        runs_file = json.loads((d / "mlflow_runs.json").read_text()) if (d / "mlflow_runs.json").exists() else {}
        # a trial a killed driver started after Tune's last save: rerun as another trial, its run closed
        rep = {k: v for k, v in reported(d).items() if k not in runs_file.get("orphaned", {})}
        c.tune = len(rep)
        c.ended = Counter(runs_file.get("ended", {}).values())
        if c.tune != r.planned:
            problems.append(f"{name}: {c.tune} Tune trials, {r.planned} planned")
        if c.ended.get(K.COMPLETE, 0) != r.planned:
            problems.append(f"{name}: ended {dict(c.ended)}, {r.planned} planned to complete")
        ml = mlflow_counts(b.mlflow_db, runs_file.get("parent") or "")
        orphans = {k: v for k, v in ml.items() if v["orphaned"]}
        c.orphaned = len(orphans)
        if any(v["status"] != "KILLED" for v in orphans.values()):
            problems.append(f"{name}: a closed orphan run is not KILLED")
        ml = {k: v for k, v in ml.items() if not v["orphaned"]}
        c.mlflow_runs = len(ml)
        by_trial = Counter(v["trial_id"] for v in ml.values())
        if c.mlflow_runs != c.tune or any(n != 1 for n in by_trial.values()) or set(by_trial) != set(rep):
            problems.append(f"{name}: {c.mlflow_runs} MLflow trial runs for {c.tune} Tune trials "
                            f"(runs per trial: {sorted(Counter(by_trial.values()).items())})")
        for v in ml.values():
            want = rep.get(v["trial_id"])
            c.params_ok += v["params"] == n_params
            c.points_logged += v["points"]
            if want:
                c.points_reported += want.points
                c.points_ok += v["points"] == want.points
            if runs_file.get("ended", {}).get(v["trial_id"]) == K.COMPLETE and v["status"] != "FINISHED":
                problems.append(f"{name}: complete trial {v['trial_id']} has MLflow status {v['status']}")
        if c.params_ok != c.mlflow_runs:
            problems.append(f"{name}: {c.mlflow_runs - c.params_ok} runs without their {n_params} params")
        if c.points_ok != c.mlflow_runs:
            problems.append(f"{name}: metric points logged {c.points_logged}, reported {c.points_reported} "
                            f"({c.mlflow_runs - c.points_ok} runs differ)")
        try:
            # pooled connections tested before use (db_server.engine_kwargs): with --pg-set idle_session_timeout=1s,
            # Optuna's own storage lost its connection between two of its opening queries on a loaded machine
            storage = optuna.storages.RDBStorage(b.optuna_url, engine_kwargs=engine_kwargs(b.optuna_url))
            trials = optuna.load_study(study_name=r.folder, storage=storage).trials
        except Exception as e:  # noqa: BLE001 - a lost Optuna study is a finding
            trials = []
            problems.append(f"{name}: Optuna study unreadable ({e})")
        c.optuna = len(trials)
        c.optuna_states = Counter(t.state.name for t in trials)
        # one Optuna trial per configuration, which runs over every seed (adbs_lab/search/searcher.py: StudySearch)
        configs = len({x.setting for x in rep.values()})
        if c.optuna != configs or c.optuna_states.get("COMPLETE", 0) != c.optuna:
            problems.append(f"{name}: Optuna trials {dict(c.optuna_states)} for {configs} configurations "
                            f"({c.tune} Tune trials)")
        if r.index % 2 == 0:  # a grid: each (alpha, seed) once
            points = Counter((x.setting, x.seed) for x in rep.values())
            twice = [p for p, n in points.items() if n > 1]
            if twice:
                problems.append(f"{name}: grid points run twice: {twice[:5]}")
        else:  # a TPE search: a sampler that restarted would draw its seeded random start-up again
            alphas = Counter(round(t.params.get("alpha", float("nan")), 12) for t in trials)
            again = [a for a, n in alphas.items() if n > 1]
            if again:
                problems.append(f"{name}: the sampler drew the same alpha twice (a restarted start-up?): {again[:5]}")
        if kill and r.index < 2 and not r.killed:
            problems.append(f"{name}: ended before its driver could be killed (use more --trials)")
        problems += outage_problems(name, r, outage)
    if b.readers is not None and (b.readers.ui_errors or b.readers.report_errors):
        problems.append(f"{b.name}: readers failed: UI {b.readers.ui_errors}, report.py {b.readers.report_errors} "
                        f"({b.readers.last_error})")
    return Result(counts, problems)


def print_summary(name: str, a, b: Backend, runs: list[StudyRun], result: Result, wall: float) -> None:
    kind = "tracking-only trials" if a.tracking_only else "real smoke-preset trainings"
    print(f"\n== {name}: {a.studies} studies x {a.trials} trials at once, {kind}"
          f"{', one grid and one sampled driver SIGKILLed and resumed' if a.kill else ''}; wall {wall:.0f} s")
    print(f"{'study':<10}{'kind':<8}{'planned':>8}{'tune':>6}{'ended':>22}{'mlflow':>8}{'params ok':>10}"
          f"{'points logged/reported':>24}{'optuna':>8}{'lock waits':>11}{'errors':>7}{'killed':>7}{'orphan runs':>12}")
    for c in result.studies:
        r = c.run
        ended = ",".join(f"{k[:4]}={v}" for k, v in sorted(c.ended.items()))
        print(f"{r.folder:<10}{'grid' if r.index % 2 == 0 else 'tpe':<8}{r.planned:>8}{c.tune:>6}{ended:>22}"
              f"{c.mlflow_runs:>8}{c.params_ok:>10}{f'{c.points_logged}/{c.points_reported}':>24}{c.optuna:>8}"
              f"{c.lock_waits:>11}{c.errors:>7}{'yes' if r.killed else '':>7}{c.orphaned:>12}")
    for c in result.studies:
        if c.run.outage:
            print(f"{c.run.folder}: its database server {c.run.outage}")
    rd = b.readers
    if rd is not None:
        print(f"readers meanwhile: {rd.ui_reads} UI run searches ({rd.ui_errors} failed), {rd.reports} report.py runs "
              f"({rd.report_errors} failed)")
    print("LOST OR WRONG:\n  " + "\n  ".join(result.problems) if result.problems else "nothing lost")
