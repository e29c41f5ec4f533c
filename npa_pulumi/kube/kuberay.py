"""The fleet's reviewed KubeRay template, and what its gate reads in a cluster.

One template, built here as plain Kubernetes objects so the cluster stack's component (which creates them
with pulumi-kubernetes), the local cloud's agent (which runs the operator for them) and the gate (which
judges them) agree on names and shape:

* the operator: namespace `kuberay-system`, its service account, cluster role and binding, and a Deployment
  of the pinned operator image (the local cloud's agent runs the pinned binary for it, standing in for the
  pod kwok cannot run);
* namespace `ray` with a NetworkPolicy that admits ingress only from pods of that namespace;
* one RayCluster `ray-cluster`: the pinned Ray image, in-tree autoscaling off, no sidecars, a head and one
  CPU worker group of exactly `worker_replicas` pods of `worker_cpus` / `worker_memory_gib`, every pod
  non-root, without privilege escalation, all capabilities dropped, placed on the CPU node group by node
  selector.

The gate (`check_ray`, `wait_for_ray`) reads the RayCluster's status as KubeRay writes it
(`RayClusterProvisioned`, `HeadPodReady`, `readyWorkerReplicas`) and the Ray pods themselves.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

JSON = dict[str, Any]

OPERATOR_NAMESPACE = "kuberay-system"
OPERATOR_NAME = "kuberay-operator"
RAY_NAMESPACE = "ray"
RAYCLUSTER_NAME = "ray-cluster"
NETWORK_POLICY_NAME = "ray-namespace-only"
WORKER_GROUP = "cpu"
MANAGED_BY = "app.kubernetes.io/managed-by"
FLEET_MANAGER = "npa-pulumi"
NODE_GROUP_LABEL = "nebius.com/node-group-name"  # how mk8s labels a node with its node group
RAY_CLUSTER_LABEL = "ray.io/cluster"  # KubeRay's label on every pod of a RayCluster
RAY_NODE_TYPE_LABEL = "ray.io/node-type"  # head | worker
HEAD_CPUS = 1  # npa_pulumi.spec.constants.KUBERAY_HEAD_CPUS / _MEMORY_GIB (validation budgets them)
HEAD_MEMORY_GIB = 4
RAY_USER = 1000  # the `ray` user of the rayproject/ray images


@dataclass(frozen=True)
class RayTemplate:
    """Everything the template varies by: the spec's three numbers, the pinned images, the placement."""

    worker_replicas: int
    worker_cpus: int
    worker_memory_gib: int
    ray_version: str
    image: str
    operator_image: str
    cpu_node_group: str  # the CPU node group's name, the value of NODE_GROUP_LABEL on its nodes

    def to_json(self) -> JSON:
        return asdict(self)

    def to_inputs(self) -> JSON:
        """The template as stored inputs (the fleet's objects' and the plan's fingerprint): its fields."""
        return asdict(self)


def cpu_node_group_name(cluster_name: str) -> str:
    """The k8s-training recipe names its CPU node group `<cluster_name>-ng-cpu`."""
    return f"{cluster_name}-ng-cpu"


def _security_context() -> JSON:
    return {
        "runAsNonRoot": True,
        "runAsUser": RAY_USER,
        "allowPrivilegeEscalation": False,
        "privileged": False,
        "capabilities": {"drop": ["ALL"]},
        "seccompProfile": {"type": "RuntimeDefault"},
    }


def _container(name: str, image: str, cpus: int, memory_gib: int) -> JSON:
    amount = {"cpu": str(cpus), "memory": f"{memory_gib}Gi"}
    return {
        "name": name,
        "image": image,
        "imagePullPolicy": "IfNotPresent",
        "resources": {"requests": dict(amount), "limits": dict(amount)},
        "securityContext": _security_context(),
    }


def _pod_template(template: RayTemplate, role: str, container: JSON) -> JSON:
    return {
        "metadata": {"labels": {MANAGED_BY: FLEET_MANAGER, "npa.nebius.com/ray-role": role}},
        "spec": {
            "nodeSelector": {NODE_GROUP_LABEL: template.cpu_node_group},
            "securityContext": {"runAsNonRoot": True, "runAsUser": RAY_USER, "fsGroup": 100},
            "automountServiceAccountToken": False,
            "containers": [container],
        },
    }


def raycluster_spec(template: RayTemplate) -> JSON:
    """The RayCluster's `spec`: head plus one fixed CPU worker group, nothing optional switched on."""
    head = _container("ray-head", template.image, HEAD_CPUS, HEAD_MEMORY_GIB)
    worker = _container("ray-worker", template.image, template.worker_cpus, template.worker_memory_gib)
    replicas = template.worker_replicas
    return {
        "rayVersion": template.ray_version,
        "enableInTreeAutoscaling": False,
        "headGroupSpec": {
            "rayStartParams": {"dashboard-host": "0.0.0.0", "num-cpus": str(HEAD_CPUS)},
            "template": _pod_template(template, "head", head),
        },
        "workerGroupSpecs": [
            {
                "groupName": WORKER_GROUP,
                "replicas": replicas,
                "minReplicas": replicas,
                "maxReplicas": replicas,
                "rayStartParams": {"num-cpus": str(template.worker_cpus)},
                "template": _pod_template(template, "worker", worker),
            }
        ],
    }


