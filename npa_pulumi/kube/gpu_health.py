"""The GPU health gate: a cluster is `deployed` only once its GPUs are usable.

One run, bounded by a single deadline (`timeout_s`), every API call bounded by what is left of it:

1. **Snapshots** every `poll_s`: every requested node present and Ready with a boot id; exactly the
   expected GPU nodes, with the expected allocatable `nvidia.com/gpu` in total and capacity equal to it;
   no `NebiusGPUError` condition; on NVSwitch topologies the fabric state exposed as complete; the driver
   components of the driver mode (`nvidia-device-plugin` for managed-image, `gpu-operator` for operator)
   Running and ready, none on an older template than its DaemonSet's, every driver DaemonSet selecting
   exactly the GPU pool, and (RTX package repositories) every driver pod mounting exactly the configured
   repository files from the fleet's ConfigMap (kube/gpu_operator.py).
2. **Stabilization**: the first clean snapshot starts a timer, any error resets it; it passes once it has
   stayed clean for `stabilization_s`. The first snapshot with the whole topology fixes each node's boot
   id; a later one that differs (a node rebooted, added or replaced) fails at once.
3. **CUDA smoke** (when asked): a vectorAdd pod pinned to every GPU node, each under a unique name (a pod
   of an earlier attempt that is still terminating can never be mistaken for this one), judged by its
   phase and the output it leaves as its termination message, and always deleted with a UID precondition.
4. **MIG hardware** (MIG clusters, before the MIG smoke): a probe pod per GPU node runs `nvidia-smi`
   (`--query-gpu` and `-L`) through the driver and must list exactly the node's GPUs, each with MIG mode
   enabled (current and pending), the pinned driver, and exactly the pinned layout's MIG devices, all
   with distinct UUIDs across the cluster: the device plugin's advertised resources (checked by the
   snapshots) can outlive a GPU whose MIG mode was reset, and only the driver tells.

The result is evidence (per node: what held, what failed, when), which never holds anything secret.
"""

from __future__ import annotations

import hashlib
import re
import secrets
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

from npa_pulumi.kube.client import KubeClient, KubeError
from npa_pulumi.kube.gpu_operator import repository_errors

JSON = dict[str, Any]
SMOKE_LABEL = "app.kubernetes.io/managed-by"
SMOKE_LABEL_VALUE = "npa-gpu-health"
DRIVER_NAMESPACES = {"managed-image": "nvidia-device-plugin", "operator": "gpu-operator"}
_FABRIC_OK = {"complete", "completed", "success", "successful"}
_CALL_CAP_S = 10.0  # no single API call waits longer than this


@dataclass(frozen=True)
class GateConfig:
    expected_nodes: int
    expected_gpu_nodes: int
    gpus_per_node: int
    gpu_platform: str
    driver_mode: str  # managed-image | operator | "" (no GPUs)
    nvswitch: bool
    stabilization_s: float
    timeout_s: float
    cuda_smoke: bool
    smoke_image: str
    smoke_namespace: str = "npa-system"
    poll_s: float = 2.0
    # MIG readiness instead of whole GPUs: the exact per-node resources of the layout (whole
    # `nvidia.com/gpu` must be 0), and its strategy and config as MIG Manager labels them.
    mig_resources: dict[str, int] | None = None
    mig_strategy: str = ""
    mig_config: str = ""
    # The GPU operator release MIG is pinned to (operator, driver, device_plugin, gfd, mig_manager,
    # toolkit): its ClusterPolicy and component DaemonSets must run exactly these.
    mig_versions: dict[str, str] | None = None
    # RTX rendering: GLX, EGL and Vulkan readiness on every GPU node, after the CUDA smoke.
    graphics_smoke: bool = False
    graphics_image: str = ""
    # RTX rendering with package repositories: the ConfigMap `driver.repoConfig` names (in the operator's
    # namespace) and its files (name -> SHA-256 of the content), which every driver pod must mount.
    driver_repo_configmap: str = ""
    driver_repositories: dict[str, str] | None = None

    @property
    def mig(self) -> bool:
        return self.mig_resources is not None

    @property
    def clean_snapshots_needed(self) -> int:
        """MIG readiness needs two consecutive exact snapshots (MIG Manager reconfigures in steps)."""
        return 2 if self.mig else 1

    @property
    def smoke_resource(self) -> str:
        if self.mig_resources:
            return next((r for r, n in self.mig_resources.items() if r != "nvidia.com/gpu" and n > 0), "")
        return "nvidia.com/gpu"

    @property
    def expected_gpus(self) -> int:
        return self.expected_gpu_nodes * self.gpus_per_node


