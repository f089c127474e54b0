"""Every command of the `bash` blocks of the README and of the docs pages in DOCS (the recipes and the reference
pages the README links), checked, so that a documented command that breaks fails CI.

- `python -m adbs.run ...` on the embedded benchmark runs, shortened to one base epoch of 8 images per class and
  one session.
- A study (`studies/<name>.py ...`) runs with `--dry-run` (in this process, as `python studies/<name>.py`
  would run it): every check a run makes before its first trial (flags, config, search space, data,
  storage), then the number of trials. The studies themselves run end to end, smoke-sized, in
  tests/e2e/test_studies.py.
- `studies/report.py ...` runs against a store that holds the studies it names (built with MlflowClient in
  the tracker's layout), placeholders such as `<parent run id A>` filled in with run ids of that store.
- A config file the docs show (a `yaml` block that starts with `# <name>.yaml`) is written where the
  commands run, so `--config my.yaml` reads what the docs show.
- Commands on a real dataset (`--dataset cifar100 --data-root ~/data`, index lists) run with `--dry-run` on a
  small stand-in in the same layout, so the flags, the preset and the data checks are exercised.
- `mlflow/serve.py` runs with `--dry-run` (it prints the server command); `python -m adbs_lab.stores.dashboard` too, on a
  study folder that holds an Optuna study.
- The toy dataset example runs as written (the writer, then a smoke run on what it wrote).
- Benchmarks (`bench/...`) take minutes to hours or the authors' code: `--help` (the script imports and
  parses); tests/bench/test_vs_official.py and tests/bench/test_gpu.py run them small.
- Cluster commands (`sbatch`, `kubectl`, `docker`, ...) are checked by tests/repo/test_deploy.py (the Slurm script
  run with stand-ins for srun, the manifests parsed and linted); here the files they name must exist and a
  study they start must pass `--dry-run`.
- The set-up and test commands are what `.ci/run` runs; a download and a bucket read need the network.

A command that no rule covers fails `test_every_doc_command_has_a_rule`: a new doc command needs a rule here.
"""

from __future__ import annotations

import itertools
import json
import os
import pickle
import re
import shlex
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from tests.helpers.scripts import in_process

REPO = Path(__file__).resolve().parents[2]
DOCS = ["README.md", "docs/recipes.md", "docs/one-run.md", "docs/config.md", "docs/data.md", "docs/studies.md",
        "docs/tables.md", "docs/mlflow-and-reports.md", "docs/stores.md", "docs/gpu.md", "docs/benchmarks.md",
        "docs/vs-official.md", "docs/datasets.md"]
NOT_RUN = {
    "docs/clusters.md": "commands on a running cluster or bucket (`--address auto`, `ray up`, s3:// with credentials)",
    "docs/paper-vs-code.md": "bench/vs_official.py runs over shell variables, hours of the authors' code",
}
"""Docs pages with `bash` blocks that this test does not run, and why (test_every_page_with_commands_is_run)."""


def doc_commands() -> list[tuple[str, int, str]]:
    """(file, line, command) of every command in a ```bash block: continuation lines joined, comments cut."""
    out = []
    for name in DOCS:
        lines = (REPO / name).read_text().splitlines()
        inside, pending, start = False, "", 0
        for i, line in enumerate(lines, 1):
            if line.startswith("```"):
                inside = line.strip() == "```bash" if not inside else False
                continue
            if not inside:
                continue
            if not pending:
                start = i
            pending += line.rstrip().removesuffix("\\") + " " if line.rstrip().endswith("\\") else line
            if line.rstrip().endswith("\\"):
                continue
            cmd = _strip_comment(pending).strip()
            pending = ""
            if cmd:
                out.append((name, start, " ".join(cmd.split())))
    return out


def _strip_comment(line: str) -> str:
    """The line without its trailing `# ...` comment (a `#` inside quotes stays)."""
    quote = None
    for i, ch in enumerate(line):
        if ch in "'\"" and quote in (None, ch):
            quote = None if quote == ch else ch
        elif ch == "#" and quote is None and (i == 0 or line[i - 1].isspace()):
            return line[:i]
    return line


