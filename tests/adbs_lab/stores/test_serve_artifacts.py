"""The MLflow server's artifact folder (adbs_lab/stores/serve.py) is where a study of that store puts its artifacts
and says so in the command it prints to open the UI (adbs_lab/stores/tracking_store.py: ui_command): one owner,
adbs_lab/stores/paths.py: artifact_root. The server's --artifacts-destination is what `mlflow server` gets."""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest

from adbs_lab.stores import paths, serve, tracking_store


def _served(argv: list[str]) -> str:
    cmd = serve.command(serve.parser().parse_args(argv))
    return cmd[cmd.index("--artifacts-destination") + 1]


def _study_folder(uri: str, storage: str | None) -> str:
    """Where the study's experiment keeps its artifacts: the artifact location its tracker gives MLflow."""
    from urllib.parse import urlsplit
    from urllib.request import url2pathname

    return url2pathname(urlsplit(paths.artifact_root(uri, storage)).path)


@pytest.mark.parametrize("uri, storage", [
    (paths.DEFAULT_TRACKING_URI, None),
    ("sqlite:////tmp/elsewhere/mlflow.db", None),
    ("sqlite:////tmp/my runs/mlflow.db", "/tmp/my runs/runs"),
    ("postgresql://u@db.example/mlflow", "/tmp/shared/runs"),
    ("postgresql://u@db.example/mlflow", "s3://bucket/runs"),
])
def test_the_printed_ui_command_serves_the_studys_artifacts(uri, storage):
    """A study printed `serve.py --backend-store-uri sqlite:////x/mlflow.db --artifacts-destination /x/artifacts`,
    and serve.py with the store alone served <repo>/mlflow/artifacts: two folders for one store. The command printed
    (and serve.py given the store alone, where the study's folder follows from it) serves the study's folder."""
    printed = shlex.split(tracking_store.ui_command(uri, storage))
    assert printed[1].endswith("mlflow/serve.py")
    assert _served(printed[2:]) == _study_folder(uri, storage)
    if storage is None or "://" in storage:  # the folder follows from the store alone
        assert _served(["--backend-store-uri", uri]) == _study_folder(uri, storage)


def test_a_given_destination_wins(tmp_path):
    assert _served(["--backend-store-uri", "sqlite:////tmp/elsewhere/mlflow.db", "--artifacts-destination",
                    str(tmp_path)]) == str(tmp_path)
    assert _served(["--artifacts-destination", "s3://bucket/mlflow"]) == "s3://bucket/mlflow"
    assert Path(_served([])) == paths.DEFAULT_ARTIFACT_ROOT