@dataclass
class Snapshot:
    at_s: float
    errors: list[str] = field(default_factory=list)
    nodes: int = 0
    ready_nodes: int = 0
    gpu_nodes: list[str] = field(default_factory=list)
    gpus: int = 0
    boot_ids: dict[str, str] = field(default_factory=dict)
    ready: dict[str, bool] = field(default_factory=dict)

    def complete(self, config: GateConfig) -> bool:
        return (
            self.nodes >= config.expected_nodes
            and len(self.gpu_nodes) == config.expected_gpu_nodes
            and bool(self.boot_ids)
            and all(self.boot_ids.values())
        )


@dataclass
class Evidence:
    passed: bool
    phase: str  # stabilization | smoke | done
    reason: str
    elapsed_s: float
    snapshots: int
    last_errors: list[str]
    nodes: dict[str, JSON]  # name -> {ready, gpus, boot_id, smoke}
    stable_after_s: float | None = None

    def to_json(self) -> JSON:
        return asdict(self)


def _quantity(value: Any) -> int:
    try:
        return int(str(value))
    except (TypeError, ValueError):
        return 0


def _condition(node: JSON, kind: str) -> JSON | None:
    for condition in (node.get("status") or {}).get("conditions") or []:
        if condition.get("type") == kind:
            return dict(condition)
    return None


def _platform_matches(label: str, platform: str) -> bool:
    def norm(text: str) -> str:
        text = text.strip().lower()
        return text[:-2] if text.endswith("-a") else text

    return bool(label) and norm(label) == norm(platform)


def _is_gpu_node(node: JSON, config: GateConfig) -> bool:
    labels = node["metadata"].get("labels") or {}
    allocatable = (node.get("status") or {}).get("allocatable") or {}
    instance_type = labels.get("node.kubernetes.io/instance-type", "")
    return (
        _platform_matches(instance_type, config.gpu_platform)
        or _quantity(allocatable.get("nvidia.com/gpu")) > 0
        or labels.get("nvidia.com/gpu.present") == "true"
    )


def _fabric_errors(node: JSON) -> list[str]:
    name = node["metadata"]["name"]
    errors = []
    for condition in (node.get("status") or {}).get("conditions") or []:
        if "fabric" in condition.get("type", "").lower() and condition.get("status") != "True":
            errors.append(f"{name}: fabric condition {condition['type']} is {condition.get('status')}")
    marks = {**(node["metadata"].get("labels") or {}), **(node["metadata"].get("annotations") or {})}
    states = {
        k: v
        for k, v in marks.items()
        if "fabric" in k.lower().replace("_", "-") and ("state" in k.lower() or "status" in k.lower())
    }
    if not states:
        errors.append(f"{name}: no fabric state exposed (NVSwitch topology)")
    errors += [f"{name}: fabric {k}={v}" for k, v in states.items() if str(v).lower() not in _FABRIC_OK]
    return errors


MIG_NOT_READY_TAINT = {"key": "nvidia.com/gpu", "value": "mig-not-ready", "effect": "NoSchedule"}


def _mig_errors(node: JSON, config: GateConfig) -> list[str]:
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
            have = _quantity((status.get(where) or {}).get(key))
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


def _operator_errors(client: KubeClient, config: GateConfig) -> list[str]:
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


REVISION_LABEL = "controller-revision-hash"


def _current_revisions(client: KubeClient, namespace: str) -> dict[str, tuple[str, str]]:
    """DaemonSet uid -> (its name, the hash of its newest template), from its ControllerRevisions."""
    daemonsets = {
        d["metadata"]["uid"]: d["metadata"]["name"]
        for d in client.list(f"/apis/apps/v1/namespaces/{namespace}/daemonsets")
    }
    newest: dict[str, tuple[int, str]] = {}
    for revision in client.list(f"/apis/apps/v1/namespaces/{namespace}/controllerrevisions"):
        meta = revision["metadata"]
        owner = next(
            (o["uid"] for o in meta.get("ownerReferences") or [] if o.get("uid") in daemonsets), None
        )
        digest = (meta.get("labels") or {}).get(REVISION_LABEL, "")
        number = int(revision.get("revision") or 0)
        if owner is not None and digest and number >= newest.get(owner, (-1, ""))[0]:
            newest[owner] = (number, digest)
    return {uid: (daemonsets[uid], digest) for uid, (_n, digest) in newest.items()}


