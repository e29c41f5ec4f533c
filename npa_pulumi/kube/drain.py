"""Draining a whole cluster before it is deleted: one inventory, what would block, eviction, and the four
kube-system PodDisruptionBudgets that may be relaxed.

* **Inventory** (`take_inventory`): nodes, pods, ReplicaSets (a pod's Deployment) and PodDisruptionBudgets,
  cluster-wide, one list call each.
* **What blocks** (`blockers`): a PodDisruptionBudget blocks when more of the pods it selects sit on nodes
  that go than its `status.disruptionsAllowed`, and no node that stays can take a replacement (its
  selector, node selector, required node affinity, taints and tolerations, cordons). A whole cluster's
  deletion drains every node, so there every such pod is one "no other node can take": the common case
  of a one-CPU-node pool whose CoreDNS, cilium-operator, CoreDNS autoscaler and metrics-server cannot be
  rescheduled anywhere.
* **Eviction** (`evict_pods`): the API's own `policy/v1` Eviction subresource, so the API server applies
  every budget; a refusal (429) is retried for a bounded time, then reported by pod.
* **The four system budgets** (`SYSTEM_PDBS`, `is_system_pdb`): the managed cluster's own workloads in
  `kube-system`; identified by namespace, name *and* what they protect (every pod they select belongs to
  the Deployment of that name), so a user's budget that happens to share a name is never one of them.
  `relax_pdb` snapshots one and deletes exactly that object (uid and resourceVersion preconditions);
  `restore_pdb` puts it back from the snapshot. Nothing here decides *whether* to relax: the teardown
  does (engine/teardown/drain.py), and it never relaxes any other budget.

No kubectl: the small client of kube/client.py.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from npa_pulumi.kube.client import KubeClient, KubeError

JSON = dict[str, Any]

SYSTEM_NAMESPACE = "kube-system"
# The managed cluster's own workloads under a PodDisruptionBudget in kube-system: the budget's name -> the
# Deployment whose pods it protects (of the same name).
SYSTEM_PDBS: dict[str, str] = {
    "cilium-operator": "cilium-operator",
    "coredns": "coredns",
    "coredns-autoscaler": "coredns-autoscaler",
    "metrics-server": "metrics-server",
}
MIRROR_ANNOTATION = "kubernetes.io/config.mirror"
PDB_PATH = "/apis/policy/v1/poddisruptionbudgets"


def ref(obj: JSON) -> str:
    meta = obj.get("metadata") or {}
    return f"{meta.get('namespace', '')}/{meta.get('name', '')}"


def _meta(obj: JSON, key: str) -> str:
    return str((obj.get("metadata") or {}).get(key) or "")


# --------------------------------------------------------------------------------- selectors


def _expression_holds(expression: JSON, labels: dict[str, str]) -> bool:
    key, operator = expression.get("key", ""), expression.get("operator", "")
    values = [str(v) for v in expression.get("values") or []]
    if operator == "In":
        return key in labels and labels[key] in values
    if operator == "NotIn":
        return key not in labels or labels[key] not in values
    if operator == "Exists":
        return key in labels
    if operator == "DoesNotExist":
        return key not in labels
    if operator in ("Gt", "Lt") and key in labels and values:  # node affinity only
        try:
            have, want = int(labels[key]), int(values[0])
        except ValueError:
            return False
        return have > want if operator == "Gt" else have < want
    return False


def selects(selector: JSON | None, labels: dict[str, str]) -> bool:
    """A `metav1.LabelSelector`: a null selector selects nothing, an empty one everything (policy/v1)."""
    if selector is None:
        return False
    wanted = selector.get("matchLabels") or {}
    if any(labels.get(k) != v for k, v in wanted.items()):
        return False
    return all(_expression_holds(e, labels) for e in selector.get("matchExpressions") or [])


# --------------------------------------------------------------------------------- inventory


@dataclass
class Inventory:
    """One cluster-wide read of what a drain needs."""

    nodes: list[JSON] = field(default_factory=list)
    pods: list[JSON] = field(default_factory=list)
    replicasets: list[JSON] = field(default_factory=list)
    pdbs: list[JSON] = field(default_factory=list)

    def deployment_of(self, pod: JSON) -> str | None:
        """`namespace/name` of the Deployment whose ReplicaSet controls the pod, if one does."""
        owner = _controller(pod)
        if owner is None or owner.get("kind") != "ReplicaSet":
            return None
        namespace = _meta(pod, "namespace")
        for replicaset in self.replicasets:
            if _meta(replicaset, "namespace") == namespace and _meta(replicaset, "name") == owner.get("name"):
                parent = _controller(replicaset)
                if parent is not None and parent.get("kind") == "Deployment":
                    return f"{namespace}/{parent.get('name')}"
        return None

    def covered(self, pdb: JSON, pods: Iterable[JSON] | None = None) -> list[JSON]:
        """The pods (of `pods`, else all) in the budget's namespace that its selector selects."""
        namespace = _meta(pdb, "namespace")
        selector = (pdb.get("spec") or {}).get("selector")
        return [
            p
            for p in (self.pods if pods is None else pods)
            if _meta(p, "namespace") == namespace and selects(selector, _labels(p))
        ]