# -- rules: (name, pattern on the command, why it is not run as written) --------------------------------------
EXTERNAL = [
    ("set-up", r"^python3 -m venv \.venv && \.venv/bin/pip install", ".ci/run runs the set-up itself"),
    ("tests", r"^(\.venv/bin/python -m pytest|\.venv/bin/lint-imports$)",
     "the test command itself (tests/repo/test_imports.py runs the import contracts)"),
    ("download", r"download=True", "downloads CIFAR-100: needs the network"),
    ("bucket read", r"s3://BUCKET", "reads an S3 bucket: needs the network and credentials"),
    ("cluster shell", r"^(export |cd /shared/|squeue|ls ~/data)", "a shell step on a cluster or a data machine"),
    ("mlflow server", r"^mlflow server ", "MLflow's own server command on a server machine"),
    ("docker", r"^docker build -f deploy/Dockerfile", "tests/repo/test_deploy.py checks deploy/Dockerfile"),
    ("kubectl", r"^(kubectl |sed -i .*deploy/kuberay-rayjob\.yaml)", "tests/repo/test_deploy.py parses the manifests"),
    ("clone", r"^git clone https://", "clones the authors' code: needs the network"),
    ("gpu session", r"^OUT=\S+ bash bench/gpu_session\.sh( \w+)?$",
     "a GPU machine's session of bench/gpu.py (its commands' --help are checked below; tests/bench/test_gpu_modes.py)"),
    ("copy a measurement", r"^cp results/\S+ studies/gpu_measured\.json$", "copies a GPU session's measurement in"),
]
REAL_DATA = re.compile(r"--dataset (cifar100|mini_imagenet|cub200)|--preset (cifar100|mini_imagenet|cub200)|"
                       r"--data-root|--index-list|index_list=")


def rule(cmd: str) -> str:
    for name, pattern, _ in EXTERNAL:
        if re.search(pattern, cmd):
            return name
    if re.search(r"\bmy_study(\.py)?\b", cmd):
        return "own study"
    if cmd.startswith("sbatch "):
        return "sbatch"
    if re.match(r"^\.venv/bin/python bench/\w+\.py", cmd):
        return "bench"
    if re.match(r"^(\.venv/bin/python examples/toy_dataset\.py write|PYTHONPATH=examples \.venv/bin/python "
                r"(-m adbs\.run|studies/\w+\.py))", cmd):
        return "toy dataset"
    if re.match(r"^\.venv/bin/python -m adbs\.run ", cmd):
        return "adbs.run on real data" if REAL_DATA.search(cmd) else "adbs.run"
    if re.match(r"^\.venv/bin/python studies/report\.py ", cmd):
        return "report"
    if re.match(r"^\.venv/bin/python studies/\w+\.py", cmd):
        return "study on real data" if REAL_DATA.search(cmd) else "study"
    if re.match(r"^\.venv/bin/python mlflow/serve\.py", cmd):
        return "serve"
    if re.match(r"^\.venv/bin/python -m adbs_lab\.stores\.dashboard ", cmd):
        return "dashboard"
    if re.match(r"^\.venv/bin/python -c ", cmd) and "results/reports/compare-" in cmd:
        return "compare snippet"
    return ""


COMMANDS = doc_commands()


def test_the_docs_show_commands():
    assert len(COMMANDS) > 30 and any("studies/alpha_sweep.py" in c for _, _, c in COMMANDS)


def test_every_page_with_commands_is_run():
    """A docs page that shows commands is in DOCS (its commands are checked here) or in NOT_RUN, saying why."""
    pages = {p.relative_to(REPO).as_posix() for p in (REPO / "docs").glob("*.md") if "```bash" in p.read_text()}
    assert pages - set(DOCS) - set(NOT_RUN) == set(), "add these to DOCS (or NOT_RUN, saying why)"
    assert all((REPO / name).is_file() for name in DOCS + list(NOT_RUN))


def test_every_doc_command_has_a_rule():
    missing = [f"{f}:{n}: {c}" for f, n, c in COMMANDS if not rule(c)]
    assert not missing, "doc commands no rule of tests/repo/test_doc_commands.py covers:\n" + "\n".join(missing)


