"""A driver pod on an older template than its DaemonSet's newest ControllerRevision (what an `OnDelete`
update leaves behind) is reported by name; pods on the newest template, and terminating ones, are not."""

from __future__ import annotations

from typing import Any

from npa_pulumi.kube.gpu_health.checks import REVISION_LABEL, stale_driver_pods

NS = "gpu-operator"
DS_UID = "uid-driver-ds"


def _revision(name: str, number: int, digest: str) -> dict[str, Any]:
    meta = {"name": name, "labels": {REVISION_LABEL: digest}, "ownerReferences": [{"uid": DS_UID}]}
    return {"metadata": meta, "revision": number}


def _pod(name: str, digest: str, terminating: bool = False) -> dict[str, Any]:
    meta: dict[str, Any] = {
        "name": name,
        "labels": {REVISION_LABEL: digest},
        "ownerReferences": [{"uid": DS_UID}],
    }
    if terminating:
        meta["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    return {"metadata": meta}


class _Cluster:
    """What the API server lists, by path (the check only lists)."""

    def __init__(self, pods: list[dict[str, Any]]) -> None:
        self.objects = {
            f"/apis/apps/v1/namespaces/{NS}/daemonsets": [
                {"metadata": {"uid": DS_UID, "name": "nvidia-driver-daemonset"}}
            ],
            f"/apis/apps/v1/namespaces/{NS}/controllerrevisions": [
                _revision("nvidia-driver-daemonset-old", 1, "aaaa"),
                _revision("nvidia-driver-daemonset-new", 2, "bbbb"),
            ],
            f"/api/v1/namespaces/{NS}/pods": pods,
        }

    def list(self, path: str) -> list[dict[str, Any]]:
        return self.objects[path]


def test_a_pod_on_an_older_template_is_named() -> None:
    pods = [_pod("driver-x1", "aaaa"), _pod("driver-y2", "bbbb"), _pod("driver-z3", "aaaa", terminating=True)]
    [error] = stale_driver_pods(_Cluster(pods), NS, pods)  # type: ignore[arg-type]
    assert error.startswith(f"driver pod {NS}/driver-x1 runs an older template (aaaa)")
    assert "DaemonSet nvidia-driver-daemonset (bbbb)" in error and "OnDelete" in error


def test_pods_on_the_newest_template_pass() -> None:
    pods = [_pod("driver-y2", "bbbb")]
    assert stale_driver_pods(_Cluster(pods), NS, pods) == []  # type: ignore[arg-type]


def test_a_driver_daemonset_must_select_exactly_the_gpu_pool() -> None:
    from npa_pulumi.kube.gpu_health.checks import _driver_selector_errors
    from npa_pulumi.kube.gpu_health.config import GateConfig

    cluster = _Cluster([])
    [daemonset] = cluster.objects[f"/apis/apps/v1/namespaces/{NS}/daemonsets"]
    config = GateConfig(
        expected_nodes=3,
        expected_gpu_nodes=2,
        gpus_per_node=8,
        gpu_platform="gpu-rtx6000",
        driver_mode="operator",
        nvswitch=False,
        stabilization_s=0.0,
        timeout_s=1.0,
        cuda_smoke=False,
        smoke_image="",
    )
    daemonset["status"] = {"desiredNumberScheduled": 2}
    assert _driver_selector_errors(cluster, NS, config) == []  # type: ignore[arg-type]
    daemonset["status"] = {"desiredNumberScheduled": 3}
    [error] = _driver_selector_errors(cluster, NS, config)  # type: ignore[arg-type]
    assert "selects 3 node(s), the GPU pool has 2" in error
