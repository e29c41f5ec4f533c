"""The repairs `verify-mig --wait --reconcile` and `verify-graphics --reconcile` make, as the original tool's
skill states them: chosen from what a snapshot found, in one order, each at most once per run.

Every repair is refused, with nothing changed, while an active pod (Pending or Running) outside the GPU
operator requests or limits an `nvidia.com/*` resource: the operator deletes those workloads explicitly. A
repair never deletes an application pod and never relaxes a readiness check; what it did is judged by the
full gate afterwards (the caller runs it).

1. **Stale `OnDelete` driver pods** (`stale-driver-pod`). An `OnDelete` update strategy leaves a driver pod
   on its DaemonSet's older template until someone deletes it. Replacing it is maintenance, one worker at
   a time in node order: cordon the node (unless it was already unschedulable), recheck the workloads (one
   that appeared meanwhile: nothing is deleted, the node is restored, the repair is refused), delete exactly
   the identified pod with a UID precondition, wait until the DaemonSet's pod on that node is another one,
   on the newest template, Running and ready, then restore the node's prior scheduling state (uncordon
   only a node this repair cordoned). A node that is not Ready is not touched (its replacement could never
   become ready).
2. **The stale `nvidia.com/gpu=mig-not-ready:NoSchedule` taint** (MIG), only when it is the only thing
   wrong: exactly that taint removed, by index, with JSON Patch `test` operations; other taints stay.
3. **GFD, then the device plugin** (`stale-resources`), only when every finding is a node's GPU resources
   disagreeing with what is expected (on MIG clusters the nodes' MIG Manager labels say the layout was
   applied, or a label finding would be among them): a rolling restart of GPU feature discovery, waited
   until rolled out, then of the device plugin, never together, so the plugin re-registers against the
   labels and geometry discovery has just refreshed. A DaemonSet with an `OnDelete` strategy is not
   restarted (a restart would replace nothing): the repair fails instead.

Each step goes to `journal` as it happens (before a change and after it), so the caller's private receipt
says what was done, and what a run that died mid-way left behind (a node it cordoned).
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from enum import StrEnum

from npa_pulumi.kube.client import KubeClient, KubeError
from npa_pulumi.kube.gpu_health.checks import REVISION_LABEL, StaleDriverPod, find_stale_driver_pods
from npa_pulumi.kube.gpu_health.config import DRIVER_NAMESPACES, JSON, GateConfig, quantity
from npa_pulumi.kube.gpu_health.mig import MIG_NOT_READY_TAINT

RESTARTED_AT = "kubectl.kubernetes.io/restartedAt"  # what `kubectl rollout restart` stamps on a template
_MERGE = "application/merge-patch+json"
_POLL_S = 2.0


class RepairKind(StrEnum):
    DRIVER_POD = "stale-driver-pod"
    TAINT = "stale-taint"
    RESOURCES = "stale-resources"


# The snapshot findings each repair answers (their producers: checks.py, mig.py).
_STALE_DRIVER = re.compile(r"^driver pod \S+ runs an older template ")
_STALE_TAINT = re.compile(r"^\S+: tainted nvidia\.com/gpu=mig-not-ready:NoSchedule$")
_RESOURCE_FINDINGS = (
    re.compile(r"^\S+: (capacity|allocatable) nvidia\.com/\S+=\d+, \d+ expected$"),  # MIG layout
    re.compile(r"^\S+: nvidia\.com/gpu capacity \d+, allocatable \d+; \d+ expected$"),  # whole GPUs
    re.compile(r"^\d+ GPU\(s\) allocatable, \d+ requested$"),
)


def is_stale_taint_error(error: str) -> bool:
    return bool(_STALE_TAINT.match(error))


def is_resource_error(error: str) -> bool:
    """A node's advertised GPU resources disagree with what is expected (and nothing else is said)."""
    return any(pattern.match(error) for pattern in _RESOURCE_FINDINGS)


def gpu_workloads(client: KubeClient, operator_namespace: str = "gpu-operator") -> list[str]:
    """Active pods (Pending or Running) outside the GPU operator that request or limit any `nvidia.com/*`
    resource, as namespace/name: while one runs, no repair may touch a GPU node."""
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
            if any(k.startswith("nvidia.com/") and quantity(v) > 0 for k, v in wanted.items()):
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


class RepairFailed(Exception):
    """A repair could not finish; what it changed is in the journal (and was undone where it could be)."""


class _Refused(Exception):
    def __init__(self, workloads: list[str]) -> None:
        super().__init__(", ".join(workloads))
        self.workloads = workloads


