"""The gate's snapshots: one look at every node (Ready, boot id, GPUs, NebiusGPUError, the NVSwitch
fabric) and at the driver components of the driver mode (running, current, selecting exactly the GPU pool,
mounting the RTX package repositories); MIG clusters add the MIG checks of `mig.py`."""

from __future__ import annotations

from dataclasses import dataclass

from npa_pulumi.kube.client import KubeClient, KubeError
from npa_pulumi.kube.gpu_health.config import DRIVER_NAMESPACES, JSON, GateConfig, Snapshot, quantity
from npa_pulumi.kube.gpu_health.mig import node_mig_errors, operator_errors
from npa_pulumi.kube.gpu_operator import repository_errors

_FABRIC_OK = {"complete", "completed", "success", "successful"}


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
        or quantity(allocatable.get("nvidia.com/gpu")) > 0
        or labels.get("nvidia.com/gpu.present") == "true"
    )


def is_gpu_node(node: JSON, config: GateConfig) -> bool:
    """A node of the GPU pool, as the gate tells one (`health` judges nodes the same way)."""
    return _is_gpu_node(node, config)


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


REVISION_LABEL = "controller-revision-hash"


def _daemonset_revisions(client: KubeClient, namespace: str) -> dict[str, tuple[str, str, bool]]:
    """DaemonSet uid -> (its name, the hash of its newest template, whether it updates OnDelete)."""
    listed = client.list(f"/apis/apps/v1/namespaces/{namespace}/daemonsets")
    daemonsets = {d["metadata"]["uid"]: d["metadata"]["name"] for d in listed}
    on_delete = {
        d["metadata"]["uid"]: ((d.get("spec") or {}).get("updateStrategy") or {}).get("type") == "OnDelete"
        for d in listed
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
    return {uid: (daemonsets[uid], digest, on_delete[uid]) for uid, (_n, digest) in newest.items()}


@dataclass(frozen=True)
class StaleDriverPod:
    """A driver pod on an older template than its DaemonSet's newest: what the OnDelete repair replaces."""

    namespace: str
    name: str
    uid: str
    node: str
    daemonset: str
    daemonset_uid: str
    revision: str  # the pod's template hash
    current: str  # the DaemonSet's newest template hash
    on_delete: bool = True  # the DaemonSet updates OnDelete (else its controller replaces the pod itself)

    def error(self) -> str:
        return (
            f"driver pod {self.namespace}/{self.name} runs an older template ({self.revision}) than its "
            f"DaemonSet {self.daemonset} ({self.current}): an OnDelete update leaves it until the pod is "
            "deleted"
        )


def find_stale_driver_pods(client: KubeClient, namespace: str, pods: list[JSON]) -> list[StaleDriverPod]:
    """Driver pods running an older template than their DaemonSet's newest: an `OnDelete` update strategy
    leaves them in place until someone deletes them, so a changed driver never reaches those nodes.
    Terminating pods are not counted (they are on their way out)."""
    current = _daemonset_revisions(client, namespace)
    found = []
    for pod in pods:
        meta = pod["metadata"]
        owner = next((o["uid"] for o in meta.get("ownerReferences") or [] if o.get("uid") in current), None)
        have = (meta.get("labels") or {}).get(REVISION_LABEL, "")
        if owner is None or not have or meta.get("deletionTimestamp"):
            continue
        daemonset, want, on_delete = current[owner]
        if have != want:
            node = str((pod.get("spec") or {}).get("nodeName") or "")
            uid = str(meta.get("uid", ""))
            found.append(
                StaleDriverPod(namespace, meta["name"], uid, node, daemonset, owner, have, want, on_delete)
            )
    return found


def stale_driver_pods(client: KubeClient, namespace: str, pods: list[JSON]) -> list[str]:
    """The gate's errors for `find_stale_driver_pods`, one per stale pod (named: the evidence is private)."""
    return [stale.error() for stale in find_stale_driver_pods(client, namespace, pods)]


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
        allocatable = quantity((status.get("allocatable") or {}).get("nvidia.com/gpu"))
        capacity = quantity((status.get("capacity") or {}).get("nvidia.com/gpu"))
        snap.gpus += allocatable
        if config.mig:
            snap.errors += node_mig_errors(node, config)
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
            snap.errors += operator_errors(client, config)
        except KubeError as err:
            snap.errors.append(f"cannot read the GPU operator's ClusterPolicy: {err}")
    return snap
