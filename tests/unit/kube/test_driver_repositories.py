"""The gate's read-only check that the GPU operator's driver pods mount exactly the package repository
files the fleet configured (kube/gpu_operator.py), against the driver DaemonSet the local cloud renders
from the recipe's RTX values: the fleet's values, through the recipe's addon, into the simulated operator,
back to the check."""

from __future__ import annotations

import copy
from typing import Any

from npa_pulumi.kube.gpu_operator import (
    OPERATOR_NAMESPACE,
    REPOSITORIES_CONFIGMAP,
    VALUES_REVISION_ANNOTATION,
    file_digests,
    mounted_repository_files,
    repository_errors,
)
from npa_pulumi.output.evidence import publish_graphics
from npa_pulumi.plan.rtx_values import rtx_operator_values
from npa_pulumi.simulator.kube import shapes

SOURCES = {"ubuntu-noble.sources": "Types: deb\n", "cuda.list": "deb https://mirror.example/cuda /\n"}
CM = REPOSITORIES_CONFIGMAP


def _addons(sources: dict[str, str], platform: str = "gpu-rtx6000-a") -> dict[str, Any]:
    """What the local recipe records for an RTX cluster (addons.tf: `rtx_driver`)."""
    values = rtx_operator_values(platform, "1gpu-24vcpu-218gb", sources)
    rtx = {"platform": platform, "preset": "1gpu-24vcpu-218gb", "values": values.helm_values()}
    return {"gpu_driver": "operator", "rtx_driver": {**rtx, "revision": values.revision()}}


def _objects(
    addons: dict[str, Any], files: list[str] | None, driver_faults: dict[str, bool] | None = None
) -> dict[str, dict[str, Any]]:
    cluster = {"id": "mk8scluster-x", "region": "us-central1", "addons": addons}
    if driver_faults:
        cluster["driver_faults"] = driver_faults
    return {f"{o['kind']}/{o['metadata']['name']}": o for o in shapes.recipe_objects(cluster, files)}