@dataclass
class RepairOutcome:
    """One repair attempt: refused for `workloads` (nothing changed), failed with `error`, or done."""

    kind: RepairKind
    workloads: list[str] = field(default_factory=list)
    error: str | None = None
    changed: bool = False

    @property
    def refused(self) -> bool:
        return bool(self.workloads)


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def _ready(pod: JSON) -> bool:
    status = pod.get("status") or {}
    containers = status.get("containerStatuses") or []
    return status.get("phase") == "Running" and bool(containers) and all(c.get("ready") for c in containers)


def _node_ready(node: JSON) -> bool:
    conditions = (node.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


class Repairer:
    """The repairs of one run against one cluster: `attempt` picks the one the findings call for (or none),
    refuses it while GPU workloads run, and carries it out. Each kind at most once per run."""

    def __init__(
        self,
        config: GateConfig,
        journal: Callable[[JSON], None],
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.config = config
        self.namespace = DRIVER_NAMESPACES.get(config.driver_mode, "gpu-operator")
        self._journal = journal
        self.clock, self.sleep = clock, sleep
        self.attempted: list[RepairKind] = []
        self.changed = False

    def journal(self, kind: RepairKind, step: str, **fields: object) -> None:
        self._journal({"at": _now(), "repair": str(kind), "step": step, **fields})

    # ------------------------------------------------------------------ choosing

    def choose(self, client: KubeClient, errors: list[str]) -> tuple[RepairKind, list[StaleDriverPod]] | None:
        """The repair `errors` call for, in the skill's order; None when none applies (or it was tried)."""
        if not errors:
            return None
        if RepairKind.DRIVER_POD not in self.attempted and any(_STALE_DRIVER.match(e) for e in errors):
            pods = client.list(f"/api/v1/namespaces/{self.namespace}/pods")
            # Only OnDelete DaemonSets' pods (a rolling update's controller replaces its own), on nodes that
            # exist (a pod left bound to a deleted node is the pod garbage collector's, not a worker's).
            nodes = {n["metadata"]["name"] for n in client.list("/api/v1/nodes")}
            stale = [
                p
                for p in find_stale_driver_pods(client, self.namespace, pods)
                if p.on_delete and p.node in nodes
            ]
            if stale:
                return RepairKind.DRIVER_POD, sorted(stale, key=lambda s: (s.node, s.name))
        if RepairKind.TAINT not in self.attempted and all(is_stale_taint_error(e) for e in errors):
            return RepairKind.TAINT, []
        if RepairKind.RESOURCES not in self.attempted and all(is_resource_error(e) for e in errors):
            return RepairKind.RESOURCES, []
        return None

    def attempt(self, client: KubeClient, errors: list[str], deadline: float) -> RepairOutcome | None:
        """Carry out the repair `errors` call for; None when there is none."""
        choice = self.choose(client, errors)
        if choice is None:
            return None
        kind, stale = choice
        self.attempted.append(kind)
        outcome = RepairOutcome(kind)
        users = gpu_workloads(client)
        if users:
            self.journal(kind, "refused", workloads=users)
            outcome.workloads = users
            return outcome
        try:
            if kind is RepairKind.DRIVER_POD:
                for pod in stale:
                    self._replace_driver_pod(client, pod, deadline)
                    outcome.changed = self.changed = True
            elif kind is RepairKind.TAINT:
                outcome.changed = self._remove_taints(client, errors)
                self.changed |= outcome.changed
            else:
                self._restart_discovery(client, deadline, outcome)
            self.journal(kind, "done")
        except _Refused as refused:
            self.journal(kind, "refused", workloads=refused.workloads)
            outcome.workloads = refused.workloads
        except (KubeError, RepairFailed) as err:
            outcome.error = f"repair failed ({kind}): {err}"
            self.journal(kind, "failed", error=str(err))
        return outcome

    # ------------------------------------------------------------------ stale OnDelete driver pods

    def _replace_driver_pod(self, client: KubeClient, stale: StaleDriverPod, deadline: float) -> None:
        kind = RepairKind.DRIVER_POD
        node_path = f"/api/v1/nodes/{stale.node}"
        node = client.get(node_path)
        if not _node_ready(node):
            raise RepairFailed(
                f"node {stale.node} is not Ready: its driver pod {stale.name} is left as it is"
            )
        prior = bool((node.get("spec") or {}).get("unschedulable"))
        self.journal(kind, "cordon", node=stale.node, pod=stale.name, prior_unschedulable=prior)
        cordoned = False
        try:
            if not prior:
                client.request("PATCH", node_path, {"spec": {"unschedulable": True}}, _MERGE)
                cordoned = True
            users = gpu_workloads(client)  # one may have started between the check and the cordon
            if users:
                raise _Refused(users)
            self.journal(kind, "delete", node=stale.node, pod=stale.name, uid=stale.uid)
            self._delete_pod(client, stale)
            replacement = self._wait_for_replacement(client, stale, deadline)
            meta = replacement["metadata"]
            self.journal(kind, "replaced", node=stale.node, pod=meta["name"], uid=meta.get("uid", ""))
        finally:
            if cordoned:
                # the node's prior scheduling state: it was schedulable, so it is uncordoned again
                client.request("PATCH", node_path, {"spec": {"unschedulable": None}}, _MERGE)
                self.journal(kind, "restored", node=stale.node, unschedulable=False)

    def _delete_pod(self, client: KubeClient, stale: StaleDriverPod) -> None:
        """Delete exactly the identified pod: the API refuses (409) if the name now holds another one."""
        body: JSON = {"kind": "DeleteOptions", "apiVersion": "v1", "preconditions": {"uid": stale.uid}}
        try:
            client.request("DELETE", f"/api/v1/namespaces/{stale.namespace}/pods/{stale.name}", body)
        except KubeError as err:
            if err.status not in (404, 409):  # gone already, or replaced meanwhile: its successor is judged
                raise

    def _wait_for_replacement(self, client: KubeClient, stale: StaleDriverPod, deadline: float) -> JSON:
        """The DaemonSet's pod on the node that took the stale one's place: another UID, the newest
        template, Running and ready."""
        while True:
            for pod in client.list(f"/api/v1/namespaces/{stale.namespace}/pods"):
                meta = pod["metadata"]
                owners = {o.get("uid") for o in meta.get("ownerReferences") or []}
                if (
                    stale.daemonset_uid in owners
                    and (pod.get("spec") or {}).get("nodeName") == stale.node
                    and meta.get("uid") != stale.uid
                    and not meta.get("deletionTimestamp")
                    and (meta.get("labels") or {}).get(REVISION_LABEL) == stale.current
                    and _ready(pod)
                ):
                    return dict(pod)
            if self.clock() >= deadline:
                raise RepairFailed(
                    f"no ready replacement of driver pod {stale.name} on {stale.node} before the deadline"
                )
            self.sleep(min(_POLL_S, max(0.0, deadline - self.clock())))

    # ------------------------------------------------------------------ the stale mig-not-ready taint

    def _remove_taints(self, client: KubeClient, errors: list[str]) -> bool:
        removed = False
        for error in errors:
            node = error.split(":", 1)[0]
            if remove_stale_mig_taint(client, node):
                self.journal(RepairKind.TAINT, "untainted", node=node, taint=dict(MIG_NOT_READY_TAINT))
                removed = True
        return removed

    # ------------------------------------------------------------------ GFD, then the device plugin

    def _discovery_daemonsets(self, client: KubeClient) -> list[str]:
        """GPU feature discovery (when the driver stack has one: the operator's), then the device plugin."""
        names = [
            d["metadata"]["name"]
            for d in client.list(f"/apis/apps/v1/namespaces/{self.namespace}/daemonsets")
        ]
        gfd = sorted(n for n in names if "feature-discovery" in n)
        plugin = sorted(n for n in names if "device-plugin" in n)
        if not plugin:
            raise RepairFailed(f"no device plugin DaemonSet in {self.namespace}")
        return [*gfd, *plugin]

    def _restart_discovery(self, client: KubeClient, deadline: float, outcome: RepairOutcome) -> None:
        kind = RepairKind.RESOURCES
        for name in self._discovery_daemonsets(client):
            path = f"/apis/apps/v1/namespaces/{self.namespace}/daemonsets/{name}"
            daemonset = client.get(path)
            strategy = ((daemonset.get("spec") or {}).get("updateStrategy") or {}).get(
                "type", "RollingUpdate"
            )
            if strategy == "OnDelete":
                raise RepairFailed(
                    f"DaemonSet {name} updates OnDelete: a restart would replace none of its pods"
                )
            stamp = _now()
            self.journal(kind, "restart", daemonset=name)
            patch = {"spec": {"template": {"metadata": {"annotations": {RESTARTED_AT: stamp}}}}}
            client.request("PATCH", path, patch, "application/strategic-merge-patch+json")
            outcome.changed = self.changed = True
            self._wait_rolled_out(client, path, name, deadline)
            self.journal(kind, "rolled-out", daemonset=name)

    def _wait_rolled_out(self, client: KubeClient, path: str, name: str, deadline: float) -> None:
        """As `kubectl rollout status` judges a DaemonSet: its generation observed, every scheduled pod
        updated and available."""
        while True:
            current = client.get(path)
            status = current.get("status") or {}
            desired = int(status.get("desiredNumberScheduled") or 0)
            if (
                int(status.get("observedGeneration") or 0) >= int(current["metadata"].get("generation") or 0)
                and int(status.get("updatedNumberScheduled") or 0) >= desired
                and int(status.get("numberAvailable") or 0) >= desired
            ):
                return
            if self.clock() >= deadline:
                raise RepairFailed(f"DaemonSet {name} did not roll out before the deadline")
            self.sleep(min(_POLL_S, max(0.0, deadline - self.clock())))
