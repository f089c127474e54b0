"""Ray, Optuna and MLflow are pinned to the minor release the tests ran on (pyproject.toml): their upgrades change
what a study does without an error (Optuna 5.0 turned on multivariate TPE and the constant liar and changed the
default importance evaluator; Ray 2.59 and 2.61 turn token authentication on; MLflow 3.x moved its default stores),
so the range says what was tested and the installed release must lie in it. What a study takes of each tool is
checked in the fast tier besides: tests/adbs_lab/search/test_sampler_settings.py (the sampler),
tests/adbs_lab/results/test_importance.py (the importance evaluators), tests/adbs_lab/stores/test_tracking_store_defaults.py
(MLflow's stores); token authentication by tests/e2e/test_token_auth_cluster.py (slow)."""

from __future__ import annotations

import tomllib
from importlib.metadata import version
from pathlib import Path

import pytest
import yaml
from packaging.requirements import Requirement
from packaging.version import Version

REPO = Path(__file__).resolve().parents[2]
PINNED = ("ray", "optuna", "mlflow")


def _requirements() -> dict[str, Requirement]:
    deps = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["dependencies"]
    return {r.name: r for r in map(Requirement, deps)}


@pytest.mark.parametrize("name", PINNED)
def test_the_tool_is_pinned_to_one_minor_release_and_the_installed_one_is_in_it(name):
    spec = _requirements()[name].specifier
    lower = [Version(s.version) for s in spec if s.operator == ">="]
    upper = [Version(s.version) for s in spec if s.operator == "<"]
    assert len(lower) == len(upper) == 1, f"{name}: {spec} (a tested range is >=X.Y,<X.Y+1)"
    assert upper[0] == Version(f"{lower[0].major}.{lower[0].minor + 1}"), f"{name}: {spec} spans more than one minor release"
    installed = version(name)
    assert spec.contains(installed), f"{name} {installed} is outside the tested range {spec} of pyproject.toml"


def test_the_cluster_launcher_installs_the_tested_releases():
    """deploy/ray-cluster-gpu.yaml installs the dependencies itself (Ray comes with its image, rayproject/ray:X.Y.Z):
    the same ranges as pyproject.toml, and the image's Ray inside Ray's range."""
    cfg = yaml.safe_load((REPO / "deploy" / "ray-cluster-gpu.yaml").read_text())
    pinned = _requirements()
    said = {r.name: r for cmd in cfg["setup_commands"] for w in cmd.split()[2:]
            for r in [Requirement(w.strip('"'))]}
    for name in ("optuna", "mlflow"):
        assert said[name].specifier == pinned[name].specifier, (name, said[name], pinned[name])
    image = cfg["docker"]["image"].split(":", 1)[1].split("-", 1)[0]
    assert pinned["ray"].specifier.contains(image), (image, pinned["ray"])
