"""deploy/: the cluster-launcher YAML against Ray's own schema, the KubeRay RayJob's required fields,
the Slurm script through bash -n, shellcheck (when installed) and a run with stand-in srun/ray/python."""

from __future__ import annotations

import copy
import os
import shutil
import stat
import subprocess
import time
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
DEPLOY = REPO / "deploy"
STUDIES = sorted(p.name for p in (REPO / "studies").glob("*.py") if p.name != "submit.py")


# -- Ray cluster launcher -----------------------------------------------------------------------


def launcher() -> dict:
    return yaml.safe_load((DEPLOY / "ray-cluster-gpu.yaml").read_text())


def test_cluster_launcher_yaml_passes_rays_schema():
    from ray.autoscaler._private.util import prepare_config, validate_config

    cfg = launcher()
    validate_config(prepare_config(copy.deepcopy(cfg)))  # what `ray up` runs first
    bad = copy.deepcopy(cfg)
    bad["available_node_types"]["head"]["typo_field"] = 1
    with pytest.raises(Exception, match="typo_field"):
        validate_config(prepare_config(bad))


def test_cluster_launcher_has_a_gpu_cluster_with_shared_storage():
    cfg = launcher()
    for key in ("cluster_name", "provider", "available_node_types", "head_node_type", "setup_commands",
                "head_start_ray_commands", "worker_start_ray_commands"):
        assert cfg.get(key), key
    types = cfg["available_node_types"]
    assert cfg["head_node_type"] in types
    gpu = [t for t in types.values() if t.get("resources", {}).get("GPU", 0) >= 1]
    assert gpu and gpu[0]["max_workers"] >= 1
    assert any("ray start --head" in c and "--dashboard-host=0.0.0.0" in c for c in cfg["head_start_ray_commands"])
    assert any("ray start --address=$RAY_HEAD_IP:6379" in c for c in cfg["worker_start_ray_commands"])
    assert any("/mnt/shared" in c for c in cfg["initialization_commands"])  # the shared --storage
    deps = " ".join(cfg["setup_commands"])
    assert "torch" in deps and "optuna" in deps and "mlflow" in deps and "ray" not in deps.replace("ray_", "")
    assert cfg["docker"]["image"].startswith("rayproject/ray:2.60")


# -- KubeRay RayJob -----------------------------------------------------------------------------


def rayjob() -> tuple[dict, list[dict]]:
    docs = [d for d in yaml.safe_load_all((DEPLOY / "kuberay-rayjob.yaml").read_text()) if d]
    jobs = [d for d in docs if d.get("kind") == "RayJob"]
    assert len(jobs) == 1
    return jobs[0], docs


def test_rayjob_required_fields():
    job, docs = rayjob()
    assert job["apiVersion"] == "ray.io/v1" and job["metadata"]["name"]
    spec = job["spec"]
    assert spec["entrypoint"].startswith("python /app/studies/")
    cluster = spec["rayClusterSpec"]
    assert cluster["rayVersion"] == "2.60.0"
    head = cluster["headGroupSpec"]
    assert "rayStartParams" in head and head["template"]["spec"]["containers"][0]["image"]
    workers = cluster["workerGroupSpecs"]
    assert workers and all(w["groupName"] and "rayStartParams" in w and w["template"]["spec"]["containers"] for w in workers)
    assert any(w["template"]["spec"]["containers"][0]["resources"]["limits"].get("nvidia.com/gpu") for w in workers)
    # Shared storage: the RWX claim defined beside it, mounted on head and workers, passed as --storage.
    claims = {d["metadata"]["name"]: d for d in docs if d["kind"] == "PersistentVolumeClaim"}
    pods = [head["template"]["spec"]] + [w["template"]["spec"] for w in workers]
    for pod in pods:
        vols = {v["name"]: v["persistentVolumeClaim"]["claimName"] for v in pod["volumes"]}
        mounts = {m["name"]: m["mountPath"] for m in pod["containers"][0]["volumeMounts"]}
        assert vols["shared"] in claims and mounts["shared"] == "/mnt/shared"
    assert all("ReadWriteMany" in c["spec"]["accessModes"] for c in claims.values())
    assert "--storage /mnt/shared/" in spec["entrypoint"] and "--tracking-uri http" in spec["entrypoint"]


def test_rayjob_entrypoint_is_a_valid_study_command():
    job, _ = rayjob()
    words = job["spec"]["entrypoint"].split()
    assert words[1].removeprefix("/app/studies/") in STUDIES
    # Secrets come from a Kubernetes Secret, never inline.
    text = (DEPLOY / "kuberay-rayjob.yaml").read_text()
    for env in job["spec"]["rayClusterSpec"]["headGroupSpec"]["template"]["spec"]["containers"][0]["env"]:
        if "TOKEN" in env["name"] or "PASSWORD" in env["name"]:
            assert "secretKeyRef" in env["valueFrom"] and "value" not in env
    assert "MLFLOW_TRACKING_TOKEN=..." in text  # the comment shows how to create the Secret


def test_dockerfile_installs_the_project():
    text = (DEPLOY / "Dockerfile").read_text()
    assert "FROM rayproject/ray:2.60.0" in text and "pip install" in text and "WORKDIR /app" in text


# -- Slurm ---------------------------------------------------------------------------------------

SBATCH = DEPLOY / "slurm-study.sbatch"