def take_inventory(client: KubeClient) -> Inventory:
    """Nodes, pods, ReplicaSets and PodDisruptionBudgets of the whole cluster (raises KubeError)."""
    return Inventory(
        nodes=client.list("/api/v1/nodes"),
        pods=client.list("/api/v1/pods"),
        replicasets=client.list("/apis/apps/v1/replicasets"),
        pdbs=client.list(PDB_PATH),
    )


def _labels(obj: JSON) -> dict[str, str]:
    return {str(k): str(v) for k, v in ((obj.get("metadata") or {}).get("labels") or {}).items()}


def _controller(obj: JSON) -> JSON | None:
    owners = (obj.get("metadata") or {}).get("ownerReferences") or []
    return next((o for o in owners if o.get("controller")), None)


def evictable(pod: JSON) -> bool:
    """A pod a drain evicts: running or pending on a node, not already going, not a DaemonSet's (it would
    be put back on the same node) and not a static (mirror) pod (the kubelet owns it)."""
    spec, status = pod.get("spec") or {}, pod.get("status") or {}
    meta = pod.get("metadata") or {}
    if not spec.get("nodeName") or meta.get("deletionTimestamp"):
        return False
    if status.get("phase") in ("Succeeded", "Failed"):
        return False
    if MIRROR_ANNOTATION in (meta.get("annotations") or {}):
        return False
    owner = _controller(pod)
    return not (owner is not None and owner.get("kind") == "DaemonSet")


# --------------------------------------------------------------------------------- placement


def _tolerates(pod: JSON, taint: JSON) -> bool:
    for toleration in (pod.get("spec") or {}).get("tolerations") or []:
        if toleration.get("effect") and toleration.get("effect") != taint.get("effect"):
            continue
        if toleration.get("operator") == "Exists":
            if not toleration.get("key") or toleration.get("key") == taint.get("key"):
                return True
        elif toleration.get("key") == taint.get("key") and toleration.get("value", "") == taint.get(
            "value", ""
        ):
            return True
    return False


