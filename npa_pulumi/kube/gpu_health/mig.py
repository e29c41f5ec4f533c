"""MIG readiness: the exact layout on every GPU node (MIG Manager's labels, the resources, no whole GPU,
no `mig-not-ready` taint), the GPU operator running exactly the pinned release, and what `nvidia-smi` says
against the pinned layout (the MIG hardware probe). The repairs are `repair.py`'s."""

from __future__ import annotations

from collections.abc import Callable

from npa_pulumi.kube.client import KubeClient
from npa_pulumi.kube.gpu_health.config import JSON, GateConfig, quantity
from npa_pulumi.kube.gpu_health.probes import (
    MIG_HARDWARE_MARKER,
    MIG_HARDWARE_SMOKE,
    MIG_QUERY_FIELDS,
    run_smoke,
)
from npa_pulumi.kube.nvidia_smi_output import parse_listing, parse_query

MIG_NOT_READY_TAINT = {"key": "nvidia.com/gpu", "value": "mig-not-ready", "effect": "NoSchedule"}


def node_mig_errors(node: JSON, config: GateConfig) -> list[str]:
    """The exact MIG layout on one node: MIG Manager's labels, the resources, no whole GPU, schedulable."""
    assert config.mig_resources is not None
    name, labels = node["metadata"]["name"], node["metadata"].get("labels") or {}
    status, spec = node.get("status") or {}, node.get("spec") or {}
    errors = []
    expected_labels = {
        "nvidia.com/mig.strategy": config.mig_strategy,
        "nvidia.com/mig.config": config.mig_config,
        "nvidia.com/mig.config.state": "success",
    }
    for key, value in expected_labels.items():
        if labels.get(key) != value:
            errors.append(f"{name}: label {key}={labels.get(key)!r}, {value!r} expected")
    for key, per_gpu in config.mig_resources.items():
        want = per_gpu * max(1, config.gpus_per_node)
        for where in ("capacity", "allocatable"):
            have = quantity((status.get(where) or {}).get(key))
            if have != want:
                errors.append(f"{name}: {where} {key}={have}, {want} expected")
    if spec.get("unschedulable"):
        errors.append(f"{name}: cordoned")
    for taint in spec.get("taints") or []:
        if all(taint.get(k) == v for k, v in MIG_NOT_READY_TAINT.items()):
            errors.append(f"{name}: tainted nvidia.com/gpu=mig-not-ready:NoSchedule")
    return errors


# Each pinned component: the ClusterPolicy field that states its version, and the DaemonSet whose image
# must carry it (the operator's own version is the ClusterPolicy's chart label).
MIG_PINNED_COMPONENTS = {
    "driver": ("driver", "nvidia-driver-daemonset"),
    "device_plugin": ("devicePlugin", "nvidia-device-plugin-daemonset"),
    "gfd": ("gfd", "gpu-feature-discovery"),
    "mig_manager": ("migManager", "nvidia-mig-manager"),
    "toolkit": ("toolkit", "nvidia-container-toolkit-daemonset"),
}


def operator_errors(client: KubeClient, config: GateConfig) -> list[str]:
    """The GPU operator runs the pinned release: one ClusterPolicy, ready, with the chart's version label,
    each component's version, the MIG strategy and CDI; each component DaemonSet's current generation
    rolled out on every GPU node with an image of the pinned version (a stale operator generation, or a
    recipe that ignored a pin, is caught here)."""
    pins = config.mig_versions or {}
    policies = client.list("/apis/nvidia.com/v1/clusterpolicies")
    if len(policies) != 1:
        return [f"{len(policies)} GPU operator ClusterPolicy object(s), exactly 1 expected"]
    policy = policies[0]
    name, spec = policy["metadata"]["name"], policy.get("spec") or {}
    errors = []
    if (policy.get("status") or {}).get("state") != "ready":
        errors.append(
            f"ClusterPolicy {name}: state {(policy.get('status') or {}).get('state')!r}, 'ready' expected"
        )
    label = (policy["metadata"].get("labels") or {}).get("app.kubernetes.io/version")
    if pins.get("operator") and label != pins["operator"]:
        errors.append(f"ClusterPolicy {name}: GPU operator {label!r}, {pins['operator']} pinned")
    for component, (field_name, _) in MIG_PINNED_COMPONENTS.items():
        have = (spec.get(field_name) or {}).get("version")
        if pins.get(component) and have != pins[component]:
            errors.append(f"ClusterPolicy {name}: {field_name}.version {have!r}, {pins[component]} pinned")
    if (spec.get("mig") or {}).get("strategy") != config.mig_strategy:
        errors.append(f"ClusterPolicy {name}: mig.strategy {(spec.get('mig') or {}).get('strategy')!r}")
    if (spec.get("cdi") or {}).get("enabled") is not True:
        errors.append(f"ClusterPolicy {name}: CDI not enabled")
    for component, (_, daemonset) in MIG_PINNED_COMPONENTS.items():
        errors += _daemonset_errors(client, daemonset, pins.get(component, ""), config.expected_gpu_nodes)
    return errors + _operator_deployment_errors(client)


def _operator_deployment_errors(client: KubeClient) -> list[str]:
    """The operator itself: its Deployment's generation observed and its one replica updated and ready."""
    found = client.get_or_none("/apis/apps/v1/namespaces/gpu-operator/deployments/gpu-operator")
    if found is None:
        return ["Deployment gpu-operator/gpu-operator not found"]
    status = found.get("status") or {}
    generation = int(found["metadata"].get("generation") or 0)
    errors = []
    if generation <= 0 or status.get("observedGeneration") != generation:
        errors.append(f"Deployment gpu-operator: generation {generation} not observed yet")
    wanted = int((found.get("spec") or {}).get("replicas", 1) or 1)
    counts = {k: int(status.get(k) or 0) for k in ("updatedReplicas", "readyReplicas", "availableReplicas")}
    if wanted != 1 or any(count != 1 for count in counts.values()):
        errors.append(f"Deployment gpu-operator: replicas {wanted}, {counts}; 1 expected each")
    return errors