def stale_driver_pods(client: KubeClient, namespace: str, pods: list[JSON]) -> list[str]:
    """Driver pods running an older template than their DaemonSet's newest: an `OnDelete` update strategy
    leaves them in place until someone deletes them, so a changed driver never reaches those nodes."""
    current = _current_revisions(client, namespace)
    errors = []
    for pod in pods:
        meta = pod["metadata"]
        owner = next((o["uid"] for o in meta.get("ownerReferences") or [] if o.get("uid") in current), None)
        have = (meta.get("labels") or {}).get(REVISION_LABEL, "")
        if owner is None or not have or meta.get("deletionTimestamp"):
            continue
        daemonset, want = current[owner]
        if have != want:
            errors.append(
                f"driver pod {namespace}/{meta['name']} runs an older template ({have}) than its DaemonSet "
                f"{daemonset} ({want}): an OnDelete update leaves it until the pod is deleted"
            )
    return errors


def _driver_selector_errors(client: KubeClient, namespace: str, config: GateConfig) -> list[str]:
    """Every driver DaemonSet selects exactly the GPU pool's nodes: no fewer (a node without a driver),
    no more (a selector that reaches other nodes)."""
    if config.expected_gpu_nodes <= 0:
        return []
    errors = []
    for daemonset in client.list(f"/apis/apps/v1/namespaces/{namespace}/daemonsets"):
        name = daemonset["metadata"]["name"]
        if "driver" not in name:
            continue
        desired = int((daemonset.get("status") or {}).get("desiredNumberScheduled") or 0)
        if desired != config.expected_gpu_nodes:
            errors.append(
                f"DaemonSet {namespace}/{name} selects {desired} node(s), the GPU pool has "
                f"{config.expected_gpu_nodes}: its node selector does not match the pool's nodes"
            )
    return errors


def _driver_errors(client: KubeClient, config: GateConfig) -> list[str]:
    namespace = DRIVER_NAMESPACES.get(config.driver_mode)
    if namespace is None:
        return []
    pods = client.list(f"/api/v1/namespaces/{namespace}/pods")
    if not pods:
        return [f"driver components ({namespace}): no pods found"]
    errors = stale_driver_pods(client, namespace, pods) + _driver_selector_errors(client, namespace, config)
    if config.driver_repositories and config.driver_mode == "operator":
        found = client.get_or_none(
            f"/api/v1/namespaces/{namespace}/configmaps/{config.driver_repo_configmap}"
        )
        errors += repository_errors(found, pods, config.driver_repo_configmap, config.driver_repositories)
    for pod in pods:
        name, status = pod["metadata"]["name"], pod.get("status") or {}
        if pod["metadata"].get("deletionTimestamp"):
            errors.append(f"driver pod {namespace}/{name} is terminating")
        elif status.get("phase") == "Succeeded":
            continue
        elif status.get("phase") != "Running" or not all(
            c.get("ready") for c in status.get("containerStatuses") or [{}]
        ):
            errors.append(f"driver pod {namespace}/{name} is {status.get('phase', 'Unknown')}, not ready")
    return errors


