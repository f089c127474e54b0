"""Ray's token authentication as this project's commands meet it (docs/clusters.md, "Token authentication"): the
mode they give Ray when the user set none, and what they say when a cluster refuses them for want of its token.

Ray turns token authentication on for a cluster `ray.init()` starts from 2.59 and for every cluster from 2.61. A Ray
2.60 client then needs both RAY_AUTH_MODE=token and the cluster's token: RAY_AUTH_TOKEN, the file RAY_AUTH_TOKEN_PATH
names, or ~/.ray/auth_token (Ray's token-auth docs: that order). Without the mode it is refused even with the token
(the Jobs API: "no authentication token was found ... RAY_AUTH_MODE is currently 'disabled'"; a driver:
"Failed to connect to Ray cluster"), checked on a one-node cluster by tests/e2e/test_token_auth_cluster.py.
"""

from __future__ import annotations

import os
import sys
from typing import Any

from adbs import light

raylet: Any = light.lazy("ray._raylet")  # Ray's cached config (Cython: no stubs); read again only once Ray is loaded

__all__ = ["TOKEN_VARS", "HOW", "default_mode", "set_default", "refused"]

TOKEN_VARS = ("RAY_AUTH_TOKEN", "RAY_AUTH_TOKEN_PATH")
"""The variables that give Ray a token (~/.ray/auth_token is the third place it looks)."""
HOW = ("if that cluster has token authentication on (every Ray cluster from Ray 2.61), give this command its token: "
       "RAY_AUTH_TOKEN=<the cluster's token> (or RAY_AUTH_TOKEN_PATH=<a file holding it>) in its environment, or the "
       "token in ~/.ray/auth_token with RAY_AUTH_MODE=token (docs/clusters.md, \"Token authentication\")")


def default_mode() -> str:
    """RAY_AUTH_MODE for a command whose user set none: `token` when a token is given in the environment (TOKEN_VARS:
    the user means a cluster with authentication), else `disabled`, so that the local Ray a study starts does not
    depend on what ~/.ray holds (Ray 2.59 on turns authentication on for it and writes ~/.ray/auth_token)."""
    return "token" if any(os.environ.get(v) for v in TOKEN_VARS) else "disabled"


def set_default() -> None:
    """RAY_AUTH_MODE set to `default_mode()` unless the user set it. Ray reads the mode into its cached config when
    it is imported; where it was imported already, the config is read again, as Ray itself does when it turns token
    authentication on (ray/_private/authentication/authentication_token_setup.py: _enable_token_auth), else a driver
    that joins a cluster with --address would send no token (a study's script imports Ray before it runs)."""
    if "RAY_AUTH_MODE" in os.environ:
        return
    os.environ["RAY_AUTH_MODE"] = default_mode()
    if "ray._raylet" in sys.modules:
        raylet.Config.initialize("")


def refused(error: BaseException) -> bool:
    """Whether `error` is a Ray client's refusal for a missing or wrong token (ray.exceptions.AuthenticationError, or
    its message passed on)."""
    return type(error).__name__ == "AuthenticationError" or "authentication token" in str(error).lower()
