"""What a light command loads (docs/architecture.md, "Layers"): the preflight never Ray Tune, the MLflow launcher's
--help and the report's --help neither Ray Tune nor torch, adbs's light modules (adbs/__init__.py loads its names on
first use) no torch, and a study's flag refused at parse exits 2 before torch loads (the config package reads the
hosts' options from adbs/hosts/<host>_options.py, never from the hosts' torch modules). Each case runs in a fresh
interpreter; the time it took is printed (`-s`), never asserted."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
WATCHED = ("ray.tune", "torch", "mlflow", "optuna", "pandas")

# argv of a script, or code to exec; what must not be in sys.modules at the end
CASES = {
    "preflight": ("code", "import adbs_lab.driver.preflight", ("ray.tune",)),
    "adbs light modules": ("code", "import adbs.redaction, adbs.writable, adbs.cells", ("torch",)),
    "mlflow/serve.py --help": ("script", "mlflow/serve.py", ("ray.tune", "torch")),
    "studies/report.py --help": ("script", "studies/report.py", ("ray.tune", "torch")),
    "stores": ("code", "import adbs_lab.stores.serve, adbs_lab.stores.tracking_store, adbs_lab.stores.sqlite_kind",
               ("ray.tune", "torch")),
    "the config package": ("code", "import adbs.config, adbs.config.cli; adbs.config.option_keys()", ("torch",)),
}

# A study's flags refused by adbs_lab/driver/options.py: parse (argparse, the study's own rules, --set's syntax),
# checked against every host's options and presets, or by adbs_lab/driver/flags.py (the options' values, a --set of
# what the study sweeps or seeds): the refusal (exit 2) must come before torch, Ray Tune, MLflow or
# pandas load (Optuna may: the study's search space is made of its distributions, search_spaces/).
REFUSED = {
    "--pruner nope": ["--pruner", "nope"],
    "--set without =": ["--set", "savc.queue_size"],
    "--preset nope": ["--preset", "nope"],
    # refused by the checks adbs_lab/study.py runs before it loads the driver (adbs_lab/driver/flags.py)
    "--alpha, which the study sweeps": ["--alpha", "0.05"],
    "--seeds -1": ["--seeds", "-1"],
    "--resolve 0": ["--resolve", "0"],
    "--error-rate 0.7": ["--error-rate", "0.7"],
}

PROBE = """
import atexit, json, sys, time
t0 = time.perf_counter()
atexit.register(lambda: sys.__stderr__.write("LOADED " + json.dumps({"modules": [m for m in %r if m in sys.modules],
                                                                   "s": round(time.perf_counter() - t0, 2)}) + "\\n"))
