"""Checks before a study runs its trials on a Ray cluster, so a multi-node run cannot lose results.

Since Ray 2.7 Tune syncs nothing to the head node: every trial writes its results and
checkpoints straight to `storage_path` from the node it runs on, and the driver reads them
back from there. On a cluster of more than one node, therefore:

- `--storage` must be one place every node sees: a shared filesystem path (NFS, Lustre, EFS,
  Filestore, ...), proved by a marker file the driver writes and a task on every node reads
  (and answers beside it), or an object-store URL Ray Tune supports (s3://, gs://, ...), proved
  by a task on every node writing, reading back and deleting an object there (credentials and
  endpoint are per node: an instance role, or variables exported where `ray start` ran);
- `--tracking-uri` must be a tracking server (http(s)://, or a database such as postgresql://):
  a SQLite file or file store on the head node is lost with the cluster and unreadable from
  anywhere else;
- the dataset (`data_root`, `index_list`, `pretrained`) must be readable on every node, checked
  by `adbs.data.check_data` in a task on every node.

`preflight` runs them all; the study calls it after `ray.init` and before any trial starts.
Every check raises ClusterCheckError with what to change. Probe tasks take 0 CPUs and are
pinned to one node each (NodeAffinitySchedulingStrategy, soft=False).
"""

from __future__ import annotations

import os
import socket
import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from adbs.objstore import OBJECT_STORE_SCHEMES
from adbs.redaction import redact
from adbs.objstore import is_url as is_object_store

__all__ = ["SERVER_SCHEMES", "LOCAL_TRACKING_SCHEMES", "MARKER_DIR", "PROBE_TIMEOUT_S", "ClusterCheckError", "Node",
           "nodes", "scheme", "check_storage", "check_tracking", "check_data_on_nodes", "check_fits", "preflight"]

# Tracking URIs that are a server or a database every node can reach.
SERVER_SCHEMES = ("http", "https", "databricks", "postgresql", "mysql", "mssql")
LOCAL_TRACKING_SCHEMES = ("sqlite", "file", "")
MARKER_DIR = ".adbs-cluster-check"
PROBE_TIMEOUT_S = 120.0


class ClusterCheckError(RuntimeError):
    """The study cannot run safely on this cluster; the message says what to change."""


@dataclass(frozen=True)
class Node:
    node_id: str
    ip: str
    hostname: str
    resources: dict[str, float]
    is_head: bool

    def __str__(self) -> str:
        role = "head" if self.is_head else "worker"
        return f"{self.hostname} ({self.ip}, {role} node {self.node_id[:8]})"


def nodes() -> list[Node]:
    """The alive nodes of the connected Ray cluster (ray.init must have run)."""
    import ray

    out = []
    for n in ray.nodes():
        if not n.get("Alive"):
            continue
        res = dict(n.get("Resources") or {})
        out.append(Node(node_id=n["NodeID"], ip=n.get("NodeManagerAddress", "?"),
                        hostname=n.get("NodeManagerHostname", "?"), resources=res,
                        is_head="node:__internal_head__" in res))
    return sorted(out, key=lambda x: (not x.is_head, x.node_id))


def scheme(uri: str) -> str:
    """URI scheme in lower case; '' for a plain path (also Windows-less 'C:' style never matters here)."""
    head, sep, _ = uri.partition("://")
    if sep:
        return head.lower()
    if uri.startswith("sqlite:") or uri.startswith("file:"):
        return uri.split(":", 1)[0].lower()
    return ""


# -- probes that run on one node each ------------------------------------------------------


def _on_every_node(fn, node_list: list[Node], *args: Any) -> dict[str, Any]:
    """Run `fn(*args)` once on each node (0 CPUs, pinned); {node_id: result or Exception}."""
    import ray
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    remote = ray.remote(num_cpus=0, max_retries=0)(fn)
    refs = {n.node_id: remote.options(scheduling_strategy=NodeAffinitySchedulingStrategy(n.node_id, soft=False))
            .remote(*args) for n in node_list}
    _, not_ready = ray.wait(list(refs.values()), num_returns=len(refs), timeout=PROBE_TIMEOUT_S)
    out: dict[str, Any] = {}
    for node_id, ref in refs.items():
        if ref in not_ready:
            ray.cancel(ref, force=True)
            out[node_id] = TimeoutError(f"no answer within {PROBE_TIMEOUT_S:.0f} s (node busy or unreachable)")
            continue
        try:
            out[node_id] = ray.get(ref)
        except Exception as e:  # noqa: BLE001 - reported per node
            out[node_id] = e
    return out


