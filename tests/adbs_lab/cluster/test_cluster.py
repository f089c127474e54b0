"""adbs_lab.cluster.checks: the multi-node checks, with fake node lists (no cluster) and real probes on the
test session's one-node Ray instance. The two-node run is tests/e2e/test_two_node_cluster.py."""

from __future__ import annotations

import pytest

from adbs.config import Config
from adbs_lab.cluster import checks as cluster
from adbs_lab.cluster.checks import ClusterCheckError, Node


def node(i: int, cpu: float = 2, gpu: float = 0) -> Node:
    return Node(node_id=f"{i:02d}" + "ab" * 27, ip=f"10.0.0.{i}", hostname=f"n{i}",
                resources={"CPU": cpu, "GPU": gpu}, is_head=i == 0)


ONE, TWO = [node(0)], [node(0), node(1)]


@pytest.mark.parametrize("uri,scheme", [("/shared/runs", ""), ("s3://b/x", "s3"), ("GS://b", "gs"),
                                        ("sqlite:////tmp/m.db", "sqlite"), ("file:///tmp/m", "file"),
                                        ("http://h:5000", "http")])
def test_scheme(uri, scheme):
    assert cluster.scheme(uri) == scheme


@pytest.mark.parametrize("uri", ["http://mlflow:5000", "https://mlflow.example.org", "postgresql://u@db/mlflow",
                                 "databricks://profile"])
def test_tracking_server_accepted_on_many_nodes(uri):
    assert cluster.check_tracking(uri, TWO) == uri


@pytest.mark.parametrize("uri,what", [("sqlite:////tmp/mlflow.db", "SQLite file"), ("file:///tmp/mlruns", "file store"),
                                      ("/tmp/mlruns", "file store")])
def test_file_tracking_refused_on_many_nodes_with_a_fix(uri, what):
    with pytest.raises(ClusterCheckError) as e:
        cluster.check_tracking(uri, TWO)
    msg = str(e.value)
    assert what in msg and "2 nodes" in msg and "mlflow server" in msg and "--tracking-uri http://" in msg
    assert "MLFLOW_TRACKING_PASSWORD" in msg  # credentials go in env vars, not in the URI


def test_file_tracking_fine_on_one_node():
    assert "single node" in cluster.check_tracking("sqlite:////tmp/mlflow.db", ONE)


def test_storage_single_node_needs_no_probe(monkeypatch):
    monkeypatch.setattr(cluster, "_on_every_node", lambda *a: pytest.fail("no probe expected"))
    assert "single node" in cluster.check_storage("/tmp/anything", ONE)
    assert "written from this node" in cluster.check_storage("s3://bucket/runs", ONE)
    with pytest.raises(ClusterCheckError, match="unsupported scheme 'ftp'"):
        cluster.check_storage("ftp://host/runs", TWO)


def test_object_store_probed_on_every_node_and_refused_with_the_node_and_fix(monkeypatch):
    seen = []

    def fake(fn, nodes, url):
        seen.append((fn.__name__, url))
        return {nodes[0].node_id: {"ok": True, "host": "n0"},
                nodes[1].node_id: {"ok": False, "host": "n1", "why": "s3://b/runs is not writable from here: "
                                   "AWS Error ACCESS_DENIED"}}

    monkeypatch.setattr(cluster, "_on_every_node", fake)
    with pytest.raises(ClusterCheckError) as e:
        cluster.check_storage("s3://KEY:hunter2@b/runs", TWO)
    msg = str(e.value)
    assert seen == [("_probe_object_store", "s3://KEY:hunter2@b/runs")]
    assert "1 of the 2 nodes" in msg and "worker node 01abab" in msg and "ACCESS_DENIED" in msg
    assert "hunter2" not in msg and "--env" in msg and "AWS_ACCESS_KEY_ID" in msg
    monkeypatch.setattr(cluster, "_on_every_node", lambda fn, nodes, url: {n.node_id: {"ok": True} for n in nodes})
    assert "from all 2 nodes" in cluster.check_storage("s3://b/runs", TWO)