def snapshot(client: KubeClient, config: GateConfig, at_s: float) -> Snapshot:
    """One look at the cluster; an API that cannot be read is an error of this snapshot, not the gate's."""
    snap = Snapshot(at_s=at_s)
    try:
        nodes = client.list("/api/v1/nodes")
    except KubeError as err:
        snap.errors.append(f"cannot list nodes: {err}")
        return snap
    snap.nodes = len(nodes)
    if snap.nodes < config.expected_nodes:
        snap.errors.append(f"{snap.nodes} node(s) registered, {config.expected_nodes} requested")
    for node in sorted(nodes, key=lambda n: n["metadata"]["name"]):
        name = node["metadata"]["name"]
        status = node.get("status") or {}
        snap.boot_ids[name] = str((status.get("nodeInfo") or {}).get("bootID") or "")
        ready = _condition(node, "Ready")
        snap.ready[name] = ready is not None and ready.get("status") == "True"
        if snap.ready[name]:
            snap.ready_nodes += 1
        else:
            reason = (ready or {}).get("reason") or "no Ready condition"
            snap.errors.append(f"{name}: not Ready ({reason})")
        if not snap.boot_ids[name]:
            snap.errors.append(f"{name}: no boot id")
        if not _is_gpu_node(node, config):
            continue
        snap.gpu_nodes.append(name)
        allocatable = _quantity((status.get("allocatable") or {}).get("nvidia.com/gpu"))
        capacity = _quantity((status.get("capacity") or {}).get("nvidia.com/gpu"))
        snap.gpus += allocatable
        if config.mig:
            snap.errors += _mig_errors(node, config)
        elif allocatable != config.gpus_per_node or capacity != config.gpus_per_node:
            snap.errors.append(
                f"{name}: nvidia.com/gpu capacity {capacity}, allocatable {allocatable}; "
                f"{config.gpus_per_node} expected"
            )
        gpu_error = _condition(node, "NebiusGPUError")
        if gpu_error is not None and gpu_error.get("status") == "True":
            snap.errors.append(
                f"{name}: NebiusGPUError: {gpu_error.get('message') or gpu_error.get('reason')}"
            )
        if config.nvswitch:
            snap.errors += _fabric_errors(node)
    if len(snap.gpu_nodes) != config.expected_gpu_nodes:
        snap.errors.append(f"{len(snap.gpu_nodes)} GPU node(s), {config.expected_gpu_nodes} requested")
    if not config.mig and snap.gpus != config.expected_gpus:
        snap.errors.append(f"{snap.gpus} GPU(s) allocatable, {config.expected_gpus} requested")
    try:
        snap.errors += _driver_errors(client, config)
    except KubeError as err:
        snap.errors.append(f"cannot list driver components: {err}")
    if config.mig and config.mig_versions is not None:
        try:
            snap.errors += _operator_errors(client, config)
        except KubeError as err:
            snap.errors.append(f"cannot read the GPU operator's ClusterPolicy: {err}")
    return snap


# ------------------------------------------------------------------------------------ the smoke


def smoke_pod(config: GateConfig, node: str) -> JSON:
    """A vectorAdd pod pinned to `node`; its output becomes its termination message, so the result is
    read from the pod's status (no log streaming through the kubelet needed)."""
    suffix = f"{hashlib.sha256(node.encode()).hexdigest()[:10]}-{secrets.token_hex(3)}"
    script = "/cuda-samples/vectorAdd 2>&1 | tee /dev/termination-log; exit ${PIPESTATUS[0]}"
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": f"npa-gpu-health-{suffix}",
            "namespace": config.smoke_namespace,
            "labels": {SMOKE_LABEL: SMOKE_LABEL_VALUE},
        },
        "spec": {
            "restartPolicy": "Never",
            "nodeName": node,
            "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
            "containers": [
                {
                    "name": "vectoradd",
                    "image": config.smoke_image,
                    "command": ["/bin/bash", "-c", script],
                    "resources": {"limits": {config.smoke_resource: "1"}},
                    "terminationMessagePolicy": "FallbackToLogsOnError",
                    "securityContext": {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}},
                }
            ],
        },
    }


GRAPHICS_SCRIPT = """set -euo pipefail
{
python3 -c 'import ctypes,os;ctypes.CDLL("libGLX_nvidia.so.0");print("NPA_GLX_LOADED",flush=True);os._exit(0)'
python3 -c 'import ctypes,os;ctypes.CDLL("libEGL_nvidia.so.0");print("NPA_EGL_LOADED",flush=True);os._exit(0)'
vulkaninfo --summary
} 2>&1 | tail -c 3500 | tee /dev/termination-log
"""


def graphics_pod(config: GateConfig, node: str) -> JSON:
    """GLX and EGL loaded and Vulkan enumerating an NVIDIA device, pinned to `node` (runtime class
    `nvidia`, all driver capabilities); the output's tail becomes the termination message."""
    pod = smoke_pod(config, node)
    pod["metadata"]["name"] = pod["metadata"]["name"].replace("npa-gpu-health-", "npa-graphics-health-")
    pod["metadata"]["labels"]["npa.nebius.com/smoke"] = "graphics"
    pod["spec"]["runtimeClassName"] = "nvidia"
    container = pod["spec"]["containers"][0]
    container.update(
        name="graphics-readiness",
        image=config.graphics_image,
        command=["/bin/bash", "-c", GRAPHICS_SCRIPT],
        env=[
            {"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"},
            {"name": "NVIDIA_DRIVER_CAPABILITIES", "value": "all"},
        ],
    )
    return pod


