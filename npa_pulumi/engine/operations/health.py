"""`health`: the selected clusters' nodes as Nebius and Kubernetes report them now, and the active
maintenance events of their projects; with `requalify`, the gate's per-node probes on exactly the nodes that
joined after the last gate pass, and the fabric check on fabric clusters (engine/health/requalification.py).

Reads are batched: one list of maintenance events (and one of instances, to join them) per project through
the cloud port, and per cluster one list of nodes through its registered kubeconfig — which is checked
against the stack's outputs and the live cloud before it is used, as `verify-*` checks it
(engine/registrations/kubeconfigs.py): a registration that does not match fails that cluster closed, nothing
read. Clusters are read `concurrency` at a time; the document keeps the spec's order. The judgement itself is
engine/health/model.py; the document and its text npa_pulumi/output/health.py.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Collection, Mapping, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from npa_pulumi.cloud.errors import CloudError
from npa_pulumi.cloud.port import MaintenanceEvent, NodeRepair
from npa_pulumi.cloud.redaction import mask_id
from npa_pulumi.engine.backends.registry import backend_for
from npa_pulumi.engine.graph import parallel
from npa_pulumi.engine.health import actions, ladder, requalification
from npa_pulumi.engine.health import ledger as ledger_store
from npa_pulumi.engine.health import model as health_model
from npa_pulumi.engine.health import remediation as core
from npa_pulumi.engine.requests import HealthRequest
from npa_pulumi.errors import NpaError
from npa_pulumi.kube.gpu_health.checks import is_gpu_node
from npa_pulumi.output.health import (
    UNQUALIFIED,
    ClusterHealth,
    FleetHealth,
    GpuTotals,
    HealthStatus,
    Maintenance,
    ProjectHealth,
)
from npa_pulumi.output.stack_outputs import ClusterOutputs
from npa_pulumi.plan import resolve_targets
from npa_pulumi.plan.gates import fabric_check_config, health_gate_config
from npa_pulumi.plan.naming import kube_context_name
from npa_pulumi.spec import remediation as remediation_spec

if TYPE_CHECKING:
    from npa_pulumi.engine.context import FleetContext
    from npa_pulumi.plan import Target


# A recovery stops and starts a GPU instance; a removal waits for its deletion to be accepted.
_REPAIR_TIMEOUT_S = 900.0


def run(fleet: FleetContext, options: HealthRequest) -> FleetHealth:
    """`health`: read the selected clusters' nodes and their projects' maintenance; requalify on request;
    then the repair ladder's side of the read (engine/health/ladder.py): the ledger moved on and saved by
    `--watch`, only shown otherwise; with `--remediate` the ladder's decisions, acted on by the watch
    (engine/health/actions.py) and only shown by `--remediate --dry-run`. A ledger that cannot be read
    stops the ladder (nothing acts), not the read."""
    shard = fleet.share.shard  # a watcher per shard keeps its own ledger (engine/health/ledger.py)
    ledger = _ledger(fleet, shard, whole=options.watch is None and shard is None)
    executing = options.remediate and options.watch is not None
    access: dict[str, actions.ClusterAccess] | None = {} if executing else None
    report = read(fleet, fleet.targets, options, ledger=ledger, access=access)
    if ledger is None:
        return report
    policy = remediation_spec.resolve(fleet.spec)
    infos = {t.cluster_stack: _cluster_info(t) for t in fleet.targets}
    # The fleet breaker's scope is the whole fleet even when the read is a selection of it (whose nodes
    # are all it can count impaired): its GPU nodes are what the spec asks for, selected or not.
    unselected = [t for t in resolve_targets(fleet.spec) if t.cluster_stack not in infos]
    absent = {f"unread:{t.cluster_stack}": _cluster_info(t) for t in unselected}
    interval = options.watch.interval_s if options.watch is not None else 60.0
    now = datetime.now(UTC)
    view, moved = ladder.advance(
        report,
        infos | absent,
        policy,
        ledger,
        now,
        interval,
        lambda: _identity(fleet),
        dry_run=options.remediate,
        watching=options.watch is not None,
    )
    if access is not None:  # --watch --remediate: act on this read's decisions, then restore returns
        decisions = [core.Decision.from_json(d) for d in view.decisions or []]
        incidents, done = actions.execute(fleet.spec.name, decisions, moved.incidents, access, policy, now)
        done += actions.restore(fleet.spec.name, ledger.incidents, incidents, access, now)
        moved.incidents, view.actions = incidents, done
    view.ledger = str(ledger_store.ledger_path(fleet.spec.name, shard))
    report.remediation = view
    if options.watch is not None:  # the watch keeps the ledger; a single read records nothing
        ledger_store.save(fleet.spec.name, moved, shard)
    return report


def _ledger(fleet: FleetContext, shard: str | None, whole: bool) -> ledger_store.Ledger | None:
    """The ledger a read moves on: a shard's own (`--shard`), the unsharded watcher's, or (`whole`: a read
    of the whole fleet that records nothing) every ledger of the fleet as one."""
    try:
        if whole:
            return ledger_store.load_all(fleet.spec.name)
        return ledger_store.load(fleet.spec.name, shard)
    except NpaError:
        return None  # read() says why in the report's warnings


def _cluster_info(target: Target) -> ladder.ClusterInfo:
    block = target.cluster.capacity_block_group_value()
    backend = backend_for(target.backend)
    return ladder.ClusterInfo(
        key=f"{target.project_key}/{target.cluster_name}",
        capacity_block=mask_id(block) if block else "",
        manager=None if backend is None else backend.workload_manager,
        expected_gpu_nodes=target.cluster.gpu_count()
        if backend is None
        else backend.expected_gpu_nodes(target),
    )


def _identity(fleet: FleetContext) -> str:
    """Who watches: the cloud's principal, else the OS user at the host (as the audit trail says who)."""
    from npa_pulumi.engine import audit as trail

    try:
        principal = fleet.cloud.principal()
    except Exception:  # who as far as it is known: never a failed read
        principal = None
    return trail.who(principal).identity