def placeable(pod: JSON, node: JSON) -> bool:
    """Whether a replacement of `pod` could be scheduled on `node`: not cordoned, its node selector and
    required node affinity hold, and it tolerates the node's NoSchedule/NoExecute taints. Resources are not
    counted (a drain preview errs towards "could be placed": it never claims a block it cannot show)."""
    node_spec, pod_spec = node.get("spec") or {}, pod.get("spec") or {}
    if node_spec.get("unschedulable"):
        return False
    labels = _labels(node)
    if any(labels.get(k) != v for k, v in (pod_spec.get("nodeSelector") or {}).items()):
        return False
    affinity = ((pod_spec.get("affinity") or {}).get("nodeAffinity") or {}).get(
        "requiredDuringSchedulingIgnoredDuringExecution"
    ) or {}
    terms = affinity.get("nodeSelectorTerms") or []
    if terms and not any(
        all(_expression_holds(e, labels) for e in t.get("matchExpressions") or []) for t in terms
    ):
        return False
    taints = [t for t in node_spec.get("taints") or [] if t.get("effect") in ("NoSchedule", "NoExecute")]
    return all(_tolerates(pod, t) for t in taints)


# --------------------------------------------------------------------------------- what blocks


def is_system_pdb(pdb: JSON, inventory: Inventory) -> bool:
    """One of the four system budgets: in kube-system, by its exact name, and every pod it selects is the
    Deployment of that name's (a budget that selects anything else is someone's, whatever its name)."""
    name = _meta(pdb, "name")
    if _meta(pdb, "namespace") != SYSTEM_NAMESPACE or name not in SYSTEM_PDBS:
        return False
    owner = f"{SYSTEM_NAMESPACE}/{SYSTEM_PDBS[name]}"
    return all(inventory.deployment_of(p) == owner for p in inventory.covered(pdb))


def disruptions_allowed(pdb: JSON) -> int:
    """What the disruption controller says the budget allows now; 0 until it has observed this generation
    (the API server refuses evictions then too)."""
    status = pdb.get("status") or {}
    generation = (pdb.get("metadata") or {}).get("generation") or 0
    if int(status.get("observedGeneration") or 0) < int(generation):
        return 0
    return max(0, int(status.get("disruptionsAllowed") or 0))


@dataclass(frozen=True)
class Blocker:
    """A budget that blocks a drain of `draining`: its pods there, and how many disruptions it allows."""

    namespace: str
    name: str
    system: bool
    allowed: int
    pods: tuple[str, ...]  # "namespace/name (node)"

    @property
    def ref(self) -> str:
        return f"{self.namespace}/{self.name}"

    def why(self, whole_cluster: bool) -> str:
        where = "every node of the cluster goes" if whole_cluster else "no node that stays can take them"
        return (
            f"allows {self.allowed} disruption(s) for {len(self.pods)} pod(s) on nodes that go; {where}, "
            "so no replacement can become ready"
        )


def blockers(inventory: Inventory, draining: set[str]) -> list[Blocker]:
    """Every budget that would stop a drain of the nodes `draining` (sorted by namespace and name)."""
    staying = [n for n in inventory.nodes if _meta(n, "name") not in draining]
    going = [p for p in inventory.pods if evictable(p) and (p.get("spec") or {}).get("nodeName") in draining]
    found = []
    for pdb in inventory.pdbs:
        pods = inventory.covered(pdb, going)
        allowed = disruptions_allowed(pdb)
        if len(pods) <= allowed:
            continue
        if any(placeable(p, node) for p in pods for node in staying):
            continue  # replacements can become ready elsewhere: slower, not blocked
        found.append(
            Blocker(
                namespace=_meta(pdb, "namespace"),
                name=_meta(pdb, "name"),
                system=is_system_pdb(pdb, inventory),
                allowed=allowed,
                pods=tuple(sorted(f"{ref(p)} ({p['spec']['nodeName']})" for p in pods)),
            )
        )
    return sorted(found, key=lambda b: (b.namespace, b.name))


def budgets_of(pod: JSON, inventory: Inventory) -> list[JSON]:
    """The budgets that select `pod`."""
    return [pdb for pdb in inventory.pdbs if inventory.covered(pdb, [pod])]


# --------------------------------------------------------------------------------- nodes