def graphics_missing(output: str) -> list[str]:
    """What a graphics smoke's output lacks: GLX, EGL, a Vulkan instance, a GPU, an NVIDIA device."""
    missing = [m for m in ("NPA_GLX_LOADED", "NPA_EGL_LOADED", "Vulkan Instance Version") if m not in output]
    lines = [line.strip() for line in output.splitlines()]
    if not any(line.startswith("GPU") and line[3:4].isdigit() for line in lines):
        missing.append("a Vulkan physical device (GPU<n>:)")
    if "NVIDIA" not in output:
        missing.append("an NVIDIA device")
    return missing


MIG_HARDWARE_SMOKE = "mig-hardware"
MIG_HARDWARE_MARKER = "NPA_MIG_DEVICES"
_MIG_QUERY = "index,uuid,driver_version,mig.mode.current,mig.mode.pending"
MIG_HARDWARE_SCRIPT = f"""set -uo pipefail
{{
nvidia-smi --query-gpu={_MIG_QUERY} --format=csv,noheader,nounits
echo {MIG_HARDWARE_MARKER}
nvidia-smi -L
}} 2>&1 | tail -c 3800 | tee /dev/termination-log
"""
_QUERY_ROW = re.compile(r"^(\d+),\s*(GPU-[0-9a-fA-F-]+),\s*([^,]+?),\s*([\w/ ]+?),\s*([\w/ ]+?)\s*$")
_GPU_LINE = re.compile(r"^GPU (\d+): .*\(UUID: (GPU-[0-9a-fA-F-]+)\)")
_MIG_LINE = re.compile(r"^\s+MIG (\S+)\s+Device\s+\d+: \(UUID: (MIG-[0-9a-fA-F-]+)\)")


def mig_hardware_pod(config: GateConfig, node: str) -> JSON:
    """`nvidia-smi` on `node` through the driver (runtime class `nvidia`, every GPU visible, the utility
    capability only), requesting no GPU resource: it reads the hardware, it does not use it."""
    pod = smoke_pod(config, node)
    pod["metadata"]["name"] = pod["metadata"]["name"].replace("npa-gpu-health-", "npa-mig-hardware-")
    pod["metadata"]["labels"]["npa.nebius.com/smoke"] = MIG_HARDWARE_SMOKE
    pod["spec"]["runtimeClassName"] = "nvidia"
    container = pod["spec"]["containers"][0]
    container.update(
        name="mig-hardware",
        command=["/bin/bash", "-c", MIG_HARDWARE_SCRIPT],
        resources={},
        env=[
            {"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"},
            {"name": "NVIDIA_DRIVER_CAPABILITIES", "value": "utility"},
        ],
    )
    return pod


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
    rows = [m.groups() for m in map(_QUERY_ROW.match, query.splitlines()) if m]
    devices: dict[str, list[tuple[str, str]]] = {}
    gpu = ""
    for line in listing.splitlines():
        if found := _GPU_LINE.match(line):
            gpu = found.group(1)
            devices[gpu] = []
        elif (found := _MIG_LINE.match(line)) and gpu:
            devices[gpu].append((found.group(1), found.group(2)))
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


def _terminated(pod: JSON) -> JSON:
    for status in (pod.get("status") or {}).get("containerStatuses") or []:
        state = (status.get("state") or {}).get("terminated")
        if state:
            return dict(state)
    return {}