def clusters(fleet: FleetContext, stacks: Collection[str], refresh: bool = False) -> dict[str, ClusterHealth]:
    """The health of some of the selected clusters (by stack), read as `health` reads them (one list of
    maintenance events per project, one list of nodes per cluster): what a staged `up` holds a cluster
    for and watches during a wave's soak (engine/rollout.py). Each cluster's API is reached with the
    credentials the cloud gives now, as the gate reaches it (a CI runner has no kubeconfig registration
    of the fleet's clusters, and `up` writes them only at its end). `refresh`: re-read the stacks'
    outputs (a cluster this run just deployed)."""
    targets = [t for t in fleet.targets if t.cluster_stack in stacks]
    if not targets:
        return {}
    options = HealthRequest(concurrency=fleet.request.concurrency)
    report = read(fleet, targets, options, refresh=refresh, from_cloud=True)
    return {c.stack: c for c in report.clusters}


def read(
    fleet: FleetContext,
    targets: Sequence[Target],
    options: HealthRequest,
    refresh: bool = False,
    from_cloud: bool = False,
    ledger: ledger_store.Ledger | None = None,
    access: dict[str, actions.ClusterAccess] | None = None,
) -> FleetHealth:
    """The health of `targets` (in their order) and of their projects; `from_cloud`: each cluster's API
    reached with credentials the cloud gives now instead of its kubeconfig registration. A node with an
    open remediation incident in the ledger (`ledger`, else read here) is usable only once its gate
    passed again (validated return), for `health`, `--min-usable` and rollouts alike."""
    outputs = fleet.stack_outputs(fleet.target_ops(targets), refresh=refresh)
    report = FleetHealth(fleet=fleet.spec.name, cloud=fleet.where.cloud, min_usable=options.min_usable)
    if ledger is None:
        try:
            ledger = ledger_store.load_all(fleet.spec.name)  # every watcher's incidents: validated return
        except NpaError as err:
            report.warnings.append(str(err))
            ledger = ledger_store.Ledger()
    projects: dict[str, ProjectHealth] = {}
    for target in targets:
        project_id = ClusterOutputs.read(outputs.get(target.cluster_stack)).project_id or None
        project = projects.setdefault(target.project_key, ProjectHealth(project_key=target.project_key))
        project.project_id = project.project_id or project_id
    events: dict[str, list[MaintenanceEvent]] = {}
    for project in projects.values():
        if project.project_id is None:
            continue
        try:
            events[project.project_key] = fleet.cloud.list_active_maintenance(project.project_id)
        except CloudError as err:
            project.error = f"maintenance events could not be listed: {err}"
            events[project.project_key] = []

    def one(target: Target) -> ClusterHealth:
        found = outputs.get(target.cluster_stack)
        incidents = ladder.open_incidents(ledger, f"{target.project_key}/{target.cluster_name}")
        return _cluster(
            fleet, target, found, events.get(target.project_key, []), options, from_cloud, incidents, access
        )

    report.clusters = parallel(targets, one, options.concurrency)
    for project in projects.values():
        mine = [c for c in report.clusters if c.project_key == project.project_key]
        matched = {(m.id, m.node): m for c in mine for n in c.nodes for m in n.maintenance}
        by_id = {m.id: m for m in matched.values()}
        for event in events.get(project.project_key, []):
            project.maintenance.append(
                by_id.get(event.id) or health_model.maintenance_view(event, None, None)
            )
        _against_windows(fleet, project.maintenance)
        project.maintenance = health_model.by_deadline(project.maintenance)
        for cluster in mine:
            project.totals.add(cluster.totals)
        report.totals.add(project.totals)
    report.projects = list(projects.values())
    return report


