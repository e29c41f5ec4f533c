"""`health --watch --remediate --yes`: the ladder's actions on the nodes it decided to act on in a read
(engine/health/remediation.py decides; this module acts), with the discipline of every node action here:

1. the node is read again: the same object (its uid) or nothing is done (a node replaced since the read
   is another node, judged at the next read);
2. its GPU workloads are read again right before (unless the cluster's policy allows them): a pod holding
   its GPUs now stops the action;
3. `cordon-and-report` (and `flag-hardware`, which keeps the node out of rotation) cordons with the
   node's resourceVersion as the precondition (a node changed since it was read is left alone: 409) and
   keeps its prior scheduling state in the action's receipt; the report is the action itself, in the
   watch's events, its receipt and the audit trail;
4. `requalify` runs the gate's per-node probes through the requalification path (`health --requalify`:
   its record, the fabric check where it applies); the next read settles the rung from that record;
5. `cloud-recovery` and `remove-from-group` go through the cloud port (`recover_node`: the node's
   instance stopped and started again; `remove_node`: the instance deleted so that its node group
   replaces it) on a node the ladder cordoned before (a node still schedulable is cordoned first, in
   the same action): the node keeps its name and uid through a recovery (its gate, `requalify`, decides
   its return), and a removed node's incident closes `replaced` at the next read;
6. on the node's validated return (its incident closed `returned`), a node this ladder cordoned from a
   schedulable state is made schedulable again (with the same precondition), and a drain the ladder
   asked of a workload manager is released.

Where a workload manager owns the nodes (its backend names it), its drain comes first: a decision with `drain`
sets the manager's drain condition on the node (running jobs finish, nothing new lands) and takes no rung;
the rung is taken at a later read, once the manager reports the node drained, and re-read right before.
A disruptive `up` drains a cluster's workers through the same condition (`ChangeDrain`, with its own
reason and field manager) and lifts only the drains it asked for.

Each action done leaves a private receipt (`<npa home>/health/remediation/receipts/<fleet>/`, 0600: the
node, its uid, the rung, its prior scheduling state, what happened); the read's actions go into the audit
trail in counts (sdk/audit.py).
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from npa_pulumi.cloud.errors import CloudError
from npa_pulumi.cloud.port import NodeRepair
from npa_pulumi.engine.health import remediation as core
from npa_pulumi.engine.health.requalification import gpu_holders
from npa_pulumi.kube.client import KubeClient, KubeError
from npa_pulumi.runtime.files import write_atomically
from npa_pulumi.runtime.home import npa_home
from npa_pulumi.spec.constants import Rung
from npa_pulumi.spec.remediation import FleetRemediation

JSON = dict[str, Any]
CORDONED_BY_LADDER = "cordoned by the ladder (was schedulable)"  # the attempt's note restore looks for
DRAIN = "workload-manager-drain"  # an action that is no rung: the node drained through its manager first
FIELD_MANAGER = "npa-remediation"  # whose conditions the ladder's drains are (server-side apply)
DRAIN_REASON_PREFIX = core.DRAIN_REASON_PREFIX
_CORDONING = (Rung.CORDON_AND_REPORT, Rung.FLAG_HARDWARE)


@dataclass(frozen=True)
class ClusterAccess:
    """How to act on one cluster read in this run: its API client, the requalification path for one
    node object (the gate's probes, the fabric check where it applies, the record written), and the
    cloud's calls on one node's instance by its name (the cloud port's `recover_node`, `remove_node` in
    the cluster's project; None: the cluster's project is not known, so neither is offered)."""

    stack: str
    client_for: Callable[[float], KubeClient]
    requalify: Callable[[JSON], JSON]
    recover: Callable[[str], NodeRepair] | None = None
    remove: Callable[[str], NodeRepair] | None = None
    manager: core.WorkloadManager | None = None  # the workload manager owning its nodes (its backend's)


def receipts_dir(fleet: str) -> Path:
    return npa_home() / "health" / "remediation" / "receipts" / fleet


def _receipt(fleet: str, entry: JSON, now: datetime) -> str:
    folder = receipts_dir(fleet)
    folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    stamp = now.strftime("%Y%m%dT%H%M%SZ")
    path = folder / f"{stamp}-{entry['node']}-{entry['rung']}-{secrets.token_hex(3)}.json"
    write_atomically(path, json.dumps(entry, indent=2, sort_keys=True) + "\n", mode=0o600)
    return str(path)


def _open_uid(incidents: Sequence[core.Incident], cluster: str, node: str) -> str:
    return next((i.uid for i in incidents if i.open and (i.cluster, i.node) == (cluster, node)), "")


def execute(
    fleet: str,
    decisions: Sequence[core.Decision],
    incidents: Sequence[core.Incident],
    access: Mapping[str, ClusterAccess],
    policy: FleetRemediation,
    now: datetime,
) -> tuple[list[core.Incident], list[JSON]]:
    """Act on every `act` decision; the ledger with the rungs taken, and what was done (each a dict:
    cluster, node, rung, outcome done | skipped | failed, detail, receipt)."""
    ledger, done = list(incidents), []
    for decision in decisions:
        if decision.status is not core.Status.ACT or decision.rung is None:
            continue
        where = access.get(decision.cluster)
        uid = _open_uid(ledger, decision.cluster, decision.node)
        rung = DRAIN if decision.drain else decision.rung.value
        action: JSON = {"cluster": decision.cluster, "node": decision.node, "rung": rung}
        if where is None:
            done.append(action | {"outcome": "skipped", "detail": "the cluster was not read in this run"})
            continue
        allowed = policy.cluster(decision.cluster).allow_active_gpu_workloads
        try:
            outcome, detail, note, prior = _act(where, decision, uid, allowed)
        except KubeError as err:
            outcome, detail, note, prior = "failed", f"the cluster's API: {err}", "", None
        except CloudError as err:
            outcome, detail, note, prior = "failed", f"the cloud: {err}", "", None
        action |= {"outcome": outcome, "detail": detail}
        if outcome == "done":
            if not decision.drain:  # a drain is no rung: the rung is taken once the node is drained
                ledger = core.record_action(ledger, decision, now, note)
            receipt = action | {"fleet": fleet, "uid": uid, "at": now.isoformat(timespec="seconds")}
            action["receipt"] = _receipt(fleet, receipt | {"prior_unschedulable": prior}, now)
        done.append(action)
    return ledger, done


def _act(
    where: ClusterAccess, decision: core.Decision, uid: str, allowed: bool
) -> tuple[str, str, str, bool | None]:
    """(outcome, detail, the attempt's note, the node's prior `unschedulable`)."""
    client = where.client_for(10.0)
    node = client.get_or_none(f"/api/v1/nodes/{decision.node}")
    if node is None or (uid and node["metadata"].get("uid") != uid):
        return "skipped", "the node object is gone or was replaced since the read", "", None
    manager = where.manager
    if manager is not None and decision.drain:
        return _drain(client, node, manager, decision.drain)
    if not allowed and manager is not None:  # its state right before, as the read judged it
        state = manager.state_of(workload_conditions(node))
        if not manager.drained(state):
            return "skipped", f"{manager.name} {state} now: not drained", "", None
    elif not allowed:
        holders = gpu_holders(client, decision.node)
        if holders:
            return "skipped", f"an active GPU workload holds it now: {', '.join(holders[:3])}", "", None
    prior = bool((node.get("spec") or {}).get("unschedulable"))
    if decision.rung is Rung.REQUALIFY:
        entry = where.requalify(node)
        verdict = "passed" if entry.get("passed") else "failed: " + "; ".join(entry.get("errors") or [])
        return "done", f"the gate's probes {verdict}", "", prior
    if decision.rung in _CORDONING:
        if prior:
            return "done", "already cordoned", "", prior
        _cordon(client, node)
        return "done", "cordoned", CORDONED_BY_LADDER, prior
    call = where.recover if decision.rung is Rung.CLOUD_RECOVERY else None
    call = where.remove if decision.rung is Rung.REMOVE_FROM_GROUP else call
    if call is None:
        return "skipped", f"{decision.rung} is not offered for this cluster", "", None
    # Out of rotation first: a node the cloud stops or deletes takes no new work meanwhile.
    note = "" if prior else _cordon(client, node)
    repair = call(decision.node)
    what = "stopped and started again" if repair.action == "RECOVERED" else "deleted: its group replaces it"
    return "done", f"its instance {what} ({repair.state or 'no state'})", note, prior


def workload_conditions(node: JSON) -> dict[str, str]:
    """The node's True conditions (type -> reason), as the health read keeps a manager's."""
    return {
        str(c.get("type")): str(c.get("reason") or "")
        for c in (node.get("status") or {}).get("conditions") or []
        if c.get("status") == "True"
    }


def _drain(
    client: KubeClient, node: JSON, manager: core.WorkloadManager, reason: str
) -> tuple[str, str, str, bool | None]:
    """Ask the workload manager to drain the node with the ladder's reason; nothing when a drain of it is
    asked for already (by anyone). Running jobs finish; nothing new is scheduled."""
    if manager.condition in workload_conditions(node):
        return "done", f"{manager.name} drain already asked for", "", None
    ask_drain(client, node["metadata"]["name"], manager, reason)
    return "done", f"drain asked of {manager.name} (reason: {reason})", "", None


def ask_drain(
    client: KubeClient,
    name: str,
    manager: core.WorkloadManager,
    reason: str,
    field_manager: str = FIELD_MANAGER,
) -> None:
    """The manager's drain condition on the node set True, with the request as its reason and `reason` as
    its message (the reason its manager gives the drain; server-side apply of that one condition: the
    node's other conditions stay as their owners keep them)."""
    condition = {
        "type": manager.condition,
        "status": "True",
        "reason": manager.request,
        "message": reason,
        "lastTransitionTime": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
    }
    _apply_node_condition(client, name, condition, field_manager)


def _apply_node_condition(
    client: KubeClient, name: str, condition: JSON, field_manager: str = FIELD_MANAGER
) -> None:
    """Set one condition of the node's status under `field_manager` (server-side apply)."""
    body = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name},
        "status": {"conditions": [condition]},
    }
    client.apply(f"/api/v1/nodes/{name}/status", body, field_manager)