def test_storage_refused_when_a_node_cannot_read_the_marker(monkeypatch, tmp_path):
    def fake(fn, nodes, marker, token):  # node 0 sees the marker and answers; node 1 has a local folder
        from pathlib import Path

        Path(f"{marker}.{nodes[0].node_id}").write_text(token)
        return {nodes[0].node_id: {"ok": True, "host": "n0"},
                nodes[1].node_id: {"ok": False, "why": f"cannot read {marker}: No such file or directory", "host": "n1"}}

    monkeypatch.setattr(cluster, "_on_every_node", fake)
    with pytest.raises(ClusterCheckError) as e:
        cluster.check_storage(str(tmp_path), TWO)
    msg = str(e.value)
    assert "not shared by all 2 nodes" in msg and "n1 (10.0.0.1, worker node 01abab" in msg
    assert "No such file" in msg and "NFS" in msg and "s3://" in msg
    assert not (tmp_path / cluster.MARKER_DIR).exists()  # markers and their folder cleaned up


def test_storage_refused_when_the_driver_cannot_see_a_node_answer(monkeypatch, tmp_path):
    # Every node reads "a" marker and answers, but into its own local folder: the driver sees no answer.
    monkeypatch.setattr(cluster, "_on_every_node", lambda fn, nodes, *a: {n.node_id: {"ok": True, "host": n.hostname}
                                                                           for n in nodes})
    with pytest.raises(ClusterCheckError, match="driver does not see it"):
        cluster.check_storage(str(tmp_path), TWO)


def test_data_check_skips_synthetic(monkeypatch):
    monkeypatch.setattr(cluster, "_on_every_node", lambda *a: pytest.fail("no probe expected"))
    assert "synthetic" in cluster.check_data_on_nodes([Config()], TWO)


def test_data_check_names_the_nodes_that_fail(monkeypatch):
    cfg = Config(dataset="cifar100", data_root="/shared/data")
    monkeypatch.setattr(cluster, "_on_every_node", lambda fn, nodes, cfgs: {
        nodes[0].node_id: [], nodes[1].node_id: ["cifar100 at data_root=/shared/data: does not exist"]})
    with pytest.raises(ClusterCheckError) as e:
        cluster.check_data_on_nodes([cfg, cfg], TWO)
    msg = str(e.value)
    assert "1 of the 2 nodes" in msg and "n1" in msg and "n0 (" not in msg and "--data-root (/shared/data)" in msg


def test_fits_needs_one_node_with_the_whole_trial():
    cluster.check_fits(2, 1, [node(0, cpu=0), node(1, cpu=4, gpu=1)])
    with pytest.raises(ClusterCheckError, match="no node fits one trial"):
        cluster.check_fits(1, 2, [node(0, cpu=4, gpu=1), node(1, cpu=4, gpu=1)])  # 2 GPUs in total, 1 per node


# -- real probes on the test session's one-node Ray instance ---------------------------------


@pytest.mark.slow
def test_probes_run_on_the_real_node(ray_address, tmp_path):
    import ray

    ray.init(address=ray_address, ignore_reinit_error=True)
    nodes = cluster.nodes()
    assert len(nodes) == 1 and nodes[0].is_head
    (tmp_path / "m").write_text("tok")
    # private helpers of adbs_lab/cluster/checks.py, run directly: the probes on a real node, which the public checks hide
    ok = cluster._on_every_node(cluster._probe_marker, nodes, str(tmp_path / "m"), "tok")[nodes[0].node_id]
    assert ok["ok"] and (tmp_path / f"m.{nodes[0].node_id}").read_text() == "tok"
    missing = cluster._on_every_node(cluster._probe_marker, nodes, str(tmp_path / "nope"), "tok")[nodes[0].node_id]
    assert not missing["ok"] and "cannot read" in missing["why"]
    # The storage check with the real probe, pretending the cluster had this node twice.
    assert "read and answered from all 2 nodes" in cluster.check_storage(str(tmp_path / "runs"), nodes * 2)
    assert not (tmp_path / "runs" / cluster.MARKER_DIR).exists()  # markers cleaned up
    cfg = Config(dataset="cifar100", data_root=str(tmp_path / "x")).to_dict()
    bad = cluster._on_every_node(cluster._probe_data, nodes, [cfg])
    assert "cifar100" in bad[nodes[0].node_id][0]
    # One node: file tracking is fine, and nothing is printed.
    assert cluster.preflight(storage=str(tmp_path), tracking_uri="sqlite:////tmp/x.db", configs=[Config()]) == nodes