def _driver_pod(name: str, files: list[str] | None = None, terminating: bool = False) -> dict[str, Any]:
    """A pod as the DaemonSet controller makes it from the simulated driver DaemonSet's template."""
    daemonset = _objects(_addons(SOURCES), sorted(SOURCES) if files is None else files)[
        "DaemonSet/nvidia-driver-daemonset"
    ]
    meta: dict[str, Any] = {
        "name": name,
        "ownerReferences": [{"kind": "DaemonSet", "name": "nvidia-driver-daemonset", "uid": "u"}],
    }
    if terminating:
        meta["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    return {"metadata": meta, "spec": copy.deepcopy(daemonset["spec"]["template"]["spec"])}


def _configmap(data: dict[str, str]) -> dict[str, Any]:
    return {"metadata": {"name": CM, "namespace": OPERATOR_NAMESPACE}, "data": data}


def test_the_simulated_operator_follows_the_rtx_values() -> None:
    addons = _addons(SOURCES)
    objects = _objects(addons, sorted(SOURCES))
    driver = objects["DaemonSet/nvidia-driver-daemonset"]["spec"]["template"]
    assert driver["spec"]["nodeSelector"] == {
        "nvidia.com/gpu.present": "true",
        "nebius.com/platform": "gpu-rtx6000-a",
        "nebius.com/preset": "1gpu-24vcpu-218gb",
    }
    assert driver["metadata"]["annotations"][VALUES_REVISION_ANNOTATION] == addons["rtx_driver"]["revision"]
    mounts = driver["spec"]["containers"][0]["volumeMounts"]
    assert {m["mountPath"] for m in mounts} == {
        "/etc/apt/sources.list.d/cuda.list",
        "/etc/apt/sources.list.d/ubuntu-noble.sources",
    }
    assert all(m["readOnly"] and m["name"] == CM for m in mounts)
    toolkit = objects["DaemonSet/nvidia-container-toolkit-daemonset"]["spec"]["template"]["spec"]
    assert toolkit["containers"][0]["env"] == [{"name": "RUNTIME_CONFIG_SOURCE", "value": "file"}]
    policy = objects["ClusterPolicy/cluster-policy"]
    assert policy["spec"]["driver"]["rdma"] == {"enabled": False}
    assert policy["spec"]["driver"]["repoConfig"] == {"configMapName": CM}
    assert policy["status"]["state"] == "ready"


def test_without_the_configmap_the_operator_cannot_render_the_driver() -> None:
    objects = _objects(_addons(SOURCES), None)
    assert "DaemonSet/nvidia-driver-daemonset" not in objects
    assert objects["ClusterPolicy/cluster-policy"]["status"]["state"] == "notReady"


def test_a_cluster_without_the_profile_keeps_the_chart_defaults() -> None:
    objects = _objects({"gpu_driver": "operator"}, None)
    template = objects["DaemonSet/nvidia-driver-daemonset"]["spec"]["template"]
    assert template["spec"]["nodeSelector"] == {"nvidia.com/gpu.present": "true"}
    assert "volumes" not in template["spec"] and "annotations" not in template["metadata"]


def test_the_driver_faults_of_the_local_cloud() -> None:
    """`local-cloud fault driver`: a stale template is an OnDelete update that changes the template; a
    driver without its repository mounts keeps the volume; cleared, the driver is rendered as before."""
    healthy = _objects(_addons(SOURCES), sorted(SOURCES))["DaemonSet/nvidia-driver-daemonset"]
    stale = _objects(_addons(SOURCES), sorted(SOURCES), {"stale_template": True})
    stale_driver = stale["DaemonSet/nvidia-driver-daemonset"]
    assert stale_driver["spec"]["updateStrategy"] == {"type": "OnDelete"}
    assert stale_driver["spec"]["template"] != healthy["spec"]["template"]
    assert "updateStrategy" not in healthy["spec"]
    unmounted = _objects(_addons(SOURCES), sorted(SOURCES), {"no_repo_mount": True})
    template = unmounted["DaemonSet/nvidia-driver-daemonset"]["spec"]["template"]["spec"]
    assert template["volumes"] and "volumeMounts" not in template["containers"][0]
    pods = [{"metadata": {"name": "nvidia-driver-daemonset-a1"}, "spec": copy.deepcopy(template)}]
    assert repository_errors(_configmap(SOURCES), pods, CM, file_digests(SOURCES))
    cleared = _objects(_addons(SOURCES), sorted(SOURCES), {"no_repo_mount": False})
    assert cleared["DaemonSet/nvidia-driver-daemonset"] == healthy


def test_pods_of_the_rendered_template_mount_every_configured_file() -> None:
    pods = [_driver_pod("nvidia-driver-daemonset-a1"), _driver_pod("nvidia-driver-daemonset-b2")]
    assert mounted_repository_files(pods[0], CM) == {"nvidia-driver-daemonset": set(SOURCES)}
    assert repository_errors(_configmap(SOURCES), pods, CM, file_digests(SOURCES)) == []


def test_a_pod_missing_a_file_is_named_and_categorized() -> None:
    stale = _driver_pod("nvidia-driver-daemonset-old", files=["ubuntu-noble.sources"])
    gone = _driver_pod("nvidia-driver-daemonset-gone", files=[], terminating=True)
    other = {"metadata": {"name": "gpu-feature-discovery-x", "ownerReferences": []}, "spec": {}}
    pods = [_driver_pod("nvidia-driver-daemonset-new"), stale, gone, other]
    [error] = repository_errors(_configmap(SOURCES), pods, CM, file_digests(SOURCES))
    assert error == (
        f"driver pod {OPERATOR_NAMESPACE}/nvidia-driver-daemonset-old does not mount repository file(s) "
        f"cuda.list from ConfigMap {CM}"
    )
    stabilization = {"passed": False, "stabilization_s": 1, "errors": [error]}
    published = publish_graphics({"passed": False, "workers": {}, "stabilization": stabilization})
    assert published.summary["failure_categories"] == {"driver-repositories": 1, "stabilization": 1}
    assert "nvidia-driver-daemonset-old" not in str(published)


def test_a_mount_of_the_directory_counts_and_a_mount_elsewhere_does_not() -> None:
    pod = _driver_pod("p")
    pod["spec"]["containers"][0]["volumeMounts"] = [{"name": CM, "mountPath": "/etc/apt/sources.list.d"}]
    assert mounted_repository_files(pod, CM)["nvidia-driver-daemonset"] == set(SOURCES)
    pod["spec"]["volumes"][0]["configMap"].pop("items")
    assert repository_errors(_configmap(SOURCES), [pod], CM, file_digests(SOURCES)) == []
    pod["spec"]["containers"][0]["volumeMounts"] = [
        {"name": CM, "mountPath": "/tmp/cuda.list", "subPath": "cuda.list"}
    ]
    assert mounted_repository_files(pod, CM)["nvidia-driver-daemonset"] == set()


def test_the_configmap_must_hold_exactly_the_spec_files() -> None:
    pods = [_driver_pod("p")]
    expected = file_digests(SOURCES)
    assert repository_errors(None, pods, CM, expected) == [
        f"repository ConfigMap {OPERATOR_NAMESPACE}/{CM} not found"
    ]
    edited = {**SOURCES, "cuda.list": "deb http://elsewhere/ /\n"}
    [changed] = repository_errors(_configmap(edited), pods, CM, expected)
    assert changed.endswith("file(s) cuda.list differ from the spec") and "elsewhere" not in changed
    [extra] = repository_errors(_configmap({**SOURCES, "x.list": "deb x"}), pods, CM, expected)
    assert "holds file(s) [cuda.list, ubuntu-noble.sources, x.list]" in extra


def test_no_driver_pod_is_no_proof() -> None:
    [error] = repository_errors(_configmap(SOURCES), [], CM, file_digests(SOURCES))
    assert error.startswith("no driver pod")