def _undrain(client: KubeClient, node: JSON, manager: core.WorkloadManager) -> bool:
    """Release the ladder's own drain of the node (its condition's message is the ladder's reason)."""
    return release_drain(client, node, manager, DRAIN_REASON_PREFIX)


def release_drain(
    client: KubeClient,
    node: JSON,
    manager: core.WorkloadManager,
    prefix: str,
    field_manager: str = FIELD_MANAGER,
) -> bool:
    """Release a drain of the node (as read) whose message starts with `prefix` (its asker's own): the
    condition set False with the manager's release reason. A drain someone else asked for is left as it
    is. Whether there was one to release."""
    found = next(
        (
            c
            for c in (node.get("status") or {}).get("conditions") or []
            if c.get("type") == manager.condition and c.get("status") == "True"
        ),
        None,
    )
    if found is None or not str(found.get("message") or "").startswith(prefix):
        return False
    name = node["metadata"]["name"]
    condition = found | {
        "status": "False",
        "reason": manager.released,
        "lastTransitionTime": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
    }
    _apply_node_condition(client, name, condition, field_manager)
    return True


def _cordon(client: KubeClient, node: JSON) -> str:
    """Cordon the node read, with its resourceVersion as the precondition; the attempt's note."""
    patch = {"metadata": {"resourceVersion": node["metadata"].get("resourceVersion")}}
    client.merge_patch(f"/api/v1/nodes/{node['metadata']['name']}", patch | {"spec": {"unschedulable": True}})
    return CORDONED_BY_LADDER


