"""The local cloud runs the real KubeRay operator: a cluster that holds the fleet's KubeRay objects (applied
here server-side, as the cluster stack's pulumi-kubernetes does) gets an operator process from its agent,
and KubeRay itself makes the Ray pods, the head service and the RayCluster's status; kwok runs the pods.
The KubeRay gate's check (npa_pulumi/kube/kuberay.py) judges the result. Removing the operator Deployment
stops the process; `local-cloud reset` leaves none."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from npa_pulumi.kube import kuberay
from npa_pulumi.kube.client import KubeClient, object_path
from npa_pulumi.kube.kubeconfig import dump
from npa_pulumi.runtime.pins import kuberay_operator_image
from npa_pulumi.runtime.toolchain import find_kuberay_operator, kuberay_crd_files
from npa_pulumi.simulator.cloud import LocalCloud
from npa_pulumi.simulator.kube import controlplane
from npa_pulumi.simulator.kube import kuberay as operator
from npa_pulumi.simulator.simulator import LocalSimulator
from npa_pulumi.spec import constants as c

pytestmark = pytest.mark.integration

TEMPLATE = kuberay.RayTemplate(
    worker_replicas=2,
    worker_cpus=2,
    worker_memory_gib=4,
    ray_version=c.RAY_VERSION,
    image=c.RAY_IMAGE,
    operator_image=kuberay_operator_image(),
    cpu_node_group="ray-ng-cpu",
)
FLEET = {kuberay.MANAGED_BY: kuberay.FLEET_MANAGER}
MANAGER = "test-fleet"


def _objects() -> list[dict[str, Any]]:
    crds = [json.loads(p.read_text()) for p in kuberay_crd_files()]
    meta = {"name": kuberay.OPERATOR_NAME, "namespace": kuberay.OPERATOR_NAMESPACE, "labels": FLEET}
    selector = {"app.kubernetes.io/name": kuberay.OPERATOR_NAME}
    return [
        *crds,
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": kuberay.OPERATOR_NAMESPACE}},
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": meta},
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": meta,
            "spec": {
                "replicas": 1,
                "selector": {"matchLabels": selector},
                "template": {"metadata": {"labels": selector}, "spec": kuberay.operator_pod_spec(TEMPLATE)},
            },
        },
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": kuberay.RAY_NAMESPACE}},
        {
            "apiVersion": "ray.io/v1",
            "kind": "RayCluster",
            "metadata": {
                "name": kuberay.RAYCLUSTER_NAME,
                "namespace": kuberay.RAY_NAMESPACE,
                "labels": FLEET,
            },
            "spec": kuberay.raycluster_spec(TEMPLATE),
        },
    ]


def _apply(client: KubeClient, obj: dict[str, Any]) -> None:
    deadline = time.monotonic() + 30
    while True:
        try:
            client.apply(object_path(obj), obj, MANAGER)
            return
        except Exception:
            if time.monotonic() > deadline:  # e.g. a RayCluster before its CRD is established
                raise
            time.sleep(1)


class Cluster:
    def __init__(self, sim: LocalSimulator, directory: Path, cluster_id: str, kubeconfig: str) -> None:
        self.sim, self.directory, self.id, self.kubeconfig = sim, directory, cluster_id, kubeconfig

    def client(self) -> KubeClient:
        return KubeClient.from_kubeconfig(self.kubeconfig, timeout_s=10)

    def operator_pid(self) -> int | None:
        return operator.running_pid(controlplane.cluster_dir(self.directory, self.id))


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    assert find_kuberay_operator() is not None, "make tools builds the KubeRay operator"
    directory = tmp_path_factory.mktemp("kuberay") / "local-cloud"
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("NPA_LOCAL_CLOUD_KUBERNETES_API", "1")
        sim = LocalSimulator(directory)
        sim.initialise()
        project = sim.list_projects(sim.principal()["tenant_id"])[0]["id"]
        subnet = sim.list_subnets(project)[0]["id"]
        created = sim.provision("cluster", 60, project_id=project, name="ray", subnet_id=subnet)
        sim.provision(
            "node_group",
            60,
            cluster_id=created["id"],
            name="ray-ng-cpu",
            node_count=1,
            platform="cpu-d3",
            preset="16vcpu-64gb",
        )
        access = LocalCloud(directory).cluster_access(created["id"])
        found = Cluster(sim, directory, created["id"], dump(access.kubeconfig("ray")))
        try:
            yield found
        finally:
            pid = found.operator_pid()
            sim.reset()
            if pid is not None:
                deadline = time.monotonic() + 20
                while operator.running_pid(controlplane.cluster_dir(directory, created["id"])) == pid:
                    assert time.monotonic() < deadline, "the operator outlived local-cloud reset"
                    time.sleep(0.2)


def _wait_ready(cluster: Cluster, timeout_s: float = 120) -> kuberay.RaySnapshot:
    config = kuberay.RayGateConfig(
        worker_replicas=2, image=c.RAY_IMAGE, cpu_node_group="ray-ng-cpu", timeout_s=0
    )
    deadline = time.monotonic() + timeout_s
    while True:
        snap = kuberay.check_ray(cluster.client(), config)
        if snap.ready:
            return snap
        assert time.monotonic() < deadline, snap.to_json()
        time.sleep(1)


def test_the_agent_runs_kuberay_and_kuberay_runs_the_ray_cluster(cluster: Cluster) -> None:
    client = cluster.client()
    assert cluster.operator_pid() is None  # nothing installed, no operator
    for obj in _objects():
        _apply(client, obj)
    deadline = time.monotonic() + 30
    while cluster.operator_pid() is None:
        assert time.monotonic() < deadline, "the agent never started the operator"
        time.sleep(0.5)
    snap = _wait_ready(cluster)
    assert snap.conditions["RayClusterProvisioned"] == "True" and snap.head_ready
    assert sorted(p["role"] for p in snap.pods) == ["head", "worker", "worker"]
    services = client.list(f"/api/v1/namespaces/{kuberay.RAY_NAMESPACE}/services")
    assert any(s["metadata"]["name"].startswith(kuberay.RAYCLUSTER_NAME) for s in services)

    # a worker deleted out of band: KubeRay makes another
    worker = next(p["name"] for p in snap.pods if p["role"] == "worker")
    client.delete(f"/api/v1/namespaces/{kuberay.RAY_NAMESPACE}/pods/{worker}")
    deadline = time.monotonic() + 90
    while True:
        snap = kuberay.check_ray(
            client,
            kuberay.RayGateConfig(
                worker_replicas=2, image=c.RAY_IMAGE, cpu_node_group="ray-ng-cpu", timeout_s=0
            ),
        )
        if snap.ready and worker not in {p["name"] for p in snap.pods}:
            break
        assert time.monotonic() < deadline, snap.to_json()
        time.sleep(1)

    # the CPU node NotReady: the Ray pods lose readiness (the node controller), KubeRay reports it; back
    # once the node is
    node = client.list("/api/v1/nodes")[0]["metadata"]["name"]
    cluster.sim.set_node_fault(cluster.id, node, "not_ready", True)
    config = kuberay.RayGateConfig(
        worker_replicas=2, image=c.RAY_IMAGE, cpu_node_group="ray-ng-cpu", timeout_s=0
    )
    deadline = time.monotonic() + 150
    while kuberay.check_ray(client, config).head_ready:
        assert time.monotonic() < deadline, "the head stayed ready on a NotReady node"
        time.sleep(2)
    snap = kuberay.check_ray(client, config)
    assert not snap.ready and snap.conditions["HeadPodReady"] != "True", snap.to_json()
    cluster.sim.set_node_fault(cluster.id, node, "not_ready", False)
    _wait_ready(cluster, 120)

    # the operator's Deployment removed: the process stops
    pid = cluster.operator_pid()
    client.delete(operator.DEPLOYMENT_PATH)
    deadline = time.monotonic() + 30
    while cluster.operator_pid() is not None:
        assert time.monotonic() < deadline, "the operator kept running without its Deployment"
        time.sleep(0.5)
    assert pid is not None