def network_policy_spec() -> JSON:
    """Ingress to every pod of the Ray namespace only from pods of that namespace; egress untouched."""
    return {
        "podSelector": {},
        "policyTypes": ["Ingress"],
        "ingress": [{"from": [{"podSelector": {}}]}],
    }


# The operator's permissions: what KubeRay's own role (config/rbac/role.yaml) grants for RayClusters.
OPERATOR_RULES: list[JSON] = [
    {"apiGroups": ["ray.io"], "resources": ["*"], "verbs": ["*"]},
    {
        "apiGroups": [""],
        "resources": ["pods", "pods/status", "services", "services/status", "serviceaccounts", "endpoints"],
        "verbs": ["create", "delete", "get", "list", "patch", "update", "watch", "deletecollection"],
    },
    {"apiGroups": [""], "resources": ["events"], "verbs": ["create", "patch", "get", "list", "watch"]},
    {"apiGroups": [""], "resources": ["configmaps", "secrets"], "verbs": ["get", "list", "watch", "create"]},
    {
        "apiGroups": ["rbac.authorization.k8s.io"],
        "resources": ["roles", "rolebindings"],
        "verbs": ["create", "delete", "get", "list", "update", "watch"],
    },
    {"apiGroups": ["batch"], "resources": ["jobs"], "verbs": ["*"]},
    {"apiGroups": ["networking.k8s.io"], "resources": ["ingresses"], "verbs": ["*"]},
    {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["*"]},
    {"apiGroups": ["route.openshift.io"], "resources": ["routes"], "verbs": ["get", "list", "watch"]},
]


def operator_pod_spec(template: RayTemplate) -> JSON:
    return {
        "serviceAccountName": OPERATOR_NAME,
        "securityContext": {"runAsNonRoot": True},
        "nodeSelector": {NODE_GROUP_LABEL: template.cpu_node_group},
        "containers": [
            {
                "name": OPERATOR_NAME,
                "image": template.operator_image,
                "command": ["/manager"],
                "args": ["--enable-leader-election=false", "--metrics-addr=:8080"],
                "resources": {
                    "requests": {"cpu": "100m", "memory": "256Mi"},
                    "limits": {"cpu": "500m", "memory": "512Mi"},
                },
                "securityContext": {
                    "allowPrivilegeEscalation": False,
                    "readOnlyRootFilesystem": True,
                    "capabilities": {"drop": ["ALL"]},
                },
            }
        ],
    }


def fleet_objects() -> list[str]:
    """The template's objects, as `Kind namespace/name` (what a teardown receipt lists as deleted)."""
    crds = [f"CustomResourceDefinition {kind}.ray.io" for kind in ("rayclusters", "rayjobs", "rayservices")]
    return [
        f"RayCluster {RAY_NAMESPACE}/{RAYCLUSTER_NAME}",
        f"NetworkPolicy {RAY_NAMESPACE}/{NETWORK_POLICY_NAME}",
        f"Namespace {RAY_NAMESPACE}",
        f"Deployment {OPERATOR_NAMESPACE}/{OPERATOR_NAME}",
        f"ServiceAccount {OPERATOR_NAMESPACE}/{OPERATOR_NAME}",
        f"ClusterRoleBinding {OPERATOR_NAME}",
        f"ClusterRole {OPERATOR_NAME}",
        f"Namespace {OPERATOR_NAMESPACE}",
        *crds,
    ]


# --------------------------------------------------------------------------------- the gate


@dataclass(frozen=True)
class RayGateConfig:
    worker_replicas: int
    image: str
    cpu_node_group: str
    timeout_s: float
    poll_s: float = 2.0


@dataclass
class RaySnapshot:
    """What one look at the RayCluster and its pods found; `missing` says what keeps it from ready."""

    found: bool = False
    conditions: dict[str, str] = field(default_factory=dict)  # type -> status
    ready_workers: int = 0
    desired_workers: int = 0
    head_ready: bool = False
    state: str = ""
    pods: list[JSON] = field(default_factory=list)  # name, node, image, ready, role
    missing: list[str] = field(default_factory=list)

    @property
    def ready(self) -> bool:
        return self.found and not self.missing

    def to_json(self) -> JSON:
        return {**asdict(self), "ready": self.ready}


def _condition(obj: JSON, kind: str) -> str:
    for cond in (obj.get("status") or {}).get("conditions") or []:
        if cond.get("type") == kind:
            return str(cond.get("status", ""))
    return ""