def restore(
    fleet: str,
    before: Sequence[core.Incident],
    after: Sequence[core.Incident],
    access: Mapping[str, ClusterAccess],
    now: datetime,
) -> list[JSON]:
    """Make schedulable again each node whose incident closed `returned` in this read and which the ladder
    cordoned from a schedulable state (a node flagged for hardware stays cordoned: a person decides)."""
    was_open = {(i.cluster, i.node, i.opened_at) for i in before if i.open}
    done = []
    for incident in after:
        if (
            incident.closed is not core.Closed.RETURNED
            or (incident.cluster, incident.node, incident.opened_at) not in was_open
        ):
            continue
        rungs = {a.rung for a in incident.attempts if a.outcome is not core.Outcome.SKIPPED}
        cordoned = any(a.note.startswith(CORDONED_BY_LADDER) for a in incident.attempts)
        where = access.get(incident.cluster)
        if Rung.FLAG_HARDWARE in rungs or where is None or not (cordoned or where.manager is not None):
            continue
        action: JSON = {"cluster": incident.cluster, "node": incident.node, "rung": "restore-scheduling"}
        try:
            client = where.client_for(10.0)
            node = client.get_or_none(f"/api/v1/nodes/{incident.node}")
            if node is None or node["metadata"].get("uid") != incident.uid:
                done.append(
                    action | {"outcome": "skipped", "detail": "the node object is gone or was replaced"}
                )
                continue
            if cordoned:  # first: the node as read (its resourceVersion) is what is uncordoned
                patch = {"metadata": {"resourceVersion": node["metadata"].get("resourceVersion")}}
                client.merge_patch(
                    f"/api/v1/nodes/{incident.node}", patch | {"spec": {"unschedulable": None}}
                )
            undrained = where.manager is not None and _undrain(client, node, where.manager)
            if not (cordoned or undrained):
                continue
        except KubeError as err:
            done.append(action | {"outcome": "failed", "detail": f"the cluster's API: {err}"})
            continue
        released = f"; {where.manager.name} drain released" if undrained and where.manager else ""
        what = ("schedulable again" if cordoned else "in service again") + released
        action |= {"outcome": "done", "detail": f"{what}: its gate passed after the incident"}
        receipt = action | {"fleet": fleet, "uid": incident.uid, "at": now.isoformat(timespec="seconds")}
        action["receipt"] = _receipt(fleet, receipt | {"prior_unschedulable": False}, now)
        done.append(action)
    return done


