"""The repairs `--reconcile` makes (npa_pulumi/kube/gpu_health/repair.py), against a recorded API: which
finding calls for which repair, and the order and preconditions of each — refused with no write while a
GPU workload runs (also when one appears after the cordon), the stale driver pod deleted by UID and only
that pod, the node's prior scheduling state restored, GPU feature discovery rolled out before the device
plugin is touched. The integration tests (test_verify_mig.py, test_kubernetes_clusters.py) run the same
repairs against a local cluster's real API server."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from npa_pulumi.kube.client import KubeError
from npa_pulumi.kube.gpu_health.checks import REVISION_LABEL
from npa_pulumi.kube.gpu_health.config import GateConfig
from npa_pulumi.kube.gpu_health.mig import node_mig_errors
from npa_pulumi.kube.gpu_health.repair import (
    RESTARTED_AT,
    Repairer,
    RepairKind,
    is_resource_error,
    is_stale_taint_error,
)

NS = "gpu-operator"
DRIVER_UID = "uid-driver-ds"
MIG = {"nvidia.com/gpu": 0, "nvidia.com/mig-1g.24gb": 2, "nvidia.com/mig-2g.48gb": 1}


def _config(**overrides: Any) -> GateConfig:
    settings: dict[str, Any] = {
        "expected_nodes": 3,
        "expected_gpu_nodes": 2,
        "gpus_per_node": 1,
        "gpu_platform": "gpu-rtx6000",
        "driver_mode": "operator",
        "nvswitch": False,
        "stabilization_s": 0.0,
        "timeout_s": 60.0,
        "cuda_smoke": False,
        "smoke_image": "cuda",
    }
    return GateConfig(**{**settings, **overrides})


def _node(name: str, unschedulable: bool = False) -> dict[str, Any]:
    return {
        "metadata": {"name": name},
        "spec": {"unschedulable": True} if unschedulable else {},
        "status": {"conditions": [{"type": "Ready", "status": "True"}]},
    }


def _driver_pod(name: str, node: str, digest: str, uid: str) -> dict[str, Any]:
    return {
        "metadata": {
            "name": name,
            "namespace": NS,
            "uid": uid,
            "labels": {REVISION_LABEL: digest},
            "ownerReferences": [{"uid": DRIVER_UID, "kind": "DaemonSet", "name": "nvidia-driver-daemonset"}],
        },
        "spec": {"nodeName": node},
        "status": {"phase": "Running", "containerStatuses": [{"ready": True}]},
    }


def _daemonset(name: str, strategy: str = "RollingUpdate") -> dict[str, Any]:
    return {
        "metadata": {"name": name, "uid": f"uid-{name}", "generation": 1},
        "spec": {"updateStrategy": {"type": strategy}, "template": {"metadata": {}}},
        "status": {
            "observedGeneration": 1,
            "desiredNumberScheduled": 2,
            "updatedNumberScheduled": 2,
            "numberAvailable": 2,
        },
    }


class FakeApi:
    """A recorded API: lists and gets from `objects`, writes appended to `writes`. The DaemonSet
    controller's part is played here: a deleted driver pod is replaced at once on the newest template; a
    patched DaemonSet reports its new generation rolled out on the next read."""

    def __init__(self, pods: list[dict[str, Any]], nodes: list[dict[str, Any]]) -> None:
        self.pods = pods
        self.nodes = {n["metadata"]["name"]: n for n in nodes}
        self.daemonsets = {
            d["metadata"]["name"]: d
            for d in (
                _daemonset("nvidia-driver-daemonset", "OnDelete"),
                _daemonset("gpu-feature-discovery"),
                _daemonset("nvidia-device-plugin-daemonset"),
            )
        }
        self.daemonsets["nvidia-driver-daemonset"]["metadata"]["uid"] = DRIVER_UID
        self.workloads: list[dict[str, Any]] = []
        self.workload_after_cordon: dict[str, Any] | None = None
        self.writes: list[tuple[str, str, Any]] = []
        self.replaced = 0

    # -- reads
    def list(self, path: str, label_selector: str = "") -> list[dict[str, Any]]:
        if path == "/api/v1/pods":
            return [*self.pods, *self.workloads]
        if path == "/api/v1/nodes":
            return list(self.nodes.values())
        if path == f"/api/v1/namespaces/{NS}/pods":
            return list(self.pods)
        if path == f"/apis/apps/v1/namespaces/{NS}/daemonsets":
            return list(self.daemonsets.values())
        if path == f"/apis/apps/v1/namespaces/{NS}/controllerrevisions":
            owner = [{"uid": DRIVER_UID}]
            return [
                {"metadata": {"labels": {REVISION_LABEL: "old"}, "ownerReferences": owner}, "revision": 1},
                {"metadata": {"labels": {REVISION_LABEL: "new"}, "ownerReferences": owner}, "revision": 2},
            ]
        raise AssertionError(f"unexpected list {path}")

    def get(self, path: str) -> dict[str, Any]:
        kind, name = path.rsplit("/", 2)[-2:]
        if kind == "nodes":
            return copy.deepcopy(self.nodes[name])
        if kind == "daemonsets":
            return copy.deepcopy(self.daemonsets[name])
        raise AssertionError(f"unexpected get {path}")

    # -- writes
    def request(self, method: str, path: str, body: Any = None, content_type: str = "") -> dict[str, Any]:
        self.writes.append((method, path, body))
        kind, name = path.rsplit("/", 2)[-2:]
        if method == "PATCH" and kind == "nodes":
            spec = self.nodes[name]["spec"]
            if body["spec"]["unschedulable"]:
                spec["unschedulable"] = True
                if self.workload_after_cordon is not None:
                    self.workloads.append(self.workload_after_cordon)
            else:
                spec.pop("unschedulable", None)
        elif method == "DELETE" and kind == "pods":
            [pod] = [p for p in self.pods if p["metadata"]["name"] == name]
            if body["preconditions"]["uid"] != pod["metadata"]["uid"]:
                raise KubeError("conflict", 409)
            self.pods.remove(pod)
            self.replaced += 1
            node = pod["spec"]["nodeName"]
            self.pods.append(_driver_pod(f"{name}-new", node, "new", f"uid-new-{self.replaced}"))
        elif method == "PATCH" and kind == "daemonsets":
            daemonset = self.daemonsets[name]
            daemonset["metadata"]["generation"] += 1
            daemonset["status"]["observedGeneration"] = daemonset["metadata"]["generation"]
        return {}


def _gpu_pod(name: str) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"containers": [{"resources": {"limits": {"nvidia.com/mig-1g.24gb": "1"}}}]},
        "status": {"phase": "Running"},
    }


def _repairer(journal: list[dict[str, Any]], **overrides: Any) -> Repairer:
    return Repairer(_config(**overrides), journal.append, sleep=lambda _s: None)


STALE_ERRORS = [
    f"driver pod {NS}/drv-a runs an older template (old) than its DaemonSet nvidia-driver-daemonset "
    "(new): an OnDelete update leaves it until the pod is deleted",
]


def _stale_cluster(cordoned: str = "") -> FakeApi:
    pods = [_driver_pod("drv-b", "node-b", "old", "uid-b"), _driver_pod("drv-a", "node-a", "old", "uid-a")]
    return FakeApi(pods, [_node("node-a", cordoned == "node-a"), _node("node-b", cordoned == "node-b")])


def test_the_findings_choose_the_repair() -> None:
    repairer = _repairer([])
    api = FakeApi([], [])
    taint = ["node-a: tainted nvidia.com/gpu=mig-not-ready:NoSchedule"]
    assert repairer.choose(api, taint) == (RepairKind.TAINT, [])  # type: ignore[arg-type]
    resources = ["node-a: capacity nvidia.com/gpu=1, 0 expected"]
    assert repairer.choose(api, resources) == (RepairKind.RESOURCES, [])  # type: ignore[arg-type]
    # anything else among the findings (a label, a node not Ready): no repair, the gate judges them
    assert repairer.choose(api, [*resources, "node-a: not Ready (KubeletNotReady)"]) is None  # type: ignore[arg-type]
    assert repairer.choose(api, [*taint, *resources]) is None  # type: ignore[arg-type]
    assert repairer.choose(api, []) is None  # type: ignore[arg-type]


def test_resource_findings_are_what_the_gate_reports() -> None:
    """The repair reads the gate's own wording: a MIG node advertising a whole GPU (the stale split) is a
    resource finding, a node MIG Manager has not labelled is not."""
    config = _config(mig_resources=MIG, mig_strategy="mixed", mig_config="all-balanced")
    labels = {
        "nvidia.com/mig.strategy": "mixed",
        "nvidia.com/mig.config": "all-balanced",
        "nvidia.com/mig.config.state": "success",
    }
    layout = {"nvidia.com/mig-1g.24gb": "2", "nvidia.com/mig-2g.48gb": "1"}
    stale: dict[str, Any] = {
        "metadata": {"name": "node-a", "labels": labels},
        "spec": {},
        "status": {
            "capacity": {**layout, "nvidia.com/gpu": "1"},
            "allocatable": {**layout, "nvidia.com/gpu": "0"},
        },
    }
    [finding] = node_mig_errors(stale, config)
    assert is_resource_error(finding) and not is_stale_taint_error(finding)
    unlabelled = copy.deepcopy(stale)
    unlabelled["metadata"]["labels"]["nvidia.com/mig.config.state"] = "pending"
    assert not all(is_resource_error(e) for e in node_mig_errors(unlabelled, config))
    assert is_resource_error("node-a: nvidia.com/gpu capacity 1, allocatable 0; 1 expected")
    assert is_resource_error("1 GPU(s) allocatable, 2 requested")


def test_a_gpu_workload_refuses_every_repair_with_nothing_written() -> None:
    for errors in (STALE_ERRORS, ["node-a: capacity nvidia.com/gpu=1, 0 expected"]):
        api = _stale_cluster()
        api.workloads.append(_gpu_pod("trainer"))
        journal: list[dict[str, Any]] = []
        outcome = _repairer(journal).attempt(api, errors, deadline=1e12)  # type: ignore[arg-type]
        assert outcome is not None and outcome.refused and outcome.workloads == ["default/trainer"]
        assert api.writes == [] and not outcome.changed
        assert [s["step"] for s in journal] == ["refused"]


def test_stale_driver_pods_are_replaced_one_worker_at_a_time() -> None:
    api = _stale_cluster()
    journal: list[dict[str, Any]] = []
    repairer = _repairer(journal)
    outcome = repairer.attempt(api, STALE_ERRORS, deadline=1e12)  # type: ignore[arg-type]
    assert outcome is not None and outcome.error is None and outcome.changed and repairer.changed
    steps = [(s["step"], s.get("node")) for s in journal]
    assert steps == [
        ("cordon", "node-a"),
        ("delete", "node-a"),
        ("replaced", "node-a"),
        ("restored", "node-a"),
        ("cordon", "node-b"),
        ("delete", "node-b"),
        ("replaced", "node-b"),
        ("restored", "node-b"),
        ("done", None),
    ]
    deletes = [(path, body["preconditions"]) for method, path, body in api.writes if method == "DELETE"]
    assert deletes == [
        (f"/api/v1/namespaces/{NS}/pods/drv-a", {"uid": "uid-a"}),
        (f"/api/v1/namespaces/{NS}/pods/drv-b", {"uid": "uid-b"}),
    ]
    assert all("unschedulable" not in n["spec"] for n in api.nodes.values())  # both uncordoned again
    # each kind at most once per run
    assert repairer.attempt(api, STALE_ERRORS, deadline=1e12) is None  # type: ignore[arg-type]


def test_a_node_cordoned_before_the_repair_stays_cordoned() -> None:
    api = _stale_cluster(cordoned="node-b")
    journal: list[dict[str, Any]] = []
    _repairer(journal).attempt(api, STALE_ERRORS, deadline=1e12)  # type: ignore[arg-type]
    node_patches = [path for method, path, _ in api.writes if method == "PATCH"]
    assert node_patches == ["/api/v1/nodes/node-a", "/api/v1/nodes/node-a"]  # cordon and uncordon a only
    assert api.nodes["node-b"]["spec"] == {"unschedulable": True}
    assert {"step": "cordon", "node": "node-b", "prior_unschedulable": True}.items() <= journal[4].items()


def test_a_workload_that_starts_after_the_cordon_stops_the_repair_before_any_delete() -> None:
    api = _stale_cluster()
    api.workload_after_cordon = _gpu_pod("late-trainer")
    journal: list[dict[str, Any]] = []
    outcome = _repairer(journal).attempt(api, STALE_ERRORS, deadline=1e12)  # type: ignore[arg-type]
    assert outcome is not None and outcome.workloads == ["default/late-trainer"]
    assert [m for m, _, _ in api.writes] == ["PATCH", "PATCH"]  # the cordon and its undoing, no DELETE
    assert "unschedulable" not in api.nodes["node-a"]["spec"]
    assert [s["step"] for s in journal] == ["cordon", "restored", "refused"]


def test_a_replacement_that_never_gets_ready_fails_and_restores_the_node() -> None:
    api = _stale_cluster()
    original = api.request

    def slow_controller(method: str, path: str, body: Any = None, content_type: str = "") -> dict[str, Any]:
        result = original(method, path, body, content_type)
        if method == "DELETE":
            api.pods[-1]["status"] = {"phase": "Pending"}
        return result

    api.request = slow_controller  # type: ignore[method-assign]
    clock = iter(range(100))
    journal: list[dict[str, Any]] = []
    repairer = Repairer(_config(), journal.append, clock=lambda: float(next(clock)), sleep=lambda _s: None)
    outcome = repairer.attempt(api, STALE_ERRORS, deadline=5.0)  # type: ignore[arg-type]
    assert (
        outcome is not None and outcome.error and "no ready replacement of driver pod drv-a" in outcome.error
    )
    assert [s["step"] for s in journal] == ["cordon", "delete", "restored", "failed"]
    assert "unschedulable" not in api.nodes["node-a"]["spec"]
    assert api.replaced == 1  # node-b's pod was never touched


def test_discovery_is_rolled_out_before_the_device_plugin_is_restarted() -> None:
    api = FakeApi([], [])
    journal: list[dict[str, Any]] = []
    errors = ["node-a: capacity nvidia.com/gpu=1, 0 expected"]
    outcome = _repairer(journal).attempt(api, errors, deadline=1e12)  # type: ignore[arg-type]
    assert outcome is not None and outcome.error is None and outcome.changed
    assert [(s["step"], s.get("daemonset")) for s in journal] == [
        ("restart", "gpu-feature-discovery"),
        ("rolled-out", "gpu-feature-discovery"),
        ("restart", "nvidia-device-plugin-daemonset"),
        ("rolled-out", "nvidia-device-plugin-daemonset"),
        ("done", None),
    ]
    patched = [path.rsplit("/", 1)[1] for method, path, _ in api.writes]
    assert patched == ["gpu-feature-discovery", "nvidia-device-plugin-daemonset"]
    body = api.writes[0][2]
    assert RESTARTED_AT in body["spec"]["template"]["metadata"]["annotations"]


def test_an_on_delete_discovery_daemonset_is_not_restarted() -> None:
    api = FakeApi([], [])
    api.daemonsets["gpu-feature-discovery"]["spec"]["updateStrategy"] = {"type": "OnDelete"}
    outcome = _repairer([]).attempt(api, ["node-a: capacity nvidia.com/gpu=1, 0 expected"], 1e12)  # type: ignore[arg-type]
    assert outcome is not None and outcome.error and "OnDelete" in outcome.error
    assert api.writes == []


@pytest.mark.parametrize("driver_mode", ["managed-image"])
def test_managed_image_has_no_discovery_to_restart(driver_mode: str) -> None:
    """The managed image's driver stack has a device plugin and no GPU feature discovery: only the plugin
    is restarted."""

    class ManagedApi(FakeApi):
        def list(self, path: str, label_selector: str = "") -> list[dict[str, Any]]:
            if path == "/apis/apps/v1/namespaces/nvidia-device-plugin/daemonsets":
                return [self.daemonsets["nvidia-device-plugin-daemonset"]]
            return super().list(path, label_selector)

    api = ManagedApi([], [])
    journal: list[dict[str, Any]] = []
    errors = [
        "node-a: nvidia.com/gpu capacity 8, allocatable 0; 8 expected",
        "8 GPU(s) allocatable, 16 requested",
    ]
    outcome = _repairer(journal, driver_mode=driver_mode).attempt(api, errors, 1e12)  # type: ignore[arg-type]
    assert outcome is not None and outcome.error is None
    assert [s.get("daemonset") for s in journal if s["step"] == "restart"] == [
        "nvidia-device-plugin-daemonset"
    ]
    assert [p for _, p, _ in api.writes] == [
        "/apis/apps/v1/namespaces/nvidia-device-plugin/daemonsets/nvidia-device-plugin-daemonset"
    ]


def test_a_rolling_update_daemonsets_stale_pod_is_its_controllers_to_replace() -> None:
    """Mid-rollout, a RollingUpdate DaemonSet's old pod is on an older template too: the repair replaces
    only OnDelete DaemonSets' pods."""
    api = _stale_cluster()
    api.daemonsets["nvidia-driver-daemonset"]["spec"]["updateStrategy"] = {"type": "RollingUpdate"}
    assert _repairer([]).attempt(api, STALE_ERRORS, deadline=1e12) is None  # type: ignore[arg-type]
    assert api.writes == []


def test_a_stale_pod_left_on_a_deleted_node_is_not_the_repairs() -> None:
    """A pod still bound to a node that left the cluster (the pod garbage collector removes it) is not a
    worker to maintain: only the pods on existing nodes are replaced."""
    api = _stale_cluster()
    api.pods.append(_driver_pod("drv-gone", "node-gone", "old", "uid-gone"))
    outcome = _repairer([]).attempt(api, STALE_ERRORS, deadline=1e12)  # type: ignore[arg-type]
    assert outcome is not None and outcome.error is None
    deleted = [path.rsplit("/", 1)[1] for method, path, _ in api.writes if method == "DELETE"]
    assert deleted == ["drv-a", "drv-b"]