"""


def _run(body: str, watched: tuple[str, ...] = WATCHED) -> tuple[subprocess.CompletedProcess, dict]:
    """`body` run after PROBE in a fresh interpreter: the process, and what it had loaded at exit (and how fast)."""
    r = subprocess.run([sys.executable, "-c", PROBE % (watched,) + body], cwd=REPO, capture_output=True, text=True,
                       timeout=300, env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin", "HOME": str(REPO)})
    line = next((ln for ln in r.stderr.splitlines() if ln.startswith("LOADED ")), None)
    assert line is not None, r.stdout[-2000:] + r.stderr[-2000:]
    return r, json.loads(line[len("LOADED "):])


def _script(path: str, *argv: str) -> str:
    if path == "-m adbs.run":
        return (f"import runpy; sys.argv = {['adbs/run.py', *argv]!r}; "
                "runpy.run_module('adbs.run', run_name='__main__', alter_sys=True)")
    return f"import runpy; sys.argv = {[path, *argv]!r}; runpy.run_path({path!r}, run_name='__main__')"


@pytest.mark.parametrize("case", list(CASES))
def test_a_light_command_loads_no_heavy_framework(case):
    kind, what, forbidden = CASES[case]
    _, loaded = _run(what if kind == "code" else _script(what, "--help"))
    print(f"{case}: {loaded['s']} s, loaded {loaded['modules'] or 'none'} of {', '.join(WATCHED)}")
    assert not set(forbidden) & set(loaded["modules"]), (case, loaded)


@pytest.mark.parametrize("case", list(REFUSED))
def test_a_refused_study_flag_exits_2_before_torch(case):
    r, loaded = _run(_script("studies/alpha_sweep.py", *REFUSED[case]))
    print(f"studies/alpha_sweep.py {case}: refused in {loaded['s']} s, loaded {loaded['modules'] or 'none'} of "
          f"{', '.join(WATCHED)}")
    assert r.returncode == 2, r.stdout[-2000:] + r.stderr[-2000:]
    assert "error:" in r.stderr
    assert not {"torch", "ray.tune", "mlflow", "pandas"} & set(loaded["modules"]), (case, loaded)


# Every entry point refuses what needs no store (its flags, an unknown config key, a value of the wrong type, an unknown
# host or choice) before torch, Ray, MLflow or pandas load (adbs/light.py: HEAVY; before, `--set bogus=1` was refused
# by a study's preflight after all four had loaded: 5 s at load 1.7, 46 s at load 17).
ENTRY_REFUSED = {
    "ablation.py --set bogus=1 (unknown key)": ("studies/ablation.py", "--set", "bogus=1"),
    "ablation_path.py --set alpha=x (wrong type)": ("studies/ablation_path.py", "--set", "alpha=x"),
    "alpha_sweep.py --set bogus=1 (unknown key)": ("studies/alpha_sweep.py", "--set", "bogus=1"),
    "boundary.py --host nope (unknown host)": ("studies/boundary.py", "--host", "nope"),
    "hosts.py --set savc.bogus=1 (unknown host option)": ("studies/hosts.py", "--set", "savc.bogus=1"),
    "knobs.py --base-epochs x (wrong type)": ("studies/knobs.py", "--base-epochs", "x"),
    "kshot_grid.py --set bogus=1 (unknown key)": ("studies/kshot_grid.py", "--set", "bogus=1"),
    "paper.py --set bogus=1 (unknown key)": ("studies/paper.py", "--set", "bogus=1"),
    "paper.py --base-epochs x (wrong type)": ("studies/paper.py", "--base-epochs", "x"),
    "report.py --metric bogus (unknown choice)": ("studies/report.py", "ablation", "--metric", "bogus"),
    "report.py --format nope (unknown choice)": ("studies/report.py", "ablation", "--format", "nope"),
    "submit.py without a study (bad flags)": ("studies/submit.py", "--address", "http://127.0.0.1:9"),
    "adbs.run --set bogus=1 (unknown key)": ("-m adbs.run", "--set", "bogus=1"),
    "adbs.run --variant nope (unknown choice)": ("-m adbs.run", "--variant", "nope"),
    "adbs.run --base-epochs 0 (out of range)": ("-m adbs.run", "--base-epochs", "0"),
    # a store's URL refused by its form alone (before, after torch, Ray and pandas had loaded: 5-20 s at load 4); a
    # study's with --dry-run, so that a case not refused checks and exits instead of starting the study
    "ablation.py --tracking-uri sqlite:///rel.db (relative)": ("studies/ablation.py", "--dry-run", "--tracking-uri",
                                                               "sqlite:///rel.db"),
    "alpha_sweep.py --tracking-uri htp:/x (no such scheme)": ("studies/alpha_sweep.py", "--dry-run", "--tracking-uri",
                                                              "htp:/x"),
    "paper.py --tracking-uri bogus://h/x (no such scheme)": ("studies/paper.py", "--dry-run", "--tracking-uri",
                                                             "bogus://h/x"),
    "knobs.py --storage ftp://h/runs (no such scheme)": ("studies/knobs.py", "--dry-run", "--storage", "ftp://h/runs"),
    "boundary.py --storage s3://K:S@b/runs (credentials)": ("studies/boundary.py", "--dry-run", "--storage",
                                                            "s3://K:S@b/runs"),
    "ablation.py --optuna-storage bogus://x (no such dialect)": ("studies/ablation.py", "--dry-run", "--optuna-storage",
                                                                 "bogus://x"),
    "kshot_grid.py --optuna-storage sqlite:///rel.db (relative)": ("studies/kshot_grid.py", "--dry-run",
                                                                   "--optuna-storage", "sqlite:///rel.db"),
    "hosts.py --optuna-storage notaurl (no URL)": ("studies/hosts.py", "--dry-run", "--optuna-storage", "notaurl"),
    "report.py --tracking-uri htp:/x (no such scheme)": ("studies/report.py", "ablation", "--tracking-uri", "htp:/x"),
    "report.py --tracking-uri sqlite:////none/m.db (no store)": ("studies/report.py", "ablation", "--tracking-uri",
                                                                 "sqlite:////nonexistent/adbs/mlflow.db"),
}


@pytest.mark.parametrize("case", list(ENTRY_REFUSED))
def test_every_entry_point_refuses_what_needs_no_store_before_a_heavy_library_loads(case):
    from adbs.light import HEAVY

    r, loaded = _run(_script(*ENTRY_REFUSED[case]), HEAVY)
    print(f"{case}: refused in {loaded['s']} s, loaded {loaded['modules'] or 'none'} of {', '.join(HEAVY)}")
    assert r.returncode == 2, r.stdout[-2000:] + r.stderr[-2000:]
    assert "error:" in r.stderr
    assert loaded["modules"] == [], (case, loaded)
