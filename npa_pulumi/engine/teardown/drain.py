"""A cluster phase's drain: before a cluster stack is destroyed, its pods are evicted the way the API server
allows, and the dry run shows what would block (`ClusterDrainer.preview`).

For a whole cluster's deletion every node goes, so the drain takes one cluster-wide inventory (nodes, pods,
ReplicaSets, PodDisruptionBudgets: kube/drain.py), cordons every node, and asks for normal eviction of every
evictable pod through the API's Eviction subresource, each refusal retried for a bounded time. A budget that
still refuses is one of two kinds:

* one of the four kube-system budgets of the managed cluster's own workloads (cilium-operator, CoreDNS, the
  CoreDNS autoscaler, metrics-server: `kube.drain.SYSTEM_PDBS`), which on a one-CPU-node pool can never be
  satisfied. It is removed, temporarily, only when every condition holds: this is the run after the destroy
  was confirmed (never a preview), it deletes the whole cluster (never a node-pool change), and the exact
  identity of the saved kubeconfig is verified (`verify`). Its spec is snapshotted into the phase, and so
  into the receipt, *before* it is deleted (exactly that object: uid and resourceVersion preconditions);
  if the destroy then aborts while the cluster still exists, every removed budget is put back from its
  snapshot and the nodes this drain cordoned are made schedulable again.
* any other budget (a user's or an application's): never weakened. Its pods stay; the drain is
  `incomplete` and says which budget held them.

The saved kubeconfig (`<npa home>/kubeconfigs/<context>.yaml`, written by `up`) is used non-interactively
(kube/client.py: no terminal for a credential plugin, `interactive: false`). Identity: the cluster's
registration must match this stack, cloud, profile, the stack's outputs and the live cloud
(engine/registrations/kubeconfigs.py), the kubeconfig must point at the registered API server, and the API's
nodes must belong to the cluster's own node groups; otherwise nothing in that cluster is touched (`identity`).
Authentication (401, a failing credential plugin), RBAC (403), kubeconfig (missing, malformed) and API
(unreachable, 5xx) failures are told apart (`DrainFailure`). Whatever the drain's outcome, the cluster's
destroy is attempted.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from npa_pulumi.cloud.errors import CloudError, NotFound
from npa_pulumi.cloud.port import NodeGroup
from npa_pulumi.kube import drain as kd
from npa_pulumi.kube.client import KubeClient, KubeconfigError, KubeError
from npa_pulumi.output.results import (
    BlockingPdb,
    ClusterDrain,
    DrainFailure,
    DrainStatus,
    PdbRelaxation,
    PdbSnapshot,
    TeardownPhase,
)

if TYPE_CHECKING:
    from npa_pulumi.engine.context import FleetContext

log = logging.getLogger(__name__)

NODE_GROUP_LABEL = "nebius.com/node-group-id"  # what mk8s labels each node with: its node group


@dataclass(frozen=True)
class DrainSettings:
    """Every wait of a drain is bounded."""

    request_timeout_s: float = 15.0  # one API call
    evict_retry_s: float = 10.0  # how long a budget's refusal is asked again before it counts
    gone_timeout_s: float = 120.0  # how long evicted pods get to terminate
    poll_s: float = 1.0


class DrainStopped(Exception):
    """The drain cannot go on: `failure` says why (the destroy goes on regardless)."""

    def __init__(self, failure: DrainFailure, message: str) -> None:
        super().__init__(message)
        self.failure = failure


def failure_of(error: Exception) -> DrainFailure:
    """Which kind of failure an error is: the kubeconfig itself, authentication, RBAC or the API."""
    if isinstance(error, KubeconfigError | OSError):
        return DrainFailure.KUBECONFIG
    if isinstance(error, KubeError):
        if error.status == 401:
            return DrainFailure.AUTHENTICATION
        if error.status == 403:
            return DrainFailure.RBAC
    return DrainFailure.API


def blocking_pdbs(inventory: kd.Inventory, may_relax: bool) -> list[BlockingPdb]:
    """What would stop a drain of every node, as the phase reports it: a system budget is `relaxable` when
    this destroy may relax it (`may_relax`), a user budget never."""
    found = []
    for blocker in kd.blockers(inventory, {str(n["metadata"]["name"]) for n in inventory.nodes}):
        why = blocker.why(whole_cluster=True)
        if blocker.system:
            why += (
                "; a kube-system budget of the cluster's own workloads: removed for a confirmed destroy of "
                "this verified cluster and restored if the destroy aborts"
                if may_relax
                else "; a kube-system budget of the cluster's own workloads, but not relaxed here"
            )
        else:
            why += (
                "; not one of the cluster's system budgets: never relaxed (its pods stay until the cluster "
                "goes)"
            )
        found.append(
            BlockingPdb(
                namespace=blocker.namespace,
                name=blocker.name,
                system=blocker.system,
                disruptions_allowed=blocker.allowed,
                pods=list(blocker.pods),
                relaxable=blocker.system and may_relax,
                why=why,
            )
        )
    return found


class NodeGroupLister(Protocol):
    def list_node_groups(self, cluster_id: str) -> list[NodeGroup]: ...


def check_nodes_belong(nodes: list[dict[str, Any]], cluster_id: str, cloud: NodeGroupLister) -> None:
    """Every node's node-group label names a node group the cloud lists for this cluster (never a recipe
    output, which the upstream module does not have): otherwise the API is another cluster's and nothing is
    drained (DrainStopped)."""
    if not cluster_id:
        raise DrainStopped(
            DrainFailure.IDENTITY, "the stack records no cluster id to check the nodes against"
        )
    try:
        groups = {group.id for group in cloud.list_node_groups(cluster_id)}
    except CloudError as err:
        raise DrainStopped(
            DrainFailure.IDENTITY, f"the node groups of cluster {cluster_id} cannot be read: {err}"
        ) from None
    foreign = sorted(
        {
            str(label)
            for node in nodes
            if (label := ((node.get("metadata") or {}).get("labels") or {}).get(NODE_GROUP_LABEL))
            and label not in groups
        }
    )
    if foreign:
        raise DrainStopped(
            DrainFailure.IDENTITY,
            f"the API's nodes belong to node group(s) {', '.join(foreign)}, which cluster {cluster_id} "
            "does not have: another cluster's API",
        )


class ClusterDrainer:
    """The drain of one cluster phase: `preview` (read-only), or `drain` before its stack's destroy and
    `after_destroy` once that ended. Fills `phase.drain`; `checkpoint` makes the phase durable (the receipt)
    and is called before a budget is deleted."""

    def __init__(
        self,
        fleet: FleetContext,
        phase: TeardownPhase,
        outputs: dict[str, Any] | None,
        checkpoint: Callable[[], None] = lambda: None,
        settings: DrainSettings | None = None,
    ) -> None:
        self.fleet = fleet
        self.phase = phase
        self.outputs = outputs or {}
        self.checkpoint = checkpoint
        self.settings = settings or DrainSettings()
        self.context = str(phase.deletes.get("kube_context") or "")
        self.report = ClusterDrain(status=DrainStatus.PREVIEWED, context=self.context)
        self.client: KubeClient | None = None
        # Budgets an earlier, killed destroy of this cluster removed (its receipt, its snapshots): this run
        # puts them back if it aborts too (engine/teardown/receipts.py `unrestored_relaxation`).
        self.inherited: tuple[str, list[PdbSnapshot]] | None = None

    def say(self, text: str) -> None:
        self.fleet.progress.message(f"{self.phase.name}: {text}")

    # ---------------------------------------------------------------------------------- identity

    def verify(self) -> KubeClient:
        """A client for the saved kubeconfig, once the cluster's identity is proved (raises DrainStopped)."""
        from npa_pulumi.engine.registrations import kubeconfigs

        if not self.context:
            raise DrainStopped(DrainFailure.KUBECONFIG, "the cluster stack records no kube context")
        path = kubeconfigs.kubeconfig_path(self.context)
        if not path.is_file():
            raise DrainStopped(
                DrainFailure.KUBECONFIG,
                f"no saved kubeconfig for {self.context} on this machine ({path}; `up` writes it): no drain",
            )
        registration = kubeconfigs.registered(self.context)
        if registration is None:
            raise DrainStopped(
                DrainFailure.IDENTITY,
                f"{self.context} has no registration: the kubeconfig is not provably this cluster's",
            )
        mismatches = kubeconfigs.identity_mismatches(
            registration,
            stack=self.phase.stack,
            cloud_name=self.fleet.where.cloud,
            profile=self.fleet.profile,
            outputs=self.outputs,
            cloud=self.fleet.cloud,
        )
        if Path(registration.kubeconfig) != path:
            mismatches.append(
                f"{self.context} is registered with kubeconfig {registration.kubeconfig}, not {path}"
            )
        if mismatches:
            raise DrainStopped(DrainFailure.IDENTITY, "; ".join(mismatches))
        try:
            text = path.read_text()
            client = KubeClient.from_kubeconfig(text, self.context, timeout_s=self.settings.request_timeout_s)
        except (OSError, KubeError) as err:
            raise DrainStopped(failure_of(err), f"the saved kubeconfig cannot be used: {err}") from None
        if registration.server and client.server != registration.server:
            raise DrainStopped(
                DrainFailure.IDENTITY,
                f"the saved kubeconfig points at {client.server}, the cluster was registered at "
                f"{registration.server}",
            )
        return client

    def _inventory(self, client: KubeClient) -> kd.Inventory:
        try:
            inventory = kd.take_inventory(client)
        except KubeError as err:
            raise DrainStopped(failure_of(err), f"the cluster's inventory could not be read: {err}") from None
        check_nodes_belong(inventory.nodes, str(self.phase.deletes.get("cluster_id") or ""), self.fleet.cloud)
        return inventory

    def _stopped(self, status: DrainStatus, stop: DrainStopped) -> ClusterDrain:
        self.report.status, self.report.failure, self.report.message = status, stop.failure, str(stop)
        self.say(f"drain {status.value} ({stop.failure.value}): {stop}; the destroy goes on")
        return self.report

    # ---------------------------------------------------------------------------------- preview

    def preview(self) -> ClusterDrain:
        """The eviction preview: what would block a drain of every node, by namespace and name. Reads only."""
        if not self.fleet.cloud.kubernetes_api_available():
            return self._not_applicable()
        try:
            inventory = self._inventory(self.verify())
            self._count(inventory)
            self.report.blocking = blocking_pdbs(inventory, may_relax=True)
        except Exception as err:  # a preview never stops the plan: it says what it could not read
            stop = (
                err if isinstance(err, DrainStopped) else DrainStopped(DrainFailure.API, f"unexpected: {err}")
            )
            self.report.status, self.report.failure, self.report.message = (
                DrainStatus.SKIPPED,
                stop.failure,
                str(stop),
            )
        return self.report

    def _not_applicable(self) -> ClusterDrain:
        self.report.status = DrainStatus.NOT_APPLICABLE
        self.report.message = "this cloud runs no Kubernetes API for its clusters: nothing to drain"
        return self.report

    def _count(self, inventory: kd.Inventory) -> None:
        self.report.nodes = len(inventory.nodes)
        self.report.evictable_pods = sum(1 for p in inventory.pods if kd.evictable(p))

    # ---------------------------------------------------------------------------------- drain

    def drain(self) -> ClusterDrain:
        """Before the destroy of a confirmed run: cordon, evict, relax a blocking system budget (and only
        such), evict again, wait for the pods to go. Never raises: a failure is reported by kind."""
        self.report = ClusterDrain(status=DrainStatus.DRAINED, context=self.context)
        self.phase.drain = self.report
        if self.inherited is not None:
            receipt, snapshots = self.inherited
            self.report.relaxed = [s.model_copy() for s in snapshots]
            self.report.relaxation = PdbRelaxation.RELAXED
            self.report.relaxation_reason = (
                f"removed by an earlier destroy (receipt {receipt}) that did not finish: restored if this "
                "one aborts"
            )
        if not self.fleet.cloud.kubernetes_api_available():
            return self._not_applicable()
        try:
            client = self.verify()
            self.client = client
            inventory = self._inventory(client)
        except DrainStopped as stop:
            return self._stopped(DrainStatus.SKIPPED, stop)
        try:
            self._drain(client, inventory)
        except DrainStopped as stop:
            return self._stopped(DrainStatus.FAILED, stop)
        except KubeError as err:
            return self._stopped(DrainStatus.FAILED, DrainStopped(failure_of(err), str(err)))
        except Exception as err:  # an answer the drain did not expect: the destroy must still be attempted
            log.exception("drain of %s", self.phase.name)
            unexpected = DrainStopped(DrainFailure.API, f"unexpected answer: {type(err).__name__}: {err}")
            return self._stopped(DrainStatus.FAILED, unexpected)
        return self.report

    def _drain(self, client: KubeClient, inventory: kd.Inventory) -> None:
        report, settings = self.report, self.settings
        self._count(inventory)
        report.blocking = blocking_pdbs(inventory, may_relax=True)
        kd.cordon(client, inventory.nodes, report.cordoned)
        pods = [p for p in inventory.pods if kd.evictable(p)]
        self.say(f"draining {len(inventory.nodes)} node(s): evicting {len(pods)} pod(s)")
        # A refusal by a budget that blocks (no node can take a replacement) is final: not asked again.
        blocking = {(b.namespace, b.name) for b in report.blocking}

        def final(pod: dict[str, Any]) -> bool:
            budgets = kd.budgets_of(pod, inventory)
            return any((b["metadata"]["namespace"], b["metadata"]["name"]) in blocking for b in budgets)

        first = kd.evict_pods(client, pods, settings.evict_retry_s, settings.poll_s, final=final)
        evicted = list(first.evicted)
        refused = {kd.ref(p): p for p in pods if kd.ref(p) in first.refused}
        answers = dict(first.refused)
        held = self._system_holds(inventory, list(refused.values()))
        if held:
            self._relax(client, held)
            again = kd.evict_pods(
                client, [refused[r] for r in sorted(held)], settings.evict_retry_s, settings.poll_s
            )
            evicted += again.evicted
            for pod in again.evicted:
                refused.pop(kd.ref(pod), None)
            answers.update(again.refused)
        report.evicted = sorted(kd.ref(p) for p in evicted)
        late = kd.wait_gone(client, evicted, settings.gone_timeout_s, settings.poll_s)
        report.refused = [self._refusal(inventory, refused[r], answers.get(r, "")) for r in sorted(refused)]
        report.refused += [f"{r}: evicted, but still there after {settings.gone_timeout_s:g}s" for r in late]
        if report.refused:
            report.status = DrainStatus.INCOMPLETE
            report.message = f"{len(report.refused)} pod(s) stayed; the destroy goes on"
            self.say(f"drain incomplete: {'; '.join(report.refused)}")
        else:
            self.say(f"drained: {len(report.evicted)} pod(s) evicted")

    def _system_holds(self, inventory: kd.Inventory, refused: list[dict[str, Any]]) -> dict[str, list[str]]:
        """The refused pods that only system budgets hold: pod ref -> those budgets' names. A pod any other
        budget also selects is left alone (that budget is never weakened)."""
        holds: dict[str, list[str]] = {}
        for pod in refused:
            budgets = kd.budgets_of(pod, inventory)
            if budgets and all(kd.is_system_pdb(b, inventory) for b in budgets):
                holds[kd.ref(pod)] = sorted(str(b["metadata"]["name"]) for b in budgets)
        return holds

    def _refusal(self, inventory: kd.Inventory, pod: dict[str, Any], answer: str) -> str:
        budgets = kd.budgets_of(pod, inventory)
        if not budgets:
            return f"{kd.ref(pod)}: {answer or 'refused'}"
        names = ", ".join(
            f"{kd.ref(b)} ({'system' if kd.is_system_pdb(b, inventory) else 'user: never relaxed'})"
            for b in budgets
        )
        return f"{kd.ref(pod)}: held by PodDisruptionBudget {names}"

    def _relax(self, client: KubeClient, holds: dict[str, list[str]]) -> None:
        """Remove the system budgets that hold pods, each snapshotted into the receipt first."""
        names = sorted({n for budgets in holds.values() for n in budgets})
        report = self.report
        earlier = {s.name for s in report.relaxed}  # an earlier run's snapshots: gone already, kept
        for name in names:

            def keep(saved: dict[str, Any], name: str = name) -> None:
                report.relaxed = [s for s in report.relaxed if s.name != name]
                report.relaxed.append(PdbSnapshot(**saved))
                report.relaxation = PdbRelaxation.RELAXED
                self.checkpoint()  # durable before the delete: a killed run still knows what to put back

            saved = kd.relax_pdb(client, kd.SYSTEM_NAMESPACE, name, keep)
            if saved is None and name not in earlier:
                report.relaxed = [s for s in report.relaxed if s.name != name]
        if report.relaxed:
            report.relaxation = PdbRelaxation.RELAXED
            relaxed = ", ".join(f"{s.namespace}/{s.name}" for s in report.relaxed)
            report.relaxation_reason = (
                "confirmed destroy of the whole cluster, its identity verified: removed until the cluster is "
                "gone, restored if the destroy aborts"
            )
            self.say(f"relaxed system PodDisruptionBudget(s) {relaxed} (snapshots in the receipt)")
        self.checkpoint()

    # ---------------------------------------------------------------------------------- after

    def after_destroy(self, destroyed: bool) -> None:
        """The destroy ended: a cluster that is gone took the relaxed budgets with it; one that aborted
        while the cluster exists gets them back from their snapshots, and its nodes their scheduling."""
        try:
            self._after_destroy(destroyed)
        except Exception as err:  # never in the way of the destroy's own result
            log.exception("after the destroy of %s", self.phase.name)
            self.report.relaxation_reason = f"putting the cluster back failed unexpectedly: {err}"

    def _after_destroy(self, destroyed: bool) -> None:
        report = self.report
        if not report.relaxed and not report.cordoned:
            return
        if destroyed or not self._cluster_exists():
            if report.relaxed:
                report.relaxation = PdbRelaxation.GONE_WITH_CLUSTER
                report.relaxation_reason = "the cluster was deleted, and its budgets with it"
            self.checkpoint()
            return
        self._restore()
        self.checkpoint()

    def _cluster_exists(self) -> bool:
        cluster_id = str(self.phase.deletes.get("cluster_id") or "")
        if not cluster_id:
            return False
        try:
            self.fleet.cloud.get_cluster(cluster_id)
        except NotFound:
            return False
        except CloudError:
            return True  # unknown: try to put things back (an API that is gone fails, and says so)
        return True

    def _restore(self) -> None:
        report, client = self.report, self.client
        if client is None:
            return
        problems = []
        for saved in report.relaxed:
            try:
                kd.restore_pdb(client, saved.model_dump(exclude={"restored"}))
            except KubeError as err:
                problems.append(f"{saved.namespace}/{saved.name} ({failure_of(err).value}): {err}")
                continue
            saved.restored = True
        try:
            report.uncordoned = kd.uncordon(client, report.cordoned)
        except KubeError as err:
            problems.append(f"nodes not made schedulable again ({failure_of(err).value}): {err}")
        if report.relaxed and not problems:
            report.relaxation = PdbRelaxation.RESTORED
            report.relaxation_reason = (
                "the destroy aborted while the cluster exists: put back from the snapshots"
            )
            self.say("the destroy aborted: system PodDisruptionBudget(s) restored, nodes schedulable again")
        elif problems:
            if report.relaxed:
                report.relaxation = PdbRelaxation.RESTORE_FAILED
            report.relaxation_reason = "; ".join(problems)
            self.say(f"the destroy aborted, and putting the cluster back failed: {'; '.join(problems)}")
