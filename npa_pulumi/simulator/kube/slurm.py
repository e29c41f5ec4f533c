"""What a soperator cluster holds on its Kubernetes API, and the simulated operator that keeps its status.

The soperator recipe records its Slurm cluster as the cluster's `soperator` addon (JSON text: name,
namespace, controllers, login, accounting, nodesets[{name, size, ...}]). From it this module derives:
* the operator's CRDs, authored from its API (group `slurm.nebius.ai`: `SlurmCluster` v1, `NodeSet`
  v1alpha1), with only the fields the fleet reads and writes and status subresources (the real ones are
  too large for client-side apply and their module is not available here);
* a `SlurmCluster` (the recipe's fixed name `soperator` in namespace `soperator`), one `NodeSet` per worker
  set, the login Service `soperator-login-svc` (a LoadBalancer) and the controller Service;
* their status, as the operator sets it: a NodeSet is `Ready` when every node of its set is Ready
  (`PodsReady`), `Provisioning` while some are, `Pending` with none; the SlurmCluster is `Available` only
  when its controllers, login and (when enabled) accounting are available and every NodeSet resolves, else
  `Not available` (`Pending` before any node exists).
Faults (`local-cloud fault slurm`): `controller_down` / `login_down` make that role's nodes NotReady
(kwok's node-not-ready stage), and the operator sees the consequence as it would on a real cluster.

Slurm drains: soperator takes and reports a drain of a worker through its Kubernetes node's
`SlurmNodeDrain` condition (soperator's consts). Set True with reason `NodeNeedDrain` (by soperator itself
for maintenance, or by the repair ladder), the operator drains the node's Slurm nodes with the condition's
message as the reason: the reason becomes `NodeDraining` while jobs still run on them (Slurm: DRAIN+ALLOC)
and `NodeDrained` once none does (DRAIN+IDLE). Jobs are the cluster record's `slurm_jobs` (node -> count,
`NodeHealth.set_slurm_jobs`).
"""

from __future__ import annotations

import hashlib
import json
from datetime import UTC, datetime
from typing import Any

JSON = dict[str, Any]

GROUP = "slurm.nebius.ai"
ROLE_LABEL = "slurm.nebius.ai/node-role"
NODESET_LABEL = "slurm.nebius.ai/nodeset"
NOT_READY_LABEL = "node-not-ready.stage.kwok.x-k8s.io"
MANAGED_BY = "app.kubernetes.io/managed-by"
FAULT_ROLES = {"controller_down": "controller", "login_down": "login"}
DRAIN_CONDITION = "SlurmNodeDrain"
NEED_DRAIN, DRAINING, DRAINED = "NodeNeedDrain", "NodeDraining", "NodeDrained"
DRAIN_MANAGER = "soperator-slurm-nodes"  # the operator's own field manager of the drain conditions
LOGIN_SERVICE = "soperator-login-svc"
CONTROLLER_SERVICE = "soperator-controller-svc"


def _crd(kind: str, plural: str, version: str, spec: JSON, status: JSON, columns: list[JSON]) -> JSON:
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.{GROUP}", "labels": {MANAGED_BY: "Helm"}},
        "spec": {
            "group": GROUP,
            "names": {"kind": kind, "listKind": f"{kind}List", "plural": plural, "singular": kind.lower()},
            "scope": "Namespaced",
            "versions": [
                {
                    "name": version,
                    "served": True,
                    "storage": True,
                    "subresources": {"status": {}},
                    "additionalPrinterColumns": columns,
                    "schema": {
                        "openAPIV3Schema": {
                            "type": "object",
                            "properties": {
                                "spec": {"type": "object", "properties": spec},
                                "status": {"type": "object", "properties": status},
                            },
                        }
                    },
                }
            ],
        },
    }


_CONDITIONS: JSON = {
    "type": "array",
    "items": {
        "type": "object",
        "required": ["type", "status"],
        "properties": {
            "type": {"type": "string"},
            "status": {"type": "string", "enum": ["True", "False", "Unknown"]},
            "reason": {"type": "string"},
            "message": {"type": "string"},
            "lastTransitionTime": {"type": "string", "format": "date-time"},
        },
    },
}
_INT = {"type": "integer", "format": "int32"}
_STR = {"type": "string"}

