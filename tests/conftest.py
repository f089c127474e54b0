"""Shared fixtures: one Ray instance per test session, a temporary MLflow SQLite store and storage."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

# Explicit, so test order and ~/.ray state cannot matter (stack-notes: Ray >= 2.59 token auth).
os.environ["RAY_AUTH_MODE"] = "disabled"
os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
os.environ.pop("MLFLOW_TRACKING_URI", None)


@pytest.fixture(scope="session")
def ray_address() -> str:
    """Address of the one local Ray cluster of this test session (studies connect with --address)."""
    import ray

    ctx = ray.init(num_cpus=2, include_dashboard=False, object_store_memory=100 * 1024 * 1024,
                   logging_level="WARNING")
    yield ctx.address_info["address"]
    ray.shutdown()


@pytest.fixture
def tracking_uri(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'mlflow' / 'mlflow.db'}"


@pytest.fixture
def storage(tmp_path: Path) -> Path:
    d = tmp_path / "runs"
    d.mkdir()
    return d


@pytest.fixture
def study_cmd(ray_address: str, storage: Path, tracking_uri: str):
    """argv for `python studies/<name>.py ... --storage TMP --tracking-uri TMP --address RAY`."""

    def make(name: str, *flags: str) -> list[str]:
        return [sys.executable, str(REPO / "studies" / f"{name}.py"), *flags, "--storage", str(storage),
                "--tracking-uri", tracking_uri, "--address", ray_address, "--gpus-per-trial", "0"]

    return make