def _probe_marker(marker: str, token: str) -> dict[str, Any]:
    """On a node: read the driver's marker, then write an answer beside it for the driver to read."""
    import ray

    node_id = ray.get_runtime_context().get_node_id()
    path = Path(marker)
    try:
        seen = path.read_text()
    except OSError as e:
        return {"ok": False, "why": f"cannot read {path}: {e.strerror or e}", "host": socket.gethostname()}
    if seen != token:
        return {"ok": False, "why": f"{path} holds other content (a different folder of the same name?)",
                "host": socket.gethostname()}
    try:
        (path.parent / f"{path.name}.{node_id}").write_text(token)
    except OSError as e:
        return {"ok": False, "why": f"can read but not write in {path.parent}: {e.strerror or e}",
                "host": socket.gethostname()}
    return {"ok": True, "host": socket.gethostname()}


def _problems(answers: dict[str, Any], node_list: list[Node]) -> list[str]:
    """One line per node whose probe raised or answered {"ok": False, "why": ...}."""
    bad = []
    for n in node_list:
        a = answers[n.node_id]
        if isinstance(a, Exception):
            bad.append(f"  {n}: {_probe_failed(a)}")
        elif not a["ok"]:
            bad.append(f"  {n}: {a['why']}")
    return bad


def _probe_failed(e: Exception) -> str:
    return f"probe failed: {str(e).strip().splitlines()[-1][:300] if str(e).strip() else type(e).__name__}"


def _probe_object_store(url: str) -> dict[str, Any]:
    """On a node: write, read back and delete an object under `url` with this node's credentials."""
    from adbs.objstore import ObjectStoreError, check_writable

    try:
        check_writable(url)
    except ObjectStoreError as e:
        return {"ok": False, "why": str(e), "host": socket.gethostname()}
    return {"ok": True, "host": socket.gethostname()}


def _probe_data(configs: list[dict[str, Any]]) -> list[str]:
    """On a node: adbs.data.check_data for each distinct dataset location, plus pretrained weights."""
    from adbs.config import Config
    from adbs.data import check_data

    problems = []
    for d in configs:
        cfg = Config(**d)
        try:
            check_data(cfg)
        except Exception as e:  # noqa: BLE001 - every failure is reported
            problems.append(f"{cfg.dataset} at data_root={cfg.data_root}: {e}")
        if cfg.pretrained and not os.path.isfile(cfg.pretrained):
            problems.append(f"pretrained weights {cfg.pretrained} not found")
    return problems


# -- checks ----------------------------------------------------------------------------------


def check_storage(storage: str, node_list: list[Node]) -> str:
    """Storage every node sees; returns how it was verified. Single node: nothing to check."""
    if is_object_store(storage):
        if len(node_list) <= 1:
            return f"{redact(storage)}: object store, written from this node"
        bad = _problems(_on_every_node(_probe_object_store, node_list, storage), node_list)
        if bad:
            raise ClusterCheckError(
                f"--storage {redact(storage)} cannot be written from {len(bad)} of the {len(node_list)} nodes of this "
                "Ray cluster (trials write results, checkpoints and base sessions there from their own node):\n"
                + "\n".join(bad) + "\n"
                "Give every node credentials for the bucket: an instance role / workload identity, or the variables "
                "(AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_ENDPOINT_URL, GOOGLE_APPLICATION_CREDENTIALS, ...) "
                "exported where `ray start` runs on each node, or submit with studies/submit.py --env NAME so the job "
                "carries them")
        return (f"{redact(storage)}: object store, an object written, read back and deleted from all "
                f"{len(node_list)} nodes")
    if scheme(storage) not in ("", "file"):
        raise ClusterCheckError(
            f"--storage {redact(storage)!r}: unsupported scheme {scheme(storage)!r}; use a shared filesystem path "
            f"or an object-store URL ({', '.join(s + '://' for s in OBJECT_STORE_SCHEMES)})")
    if len(node_list) <= 1:
        return f"{storage}: single node, local storage is fine"
    root = Path(storage.removeprefix("file://")).expanduser().resolve()
    folder = root / MARKER_DIR
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise ClusterCheckError(f"--storage {root}: cannot create it on the driver's node: {e}") from None
    token = uuid.uuid4().hex
    marker = folder / f"{token}.marker"
    marker.write_text(token)
    try:
        answers = _on_every_node(_probe_marker, node_list, str(marker), token)
        bad = _problems(answers, node_list)
        bad += [f"  {n}: wrote its answer, but the driver does not see it (a node-local folder of the same name)"
                for n in node_list if isinstance(answers[n.node_id], dict) and answers[n.node_id]["ok"]
                and not (folder / f"{marker.name}.{n.node_id}").exists()]
        if bad:
            raise ClusterCheckError(
                f"--storage {root} is not shared by all {len(node_list)} nodes of this Ray cluster:\n"
                + "\n".join(bad) + "\n"
                "Since Ray 2.7 Tune syncs nothing to the head node: each trial writes results and checkpoints to "
                "--storage from its own node, so node-local storage would lose them. Pass --storage on a shared "
                "filesystem mounted at the same path on every node (NFS, Lustre, EFS, Filestore), or an object-store "
                "URL such as s3://bucket/adbs-runs")
    finally:
        for f in folder.glob(f"{token}.marker*"):
            f.unlink(missing_ok=True)
        try:
            folder.rmdir()  # only when empty: another study's check may be running
        except OSError:
            pass
    return f"{root}: shared, a marker written by the driver was read and answered from all {len(node_list)} nodes"