SLURMCLUSTER_CRD = _crd(
    "SlurmCluster",
    "slurmclusters",
    "v1",
    spec={
        "crVersion": _STR,
        "slurmNodes": {
            "type": "object",
            "properties": {
                "controller": {"type": "object", "properties": {"size": _INT}},
                "login": {"type": "object", "properties": {"size": _INT}},
                "accounting": {"type": "object", "properties": {"enabled": {"type": "boolean"}}},
            },
        },
        "nodeSetRefs": {"type": "array", "items": _STR},
    },
    status={
        "phase": {"type": "string", "enum": ["Pending", "Reconciling", "Not available", "Available"]},
        "conditions": _CONDITIONS,
        "readyLogin": _INT,
        "readySConfigController": _INT,
    },
    columns=[{"name": "Status", "type": "string", "jsonPath": ".status.phase"}],
)
NODESET_CRD = _crd(
    "NodeSet",
    "nodesets",
    "v1alpha1",
    spec={"replicas": _INT, "nodeSelector": {"type": "object", "additionalProperties": _STR}},
    status={
        "phase": {
            "type": "string",
            "enum": ["Pending", "Configuring", "Provisioning", "Ready", "Degraded", "Terminating"],
        },
        "conditions": _CONDITIONS,
        "replicas": _INT,
        "readyReplicas": _INT,
    },
    columns=[
        {"name": "Replicas", "type": "integer", "jsonPath": ".spec.replicas"},
        {"name": "Ready", "type": "integer", "jsonPath": ".status.readyReplicas"},
        {"name": "Phase", "type": "string", "jsonPath": ".status.phase"},
    ],
)
# The scale subresource the real NodeSet has.
NODESET_CRD["spec"]["versions"][0]["subresources"]["scale"] = {
    "specReplicasPath": ".spec.replicas",
    "statusReplicasPath": ".status.replicas",
}


def slurm_of(cluster: JSON) -> JSON | None:
    """The Slurm cluster the recipe installed, or None (not a soperator cluster, or not installed yet)."""
    raw = (cluster.get("addons") or {}).get("soperator")
    if isinstance(raw, str):
        try:
            raw = json.loads(raw) if raw else None
        except ValueError:
            return None
    return raw if isinstance(raw, dict) and raw else None


def faults_of(cluster: JSON) -> JSON:
    return dict(cluster.get("slurm_faults") or {})


def with_faults(cluster: JSON, nodes: dict[str, JSON]) -> dict[str, JSON]:
    """The desired nodes with a role fault applied: the faulted role's nodes go NotReady."""
    roles = {role for fault, role in FAULT_ROLES.items() if faults_of(cluster).get(fault)}
    if not roles:
        return nodes
    for node in nodes.values():
        labels = node["metadata"]["labels"]
        if labels.get(ROLE_LABEL) in roles:
            labels[NOT_READY_LABEL] = "true"
    return nodes


def login_address(cluster_id: str) -> str:
    """A stable documentation-range address (RFC 5737) standing in for the login LoadBalancer's."""
    digest = hashlib.sha256(cluster_id.encode()).digest()
    return f"203.0.113.{1 + digest[0] % 254}"


def desired_objects(slurm: JSON) -> list[JSON]:
    """What Flux's releases leave in the cluster, in apply order (namespace and CRDs first)."""
    namespace, name = slurm.get("namespace", "soperator"), slurm.get("name", "soperator")
    labels = {MANAGED_BY: "Helm", "app.kubernetes.io/part-of": "soperator"}
    nodesets = list(slurm.get("nodesets") or [])
    objects: list[JSON] = [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace, "labels": labels}},
        SLURMCLUSTER_CRD,
        NODESET_CRD,
        {
            "apiVersion": f"{GROUP}/v1",
            "kind": "SlurmCluster",
            "metadata": {"name": name, "namespace": namespace, "labels": labels},
            "spec": {
                "crVersion": str(slurm.get("operator_version", "")),
                "slurmNodes": {
                    "controller": {"size": int(slurm.get("controllers", 1))},
                    "login": {"size": int(slurm.get("login", 1))},
                    "accounting": {"enabled": bool(slurm.get("accounting"))},
                },
                "nodeSetRefs": [str(n["name"]) for n in nodesets],
            },
        },
    ]
    for nodeset in nodesets:
        objects.append(
            {
                "apiVersion": f"{GROUP}/v1alpha1",
                "kind": "NodeSet",
                "metadata": {"name": nodeset["name"], "namespace": namespace, "labels": labels},
                "spec": {
                    "replicas": int(nodeset["size"]),
                    "nodeSelector": {NODESET_LABEL: str(nodeset["name"])},
                },
            }
        )
    for service, kind, port in ((LOGIN_SERVICE, "LoadBalancer", 22), (CONTROLLER_SERVICE, "ClusterIP", 6817)):
        role = "login" if service == LOGIN_SERVICE else "controller"
        objects.append(
            {
                "apiVersion": "v1",
                "kind": "Service",
                "metadata": {"name": service, "namespace": namespace, "labels": labels},
                "spec": {
                    "type": kind,
                    "selector": {ROLE_LABEL: role},
                    "ports": [{"port": port, "protocol": "TCP"}],
                },
            }
        )
    return objects