def test_slurm_script_syntax_and_shellcheck():
    subprocess.run(["bash", "-n", str(SBATCH)], check=True)
    if shutil.which("shellcheck") is None:
        pytest.skip("shellcheck not installed (apt-get install -y shellcheck)")
    r = subprocess.run(["shellcheck", str(SBATCH)], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout


def _stub(path: Path, body: str) -> None:
    path.write_text("#!/bin/bash\n" + body)
    path.chmod(path.stat().st_mode | stat.S_IEXEC)


def test_slurm_script_starts_head_then_workers_and_runs_the_study(tmp_path):
    """Stand-ins for scontrol, srun, ray and python record what the script runs on a 3-node allocation."""
    bin_, log = tmp_path / "bin", tmp_path / "calls.log"
    bin_.mkdir()
    _stub(bin_ / "scontrol", 'printf "nodeA\\nnodeB\\nnodeC\\n"\n')
    # srun --nodes=1 --ntasks=1 -w NODE CMD...: log the node, run CMD with NODE exported
    _stub(bin_ / "srun", 'while [ "$1" != "-w" ]; do shift; done; node=$2; shift 2\n'
                         'if [ "$1" = hostname ]; then echo "10.1.0.1 fe80::1"; exit 0; fi\n'
                         'NODE=$node "$@"\n')
    _stub(bin_ / "ray", f'echo "ray on $NODE: $*" >> {log}\n')
    _stub(bin_ / "python", f'case "$*" in *secrets*) echo tok123;; *ray.nodes*) echo 3;; '
                           f'*) echo "study: $* token=${{RAY_AUTH_TOKEN:+set}} mode=$RAY_AUTH_MODE" >> {log};; esac\n')
    venv = tmp_path / "venv" / "bin"
    venv.mkdir(parents=True)
    (venv / "activate").write_text(f'export PATH="{bin_}:$PATH"\n')
    env = {"PATH": f"{bin_}:/usr/bin:/bin", "HOME": str(tmp_path), "SLURM_JOB_ID": "77", "SLURM_JOB_NUM_NODES": "3",
           "SLURM_JOB_NODELIST": "node[A-C]", "SLURM_CPUS_PER_TASK": "8", "SLURM_GPUS_PER_TASK": "1",
           "ADBS_DIR": str(REPO), "ADBS_VENV": str(tmp_path / "venv"), "ADBS_STORAGE": "/shared/runs",
           "MLFLOW_TRACKING_URI": "http://mlflow:5000", "SLURM_TMPDIR": str(tmp_path)}
    # `sleep` is real: shorten it.
    _stub(bin_ / "sleep", "exit 0\n")
    r = subprocess.run(["bash", str(SBATCH), "studies/alpha_sweep.py", "--num-samples", "8"], env=env,
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr
    # the workers' srun runs in the background (as under Slurm): give their stand-ins a moment to log
    deadline = time.time() + 30
    while log.read_text().count("--address=10.1.0.1:6379") < 2 and time.time() < deadline:
        time.sleep(0.1)
    calls = log.read_text().splitlines()
    head = [c for c in calls if "--head" in c]
    workers = [c for c in calls if "ray on" in c and "--address=10.1.0.1:6379" in c]
    assert len(head) == 1 and head[0].startswith("ray on nodeA: start --head --node-ip-address=10.1.0.1 --port=6379")
    assert "--num-cpus=8 --num-gpus=1" in head[0] and f"--temp-dir={tmp_path}/ray-77" in head[0]
    assert sorted(c.split(":")[0] for c in workers) == ["ray on nodeB", "ray on nodeC"]
    study = [c for c in calls if c.startswith("study:")]
    assert study == ["study: studies/alpha_sweep.py --address 10.1.0.1:6379 --storage /shared/runs "
                     "--num-samples 8 token=set mode=token"]  # no --gpus-per-trial: the study packs the GPUs
    assert "tok123" not in r.stdout + r.stderr  # the Ray token is never printed
    # Several nodes without a tracking server: refused before Ray starts.
    env.pop("MLFLOW_TRACKING_URI")
    log.unlink()
    r = subprocess.run(["bash", str(SBATCH), "studies/alpha_sweep.py"], env=env, capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "MLFLOW_TRACKING_URI" in r.stderr and not log.exists()


def test_deploy_readme_covers_every_file():
    text = (DEPLOY / "README.md").read_text()
    for name in ("ray-cluster-gpu.yaml", "kuberay-rayjob.yaml", "slurm-study.sbatch", "Dockerfile", "studies/submit.py"):
        assert name in text, name
    assert os.path.exists(DEPLOY / "slurm-study.sbatch")


def test_deploy_examples_pack_gpus_and_keep_results():
    """The GPU examples leave --gpus-per-trial to packing; tear-down never deletes the results volume;
    `ray up` does not wait on its prompt."""
    for name in ("kuberay-rayjob.yaml", "ray-cluster-gpu.yaml", "README.md"):
        text = (DEPLOY / name).read_text()
        assert "--gpus-per-trial 1" not in text.replace("--gpus-per-trial 1 would", ""), name
        assert "kubectl delete -f deploy/kuberay-rayjob.yaml\n" not in text, name
        for line in text.splitlines():
            if "ray up deploy/" in line:
                assert " -y" in line, (name, line)
    rayjob = (DEPLOY / "kuberay-rayjob.yaml").read_text()
    assert "kubectl delete rayjob" in rayjob and "secretRef: {name: adbs-s3}" in rayjob