def cordon(client: KubeClient, nodes: list[JSON], cordoned: list[str] | None = None) -> list[str]:
    """Mark every schedulable node of `nodes` unschedulable, so evicted pods' replacements are not put back
    on a node that goes; the names of those this call cordoned (the others already were), appended to
    `cordoned` as it goes, so a failure part-way still says which to make schedulable again."""
    cordoned = [] if cordoned is None else cordoned
    for node in nodes:
        if (node.get("spec") or {}).get("unschedulable"):
            continue
        name = _meta(node, "name")
        client.merge_patch(f"/api/v1/nodes/{name}", {"spec": {"unschedulable": True}})
        cordoned.append(name)
    return cordoned


def uncordon(client: KubeClient, names: list[str]) -> list[str]:
    """Make the nodes this drain cordoned schedulable again (a destroy that aborted leaves the cluster as it
    found it); the ones done (a node already gone is skipped)."""
    done = []
    for name in names:
        try:
            client.merge_patch(f"/api/v1/nodes/{name}", {"spec": {"unschedulable": None}})
        except KubeError as err:
            if err.status == 404:
                continue
            raise
        done.append(name)
    return done


# --------------------------------------------------------------------------------- eviction


@dataclass
class Evictions:
    evicted: list[JSON] = field(default_factory=list)
    refused: dict[str, str] = field(default_factory=dict)  # pod ref -> the API server's answer


def evict_pods(
    client: KubeClient,
    pods: list[JSON],
    retry_s: float,
    poll_s: float = 1.0,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
    final: Callable[[JSON], bool] = lambda _pod: False,
) -> Evictions:
    """Evict each pod through the Eviction subresource; a refusal by a budget (429) is asked again until
    `retry_s` has passed (a replacement may become ready meanwhile), then left refused; a pod `final` says
    no replacement can rescue (its budget blocks: `blockers`) is not asked again. Any other API error is
    raised: the caller tells its kind."""
    result = Evictions()
    waiting = list(pods)
    deadline = clock() + retry_s
    while waiting:
        still = []
        for pod in waiting:
            meta = pod["metadata"]
            try:
                client.evict(meta["namespace"], meta["name"], str(meta.get("uid") or ""))
            except KubeError as err:
                if err.status != 429:
                    raise
                result.refused[ref(pod)] = str(err)
                if not final(pod):
                    still.append(pod)
                continue
            result.refused.pop(ref(pod), None)
            result.evicted.append(pod)
        waiting = still
        if not waiting or clock() >= deadline:
            break
        sleep(poll_s)
    return result