def _ready(node: JSON) -> bool:
    return any(
        c.get("type") == "Ready" and c.get("status") == "True"
        for c in (node.get("status") or {}).get("conditions") or []
    )


def _condition(kind: str, ok: bool, reason: str, message: str, previous: list[JSON]) -> JSON:
    status = "True" if ok else "False"
    before = next((c for c in previous if c.get("type") == kind), None)
    stamp = (
        before["lastTransitionTime"]
        if before and before.get("status") == status and before.get("lastTransitionTime")
        else datetime.now(tz=UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    )
    return {"type": kind, "status": status, "reason": reason, "message": message, "lastTransitionTime": stamp}


def _role_ready(nodes: list[JSON], role: str) -> tuple[int, int]:
    mine = [n for n in nodes if (n["metadata"].get("labels") or {}).get(ROLE_LABEL) == role]
    return sum(1 for n in mine if _ready(n)), len(mine)


def nodeset_status(nodeset: JSON, nodes: list[JSON], previous: list[JSON]) -> JSON:
    name, size = str(nodeset["name"]), int(nodeset["size"])
    mine = [n for n in nodes if (n["metadata"].get("labels") or {}).get(NODESET_LABEL) == name]
    ready = sum(1 for n in mine if _ready(n))
    phase = "Ready" if ready >= size and len(mine) >= size else "Provisioning" if mine else "Pending"
    return {
        "phase": phase,
        "replicas": len(mine),
        "readyReplicas": ready,
        "conditions": [
            _condition(
                "PodsReady",
                phase == "Ready",
                "AllPodsReady" if phase == "Ready" else "PodsNotReady",
                f"{ready}/{size} worker pods ready",
                previous,
            ),
            _condition("StatefulSetUpdated", bool(mine), "Updated" if mine else "Pending", "", previous),
        ],
    }


def cluster_status(
    slurm: JSON,
    nodes: list[JSON],
    nodesets: dict[str, JSON],
    previous: list[JSON],
    down: frozenset[str] = frozenset(),
) -> JSON:
    """The SlurmCluster's status: Available only when controllers, login and accounting are available.
    `down`: roles a fault took down (their pods are not ready even before kwok marks the nodes NotReady)."""
    controllers, controllers_total = _role_ready(nodes, "controller")
    login, login_total = _role_ready(nodes, "login")
    controllers = 0 if "controller" in down else controllers
    login = 0 if "login" in down else login
    system, system_total = _role_ready(nodes, "system")
    accounting_on = bool(slurm.get("accounting"))
    accounting, accounting_total = _role_ready(nodes, "accounting")
    want_controllers, want_login = int(slurm.get("controllers", 1)), int(slurm.get("login", 1))
    checks = [
        (
            "CommonAvailable",
            system_total > 0 and system == system_total,
            f"{system}/{system_total} system nodes ready",
        ),
        (
            "ControllersAvailable",
            controllers >= want_controllers,
            f"{controllers}/{want_controllers} controllers ready",
        ),
        ("LoginAvailable", login >= want_login, f"{login}/{want_login} login nodes ready"),
        (
            "AccountingAvailable",
            (not accounting_on) or (accounting_total > 0 and accounting == accounting_total),
            "accounting disabled"
            if not accounting_on
            else f"{accounting}/{accounting_total} accounting ready",
        ),
        ("SConfigControllerAvailable", system_total > 0 and system > 0, f"{system} system nodes ready"),
        (
            "NodeSetRefsResolved",
            all(n["name"] in nodesets for n in slurm.get("nodesets") or []),
            f"{len(nodesets)} node sets",
        ),
    ]
    conditions = [
        _condition(kind, ok, "Available" if ok else "NotAvailable", message, previous)
        for kind, ok, message in checks
    ]
    available = all(ok for _, ok, _ in checks)
    phase = (
        "Available" if available else "Pending" if not (controllers_total or login_total) else "Not available"
    )
    return {
        "phase": phase,
        "conditions": conditions,
        "readyLogin": login,
        "readySConfigController": 1 if system else 0,
    }


def jobs_of(cluster: JSON) -> dict[str, int]:
    """The Slurm jobs running on each worker node (node -> count), as injected."""
    return {str(k): int(v) for k, v in (cluster.get("slurm_jobs") or {}).items() if int(v) > 0}


def drain_progress(reason: str, jobs: int) -> str:
    """The drain condition's reason once the operator has worked on a drain: still draining while jobs
    run on the node (DRAIN+ALLOC), drained once none does (DRAIN+IDLE); other reasons are left as they are."""
    if reason not in (NEED_DRAIN, DRAINING, DRAINED):
        return reason
    return DRAINING if jobs > 0 else DRAINED


def drain_updates(nodes: list[JSON], jobs: dict[str, int]) -> dict[str, JSON]:
    """The drain conditions the operator moves on (node name -> its new condition)."""
    found = {}
    for node in nodes:
        for c in (node.get("status") or {}).get("conditions") or []:
            if c.get("type") != DRAIN_CONDITION or c.get("status") != "True":
                continue
            reason = str(c.get("reason") or "")
            moved = drain_progress(reason, jobs.get(node["metadata"]["name"], 0))
            if moved != reason:
                stamp = datetime.now(tz=UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
                found[node["metadata"]["name"]] = c | {"reason": moved, "lastTransitionTime": stamp}
    return found


class SlurmOperator:
    """The operator's reconcile loop, one tick per agent sync."""

    def __init__(self) -> None:
        self.applied: dict[str, str] = {}

    def _apply_status(self, client: Any, path: str, obj: JSON, status: JSON, field_manager: str) -> None:
        body = {
            "apiVersion": obj["apiVersion"],
            "kind": obj["kind"],
            "metadata": {"name": obj["metadata"]["name"], "namespace": obj["metadata"]["namespace"]},
            "status": status,
        }
        digest = json.dumps(body, sort_keys=True)
        if self.applied.get(path) == digest:
            return
        client.apply(path + "/status", body, field_manager)
        self.applied[path] = digest

    def sync(self, client: Any, cluster: JSON, field_manager: str) -> None:
        from npa_pulumi.kube.client import object_path

        slurm = slurm_of(cluster)
        if slurm is None:
            return
        objects = desired_objects(slurm)
        nodes = client.list("/api/v1/nodes")
        for name, condition in drain_updates(nodes, jobs_of(cluster)).items():
            body = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name}}
            client.apply(
                f"/api/v1/nodes/{name}/status", body | {"status": {"conditions": [condition]}}, DRAIN_MANAGER
            )
        live_sets: dict[str, JSON] = {}
        for obj in objects:
            if obj["kind"] == "NodeSet":
                path = object_path(obj)
                current = client.get_or_none(path)
                if current is None:
                    continue
                live_sets[obj["metadata"]["name"]] = current
                previous = ((current.get("status") or {}).get("conditions")) or []
                wanted = {"name": obj["metadata"]["name"], "size": obj["spec"]["replicas"]}
                self._apply_status(client, path, obj, nodeset_status(wanted, nodes, previous), field_manager)
        for obj in objects:
            if obj["kind"] == "SlurmCluster":
                path = object_path(obj)
                current = client.get_or_none(path)
                if current is None:
                    continue
                previous = ((current.get("status") or {}).get("conditions")) or []
                down = frozenset(role for fault, role in FAULT_ROLES.items() if faults_of(cluster).get(fault))
                status = cluster_status(slurm, nodes, live_sets, previous, down)
                self._apply_status(client, path, obj, status, field_manager)
            elif obj["kind"] == "Service" and obj["metadata"]["name"] == LOGIN_SERVICE:
                path = object_path(obj)
                if client.get_or_none(path) is None:
                    continue
                login, _ = _role_ready(nodes, "login")
                login = 0 if faults_of(cluster).get("login_down") else login
                ingress = [{"ip": login_address(str(cluster.get("id", "")))}] if login else []
                self._apply_status(client, path, obj, {"loadBalancer": {"ingress": ingress}}, field_manager)