def _pod_ready(pod: JSON) -> bool:
    status = pod.get("status") or {}
    ready = any(
        c.get("type") == "Ready" and c.get("status") == "True" for c in status.get("conditions") or []
    )
    return status.get("phase") == "Running" and ready


def raycluster_path() -> str:
    return f"/apis/ray.io/v1/namespaces/{RAY_NAMESPACE}/rayclusters/{RAYCLUSTER_NAME}"


def check_ray(client: Any, config: RayGateConfig) -> RaySnapshot:
    """One look: the RayCluster's own status (as KubeRay wrote it) and every Ray pod's node and image."""
    snap = RaySnapshot()
    cluster = client.get_or_none(raycluster_path())
    if cluster is None:
        snap.missing.append(f"RayCluster {RAY_NAMESPACE}/{RAYCLUSTER_NAME} does not exist")
        return snap
    judge_status(cluster, config.worker_replicas, snap)
    _check_pods(client, config, snap)
    return snap


def judge_status(cluster: JSON, worker_replicas: int, snap: RaySnapshot) -> None:
    """What KubeRay's own status says of the RayCluster, into `snap`: ready only with its
    `RayClusterProvisioned` and `HeadPodReady` conditions True and `readyWorkerReplicas` at the spec's
    count. `state: ready` alone is never enough: KubeRay reported it while workers were Pending
    (ray-project/kuberay#2188), and without the `RayClusterStatusConditions` feature gate (alpha in KubeRay
    1.2, docs.ray.io "KubeRay Observability") there are no conditions at all, which reads `Unknown` (fail
    closed). A field KubeRay leaves out when zero (`omitempty`) reads 0."""
    snap.found = True
    status = cluster.get("status") or {}
    for kind in ("RayClusterProvisioned", "HeadPodReady", "ReplicaFailure"):
        snap.conditions[kind] = _condition(cluster, kind) or "Unknown"
    snap.ready_workers = int(status.get("readyWorkerReplicas") or 0)
    snap.desired_workers = int(status.get("desiredWorkerReplicas") or 0)
    snap.state = str(status.get("state") or "")
    snap.head_ready = snap.conditions["HeadPodReady"] == "True"
    for kind in ("RayClusterProvisioned", "HeadPodReady"):
        if snap.conditions[kind] != "True":
            snap.missing.append(f"condition {kind} is {snap.conditions[kind]}, not True")
    if snap.conditions["ReplicaFailure"] == "True":
        snap.missing.append("condition ReplicaFailure is True (KubeRay could not create a Ray pod)")
    if snap.ready_workers != worker_replicas:
        snap.missing.append(
            f"readyWorkerReplicas is {snap.ready_workers}, the spec asks for {worker_replicas}"
        )


def _check_pods(client: Any, config: RayGateConfig, snap: RaySnapshot) -> None:
    nodes = {n["metadata"]["name"]: n for n in client.list("/api/v1/nodes")}
    pods = client.list(f"/api/v1/namespaces/{RAY_NAMESPACE}/pods", f"{RAY_CLUSTER_LABEL}={RAYCLUSTER_NAME}")
    for pod in pods:
        name = pod["metadata"]["name"]
        node = (pod.get("spec") or {}).get("nodeName") or ""
        images = [c.get("image", "") for c in (pod.get("spec") or {}).get("containers") or []]
        group = ((nodes.get(node) or {}).get("metadata") or {}).get("labels", {}).get(NODE_GROUP_LABEL, "")
        role = (pod["metadata"].get("labels") or {}).get(RAY_NODE_TYPE_LABEL, "")
        snap.pods.append(
            {"name": name, "role": role, "node": node, "images": images, "ready": _pod_ready(pod)}
        )
        if any(image != config.image for image in images):
            snap.missing.append(f"pod {name} runs {', '.join(images)}, not the pinned {config.image}")
        if node and group != config.cpu_node_group:
            snap.missing.append(
                f"pod {name} is on node {node}, not on the CPU node group {config.cpu_node_group}"
            )
    if not pods:
        snap.missing.append("no Ray pods exist")


def wait_for_ray(
    client_for: Callable[[float], Any],
    config: RayGateConfig,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> JSON:
    """Poll until the Ray cluster is ready or `timeout_s` passes; the evidence is the last look."""
    deadline = clock() + config.timeout_s
    attempts = 0
    while True:
        attempts += 1
        try:
            snap = check_ray(client_for(10.0), config)
        except Exception as err:  # the API is unreachable (a fault): keep waiting, say so if it lasts
            snap = RaySnapshot(missing=[f"the cluster's API failed: {err}"])
        if snap.ready or clock() >= deadline:
            return {
                "passed": snap.ready,
                "attempts": attempts,
                "timeout_s": config.timeout_s,
                **snap.to_json(),
            }
        sleep(config.poll_s)
