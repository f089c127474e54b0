"""studies/submit.py: argument checks before anything is sent, the job's runtime env and entrypoint,
secrets kept out of commands and output. The real submission is tests/e2e/test_two_node_cluster.py."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest
from testing.procs import free_port

REPO = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("adbs_submit", REPO / "studies" / "submit.py")
submit = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(submit)

GOOD = ["--address", "http://head:8265", "--", "studies/alpha_sweep.py", "--smoke", "--storage", "/shared/runs",
        "--tracking-uri", "http://mlflow:5000"]


def checked(argv: list[str], environ: dict[str, str] | None = None):
    args = submit.parse(argv)
    env = submit.validate(args, environ or {})
    return args, env


def test_good_arguments_give_entrypoint_with_address_auto(monkeypatch):
    monkeypatch.chdir(REPO)
    args, env = checked(GOOD)
    assert args.script == "studies/alpha_sweep.py" and env == {}
    assert submit.entrypoint(args) == ["python", "studies/alpha_sweep.py", "--smoke", "--storage", "/shared/runs",
                                       "--tracking-uri", "http://mlflow:5000", "--address", "auto"]


def test_script_found_from_another_cwd_and_absolute(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert checked(GOOD)[0].script == "studies/alpha_sweep.py"
    argv = GOOD[:3] + [str(REPO / "studies" / "kshot_grid.py")] + GOOD[4:]
    assert checked(argv)[0].script == "studies/kshot_grid.py"


@pytest.mark.parametrize("argv,msg", [
    (GOOD[2:], "--address is required"),
    (["--address", "head:6379"] + GOOD[2:], "not the Jobs API"),
    (["--address", "ray://head:10001"] + GOOD[2:], "not the Jobs API"),
    (GOOD[:3], "no study after"),
    (GOOD[:3] + ["studies/nope.py"], "not found"),
    (GOOD[:3] + ["studies/submit.py", "--storage", "/s"], "cannot submit itself"),
    (GOOD[:3] + ["/etc/hostname"], "outside the project"),
    (GOOD[:3] + ["README.md"], "not a study script"),  # a file of the project, but no study
    (GOOD[:3] + ["adbs/run.py"], "not a study script"),
    (GOOD[:4] + ["--tracking-uri", "http://m:5000"], "needs --storage"),
    (GOOD[:4] + ["--storage", "runs", "--tracking-uri", "http://m:5000"], "must be absolute"),
    (GOOD[:4] + ["--storage", "~/runs", "--tracking-uri", "http://m:5000"], "must be absolute"),
    (GOOD[:4] + ["--storage", "s3://KEY:SECRET@bucket/runs", "--tracking-uri", "http://m:5000"], "carries credentials"),
    (GOOD[:4] + ["--storage", "s3://b/runs?secret_key=SECRET", "--tracking-uri", "http://m:5000"], "carries credentials"),
    (GOOD[:4] + ["--storage", "ftp://host/runs", "--tracking-uri", "http://m:5000"], "unsupported URL scheme"),
    (GOOD[:4] + ["--storage", "/s"], "needs --tracking-uri"),
    (GOOD[:4] + ["--storage", "/s", "--tracking-uri", "sqlite:///mlflow.db"], "relative"),
    (GOOD + ["--address", "10.0.0.1:6379"], "drop the option"),
    (GOOD + ["--help"], "run `python studies/alpha_sweep.py --help`"),
    (GOOD[:8] + ["--tracking-uri", "https://bob:hunter22@mlflow.example.org"], "user:password@"),
    (["--env", "NOT_SET_ANYWHERE_XYZ"] + GOOD, "is not set in this shell"),
    (["--env", "1BAD"] + GOOD, "not an environment variable name"),
])
def test_bad_arguments_refused_before_submitting(argv, msg, monkeypatch):
    monkeypatch.chdir(REPO)
    with pytest.raises(submit.SubmitError, match=msg.replace("(", r"\(").replace("`", "`")):
        checked(argv)


@pytest.mark.parametrize("argv", [
    ["--address", "http://bob:hunter22@head:8265"] + GOOD[2:],  # the Jobs API takes no user information
    GOOD + ["--address", "http://bob:hunter22@head:8265"],  # nor does a submitted study's own --address
    GOOD[:8] + ["--tracking-uri", "https://bob:hunter22@mlflow.example.org"],
])
def test_a_refused_address_with_a_password_is_printed_without_it(argv, monkeypatch):
    """The refusal of a malformed --address quoted it whole, password and all, on the terminal and in CI logs."""
    monkeypatch.chdir(REPO)
    with pytest.raises(submit.SubmitError) as e:
        checked(argv)
    assert "hunter22" not in str(e.value)


def test_missing_separator():
    with pytest.raises(submit.SubmitError, match="after `--`"):
        submit.parse(["--address", "http://h:8265", "studies/alpha_sweep.py"])


@pytest.mark.parametrize("flag", ["--help", "-h"])
def test_help_without_a_study_command_prints_the_help(flag):
    r = subprocess.run([sys.executable, str(REPO / "studies" / "submit.py"), flag], capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("usage: submit.py --address") and "--deps" in r.stdout and not r.stderr


def test_env_copied_by_name_and_secret_never_in_the_command(monkeypatch):
    monkeypatch.chdir(REPO)
    environ = {"MLFLOW_TRACKING_TOKEN": "s3cr3t-token-value", "OTHER": "x"}
    _, env = checked(["--env", "MLFLOW_TRACKING_TOKEN", "--env", "ADBS_NOTE=hello"] + GOOD, environ)
    assert env == {"MLFLOW_TRACKING_TOKEN": "s3cr3t-token-value", "ADBS_NOTE": "hello"}
    with pytest.raises(submit.SubmitError, match="value of MLFLOW_TRACKING_TOKEN appears"):
        checked(["--env", "MLFLOW_TRACKING_TOKEN"] + GOOD + ["--name", "s3cr3t-token-value"], environ)
    # The tracking URI may come from --env instead of the study's flag.
    _, env = checked(["--env", "MLFLOW_TRACKING_URI"] + GOOD[:8], {"MLFLOW_TRACKING_URI": "http://m:5000"})
    assert env["MLFLOW_TRACKING_URI"] == "http://m:5000"


def test_runtime_env_uploads_the_project_without_local_state(monkeypatch):
    monkeypatch.chdir(REPO)
    args, env = checked(["--env", "TOKEN"] + GOOD, {"TOKEN": "abcdefgh"})
    renv = submit.runtime_env(args, env)
    assert renv["working_dir"] == str(REPO)
    for pattern in ("/.venv/", ".git/", "/runs/", "/results/", "/test-artifacts/", "/mlflow/mlflow.db", "/mlflow/artifacts/"):
        assert pattern in renv["excludes"]
    assert renv["env_vars"]["TOKEN"] == "abcdefgh" and renv["env_vars"]["RAY_USAGE_STATS_ENABLED"] == "0"
    pkgs = renv["pip"]["packages"]
    assert any(p.startswith("torch") for p in pkgs) and any(p.startswith("optuna") for p in pkgs)
    assert not any(p.lower().startswith("ray") for p in pkgs)  # the cluster's own Ray is never replaced
    # A storage folder inside the project is excluded too; --deps installed sends no pip list.
    args, env = checked(["--deps", "installed"] + GOOD[:4] + ["--storage", str(REPO / "scratch-runs"),
                                                              "--tracking-uri", "http://m:5000"])
    renv = submit.runtime_env(args, env)
    assert "pip" not in renv and "/scratch-runs/" in renv["excludes"]
    args, _ = checked(["--deps", "installed", "--pip", "psycopg2-binary"] + GOOD)
    assert submit.runtime_env(args, {})["pip"]["packages"] == ["psycopg2-binary"]


def test_dependencies_skip_only_ray():
    deps = submit.dependencies("pyproject", [])
    assert "pyyaml" in deps and not [d for d in deps if submit.SKIP_DEPS.match(d)]
    assert submit.SKIP_DEPS.match("ray[tune]>=2.50") and submit.SKIP_DEPS.match("ray") and not submit.SKIP_DEPS.match("rayon")


@pytest.mark.slow
def test_cli_exit_2_on_bad_args_and_on_an_unreachable_cluster(tmp_path):
    r = subprocess.run([sys.executable, str(REPO / "studies" / "submit.py"), "--address", "http://127.0.0.1:1", "--",
                        "studies/alpha_sweep.py", "--storage", "runs"], capture_output=True, text=True, cwd=REPO, timeout=60)
    assert r.returncode == 2 and "must be absolute" in r.stderr
    port = free_port()  # a port nobody listens on
    r = subprocess.run([sys.executable, str(REPO / "studies" / "submit.py"), "--address", f"http://127.0.0.1:{port}",
                        "--env", "SECRET_FOR_TEST", "--", "studies/alpha_sweep.py", "--storage", str(tmp_path),
                        "--tracking-uri", "http://127.0.0.1:1"], capture_output=True, text=True, cwd=REPO, timeout=120,
                       env={**__import__("os").environ, "SECRET_FOR_TEST": "do-not-print-me"})
    assert r.returncode == 2 and f"cannot submit to http://127.0.0.1:{port}" in r.stderr
    assert "do-not-print-me" not in r.stdout + r.stderr


class FakeClient:
    """Stands in for ray.job_submission.JobSubmissionClient: records the submission, replays logs."""

    submitted: dict = {}
    final = "SUCCEEDED"

    def __init__(self, address: str) -> None:
        self.address = address

    def submit_job(self, **kw) -> str:
        FakeClient.submitted = kw
        return "raysubmit_fake123"

    async def tail_job_logs(self, job_id: str):
        for chunk in ("study line 1\n", "study line 2\n"):
            yield chunk

    def get_job_status(self, job_id: str) -> str:
        return FakeClient.final

    def get_job_info(self, job_id: str):
        return type("Info", (), {"message": "Job entrypoint command failed with exit code 2"})()


@pytest.mark.parametrize("final,code", [("SUCCEEDED", 0), ("FAILED", 2), ("STOPPED", 130)])
def test_wait_streams_logs_and_exits_with_the_job_status(final, code, monkeypatch, capsys):
    import ray.job_submission

    monkeypatch.chdir(REPO)
    monkeypatch.setattr(ray.job_submission, "JobSubmissionClient", FakeClient)
    monkeypatch.setenv("MY_TOKEN", "very-secret-value")
    FakeClient.final = final
    assert submit.main(["--wait", "--env", "MY_TOKEN"] + GOOD) == code
    out = capsys.readouterr().out
    assert "submitted job raysubmit_fake123: python studies/alpha_sweep.py" in out
    assert "ray job logs --address http://head:8265 --follow raysubmit_fake123" in out
    assert "ray job stop --address http://head:8265 raysubmit_fake123" in out
    assert "study line 1\nstudy line 2\n" in out and f"job raysubmit_fake123: {final}" in out
    assert "very-secret-value" not in out and "MY_TOKEN" in out
    kw = FakeClient.submitted
    assert kw["runtime_env"]["env_vars"]["MY_TOKEN"] == "very-secret-value"
    assert "very-secret-value" not in kw["entrypoint"] and "very-secret-value" not in json.dumps(kw["metadata"])
    assert kw["entrypoint"].endswith("--address auto")


class AgentlessClient(FakeClient):
    """A dashboard that answers while no node's dashboard agent does: Ray's SDK raises this (seen with Ray 2.60 on a
    machine where another Ray held every agent's port 52365)."""

    def submit_job(self, **kw) -> str:
        raise RuntimeError("Request failed with status code 500: No available agent to submit job, please try again "
                           "later..")


def test_no_agent_names_the_agent_port_not_the_dashboard(monkeypatch, capsys):
    import ray.job_submission

    monkeypatch.chdir(REPO)
    monkeypatch.setattr(ray.job_submission, "JobSubmissionClient", AgentlessClient)
    monkeypatch.setattr(submit, "check_study_flags", lambda args: None)
    assert submit.main(GOOD) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: cannot submit to http://head:8265: ") and "No available agent" in err
    assert "--dashboard-agent-listen-port" in err and "another Ray" in err and "local_cluster start" in err
    assert "--dashboard-host" not in err  # the dashboard answered: its host is not the problem
    assert "port 52365 is in use now" not in err  # another machine's: not checked from here


def test_no_agent_on_this_machine_says_whether_the_agent_port_is_taken(monkeypatch):
    """A dashboard on this machine: whether port 52365 is in use here is checked, and said when it is."""
    from adbs_lab.cluster import local_cluster

    error = RuntimeError("Request failed with status code 500: No available agent to submit job, please try again")
    monkeypatch.setattr(local_cluster, "port_taken", lambda port: port == 52365)
    taken = submit.submit_failure("http://127.0.0.1:8266", error)
    assert "another Ray on the same machine holds it; on this machine port 52365 is in use now" in taken
    monkeypatch.setattr(local_cluster, "port_taken", lambda port: False)
    assert "in use now" not in submit.submit_failure("http://localhost:8266", error)


def test_the_jobs_exit_code_is_the_studys():
    """--wait exits with the study's own code (docs/studies.md, "Exit codes"), read from Ray's message for the job."""
    from adbs_lab.driver.outcome import exit_code_of_job

    assert exit_code_of_job("Job entrypoint command failed with exit code 2, last available logs ...", "FAILED") == 2
    assert exit_code_of_job("Job entrypoint command failed with exit code 1", "FAILED") == 1
    assert exit_code_of_job("Job entrypoint command failed with exit code 130", "FAILED") == 130
    assert exit_code_of_job("Job entrypoint command failed with exit code -9", "FAILED") == 1  # killed: a failure
    assert exit_code_of_job("Unexpected error occurred: the node died", "FAILED") == 1
    assert exit_code_of_job(None, "STOPPED") == 130 and exit_code_of_job(None, "SUCCEEDED") == 0


def test_a_study_whose_own_flags_do_not_parse_is_not_sent(monkeypatch, capsys):
    import ray.job_submission

    monkeypatch.chdir(REPO)
    monkeypatch.setattr(ray.job_submission, "JobSubmissionClient", FakeClient)
    FakeClient.submitted = {}
    assert submit.main([*GOOD, "--seeds", "zero"]) == 2
    err = capsys.readouterr().err
    assert "the study's flags do not parse" in err and "--seeds" in err and FakeClient.submitted == {}


def test_a_cluster_on_this_machine_runs_the_job_with_this_python_and_a_remote_one_with_its_own(monkeypatch):
    """The one-machine recipe run with .venv/bin/python: `python` on the PATH of `ray start` may be the system's,
    without torch; a remote cluster keeps `python` unless --python says otherwise."""
    monkeypatch.chdir(REPO)
    for address in ("http://127.0.0.1:8266", "http://localhost:8265"):
        args, _ = checked(["--address", address, *GOOD[2:]])
        assert submit.entrypoint(args)[0] == sys.executable
    assert submit.entrypoint(checked(GOOD)[0])[0] == "python"
    args, _ = checked(["--address", "http://127.0.0.1:8266", "--python", "/opt/py/bin/python", *GOOD[2:]])
    assert submit.entrypoint(args)[0] == "/opt/py/bin/python"


def test_a_config_outside_the_project_is_refused_and_one_inside_travels_with_it(tmp_path, monkeypatch):
    """The job gets only the project folder (its working directory): a --config outside it was sent without a word
    and not found on the cluster; now it is refused (exit 2), and one inside it is named as the job sees it."""
    outside = tmp_path / "mine.yaml"
    outside.write_text("base_epochs: 2\n")
    monkeypatch.chdir(tmp_path)
    with pytest.raises(submit.SubmitError, match=r"is outside the project .*copy the file into the project"):
        checked(GOOD + ["--config", "mine.yaml"])
    inside = REPO / "deploy" / "ray-cluster-gpu.yaml"  # any file of the project stands in for a config here
    args, _ = checked(GOOD + [f"--config={inside}"])
    assert submit.entrypoint(args)[-3] == "--config=deploy/ray-cluster-gpu.yaml"
    assert args.shipped == [f"--config {inside} travels with the project as deploy/ray-cluster-gpu.yaml"]
    with pytest.raises(submit.SubmitError, match="no such file"):
        checked(GOOD + ["--config", "nope.yaml"])


@pytest.mark.parametrize("flag", ["--conf", "--stor", "--track"])
def test_an_abbreviated_study_flag_is_not_sent(flag, tmp_path, monkeypatch, capsys):
    """submit.py checks --config, --storage and --tracking-uri by their names; argparse would also take `--conf`
    for --config, so `--conf /outside.yaml` (or a relative `--stor`) passed every check and reached the cluster.
    The study's parser takes whole flag names only, so the study's flags do not parse and nothing is sent."""
    import ray.job_submission

    outside = tmp_path / "mine.yaml"
    outside.write_text("base_epochs: 2\n")
    monkeypatch.chdir(REPO)
    monkeypatch.setattr(ray.job_submission, "JobSubmissionClient", FakeClient)
    FakeClient.submitted = {}
    value = {"--conf": str(outside), "--stor": "runs", "--track": "sqlite:///m.db"}[flag]
    assert submit.main([*GOOD, flag, value]) == 2
    err = capsys.readouterr().err
    assert "the study's flags do not parse" in err and flag in err and FakeClient.submitted == {}, err