def _daemonset_errors(client: KubeClient, name: str, pin: str, nodes: int) -> list[str]:
    found = client.get_or_none(f"/apis/apps/v1/namespaces/gpu-operator/daemonsets/{name}")
    if found is None:
        return [f"DaemonSet gpu-operator/{name} not found"]
    errors = []
    status = found.get("status") or {}
    generation = int(found["metadata"].get("generation") or 0)
    if generation <= 0 or status.get("observedGeneration") != generation:
        errors.append(
            f"DaemonSet {name}: generation {generation} not observed yet (stale operator generation)"
        )
    counts = {
        key: int(status.get(key) or 0)
        for key in (
            "desiredNumberScheduled",
            "currentNumberScheduled",
            "updatedNumberScheduled",
            "numberReady",
            "numberAvailable",
        )
    }
    if any(count != nodes for count in counts.values()):
        errors.append(f"DaemonSet {name}: {counts}, {nodes} expected each")
    images = [
        c.get("image", "")
        for c in ((found["spec"].get("template") or {}).get("spec") or {}).get("containers") or []
    ]
    if pin and not any(pin in image for image in images):
        errors.append(f"DaemonSet {name}: image {', '.join(images)} is not the pinned {pin}")
    return errors


# ------------------------------------------------------------------------------------ MIG hardware


def expected_mig_profiles(config: GateConfig) -> list[str]:
    """The MIG devices one GPU carries in the pinned layout, as `nvidia-smi -L` names their profiles."""
    profiles: list[str] = []
    # (counts cross the engine as floats)
    for resource, count in (config.mig_resources or {}).items():
        if resource.startswith("nvidia.com/mig-"):
            profiles += [resource[len("nvidia.com/mig-") :]] * int(count)
    return sorted(profiles)


def mig_hardware_report(node: str, output: str, config: GateConfig) -> JSON:
    """What `nvidia-smi` on one node says against the pinned layout: the facts and the errors."""
    query, _, listing = output.partition(MIG_HARDWARE_MARKER)
    rows = [
        (r["index"], r["uuid"], r["driver_version"], r["mig.mode.current"], r["mig.mode.pending"])
        for r in parse_query(query, MIG_QUERY_FIELDS).rows
    ]
    devices = {
        str(i): [(d.profile, d.uuid) for d in gpu.mig] for i, gpu in parse_listing(listing).gpus.items()
    }
    errors: list[str] = []
    if not listing:
        errors.append(f"{node}: nvidia-smi gave no device listing")
    if len(rows) != config.gpus_per_node or len(devices) != config.gpus_per_node:
        errors.append(
            f"{node}: nvidia-smi lists {len(rows)} GPU(s) ({len(devices)} in -L), {config.gpus_per_node} "
            "expected"
        )
    pinned_driver = (config.mig_versions or {}).get("driver", "")
    for index, _uuid, driver, current, pending in rows:
        if (current, pending) != ("Enabled", "Enabled"):
            errors.append(
                f"{node}: GPU {index} MIG mode {current}/{pending} (current/pending), Enabled expected"
            )
        if pinned_driver and driver != pinned_driver:
            errors.append(f"{node}: GPU {index} driver {driver}, {pinned_driver} pinned")
    expected = expected_mig_profiles(config)
    for index, found_devices in sorted(devices.items()):
        profiles = sorted(profile for profile, _ in found_devices)
        if profiles != expected:
            errors.append(
                f"{node}: GPU {index} MIG devices [{', '.join(profiles)}], [{', '.join(expected)}] expected"
            )
    uuids = [uuid for found_devices in devices.values() for _, uuid in found_devices]
    if len(set(uuids)) != len(uuids):
        errors.append(f"{node}: MIG device UUIDs repeat")
    return {
        "gpus": len(rows),
        "driver_versions": sorted({row[2] for row in rows}),
        "mig_profiles": {index: sorted(p for p, _ in d) for index, d in sorted(devices.items())},
        "mig_uuids": sorted(uuids),
        "errors": errors,
    }


def run_mig_hardware(
    client: KubeClient, config: GateConfig, nodes: list[str], deadline: float, clock: Callable[[], float]
) -> tuple[dict[str, JSON], list[str]]:
    """The MIG hardware probe on every GPU node: each node's report, and every error (a probe that did not
    finish, or left its pod behind, is an error too: partial evidence never passes)."""
    reports: dict[str, JSON] = {}
    errors: list[str] = []
    for node in sorted(nodes):
        result = run_smoke(client, config, node, deadline, clock, kind=MIG_HARDWARE_SMOKE)
        report = mig_hardware_report(node, str(result.pop("output", "")), config)
        report |= {k: result[k] for k in ("pod", "phase", "exit_code", "cleaned_up", "error") if k in result}
        if result["phase"] != "Succeeded" and not report["errors"]:
            report["errors"].append(f"{node}: nvidia-smi probe ended {result['phase']}")
        if result.get("cleaned_up") is False:
            report["errors"].append(f"{node}: the nvidia-smi probe pod could not be removed")
        reports[node] = report
        errors += report["errors"]
    seen: dict[str, str] = {}
    for node, report in reports.items():
        for uuid in report["mig_uuids"]:
            if uuid in seen and seen[uuid] != node:
                errors.append(f"MIG device {uuid} reported by both {seen[uuid]} and {node}")
            seen[uuid] = node
    return reports, errors
