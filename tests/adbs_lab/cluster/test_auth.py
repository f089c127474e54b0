"""Ray's token authentication as the project's commands set it up (adbs_lab/cluster/auth.py): RAY_AUTH_MODE=token
when a token is given and the user set no mode (a Ray 2.60 client sends the token only then), disabled otherwise
(the local Ray of a study never depends on ~/.ray), the user's own setting kept; a refusal for a missing or wrong
token recognised; `local_cluster start` starts its nodes so. tests/e2e/test_token_auth_cluster.py runs a cluster."""

from __future__ import annotations

import os
import subprocess
import sys
from types import SimpleNamespace

import pytest

from adbs_lab.cluster import auth, local_cluster


def _no_ray(monkeypatch) -> None:
    """As in a process that has not imported Ray: set_default would make a Ray imported by other tests of this process
    read its config again (token mode), which outlives this test's environment (and a local Ray started later
    would then write a token to ~/.ray)."""
    monkeypatch.delitem(sys.modules, "ray._raylet", raising=False)


@pytest.mark.parametrize("given, mode", [({}, "disabled"), ({"RAY_AUTH_TOKEN": "abc"}, "token"),
                                         ({"RAY_AUTH_TOKEN_PATH": "/run/secrets/ray"}, "token"),
                                         ({"RAY_AUTH_TOKEN": ""}, "disabled")])
def test_a_given_token_turns_token_mode_on_unless_the_user_set_a_mode(monkeypatch, given, mode):
    _no_ray(monkeypatch)
    for var in ("RAY_AUTH_MODE", *auth.TOKEN_VARS):
        monkeypatch.delenv(var, raising=False)
    for k, v in given.items():
        monkeypatch.setenv(k, v)
    assert auth.default_mode() == mode
    auth.set_default()
    assert os.environ["RAY_AUTH_MODE"] == mode
    monkeypatch.setenv("RAY_AUTH_MODE", "disabled")  # the user's word wins
    auth.set_default()
    assert os.environ["RAY_AUTH_MODE"] == "disabled"


def test_rays_refusals_for_a_token_are_told_apart():
    class AuthenticationError(Exception):  # ray.exceptions' class, by name: no Ray import here
        pass

    assert auth.refused(AuthenticationError("Token authentication is enabled but the token is invalid"))
    assert auth.refused(RuntimeError("Token authentication is enabled but no authentication token was found."))
    assert not auth.refused(ConnectionError("Failed to connect to Ray cluster at 10.0.0.1:6379"))
    assert "RAY_AUTH_TOKEN=<the cluster's token>" in auth.HOW and "RAY_AUTH_MODE=token" in auth.HOW


def test_local_cluster_start_gives_its_nodes_the_token_mode(monkeypatch, tmp_path):
    _no_ray(monkeypatch)
    seen = []
    monkeypatch.delenv("RAY_AUTH_MODE", raising=False)
    monkeypatch.setenv("RAY_AUTH_TOKEN", "abc")
    monkeypatch.setattr(subprocess, "run",
                        lambda argv, **kw: seen.append(os.environ.get("RAY_AUTH_MODE")) or SimpleNamespace(returncode=0))
    local_cluster.start(tmp_path / "h", tmp_path / "w", echo=False)
    assert seen == ["token", "token"]  # both `ray start` commands, head and worker