# ------------------------------------------------------------------------ a disruptive change's drain

CHANGE_FIELD_MANAGER = "npa-disruptive-change"  # whose conditions a disruptive change's drains are
CHANGE_REASON_PREFIX = "npa-pulumi: disruptive change"  # the reason its drains give the workload manager


@dataclass
class ChangeDrain:
    """A workload manager's drain of every worker of a cluster before a disruptive change (a disruptive
    `up`: engine/operations/up.py). Each worker with no drain is drained through its manager with `reason`
    (running jobs finish; nothing new lands on it); one drained already by someone else is waited for and
    left as it is, never lifted. A drain with this prefix that is already there is an earlier change's
    that was never lifted (its run was killed): it is taken over, and lifted with this one's.

    `busy` reads the workers (and drains any that joined since); `lift` releases the drains this asked
    for, and only those (a node replaced since has none to release)."""

    client: KubeClient
    manager: core.WorkloadManager
    reason: str
    asked: dict[str, str] = field(default_factory=dict)  # node -> its uid: the drains this owns
    kept: set[str] = field(default_factory=set)  # workers drained by someone else: left as they are
    workers: set[str] = field(default_factory=set)  # every worker seen

    def busy(self) -> list[str]:
        """`node (state)` of each worker not drained yet (a job still runs on it, or its manager has not
        taken the drain yet), after asking the drain of every worker that has none."""
        found = []
        for node in self.client.list("/api/v1/nodes", label_selector=self.manager.workers):
            meta = node.get("metadata") or {}
            name, uid = str(meta.get("name") or ""), str(meta.get("uid") or "")
            self.workers.add(name)
            conditions = workload_conditions(node)
            if self.manager.condition not in conditions:
                ask_drain(self.client, name, self.manager, self.reason, CHANGE_FIELD_MANAGER)
                self.asked[name], conditions = uid, {self.manager.condition: self.manager.request}
                self.kept.discard(name)
            elif name not in self.asked and name not in self.kept:
                if _drain_message(node, self.manager).startswith(CHANGE_REASON_PREFIX):
                    self.asked[name] = uid
                else:
                    self.kept.add(name)
            state = self.manager.state_of(conditions)
            if not self.manager.drained(state):
                found.append(f"{name} ({state})")
        return sorted(found)

    def lift(self) -> list[str]:
        """Release the drains this owns; the nodes whose drain was released."""
        lifted = []
        for name, uid in sorted(self.asked.items()):
            node = self.client.get_or_none(f"/api/v1/nodes/{name}")
            if node is None or (uid and (node.get("metadata") or {}).get("uid") != uid):
                continue  # gone or replaced: its drain went with it
            if release_drain(self.client, node, self.manager, CHANGE_REASON_PREFIX, CHANGE_FIELD_MANAGER):
                lifted.append(name)
        return lifted


def _drain_message(node: JSON, manager: core.WorkloadManager) -> str:
    """The message (the reason it was given) of the node's drain through `manager`, "" with none."""
    return next(
        (
            str(c.get("message") or "")
            for c in (node.get("status") or {}).get("conditions") or []
            if c.get("type") == manager.condition and c.get("status") == "True"
        ),
        "",
    )