def run_smoke(
    client: KubeClient,
    config: GateConfig,
    node: str,
    deadline: float,
    clock: Callable[[], float],
    kind: str = "cuda",
) -> JSON:
    """Run the CUDA (or `graphics`, or MIG hardware) smoke on one node; always deletes its pod (by UID)
    and waits until it is gone."""
    builders = {"cuda": smoke_pod, "graphics": graphics_pod, MIG_HARDWARE_SMOKE: mig_hardware_pod}
    pod = builders[kind](config, node)
    name, namespace = pod["metadata"]["name"], config.smoke_namespace
    path = f"/api/v1/namespaces/{namespace}/pods/{name}"
    result: JSON = {"node": node, "pod": name, "phase": "not-created", "passed": False}
    created = None
    try:
        created = client.request("POST", f"/api/v1/namespaces/{namespace}/pods", pod)
        while clock() < deadline:
            current = client.get(path)
            phase = (current.get("status") or {}).get("phase", "Pending")
            result["phase"] = phase
            if phase in ("Succeeded", "Failed"):
                terminated = _terminated(current)
                message = str(terminated.get("message") or "")
                result["exit_code"] = terminated.get("exitCode")
                result["output_tail"] = message[-300:]
                if kind == "graphics":
                    result["missing"] = graphics_missing(message)
                    result["passed"] = phase == "Succeeded" and not result["missing"]
                elif kind == MIG_HARDWARE_SMOKE:
                    result["output"] = message  # judged by mig_hardware_report
                    result["passed"] = phase == "Succeeded"
                else:
                    result["passed"] = phase == "Succeeded" and "Test PASSED" in message
                break
            time.sleep(min(1.0, max(0.0, deadline - clock())))
        else:
            result["phase"] = "timeout"
    except KubeError as err:
        result["error"] = str(err)
    finally:
        if created is not None:
            result["cleaned_up"] = _delete_and_wait(client, path, created["metadata"]["uid"], deadline, clock)
    return result


def _delete_and_wait(
    client: KubeClient, path: str, uid: str, deadline: float, clock: Callable[[], float]
) -> bool:
    """Delete exactly the pod this run created (a UID precondition), then wait until it is gone."""
    body = {
        "kind": "DeleteOptions",
        "apiVersion": "v1",
        "gracePeriodSeconds": 0,
        "preconditions": {"uid": uid},
    }
    try:
        client.request("DELETE", path, body)
    except KubeError as err:
        if err.status not in (404, 409):  # gone already, or a different pod now holds the name
            return False
    end = max(deadline, clock() + 30)  # cleanup gets its own short grace even at the deadline
    while clock() < end:
        current = client.get_or_none(path)
        if current is None or current["metadata"].get("uid") != uid:
            return True
        time.sleep(0.5)
    return False


# ------------------------------------------------------------------------------------ the gate