def wait_gone(
    client: KubeClient,
    pods: list[JSON],
    timeout_s: float,
    poll_s: float = 0.5,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> list[str]:
    """Until every pod of `pods` is gone (or replaced by another of the same name); those still there when
    `timeout_s` has passed."""
    deadline = clock() + timeout_s
    left = list(pods)
    while True:
        still = []
        for pod in left:
            current = client.get_or_none(
                f"/api/v1/namespaces/{_meta(pod, 'namespace')}/pods/{_meta(pod, 'name')}"
            )
            if current is not None and _meta(current, "uid") == _meta(pod, "uid"):
                still.append(pod)
        left = still
        if not left or clock() >= deadline:
            return [ref(p) for p in left]
        sleep(poll_s)


# ------------------------------------------------------------------------------------ job waits


_LIVE_PHASES = ("Pending", "Running")  # a pod in either has not finished its work


def running_jobs(client: KubeClient, selectors: Iterable[str]) -> list[str]:
    """`namespace/name` of every Pending or Running pod matching any of `selectors`, in every namespace
    (one list call per selector; the API server applies each selector)."""
    found: set[str] = set()
    for selector in selectors:
        for pod in client.list("/api/v1/pods", label_selector=selector):
            if (pod.get("status") or {}).get("phase") in _LIVE_PHASES and not _meta(pod, "deletionTimestamp"):
                found.add(ref(pod))
    return sorted(found)


@dataclass(frozen=True)
class JobWait:
    """How a wait for running jobs ended: `still` empty when every one ended in time (`waited_s`)."""

    waited_s: float
    seen: tuple[str, ...]  # the job pods running when the wait began
    still: tuple[str, ...]  # those still running when it gave up

    @property
    def cleared(self) -> bool:
        return not self.still


def wait_for_jobs(
    running: Callable[[], list[str]],
    timeout_s: float,
    poll_s: float = 10.0,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> JobWait:
    """Until `running()` (e.g. `running_jobs` of a cluster) finds none, or `timeout_s` has passed. Never
    evicts or deletes anything: the caller decides what a timeout means (a disruptive `up` halts)."""
    started = clock()
    seen = tuple(running())
    now = seen
    while now:
        left = timeout_s - (clock() - started)
        if left <= 0:
            break
        sleep(min(poll_s, left))
        now = tuple(running())
    return JobWait(round(clock() - started, 1), seen, now)


# --------------------------------------------------------------------------------- system budgets


def pdb_path(namespace: str, name: str) -> str:
    return f"/apis/policy/v1/namespaces/{namespace}/poddisruptionbudgets/{name}"


def snapshot(pdb: JSON) -> JSON:
    """What puts the budget back as it was: name, namespace, labels, annotations and spec (not its status,
    uid or resourceVersion, which the API server assigns), and the uid it had."""
    meta = pdb.get("metadata") or {}
    return {
        "namespace": str(meta.get("namespace") or ""),
        "name": str(meta.get("name") or ""),
        "uid": str(meta.get("uid") or ""),
        "labels": dict(meta.get("labels") or {}),
        "annotations": dict(meta.get("annotations") or {}),
        "spec": dict(pdb.get("spec") or {}),
    }


def restorable(saved: JSON) -> JSON:
    """The object `restore_pdb` creates from a snapshot."""
    metadata: JSON = {"name": saved["name"], "namespace": saved["namespace"]}
    if saved.get("labels"):
        metadata["labels"] = saved["labels"]
    if saved.get("annotations"):
        metadata["annotations"] = saved["annotations"]
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": metadata,
        "spec": saved.get("spec") or {},
    }


def relax_pdb(
    client: KubeClient, namespace: str, name: str, keep: Callable[[JSON], None], attempts: int = 3
) -> JSON | None:
    """Delete one budget, exactly the object snapshotted: read it, hand the snapshot to `keep` (which must
    make it durable: the receipt), then delete with its uid and resourceVersion as preconditions. A budget
    changed in between (409) is read and snapshotted again. None when it is already gone."""
    for _ in range(attempts):
        current = client.get_or_none(pdb_path(namespace, name))
        if current is None:
            return None
        saved = snapshot(current)
        keep(saved)
        preconditions = {
            "uid": saved["uid"],
            "resourceVersion": str((current.get("metadata") or {}).get("resourceVersion") or ""),
        }
        try:
            client.delete(pdb_path(namespace, name), preconditions=preconditions, grace_s=None)
        except KubeError as err:
            if err.status == 409:
                continue
            raise
        return saved
    raise KubeError(f"PodDisruptionBudget {namespace}/{name} kept changing: not removed", 409)


def restore_pdb(client: KubeClient, saved: JSON) -> str:
    """Put a removed budget back from its snapshot: `restored`, or `present` when a budget of that name is
    there already with the same spec (put back by its owner). One of that name with another spec is left
    as it is and raises: whoever made it meant it."""
    obj = restorable(saved)
    namespace = saved["namespace"]
    try:
        client.create(f"/apis/policy/v1/namespaces/{namespace}/poddisruptionbudgets", obj)
    except KubeError as err:
        if err.status != 409:
            raise
        current = client.get_or_none(pdb_path(namespace, saved["name"])) or {}
        if (current.get("spec") or {}) == obj["spec"]:
            return "present"
        raise KubeError(
            f"PodDisruptionBudget {namespace}/{saved['name']} exists again with another spec: left as it is",
            409,
        ) from None
    return "restored"
