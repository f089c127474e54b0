"""Shared fixtures: one Ray instance per test session, a temporary MLflow SQLite store and storage."""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

# Explicit, so test order and ~/.ray state cannot matter (Ray >= 2.59 turns token auth on for local clusters).
os.environ["RAY_AUTH_MODE"] = "disabled"
os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
os.environ.pop("MLFLOW_TRACKING_URI", None)
# Credentials for the local S3-compatible server of the `s3` fixture (moto accepts any). Set before
# Ray starts, so Ray's workers have them too; every test URL names the local endpoint, never AWS.
os.environ.setdefault("AWS_ACCESS_KEY_ID", "testing")
os.environ.setdefault("AWS_SECRET_ACCESS_KEY", "testing")
os.environ.setdefault("AWS_DEFAULT_REGION", "us-east-1")
os.environ.setdefault("AWS_EC2_METADATA_DISABLED", "true")
# File digests of the base-session cache key (adbs/digests.py) stay in each process: tests never write the
# user's ~/.cache memo (tests/adbs/test_cache_key_inputs.py points it at a temporary file where it tests it).
os.environ.setdefault("ADBS_DIGEST_MEMO", "")
# The embedded benchmark's images, generated once per test run and loaded by every later process (studies start
# hundreds of trial processes; each would spend seconds generating them). Set here, in the process that starts the
# xdist workers, so the workers, the studies and their Ray workers all share one folder; removed at the end.
_SYNTHETIC_CACHE = None if os.environ.get("ADBS_SYNTHETIC_CACHE") else tempfile.mkdtemp(prefix="adbs-test-synthetic-")
if _SYNTHETIC_CACHE:
    os.environ["ADBS_SYNTHETIC_CACHE"] = _SYNTHETIC_CACHE


def pytest_unconfigure(config):
    if _SYNTHETIC_CACHE:
        shutil.rmtree(_SYNTHETIC_CACHE, ignore_errors=True)


ON_DEMAND = ("outage",)
"""Markers of tests that run only when `-m` names them (pyproject.toml says what each marks)."""


def pytest_collection_modifyitems(config, items):
    """The end-to-end tier first, the fast tier after it: with `pytest -n 2` the minutes-long tests start early
    and the seconds-long ones fill in at the end, so no worker idles while another finishes a long test.
    Stable, so each module keeps its own order (and every xdist worker collects the same order).

    Tests marked `outage` (a database server that stays away: minutes each) run only when `-m` names them
    (`pytest -m outage`); the test command and both tiers leave them out, to keep CI within its time. (`scale`,
    bench/scale.py --quick, is in the slow tier; `-m scale` selects it alone.)"""
    named = config.getoption("markexpr") or ""
    on_demand = [mark for mark in ON_DEMAND if mark not in named]
    if on_demand:
        kept = [item for item in items if not any(item.get_closest_marker(mark) for mark in on_demand)]
        if len(kept) < len(items):
            config.hook.pytest_deselected(items=[item for item in items if item not in kept])
            items[:] = kept
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)


@pytest.fixture(scope="session")
def ray_address() -> str:
    """Address of the one local Ray cluster of this test session (studies connect with --address)."""
    import ray

    if ray.is_initialized():  # an earlier test of this process connected in it (Ray starts itself on first use)
        ray.shutdown()
    # address="local": always a new instance of its own, even where another Ray cluster runs on this machine
    ctx = ray.init(address="local", num_cpus=2, include_dashboard=False, object_store_memory=100 * 1024 * 1024,
                   logging_level="WARNING")
    yield ctx.address_info["address"]
    ray.shutdown()


@pytest.fixture(scope="session")
def empty_mlflow_db(tmp_path_factory) -> Path:
    """An empty MLflow SQLite store, its tables created once per test session: MLflow's schema migrations take
    seconds, and most end-to-end tests start from an empty store. A store a study creates itself is still
    tested (tests/repo/test_doc_commands.py, tests/studies/test_paper.py and others pass their own new --tracking-uri)."""
    from mlflow.tracking import MlflowClient

    db = tmp_path_factory.mktemp("mlflow-template") / "mlflow.db"
    MlflowClient(f"sqlite:///{db}").search_experiments()
    return db


@pytest.fixture
def tracking_uri(tmp_path: Path, empty_mlflow_db: Path) -> str:
    """A real, empty MLflow store of this test's own (a copy of `empty_mlflow_db`)."""
    (tmp_path / "mlflow").mkdir()
    shutil.copy(empty_mlflow_db, tmp_path / "mlflow" / "mlflow.db")
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


class S3Server:
    """A local S3-compatible server (moto's, from pip): a real HTTP S3 API that pyarrow's S3 client,
    and so Ray Tune and adbs.cache, talk to exactly as to AWS or MinIO."""

    def __init__(self, port: int):
        self.port = port
        self.endpoint = f"127.0.0.1:{port}"

    def url(self, bucket: str, prefix: str = "") -> str:
        """s3://bucket/prefix with the endpoint in the query string (pyarrow's from_uri reads it)."""
        return f"s3://{bucket}/{prefix}".rstrip("/") + f"?endpoint_override={self.endpoint}&scheme=http"

    def fs(self):
        import pyarrow.fs as pafs

        return pafs.S3FileSystem(endpoint_override=self.endpoint, scheme="http", allow_bucket_creation=True,
                                 allow_bucket_deletion=True)

    def bucket(self, name: str) -> str:
        """Create bucket `name` (empty) and return its name."""
        import pyarrow.fs as pafs

        fs = self.fs()
        if fs.get_file_info(name).type != pafs.FileType.NotFound:
            fs.delete_dir_contents(name, missing_dir_ok=True)
        else:
            fs.create_dir(name)
        return name

    def keys(self, bucket: str) -> list[str]:
        """Every object key in `bucket`."""
        import pyarrow.fs as pafs

        infos = self.fs().get_file_info(pafs.FileSelector(bucket, recursive=True, allow_not_found=True))
        return sorted(i.path[len(bucket) + 1:] for i in infos if i.type == pafs.FileType.File)


@pytest.fixture(scope="session")
def s3():
    """A moto S3 server on a free local port for this test session (stopped at the end)."""
    import subprocess

    from testing.procs import free_port, stop, wait_listening

    pytest.importorskip("moto.server", reason="moto[server] is a test dependency (pip install -e '.[test]')")
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_listening(port, proc, 60, "the moto S3 server")
        yield S3Server(port)
    finally:
        stop(proc, 10)


@pytest.fixture(scope="session")
def postgres():
    """A real PostgreSQL server of this test session (testing/postgres.py): its own data folder, port and socket
    folder (each xdist worker starts its own), run as an unprivileged user; stopped at the end. Skips with the
    reason where PostgreSQL or its Python driver is missing."""
    from testing.postgres import PgServer, missing

    why = missing()
    if why:
        pytest.skip(why)
    server = PgServer()
    try:
        yield server.start()
    finally:
        server.stop()