def test_files_named_by_cluster_commands_exist():
    for f, n, c in COMMANDS:
        for path in re.findall(r"\b((?:deploy|studies|mlflow)/[\w./-]+\.(?:py|sbatch|yaml|Dockerfile))", c):
            assert (REPO / path).exists(), f"{f}:{n}: {path} does not exist ({c})"
        if "deploy/Dockerfile" in c:
            assert (REPO / "deploy" / "Dockerfile").exists()


# -- the stand-ins: a small CIFAR-100 in torchvision's layout, index lists for it, and a report store ------------
@pytest.fixture(scope="module")
def home(tmp_path_factory) -> Path:
    """A HOME with ~/data/cifar-100-python and the index lists the docs name (~/fscil_index_lists/cifar100 and,
    under the working folder, adbs-official/data/index_list/cifar100)."""
    h = tmp_path_factory.mktemp("home")
    d = h / "data" / "cifar-100-python"
    d.mkdir(parents=True)
    rng = np.random.default_rng(0)
    labels = {}
    for split, n in (("train", 80), ("test", 4)):  # 80: room for the k-shot grid's 50 shots + 20 held out
        lab = rng.permutation(np.repeat(np.arange(100), n))
        labels[split] = lab
        with open(d / split, "wb") as fh:
            pickle.dump({"batch_label": split, "fine_labels": lab.tolist(), "coarse_labels": (lab // 5).tolist(),
                         "data": rng.integers(0, 256, (len(lab), 3072), dtype=np.uint8),
                         "filenames": [f"img_{i}.png" for i in range(len(lab))]}, fh)
    train = labels["train"]
    sessions = [np.flatnonzero(train < 60)] + [
        np.concatenate([np.flatnonzero(train == c)[:5] for c in range(60 + 5 * t, 65 + 5 * t)]) for t in range(8)]
    for folder in (h / "fscil_index_lists" / "cifar100", h / "work" / "adbs-official" / "data" / "index_list" / "cifar100"):
        folder.mkdir(parents=True)
        for t, idx in enumerate(sessions, 1):
            (folder / f"session_{t}.txt").write_text("\n".join(map(str, idx)) + "\n")
    # the config files the docs show (a ```yaml block whose first line is `# <name>.yaml`), in the working folder
    for name in DOCS:
        for block in re.findall(r"```yaml\n(.*?)```", (REPO / name).read_text(), re.S):
            first = block.splitlines()[0]
            if re.fullmatch(r"# [\w.-]+\.ya?ml", first.strip()):
                (h / "work" / first.strip()[2:]).write_text(block)
    # a study's best_config.json as studies write it, for `adbs.run --config runs/alpha_sweep/best_config.json`
    from adbs.config import Config

    best = h / "work" / "runs" / "alpha_sweep" / "best_config.json"
    best.parent.mkdir(parents=True)
    best.write_text(json.dumps({"config_label": "alpha=0.05", "objective": "summary/val_avg_acc",
                                "mean_over_seeds": 60.0, "seeds": 3,
                                "config": Config(variant="adb+ic", alpha=0.05).to_dict()}, indent=1))
    # and a knobs study's, for `studies/ablation_path.py --to runs/knobs/best_config.json`
    knobs = h / "work" / "runs" / "knobs" / "best_config.json"
    knobs.parent.mkdir(parents=True)
    knobs.write_text(json.dumps({"config_label": "alpha=0.01 new_boundary_init=one", "objective": "summary/val_avg_acc",
                                 "mean_over_seeds": 60.0, "seeds": 1,
                                 "config": Config(variant="adb+ic", alpha=0.01, new_boundary_init="one",
                                                  finetune_epochs=0).to_dict()}, indent=1))
    return h


def _env(home: Path) -> dict[str, str]:
    return {**os.environ, "HOME": str(home), "MPLBACKEND": "Agg", "RAY_USAGE_STATS_ENABLED": "0",
            "MLFLOW_DISABLE_TELEMETRY": "true"}


def _argv(cmd: str, home: Path) -> list[str]:
    """The command as a shell would split it, ~ expanded to the stand-in HOME, the venv's python = this one."""
    words = [w.replace("~", str(home)) if w.startswith("~") else w for w in shlex.split(cmd)]
    words = [str(REPO / w) if re.match(r"^(studies|mlflow|bench|examples)/[\w/]+\.py$", w) else w for w in words]
    return [sys.executable if w == ".venv/bin/python" else w for w in words]


def _run(argv: list[str], home: Path, cwd: Path = REPO, timeout: int = 300) -> subprocess.CompletedProcess:
    return subprocess.run(argv, cwd=cwd, env=_env(home), capture_output=True, text=True, timeout=timeout)


def _run_in_process(argv: list[str], cmd: str, capsys) -> str:
    """Run the script argv[1] in this process as `python <argv[1:]>` would (tests/helpers/scripts.py); its stdout. A
    non-zero exit fails the test."""
    r = in_process(capsys, argv)
    if r.returncode != 0:
        pytest.fail(f"{cmd}: exit {r.returncode}\n{r.stdout[-2000:]}\n{r.stderr[-3000:]}")
    return r.stdout


def _isolated(argv: list[str], tmp: Path) -> list[str]:
    """A study's results and tracking in a temporary folder, never the repository's runs/ and mlflow/."""
    extra = []
    if "--storage" not in argv:
        extra += ["--storage", str(tmp / "runs")]
    if "--tracking-uri" not in argv:
        extra += ["--tracking-uri", f"sqlite:///{tmp / 'mlflow.db'}"]
    return argv + extra


def _by_rule(*names: str) -> list:
    """The commands of these rules, each once (the README repeats a few), named by where they first appear."""
    first = {}
    for f, n, c in COMMANDS:
        if rule(c) in names:
            first.setdefault(c, f"{f}:{n}")
    return [pytest.param(c, id=where) for c, where in first.items()]


@pytest.mark.parametrize("cmd", _by_rule("study", "study on real data", "sbatch"))
def test_study_commands_pass_their_dry_run(cmd, home, tmp_path, monkeypatch, capsys):
    """In this process (a dry run imports, checks and prints; no Ray, no training): the study script as a
    user runs it, from a working folder with the docs' relative paths, HOME = the stand-in's."""
    if cmd.startswith("sbatch "):  # the study the Slurm script starts, on a cluster's shared folders
        cmd = ".venv/bin/python " + cmd[cmd.index("studies/"):].replace("/shared/data", "~/data")
    argv = _isolated(_argv(cmd, home) + ["--dry-run"], tmp_path)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.chdir(home / "work")
    # The dry run makes the run's checks: a command that needs a tracking server running, or an interrupted study
    # to continue, is refused here (exit 2) with the message a user without them would get.
    needs = ("is unreachable" if re.search(r"--tracking-uri https?://", cmd) else
             "no interrupted study to continue" if "--resume" in argv else None)
    if needs:
        r = in_process(capsys, argv)
        assert r.returncode == 2 and needs in r.stderr, f"{cmd}\n{r.stdout[-2000:]}\n{r.stderr[-3000:]}"
        return
    assert "dry run: study " in _run_in_process(argv, cmd, capsys), cmd
    written = [f for f in (tmp_path / "runs").rglob("*") if f.is_file()] if (tmp_path / "runs").exists() else []
    assert not written, f"{cmd}: a dry run wrote {written}"


@pytest.mark.slow
@pytest.mark.parametrize("cmd", _by_rule("adbs.run", "adbs.run on real data"))
def test_single_run_commands_run(cmd, home, tmp_path):
    """On the embedded benchmark they run (one base epoch of 8 images per class, one session); on a real dataset, a
    dry run."""
    argv = _argv(cmd, home) + ["--out", str(tmp_path / "run.json")]
    if rule(cmd) == "adbs.run on real data":
        argv += ["--dry-run"]
    else:
        # the command's own flags first; a user's run, only shorter: a tenth of the base images for one epoch,
        # validated on 10 images per base class and scored on 20 per class
        argv += ["--base-epochs", "1", "--base-images-per-class", "8", "--sessions", "1", "--val-fraction", "0.02",
                 "--test-images-per-class", "20", "--quiet"]
    r = _run(argv, home, cwd=home / "work")
    assert r.returncode == 0, f"{cmd}\n{r.stdout[-2000:]}\n{r.stderr[-3000:]}"
    if "--dry-run" in argv:
        assert "dry run: " in r.stdout
    else:
        assert json.loads((tmp_path / "run.json").read_text())["summary"]["test_avg_acc"] > 0


@pytest.mark.slow
@pytest.mark.parametrize("cmd", _by_rule("serve"))
def test_serve_commands_print_their_server(cmd, home, tmp_path):
    r = _run(_argv(cmd, home) + ["--dry-run"], home)
    assert r.returncode == 0 and "mlflow" in r.stdout, f"{cmd}\n{r.stdout}\n{r.stderr}"


@pytest.mark.parametrize("cmd", _by_rule("dashboard"))
def test_dashboard_commands_name_what_they_would_serve(cmd, home, tmp_path, monkeypatch, capsys):
    """In this process, with --dry-run: the live view of the study folder the command names (relative to the
    project folder, where the docs run it), which here holds a study's optuna.db."""
    import optuna

    from adbs_lab.stores import dashboard
    from adbs_lab.stores import serve

    argv = _argv(cmd, home)[3:]
    folder = tmp_path / argv[0]
    folder.mkdir(parents=True)
    optuna.create_study(study_name=folder.name, storage=f"sqlite:///{folder / 'optuna.db'}")
    monkeypatch.chdir(tmp_path)
    capsys.readouterr()
    args = dashboard.parser().parse_args(argv)
    if serve.port_problem(args.host, args.port):  # the docs' port is taken on this machine now: the refusal
        assert dashboard.main([*argv, "--dry-run"]) == 2 and "pick another --port" in capsys.readouterr().err
        return
    assert dashboard.main([*argv, "--dry-run"]) == 0, capsys.readouterr().err
    assert f"would serve sqlite:///{folder / 'optuna.db'} read-only" in capsys.readouterr().out


# -- report.py on a store that holds the studies the docs name ---------------------------------------------------
STUDIES = {"ablation": ("baseline", {"baseline": [70, 60, 50], "adb": [72, 61, 51], "adb+ic": [73, 62, 53]}),
           "boundary": ("released", {"released": [70, 40, 20], "clamp": [70, 58, 50]}),
           "alpha_sweep": (None, {"alpha=0.01": [71, 60, 52], "alpha=0.1": [72, 61, 50]}),
           "hosts": ({"SAVC+ADBS": "SAVC"}, {"SAVC": [78, 60, 52], "SAVC+ADBS": [85, 70, 60]})}


@pytest.fixture(scope="module")
def report_store(tmp_path_factory) -> tuple[str, list[str]]:
    """An MLflow store in the tracker's layout with one run of each study above (two of alpha_sweep), two seeds
    per row, on cifar100 (so --paper has the paper's rows to print); (uri, parent run ids of alpha_sweep)."""
    from mlflow.entities import Metric, Param
    from mlflow.tracking import MlflowClient

    from adbs.config import Config
    from adbs_lab.records import metrics_keys as K

    uri = f"sqlite:///{tmp_path_factory.mktemp('store') / 'mlflow.db'}"
    c = MlflowClient(uri)
    sweeps, parents = [], {}
    for name, (baseline, rows) in [*STUDIES.items(), ("alpha_sweep", STUDIES["alpha_sweep"])]:
        exp = c.get_experiment_by_name(name)
        exp_id = exp.experiment_id if exp else c.create_experiment(name)
        tags = {"adbs.role": "study", "adbs.study": name, "adbs.order": json.dumps(list(rows)),
                "adbs.command": f"python studies/{name}.py"}
        if baseline:
            tags["adbs.baseline"] = baseline if isinstance(baseline, str) else json.dumps(baseline)
        parent = c.create_run(exp_id, run_name=f"{name} 2026-01-01", tags=tags)
        number = 0
        for label, accs in rows.items():
            for seed in (0, 1):
                run = c.create_run(exp_id, run_name=f"{label} seed={seed}", tags={
                    "mlflow.parentRunId": parent.info.run_id, "adbs.role": "trial", "adbs.study": name,
                    "adbs.trial_id": f"{name}{number}", "adbs.optuna_trial": str(number), "adbs.state": K.COMPLETE,
                    "adbs.label": label})
                got = [a + seed for a in accs]
                cfg = Config(seed=seed, dataset="cifar100", keep_embeddings=False).to_dict()
                c.log_batch(run.info.run_id,
                            metrics=[Metric("session/test_acc", a, 0, s) for s, a in enumerate(got)]
                            + [Metric("session/test_novel_acc", a / 2, 0, s) for s, a in enumerate(got)]
                            + [Metric("summary/val_avg_acc", sum(got) / len(got) + 1, 0, 0),
                               Metric("summary/test_avg_acc", sum(got) / len(got), 0, 0)],
                            params=[Param(k, json.dumps(v) if isinstance(v, list) else str(v)) for k, v in cfg.items()])
                c.set_terminated(run.info.run_id, "FINISHED")
                number += 1
        c.set_terminated(parent.info.run_id)
        parents[name] = parent.info.run_id
        if name == "alpha_sweep":
            sweeps.append(parent.info.run_id)
    # a studies/paper.py run naming its parts, as paper.py logs it (for `report.py paper`)
    from adbs_lab.results import paper

    run = c.create_run(c.create_experiment(paper.EXPERIMENT), run_name="paper cifar100", tags={
        "adbs.role": paper.ROLE, "adbs.dataset": "cifar100", "adbs.command": "python studies/paper.py",
        "adbs.parts": json.dumps({k: parents[k] for k in ("hosts", "ablation", "alpha_sweep")})})
    c.set_terminated(run.info.run_id)
    return uri, sweeps


@pytest.mark.slow
def test_report_commands_and_the_compare_snippet(report_store, home, tmp_path, monkeypatch, capsys):
    """Every report.py command of the docs, in order, then the pandas snippet that reads the comparison. report.py
    runs in this process, as the studies' dry runs do above (30 interpreters would spend minutes importing); the
    snippet in its own."""
    uri, sweeps = report_store
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.chdir(work)
    cmds = _by_rule("report", "compare snippet")
    assert cmds
    for param in cmds:
        cmd = param.values[0]
        cmd = (cmd.replace("<parent run id A>", sweeps[0]).replace("<parent run id B>", sweeps[1])
               .replace("<parent or trial run id>", sweeps[0]))
        argv = _argv(cmd, home)
        refs = list(itertools.takewhile(lambda w: not w.startswith("-"), argv[2:]))  # the studies, before the flags
        if rule(cmd) == "report":
            if "--tracking-uri" in argv:  # a server or a copied store in the docs: this store here
                argv[argv.index("--tracking-uri") + 1] = uri
            else:
                argv += ["--tracking-uri", uri]
            if "--out" in argv:
                argv[argv.index("--out") + 1] = str(work / "out")
            else:  # report.py's default folder, under this test's working folder instead of the repository
                folder = f"compare-{'-'.join(refs)}" if len(refs) > 1 else refs[0]
                argv += ["--out", str(work / "results" / "reports" / folder)]
        if rule(cmd) == "compare snippet":
            r = _run(argv, home, cwd=work)
            assert r.returncode == 0, f"{cmd}\n{r.stdout[-2000:]}\n{r.stderr[-3000:]}"
            assert "test_avg_acc" in r.stdout
            continue
        out = _run_in_process(argv, cmd, capsys)
        if "--paper" in cmd:
            assert "beside the paper" in out, cmd


@pytest.mark.slow
def test_the_toy_dataset_commands_run(home, tmp_path):
    """The writer, then a run on what it wrote; a study on it (docs/datasets.md) passes its dry run, in a
    subprocess that imports the dataset's module from PYTHONPATH as the trials would."""
    cmds = [p.values[0] for p in _by_rule("toy dataset")]
    assert len(cmds) == 3 and "write" in cmds[0] and "studies/ablation.py" in cmds[2]
    for cmd in cmds:
        env_words = []
        while re.match(r"^[A-Z_]+=", cmd):
            word, cmd = cmd.split(" ", 1)
            env_words.append(word.split("=", 1))
        argv = _argv(cmd, home) + (["--out", str(tmp_path / "toy.json")] if "adbs.run" in cmd else [])
        if "studies/" in cmd:
            argv = _isolated(argv + ["--dry-run"], tmp_path)
        env = {**_env(home), **{k: str(REPO / v) for k, v in env_words}}
        r = subprocess.run(argv, cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
        assert r.returncode == 0, f"{cmd}\n{r.stdout[-2000:]}\n{r.stderr[-3000:]}"
        if "studies/" in cmd:
            assert "dry run: study " in r.stdout, r.stdout[-2000:]
    assert json.loads((tmp_path / "toy.json").read_text())["config"]["dataset"] == "toy_dataset:toy"


@pytest.mark.slow
@pytest.mark.parametrize("cmd", _by_rule("bench"))
def test_bench_commands_parse(cmd, home):
    script = _argv(cmd, home)[:2]  # python, the script
    r = _run(script + ["--help"], home, timeout=120)
    assert r.returncode == 0 and "usage" in r.stdout.lower(), f"{cmd}\n{r.stdout[-1000:]}\n{r.stderr[-2000:]}"


def own_study_files(folder: Path) -> list[Path]:
    """The README's second-day files (```python blocks whose first line is `# my_<name>.py`), written to `folder`."""
    out = []
    for block in re.findall(r"```python\n(.*?)```", (REPO / "README.md").read_text(), re.S):
        first = block.splitlines()[0].strip()
        if re.fullmatch(r"# my_\w+\.py", first):
            out.append(folder / first[2:])
            out[-1].write_text(block)
    return out


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_the_second_day_study_runs_as_written(ray_address, tmp_path):
    """The README's own study: its two files written as shown, its commands run in order from that folder (the
    smoke run for real, on this session's Ray; the others' trials only --dry-run), then its report from MLflow."""
    lab = tmp_path / "lab"
    lab.mkdir()
    assert [f.name for f in own_study_files(lab)] == ["my_space.py", "my_study.py"]
    cmds = [p.values[0] for p in _by_rule("own study")]
    assert any(c.endswith("my_study.py --smoke") for c in cmds) and any("report.py my_study" in c for c in cmds)
    uri = f"sqlite:///{tmp_path / 'mlflow' / 'mlflow.db'}"
    env = {**os.environ, "PYTHONPATH": str(REPO)}  # as an installed project (pip install -e .) imports adbs_lab
    for cmd in cmds:
        words = shlex.split(cmd)
        assert words[0] == ".venv/bin/python", cmd
        if words[1] == "my_study.py":
            argv = [sys.executable, str(lab / "my_study.py"), *words[2:], "--storage", str(tmp_path / "runs"),
                    "--tracking-uri", uri, "--address", ray_address, "--gpus-per-trial", "0"]
            if words[2:] != ["--smoke"] and "--dry-run" not in words:
                argv.append("--dry-run")  # another run of the same study: its checks and size only
        else:
            argv = [sys.executable, str(REPO / words[1]), *words[2:], "--tracking-uri", uri, "--out",
                    str(tmp_path / "report")]
        r = subprocess.run(argv, cwd=lab, env=env, capture_output=True, text=True, timeout=600)
        assert r.returncode == 0, f"{cmd}\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}"
        if words[2:] == ["--smoke"]:  # it names no best: shots is a data condition (its plan's conditions=)
            said = "my_study varies data conditions (shots), not knobs: no configuration is best across them"
            assert f"note: {said}" in r.stdout and f"best configuration: none ({said}" in r.stdout, r.stdout[-3000:]
            assert "best val avg acc" not in r.stdout and "best configuration by" not in r.stdout
            assert "| no best across shots" in r.stdout
    folder = tmp_path / "runs" / "my_study-smoke"  # a --smoke run (README)
    assert json.loads((folder / "best_config.json").read_text())["config_label"] is None
    assert "None: my_study varies data conditions (shots)" in (folder / "report.md").read_text()
    assert "None: my_study varies data conditions (shots)" in (tmp_path / "report" / "report.md").read_text()
    table = (folder / "table.txt").read_text()
    assert "shots=1" in table and "shots=5" in table and "alpha=0.05" in table
    assert (tmp_path / "report" / "table.txt").read_text().count("alpha=") >= 4