def _against_windows(fleet: FleetContext, events: Sequence[Maintenance]) -> None:
    """Each event of a fleet node against its cluster's maintenance windows (docs/upgrades.md): the next
    opening and whether Nebius' deadline comes first. One moment for the whole report."""
    from npa_pulumi.engine.operations.common import maintenance_blocks
    from npa_pulumi.plan.windows import policy_from_spec

    now = datetime.now(UTC)
    policies = {stack: policy_from_spec(block) for stack, block in maintenance_blocks(fleet).items()}
    for event in events:
        if event.cluster is not None:
            health_model.against_window(event, policies.get(event.cluster), now)


def _cluster(
    fleet: FleetContext,
    target: Target,
    outputs: dict[str, Any] | None,
    events: Sequence[MaintenanceEvent],
    options: HealthRequest,
    from_cloud: bool = False,
    incidents: Mapping[str, tuple[str, str, str]] | None = None,
    access: dict[str, actions.ClusterAccess] | None = None,
) -> ClusterHealth:
    from npa_pulumi.engine.verification.verifiers import _registered_kubeconfig
    from npa_pulumi.kube.client import KubeClient, KubeError

    context = kube_context_name(fleet.spec.name, target.project_key, target.cluster_name)
    config = health_gate_config(target.cluster)
    entry = ClusterHealth(
        stack=target.cluster_stack,
        project_key=target.project_key,
        cluster_name=target.cluster_name,
        kube_context=context,
        status=HealthStatus.OK,
        totals=GpuTotals(requested=config.expected_gpus),
    )
    recorded = ClusterOutputs.read(outputs)
    if outputs is None or not recorded.cluster_id:
        return _failed(entry, config, "not deployed: run `npa-pulumi up` first")
    entry.cluster_id = recorded.cluster_id
    entry.last_gate = _last_gate(recorded)
    entry.last_gate_passed_at = _gate_passed_at(recorded)
    if from_cloud:
        found = _cloud_kubeconfig(fleet, entry.cluster_id, context)
    else:
        registered = _registered_kubeconfig(fleet, target, context, validation="health")
        found = registered if isinstance(registered, tuple) else registered.error or "no usable registration"
    if isinstance(found, str):
        return _failed(entry, config, found)
    text, cluster_id = found

    def client_for(timeout_s: float) -> KubeClient:
        return KubeClient.from_kubeconfig(text, timeout_s=timeout_s)

    try:
        nodes = sorted(client_for(10.0).list("/api/v1/nodes"), key=lambda n: n["metadata"]["name"])
    except KubeError as err:
        return _failed(entry, config, f"the cluster's API could not be read: {err}")
    incidents = incidents or {}
    if options.requalify:
        entry.requalify = _requalify(
            client_for, config, nodes, outputs, context, target, cluster_id, options, incidents
        )
        entry.requalify.pop("results", None)
    if access is not None:

        def requalify_one(node: dict[str, Any]) -> dict[str, Any]:
            done = _probe(
                client_for, config, [node], context, target, cluster_id, options.requalify_timeout_s
            )
            result: dict[str, Any] = done["results"][node["metadata"]["name"]]
            return result

        key = f"{target.project_key}/{target.cluster_name}"
        project_id, cloud = recorded.project_id or "", fleet.cloud

        def recover(node: str) -> NodeRepair:
            return cloud.recover_node(project_id, node, timeout_s=_REPAIR_TIMEOUT_S)

        def remove(node: str) -> NodeRepair:
            return cloud.remove_node(project_id, node, timeout_s=_REPAIR_TIMEOUT_S)

        access[key] = actions.ClusterAccess(
            target.cluster_stack,
            client_for,
            requalify_one,
            recover if project_id else None,
            remove if project_id else None,
            _cluster_info(target).manager,
        )
    qualification = health_model.Qualification.from_outputs(
        outputs, requalification.read_record(context), incidents
    )
    entry.nodes = [health_model.judge_node(n, config, qualification, events) for n in nodes]
    if options.remediate:
        try:
            holders = requalification.holders_by_node(client_for(10.0).list("/api/v1/pods"))
        except KubeError as err:
            entry.error = f"the cluster's pods could not be listed (no remediation acts there): {err}"
        else:
            for node in (n for n in entry.nodes if n.gpu):
                node.gpu_workloads = holders.get(node.name, [])
    for node in entry.nodes:
        for event in node.maintenance:
            event.cluster = target.cluster_stack
    entry.totals = health_model.totals(entry.nodes, config)
    entry.usable_fraction = round(entry.totals.usable_fraction, 4)
    if health_model.below_min_usable(entry.totals, options.min_usable):
        entry.status = HealthStatus.BELOW_MIN_USABLE
        entry.error = (
            f"{entry.totals.usable} of {entry.totals.requested} GPUs usable, fewer than --min-usable "
            f"{options.min_usable:g}"
        )
    return entry


