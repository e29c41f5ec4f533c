"""Each fault the local cloud can inject into a cluster's Kubernetes API makes the matching GPU health
check fail, and only that one: the gate (npa_pulumi/kube/gpu_health/) run directly against a real API
server with kwok nodes, with short deadlines."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from npa_pulumi.cloud.errors import PermissionDenied
from npa_pulumi.kube.client import KubeClient
from npa_pulumi.kube.gpu_health.checks import snapshot
from npa_pulumi.kube.gpu_health.config import Evidence, GateConfig
from npa_pulumi.kube.gpu_health.gate import run_gate
from npa_pulumi.kube.kubeconfig import dump
from npa_pulumi.simulator.cloud import LocalCloud
from npa_pulumi.simulator.simulator import LocalSimulator

pytestmark = pytest.mark.integration


class Cluster:
    def __init__(self, sim: LocalSimulator, cluster_id: str, kubeconfig: str) -> None:
        self.sim, self.id, self.kubeconfig = sim, cluster_id, kubeconfig

    def client(self, timeout_s: float = 5.0) -> KubeClient:
        return KubeClient.from_kubeconfig(self.kubeconfig, timeout_s=timeout_s)

    def config(self, **overrides: Any) -> GateConfig:
        settings: dict[str, Any] = {
            "expected_nodes": 3,
            "expected_gpu_nodes": 2,
            "gpus_per_node": 8,
            "gpu_platform": "gpu-h200-sxm",
            "driver_mode": "managed-image",
            "nvswitch": True,
            "stabilization_s": 0.0,
            "timeout_s": 6.0,
            "cuda_smoke": False,
            "smoke_image": "cuda",
            "smoke_namespace": "default",
            "poll_s": 0.5,
        }
        return GateConfig(**{**settings, **overrides})

    def gate(self, **overrides: Any) -> Evidence:
        return run_gate(lambda t: self.client(t), self.config(**overrides))

    def gpu_nodes(self) -> list[str]:
        return sorted(snapshot(self.client(), self.config(), 0).gpu_nodes)

    def fault(self, node: str, kind: str, active: bool = True) -> None:
        """Inject (or clear) a node fault; an injected one is waited for until the API shows it (the
        cluster's agent and kwok carry it out within a few seconds), as a real fault is there first."""
        self.sim.set_node_fault(self.id, node, kind, active)
        if active and kind == "pod_failure":
            deadline = time.monotonic() + 20
            path = "/apis/kwok.x-k8s.io/v1alpha1/stages/npa-pod-failure"
            while True:
                expressions = self.client().get(path)["spec"]["selector"]["matchExpressions"]
                if any(node in (e.get("values") or []) for e in expressions):
                    break
                assert time.monotonic() < deadline, f"the pod-failure stage never named {node}"
                time.sleep(0.3)
            time.sleep(1.0)  # kwok picks up the changed Stage from its watch
        if active and kind in ("not_ready", "gpu_missing", "gpu_error"):
            deadline = time.monotonic() + 20
            while not snapshot(self.client(), self.config(), 0).errors:
                assert time.monotonic() < deadline, f"{kind} on {node} never showed in the API"
                time.sleep(0.3)

    def wait_healthy(self, timeout_s: float = 30.0, **overrides: Any) -> None:
        """Until one snapshot (what the nodes and the driver stack show, no probe pods) is clean."""
        config = self.config(**overrides)
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if not snapshot(self.client(), config, 0).errors:
                return
            time.sleep(0.5)
        raise AssertionError(f"still unhealthy: {snapshot(self.client(), config, 0).errors}")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    directory = tmp_path_factory.mktemp("gate-faults") / "local-cloud"
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("NPA_LOCAL_CLOUD_KUBERNETES_API", "1")
        sim = LocalSimulator(directory)
        sim.initialise()
        project = sim.list_projects(sim.principal()["tenant_id"])[0]["id"]
        subnet = sim.list_subnets(project)[0]["id"]
        created = sim.provision("cluster", 60, project_id=project, name="faults", subnet_id=subnet)
        sim.set_cluster_addons(created["id"], {"gpu_driver": "managed-image"})
        sim.provision(
            "node_group",
            60,
            cluster_id=created["id"],
            name="cpu",
            node_count=1,
            platform="cpu-d3",
            preset="4vcpu-16gb",
        )
        sim.provision(
            "node_group",
            60,
            cluster_id=created["id"],
            name="gpu",
            node_count=2,
            platform="gpu-h200-sxm",
            preset="8gpu-128vcpu-1600gb",
        )
        access = LocalCloud(directory).cluster_access(created["id"])
        found = Cluster(sim, created["id"], dump(access.kubeconfig("faults")))
        found.wait_healthy()
        try:
            yield found
        finally:
            sim.reset()


def _only_about(evidence: Evidence, node: str, words: str) -> None:
    assert not evidence.passed
    assert evidence.last_errors, evidence
    assert all(node in e and words in e for e in evidence.last_errors), evidence.last_errors


def test_a_healthy_cluster_passes_with_a_cuda_smoke_on_every_gpu_node(cluster: Cluster) -> None:
    evidence = cluster.gate(stabilization_s=1.0, cuda_smoke=True, timeout_s=30.0)
    assert evidence.passed, evidence
    assert sorted(n for n, v in evidence.nodes.items() if "smoke" in v) == cluster.gpu_nodes()


def test_a_not_ready_node(cluster: Cluster) -> None:
    node = cluster.gpu_nodes()[0]
    cluster.fault(node, "not_ready")
    try:
        _only_about(cluster.gate(), node, "not Ready")
    finally:
        cluster.fault(node, "not_ready", active=False)
        cluster.wait_healthy()


def test_a_gpu_missing_from_capacity(cluster: Cluster) -> None:
    node = cluster.gpu_nodes()[1]
    cluster.fault(node, "gpu_missing")
    try:
        evidence = cluster.gate()
        assert not evidence.passed
        assert any(node in e and "capacity 7, allocatable 7" in e for e in evidence.last_errors)
        assert all(node in e or "15 GPU(s) allocatable" in e for e in evidence.last_errors), (
            evidence.last_errors
        )
    finally:
        cluster.fault(node, "gpu_missing", active=False)
        cluster.wait_healthy()


def test_a_nebius_gpu_error_condition(cluster: Cluster) -> None:
    node = cluster.gpu_nodes()[0]
    cluster.fault(node, "gpu_error")
    try:
        _only_about(cluster.gate(), node, "NebiusGPUError")
    finally:
        cluster.fault(node, "gpu_error", active=False)
        cluster.wait_healthy()


def test_a_reboot_during_stabilization_fails_at_once(cluster: Cluster) -> None:
    node = cluster.gpu_nodes()[1]
    timer = threading.Timer(2.0, lambda: cluster.fault(node, "reboot"))
    timer.start()
    evidence = cluster.gate(stabilization_s=20.0, timeout_s=40.0)
    timer.join()
    # The gate returns this reason the poll it sees the new boot id, still in stabilization: not a
    # "not healthy ... before the timeout" at its deadline (no wall-clock bound: load cannot break it).
    assert not evidence.passed and "boot ids changed" in evidence.reason and node in evidence.reason
    assert evidence.phase == "stabilization" and "before the timeout" not in evidence.reason


def test_a_smoke_that_fails_on_one_node(cluster: Cluster) -> None:
    bad, good = cluster.gpu_nodes()
    cluster.fault(bad, "pod_failure")
    try:
        evidence = cluster.gate(cuda_smoke=True, timeout_s=30.0)
        assert not evidence.passed and evidence.phase == "smoke" and bad in evidence.reason
        assert evidence.nodes[bad]["smoke"]["exit_code"] == 1 and evidence.nodes[good]["smoke"]["passed"]
        assert all(evidence.nodes[n]["smoke"]["cleaned_up"] for n in (bad, good))
    finally:
        cluster.fault(bad, "pod_failure", active=False)


def test_an_unreachable_api(cluster: Cluster) -> None:
    cluster.sim.set_api_fault(cluster.id, "unreachable")
    try:
        evidence = cluster.gate(timeout_s=4.0)
        assert not evidence.passed
        assert evidence.last_errors and all("cannot list nodes" in e for e in evidence.last_errors)
    finally:
        cluster.sim.set_api_fault(cluster.id, "unreachable", active=False)
        cluster.wait_healthy()


def test_credentials_rejected(cluster: Cluster) -> None:
    cluster.sim.add_fault("get_cluster_credentials", "permission-denied", count=1)
    with pytest.raises(PermissionDenied):
        LocalCloud(cluster.sim.directory).cluster_access(cluster.id)
    assert (
        LocalCloud(cluster.sim.directory).cluster_access(cluster.id).server.startswith("https://127.0.0.1:")
    )


def test_mig_readiness_needs_the_exact_layout(cluster: Cluster) -> None:
    """Without MIG the GPU nodes fail MIG readiness on exactly the MIG checks; once the cluster's driver
    stack runs the mixed / all-balanced layout, two exact snapshots in a row, nvidia-smi's listing on every
    node and a smoke on a MIG device pass; a GPU whose MIG mode was reset fails only the nvidia-smi check,
    on only its node."""
    mig = {
        "mig_resources": {"nvidia.com/gpu": 0, "nvidia.com/mig-1g.24gb": 2, "nvidia.com/mig-2g.48gb": 1},
        "mig_strategy": "mixed",
        "mig_config": "all-balanced",
    }
    whole = cluster.gate(**mig, timeout_s=3.0)
    assert not whole.passed
    assert any("nvidia.com/mig.config.state" in e for e in whole.last_errors)
    assert any("capacity nvidia.com/gpu=8, 0 expected" in e for e in whole.last_errors)
    gpu_nodes = cluster.gpu_nodes()
    assert all(any(n in e for n in gpu_nodes) for e in whole.last_errors), whole.last_errors

    cluster.sim.set_cluster_addons(
        cluster.id, {"gpu_driver": "managed-image", "mig": {"strategy": "mixed", "config": "all-balanced"}}
    )
    try:
        cluster.wait_healthy(timeout_s=20.0, **mig)  # the agent reshapes the nodes within a few ticks
        evidence = cluster.gate(**mig, cuda_smoke=True, timeout_s=30.0)
        assert evidence.passed, evidence
        assert evidence.snapshots >= 2  # two consecutive exact snapshots
        assert all(evidence.nodes[n]["smoke"]["passed"] for n in gpu_nodes)
        for node in gpu_nodes:  # nvidia-smi on every GPU node listed the layout on all 8 GPUs
            hardware = evidence.nodes[node]["mig_hardware"]
            assert hardware["errors"] == [] and hardware["gpus"] == 8 and len(hardware["mig_uuids"]) == 24
            assert hardware["cleaned_up"] is True

        # ---- a GPU whose MIG mode was reset: the node still advertises the layout, nvidia-smi does not
        bad = gpu_nodes[0]
        cluster.fault(bad, "mig_disabled")
        try:
            broken = cluster.gate(**mig, cuda_smoke=True, timeout_s=30.0)
        finally:
            cluster.fault(bad, "mig_disabled", active=False)
        assert not broken.passed and broken.phase == "mig-hardware", broken
        _only_about(broken, bad, "GPU 0 ")
        assert broken.nodes[gpu_nodes[1]]["mig_hardware"]["errors"] == []
        assert "smoke" not in broken.nodes[bad]  # no MIG smoke on hardware that disagrees
        probes = cluster.client().list("/api/v1/pods", "npa.nebius.com/smoke=mig-hardware")
        assert probes == []
    finally:
        cluster.sim.set_cluster_addons(cluster.id, {"gpu_driver": "managed-image"})
        cluster.wait_healthy()


def test_graphics_readiness_needs_a_gpu_that_renders(cluster: Cluster) -> None:
    """H200s have no display engines: the GLX/EGL/Vulkan smoke finds no Vulkan device on them (RTX nodes
    render; tests/integration/test_kubernetes_clusters.py deploys one)."""
    evidence = cluster.gate(
        cuda_smoke=True, graphics_smoke=True, graphics_image="cuda-graphics", timeout_s=40.0
    )
    assert not evidence.passed and evidence.phase == "graphics"
    for node in cluster.gpu_nodes():
        smoke = evidence.nodes[node]["smoke"]
        assert smoke["passed"]  # CUDA itself works
        missing = smoke["graphics"]["missing"]
        assert "a Vulkan physical device (GPU<n>:)" in missing and "NPA_GLX_LOADED" not in missing
        assert smoke["graphics"]["cleaned_up"] is True


PINS = {
    "operator": "v26.3.3",
    "driver": "580.173.02",
    "device_plugin": "v0.19.3",
    "gfd": "v0.19.3",
    "mig_manager": "v0.14.2",
    "toolkit": "v1.19.1",
}


def test_mig_readiness_needs_the_pinned_operator_release(cluster: Cluster) -> None:
    """MIG readiness also reads the GPU operator: a recipe that installed another MIG Manager than the pin
    fails on exactly the ClusterPolicy's version and that DaemonSet's image; the pinned release passes."""
    mig = {
        "mig_resources": {"nvidia.com/gpu": 0, "nvidia.com/mig-1g.24gb": 2, "nvidia.com/mig-2g.48gb": 1},
        "mig_strategy": "mixed",
        "mig_config": "all-balanced",
        "mig_versions": PINS,
        "driver_mode": "operator",
    }
    layout = {"strategy": "mixed", "config": "all-balanced"}
    stale = {**{k: v for k, v in PINS.items() if k != "toolkit"}, "mig_manager": "v0.14.1"}
    cluster.sim.set_cluster_addons(
        cluster.id, {"gpu_driver": "operator", "mig": {**layout, "versions": stale}}
    )
    try:
        deadline = time.monotonic() + 40
        while True:  # until the operator's pods run and only the version is wrong
            evidence = cluster.gate(**mig, timeout_s=2.0)
            if evidence.last_errors and all(
                "igManager" in e or "mig-manager" in e for e in evidence.last_errors
            ):
                break
            assert time.monotonic() < deadline, evidence.last_errors
            time.sleep(1.0)
        assert not evidence.passed
        assert (
            "ClusterPolicy cluster-policy: migManager.version 'v0.14.1', v0.14.2 pinned"
            in evidence.last_errors
        )
        assert any(
            e.startswith("DaemonSet nvidia-mig-manager: image ") and "not the pinned v0.14.2" in e
            for e in evidence.last_errors
        ), evidence.last_errors

        pinned = {k: v for k, v in PINS.items() if k != "toolkit"}
        cluster.sim.set_cluster_addons(
            cluster.id, {"gpu_driver": "operator", "mig": {**layout, "versions": pinned}}
        )
        cluster.wait_healthy(timeout_s=40.0, **mig)
        evidence = cluster.gate(**mig, timeout_s=30.0)
        assert evidence.passed and evidence.snapshots >= 2, evidence
    finally:
        cluster.sim.set_cluster_addons(cluster.id, {"gpu_driver": "managed-image"})
        cluster.wait_healthy()


def test_a_stale_device_plugin_is_repaired_by_restarting_it(cluster: Cluster) -> None:
    """The managed image's driver stack has a device plugin and no GPU feature discovery: a node whose
    plugin holds stale resources (none allocatable) fails the gate on exactly its resources; the repair
    (kube/gpu_health/repair.py) refuses while a GPU pod runs, then rolls the plugin out, and the gate
    passes again."""
    from npa_pulumi.kube.gpu_health.repair import Repairer

    node = cluster.gpu_nodes()[0]
    cluster.sim.set_node_fault(cluster.id, node, "stale_device_plugin")
    try:
        deadline = time.monotonic() + 20
        while not snapshot(cluster.client(), cluster.config(), 0).errors:
            assert time.monotonic() < deadline, "the stale resources never showed in the API"
            time.sleep(0.3)
        errors = snapshot(cluster.client(), cluster.config(), 0).errors
        assert errors == [
            f"{node}: nvidia.com/gpu capacity 8, allocatable 0; 8 expected",
            "8 GPU(s) allocatable, 16 requested",
        ]
        plugin = "/apis/apps/v1/namespaces/nvidia-device-plugin/daemonsets/nvidia-device-plugin-daemonset"
        generation = cluster.client().get(plugin)["metadata"]["generation"]

        workload = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "trainer", "namespace": "default"},
            "spec": {
                "nodeName": cluster.gpu_nodes()[1],
                "tolerations": [{"operator": "Exists"}],
                "containers": [
                    {"name": "t", "image": "train", "resources": {"limits": {"nvidia.com/gpu": "1"}}}
                ],
            },
        }
        created = cluster.client().request("POST", "/api/v1/namespaces/default/pods", workload)
        journal: list[dict[str, Any]] = []
        refused = Repairer(cluster.config(), journal.append).attempt(
            cluster.client(), errors, time.monotonic() + 60
        )
        assert refused is not None and refused.workloads == ["default/trainer"] and not refused.changed
        assert cluster.client().get(plugin)["metadata"]["generation"] == generation  # nothing restarted
        cluster.client().request(
            "DELETE",
            "/api/v1/namespaces/default/pods/trainer",
            {
                "kind": "DeleteOptions",
                "apiVersion": "v1",
                "gracePeriodSeconds": 0,
                "preconditions": {"uid": created["metadata"]["uid"]},
            },
        )
        deadline = time.monotonic() + 20
        while cluster.client().get_or_none("/api/v1/namespaces/default/pods/trainer") is not None:
            assert time.monotonic() < deadline
            time.sleep(0.3)

        journal.clear()
        outcome = Repairer(cluster.config(), journal.append).attempt(
            cluster.client(), errors, time.monotonic() + 60
        )
        assert outcome is not None and outcome.error is None and outcome.changed, journal
        assert [(s["step"], s.get("daemonset")) for s in journal] == [
            ("restart", "nvidia-device-plugin-daemonset"),
            ("rolled-out", "nvidia-device-plugin-daemonset"),
            ("done", None),
        ]
        cluster.wait_healthy(timeout_s=30.0)
        assert cluster.gate().passed
    finally:
        cluster.sim.set_node_fault(cluster.id, node, "stale_device_plugin", active=False)
        cluster.wait_healthy()