def check_tracking(uri: str, node_list: list[Node]) -> str:
    """A tracking server when the cluster has more than one node."""
    s = scheme(uri)
    if len(node_list) <= 1 or s in SERVER_SCHEMES:
        return uri if s in SERVER_SCHEMES else f"{uri} (single node)"
    what = {"sqlite": "a SQLite file", "file": "a file store", "": "a file store"}.get(s, f"a {s}:// store")
    raise ClusterCheckError(
        f"--tracking-uri {redact(uri)!r} is {what} on the driver's node, but this Ray cluster has {len(node_list)} nodes. "
        "Such a store lives on one node's disk: it is lost with the cluster (cloud and Kubernetes head nodes are "
        "ephemeral) and nobody else can read it. Start an MLflow server on shared storage, e.g.\n"
        "  mlflow server --backend-store-uri postgresql://USER@DBHOST/mlflow --artifacts-destination "
        "s3://bucket/mlflow --host 0.0.0.0 --port 5000\n"
        "and pass --tracking-uri http://MLFLOW_HOST:5000 (credentials as MLFLOW_TRACKING_USERNAME and "
        "MLFLOW_TRACKING_PASSWORD or "
        "MLFLOW_TRACKING_TOKEN environment variables, never in the URI)")


def _needs_data(cfg) -> bool:
    return cfg.dataset != "synthetic" or bool(cfg.pretrained)


def check_data_on_nodes(configs: Iterable, node_list: list[Node]) -> str:
    """adbs.data.check_data on a worker of every node, for each distinct dataset location."""
    locs: dict[tuple, dict] = {}
    for cfg in configs:
        if _needs_data(cfg):
            key = (cfg.dataset, cfg.data_root, cfg.index_list, cfg.pretrained, cfg.ways, cfg.shots, cfg.sessions)
            locs.setdefault(key, cfg.to_dict())
    if not locs:
        return "synthetic data only, generated on each node"
    answers = _on_every_node(_probe_data, node_list, list(locs.values()))
    bad = []
    for n in node_list:
        a = answers[n.node_id]
        if isinstance(a, Exception):
            bad.append(f"  {n}: {_probe_failed(a)}")
        else:
            bad += [f"  {n}: {p}" for p in a]
    if bad:
        roots = sorted({str(d.get("data_root")) for d in locs.values()})
        failed = sum(1 for n in node_list if isinstance(answers[n.node_id], Exception) or answers[n.node_id])
        raise ClusterCheckError(
            f"the dataset is not readable on {failed} of the {len(node_list)} nodes of this Ray cluster "
            "(trials run on any node):\n"
            + "\n".join(bad) + "\n"
            f"Put --data-root ({', '.join(roots)}) on a shared filesystem mounted at the same path on every node, "
            "or copy it to that path on each node")
    return f"{len(locs)} dataset location(s) readable on all {len(node_list)} nodes"


def check_fits(cpus_per_trial: float, gpus_per_trial: float, node_list: list[Node]) -> None:
    """A trial runs on one node: some node must hold its CPUs and GPUs, else it stays PENDING forever."""
    fits = [n for n in node_list if n.resources.get("CPU", 0) >= cpus_per_trial
            and n.resources.get("GPU", 0) >= gpus_per_trial]
    if not fits:
        have = "; ".join(f"{n.hostname}: {n.resources.get('CPU', 0):g} CPU, {n.resources.get('GPU', 0):g} GPU"
                         for n in node_list)
        raise ClusterCheckError(
            f"no node fits one trial ({cpus_per_trial:g} CPU, {gpus_per_trial:g} GPU); nodes: {have}. "
            "Lower --cpus-per-trial/--gpus-per-trial (a trial never spans nodes)")


def preflight(*, storage: str, tracking_uri: str, configs: Iterable = (), cpus_per_trial: float = 1.0,
              gpus_per_trial: float = 0.0, verbose: bool = True) -> list[Node]:
    """All cluster checks, after ray.init and before any trial; raises ClusterCheckError."""
    node_list = nodes()
    check_fits(cpus_per_trial, gpus_per_trial, node_list)
    lines = [check_storage(storage, node_list), check_tracking(tracking_uri, node_list)]
    if len(node_list) > 1 or any(_needs_data(c) for c in configs):
        lines.append(check_data_on_nodes(configs, node_list))
    if verbose and len(node_list) > 1:
        print(f"Ray cluster: {len(node_list)} nodes: " + ", ".join(str(n) for n in node_list))
        print("  storage: " + lines[0] + "\n  tracking: " + lines[1] + ("\n  data: " + lines[2] if len(lines) > 2 else ""),
              flush=True)
    return node_list