def _cloud_kubeconfig(fleet: FleetContext, cluster_id: str, context: str) -> tuple[str, str] | str:
    """A kubeconfig of the cluster from the cloud now (Nebius: an exec plugin pinned to the profile), or
    why there is none."""
    from npa_pulumi.kube.kubeconfig import dump

    try:
        return dump(fleet.cloud.cluster_access(cluster_id).kubeconfig(context)), cluster_id
    except CloudError as err:
        return f"the cloud gave no credentials for the cluster's API: {err}"


def _fabric_config(target: Target, deadline: float) -> Any:
    """The fabric check's settings for a requalification (None where it does not apply), bounded by what
    is left of the requalification's deadline (at least a minute)."""
    if target.cluster.gpu_count() <= 0:
        return None
    settings = fabric_check_config(target.cluster)
    left = max(60.0, deadline - time.monotonic())
    config = dataclasses.replace(settings, timeout_s=min(float(settings.timeout_s), left))
    return None if config.not_applicable else config


def _failed(entry: ClusterHealth, config: Any, why: str) -> ClusterHealth:
    entry.status, entry.error = HealthStatus.FAILED, why
    entry.totals = GpuTotals(requested=config.expected_gpus, missing=config.expected_gpus)
    entry.usable_fraction = 0.0 if config.expected_gpus else 1.0
    return entry


def _gate_passed_at(outputs: ClusterOutputs) -> str | None:
    evidence = outputs.health_evidence
    if evidence is None or not evidence.get("passed"):
        return None
    return str(evidence.get("finished_at") or "") or None


def _last_gate(outputs: ClusterOutputs) -> str:
    if outputs.validation == "skipped":
        return "skipped"
    evidence = outputs.health_evidence
    if evidence is None:
        return "none"
    return "passed" if evidence.get("passed") else "failed"


def _requalify(
    client_for: Any,
    config: Any,
    nodes: list[dict[str, Any]],
    outputs: dict[str, Any],
    context: str,
    target: Target,
    cluster_id: str,
    options: HealthRequest,
    incidents: Mapping[str, tuple[str, str, str]],
) -> dict[str, Any]:
    """The gate's per-node probes on exactly the unqualified GPU nodes: those joined after the gate pass,
    and those with an open remediation incident whose fault has cleared (their validated return; one
    whose fault is still there would only fail); the record written for them."""
    qualification = health_model.Qualification.from_outputs(
        outputs, requalification.read_record(context), incidents
    )
    wanted = [
        n
        for n in nodes
        if config.expected_gpu_nodes > 0
        and is_gpu_node(n, config)
        and qualification.of(n)[0] == UNQUALIFIED
        and not (
            qualification.incident_of(n) is not None
            and ladder.faults_now(health_model.judge_node(n, config, qualification, []))
        )
    ]
    return _probe(client_for, config, wanted, context, target, cluster_id, options.requalify_timeout_s)


def _probe(
    client_for: Any,
    config: Any,
    wanted: list[dict[str, Any]],
    context: str,
    target: Target,
    cluster_id: str,
    timeout_s: float,
) -> dict[str, Any]:
    """The gate's per-node probes on `wanted` (then the fabric check where it applies); the record
    written for them."""
    done: dict[str, Any] = {"nodes": [n["metadata"]["name"] for n in wanted], "passed": [], "failed": []}
    if not wanted:
        return done
    deadline = time.monotonic() + timeout_s
    results = {
        n["metadata"]["name"]: requalification.requalify_node(client_for, config, n, deadline) for n in wanted
    }
    fabric = _fabric_config(target, deadline)
    if fabric is not None and any(r["passed"] for r in results.values()):
        from npa_pulumi.kube.fabric_check import run_fabric_check

        evidence = run_fabric_check(client_for, fabric, refuse_while_busy=True)
        done["fabric"] = requalification.judge_fabric(results, evidence)
    refused = {name: r["refused"] for name, r in results.items() if r.get("refused")}
    done["passed"] = sorted(n for n, r in results.items() if r["passed"])
    done["failed"] = sorted(n for n, r in results.items() if not r["passed"])
    if refused:
        done["refused"] = refused
    done["record"] = str(requalification.write_record(context, target.cluster_stack, cluster_id, results))
    done["results"] = results
    return done