def run_gate(
    client_for: Callable[[float], KubeClient],
    config: GateConfig,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> Evidence:
    """The whole gate. `client_for(timeout_s)` gives a client whose calls wait at most `timeout_s`."""
    started = clock()
    deadline = started + config.timeout_s
    baseline: dict[str, str] | None = None
    stable_since: float | None = None
    last = Snapshot(at_s=0.0)
    count = 0
    clean = 0  # consecutive snapshots without an error
    hardware: dict[str, JSON] = {}  # node -> what nvidia-smi listed (MIG clusters)

    def evidence(passed: bool, phase: str, reason: str, smoke: dict[str, JSON] | None = None) -> Evidence:
        nodes = {
            name: {"ready": last.ready.get(name, False), "boot_id": boot, "gpu": name in last.gpu_nodes}
            for name, boot in last.boot_ids.items()
        }
        for name, result in (smoke or {}).items():
            nodes.setdefault(name, {})["smoke"] = result
        for name, report in hardware.items():
            nodes.setdefault(name, {})["mig_hardware"] = report
        stable = None if stable_since is None else round(stable_since - started, 2)
        return Evidence(
            passed, phase, reason, round(clock() - started, 2), count, last.errors[:20], nodes, stable
        )

    while True:
        now = clock()
        if now > deadline:
            why = "; ".join(last.errors[:5]) or "no clean snapshot"
            return evidence(
                False,
                "stabilization",
                f"not healthy for {config.stabilization_s:g}s before the timeout: {why}",
            )
        client = client_for(min(_CALL_CAP_S, max(1.0, deadline - now)))
        last = snapshot(client, config, round(now - started, 2))
        count += 1
        if last.complete(config):
            if baseline is None:
                baseline = dict(last.boot_ids)
            elif last.boot_ids != baseline:
                changed = sorted(
                    set(baseline.items()).symmetric_difference(last.boot_ids.items()), key=lambda kv: kv[0]
                )
                names = sorted({name for name, _ in changed})
                return evidence(
                    False,
                    "stabilization",
                    f"boot ids changed during stabilization ({', '.join(names)}): "
                    "a node rebooted or was replaced",
                )
        if last.errors:
            stable_since, clean = None, 0
        else:
            clean += 1
            if stable_since is None:
                stable_since = now
        stable_long_enough = stable_since is not None and now - stable_since >= config.stabilization_s
        if stable_long_enough and clean >= config.clean_snapshots_needed:
            break
        sleep(min(config.poll_s, max(0.0, deadline - clock())))

    if config.mig and last.gpu_nodes:
        client = client_for(min(_CALL_CAP_S, max(1.0, deadline - clock())))
        found, errors = run_mig_hardware(client, config, last.gpu_nodes, deadline, clock)
        hardware.update(found)
        if errors:
            last.errors = errors
            return evidence(False, "mig-hardware", f"nvidia-smi disagrees: {'; '.join(errors[:3])}")
    if not config.cuda_smoke or not last.gpu_nodes:
        return evidence(True, "done", "healthy")
    results: dict[str, JSON] = {}
    for node in sorted(last.gpu_nodes):
        client = client_for(min(_CALL_CAP_S, max(1.0, deadline - clock())))
        results[node] = run_smoke(client, config, node, deadline, clock)
    failed = [n for n, r in results.items() if not r["passed"]]
    leftovers = [n for n, r in results.items() if r.get("cleaned_up") is False]
    if failed:
        return evidence(False, "smoke", f"CUDA smoke failed on {', '.join(failed)}", results)
    if leftovers:
        return evidence(
            False, "smoke", f"smoke pods could not be removed from {', '.join(leftovers)}", results
        )
    if not config.graphics_smoke:
        return evidence(True, "done", "healthy; CUDA smoke passed on every GPU node", results)
    for node in sorted(last.gpu_nodes):
        client = client_for(min(_CALL_CAP_S, max(1.0, deadline - clock())))
        results[node]["graphics"] = run_smoke(client, config, node, deadline, clock, kind="graphics")
    failed = [n for n, r in results.items() if not r["graphics"]["passed"]]
    if failed:
        why = "; ".join(
            f"{n}: missing {', '.join(results[n]['graphics'].get('missing') or ['a result'])}" for n in failed
        )
        return evidence(False, "graphics", f"graphics readiness failed ({why})", results)
    return evidence(True, "done", "healthy; CUDA and GLX/EGL/Vulkan passed on every GPU node", results)


# ------------------------------------------------------------------------------------ MIG repair


def is_stale_taint_error(error: str) -> bool:
    return error.endswith(": tainted nvidia.com/gpu=mig-not-ready:NoSchedule")


def gpu_workloads(client: KubeClient, operator_namespace: str = "gpu-operator") -> list[str]:
    """Active pods (Pending or Running) outside the GPU operator that request or limit any `nvidia.com/*`
    resource, as namespace/name: while one runs, no MIG repair may touch a GPU node."""
    found = []
    for pod in client.list("/api/v1/pods"):
        meta, spec = pod["metadata"], pod.get("spec") or {}
        if meta.get("namespace") == operator_namespace:
            continue
        if (pod.get("status") or {}).get("phase") not in ("Pending", "Running"):
            continue
        containers = [*(spec.get("initContainers") or []), *(spec.get("containers") or [])]
        containers += spec.get("ephemeralContainers") or []
        for container in containers:
            resources = container.get("resources") or {}
            wanted = {**(resources.get("requests") or {}), **(resources.get("limits") or {})}
            if any(k.startswith("nvidia.com/") and _quantity(v) > 0 for k, v in wanted.items()):
                found.append(f"{meta.get('namespace')}/{meta['name']}")
                break
    return sorted(found)


def remove_stale_mig_taint(client: KubeClient, node: str) -> bool:
    """Remove exactly the `nvidia.com/gpu=mig-not-ready:NoSchedule` taint from `node`, by index, with JSON
    Patch `test` operations that make the API refuse if the taint at that index changed meanwhile. Every
    other taint stays. False when the node has no such taint."""
    current = client.get(f"/api/v1/nodes/{node}")
    taints = (current.get("spec") or {}).get("taints") or []
    for index, taint in enumerate(taints):
        if all(taint.get(k) == v for k, v in MIG_NOT_READY_TAINT.items()):
            patch: list[JSON] = [
                {"op": "test", "path": f"/spec/taints/{index}/{key}", "value": value}
                for key, value in MIG_NOT_READY_TAINT.items()
            ]
            patch.append({"op": "remove", "path": f"/spec/taints/{index}"})
            client.request("PATCH", f"/api/v1/nodes/{node}", patch, "application/json-patch+json")
            return True
    return False
