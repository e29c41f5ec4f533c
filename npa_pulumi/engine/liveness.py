"""Is a deployed stack still what it recorded? The live and drift checks every operation shares.

`up` skips a stack only when it was deployed from exactly the current plan (its fingerprint) and the cloud
still has what it recorded; `preview`, `refresh` and `status` report drift from the same reads; preflight's
live proof starts from every deployed cluster stack, whatever its fingerprint (`deployed_clusters`). All of
it is read-only: stack outputs (through the context's cache) and the cloud port.
"""

from __future__ import annotations

from npa_pulumi.bridge.drift import LIVE_OBJECTS_OUTPUT, Drift, declared_objects, live_drift
from npa_pulumi.cloud.errors import CloudError, NotFound
from npa_pulumi.cloud.project_reads import LiveReader
from npa_pulumi.engine.automation import PROJECT_NAME, StackOp, stack_interrupted
from npa_pulumi.engine.context import FleetContext
from npa_pulumi.engine.programs import ClusterPlan, ProjectPlan
from npa_pulumi.output.stack_outputs import ClusterOutputs, ProjectOutputs, StackOutputs
from npa_pulumi.plan import Target


def fingerprint_matches(
    context: FleetContext, plan: ProjectPlan | ClusterPlan, outputs: StackOutputs | None
) -> bool:
    matches = outputs is not None and outputs.npa_fingerprint == context.fingerprint(plan)
    # A run killed after the engine wrote the outputs but before it released the lock leaves a
    # matching fingerprint behind a stale lock: run such a stack, so the lock is recovered.
    return matches and not stack_interrupted(context.settings.backend_url, plan.stack, PROJECT_NAME)


def project_live(context: FleetContext, outputs: ProjectOutputs) -> bool:
    try:
        project = context.cloud.get_project(str(outputs.project_id))
        context.cloud.get_subnet(str(outputs.subnet_id))
        if outputs.bucket_id:
            context.cloud.get_bucket(outputs.bucket_id)
    except CloudError:
        return False
    return project.state == "ACTIVE"


def cluster_live(context: FleetContext, outputs: ClusterOutputs, batched: bool = False) -> bool:
    """Whether the cluster and node groups the stack recorded all run at their targets, without drift.
    `batched`: read them from the command's per-project listings (fleet-wide checks at the start of a
    command); otherwise asked of the cloud now (a check after this command may have changed them)."""
    cluster_id = outputs.cluster_id
    if not cluster_id:
        return False
    if outputs.recorded_lifecycle != "deployed":
        return False  # a failed gate or missing credentials: `up` runs the stack again (only the gate)
    try:
        reads = live_reads(context, outputs) if batched else context.cloud
        cluster = reads.get_cluster(cluster_id)
        groups = reads.list_node_groups(cluster.id)
        if drift(context, outputs, reads):
            return False  # an object the recipe made was deleted or resized outside the fleet
    except CloudError:
        return False
    return cluster.state == "RUNNING" and all(
        g.state == "RUNNING" and g.ready_node_count >= g.target_node_count for g in groups
    )


def live_reads(context: FleetContext, outputs: StackOutputs) -> LiveReader:
    """The command's batched reads of the project a stack recorded (cloud/project_reads.py)."""
    return context.live_reads(outputs.project_id or "")


def drift(context: FleetContext, outputs: ClusterOutputs, reads: LiveReader | None = None) -> list[Drift]:
    """The objects a cluster stack's recipe declared (its `live_objects` output) that the cloud no longer
    has or that differ from the spec; empty when the recipe declares none (npa_pulumi/bridge/drift.py).
    Read through `reads` (default: the cloud now). Cloud errors other than NotFound propagate."""
    declared = declared_objects({LIVE_OBJECTS_OUTPUT: outputs.live_objects})
    if not declared:
        return []
    return live_drift(reads or context.cloud, outputs.project_id or "", declared)


def deleted_cluster_drift(
    context: FleetContext, outputs: ClusterOutputs, reads: LiveReader | None = None
) -> list[dict[str, str]]:
    """The drift of a cluster the cloud no longer has: every object its recipe declared that went with
    it, or the cluster alone when the recipe declares none (or the check cannot run)."""
    try:
        found = [d.as_dict() for d in drift(context, outputs, reads)]
    except CloudError:
        found = []
    cluster = {"address": "", "kind": "cluster", "id": outputs.cluster_id or ""}
    return found or [{**cluster, "reason": "deleted outside the fleet"}]


def cluster_drift(context: FleetContext, outputs: ClusterOutputs) -> list[dict[str, str]]:
    """What of a deployed cluster changed outside the fleet, as refresh and preview report it (the whole
    cluster when it is gone). Cloud errors other than NotFound propagate."""
    try:
        context.cloud.get_cluster(str(outputs.cluster_id))
        return [d.as_dict() for d in drift(context, outputs)]
    except NotFound:
        return deleted_cluster_drift(context, outputs)


def describe_drift(drift_found: list[dict[str, str]]) -> str:
    """One line for a result's error: every drifted object with why."""
    return "; ".join(f"{d['kind'].replace('_', ' ')} {d['id']} {d['reason']}" for d in drift_found)


def needs_refresh(context: FleetContext, stack: str) -> bool:
    """A deployed cluster stack whose live objects do not match what it recorded: its update must
    refresh first, so the Terraform bridge sees the drift (an unchanged spec alone makes no diff)."""
    outputs = ClusterOutputs.read(context.cached_outputs(stack))
    if not outputs.cluster_id:
        return False
    # A failed gate is retried by a plain update; its objects may still have drifted: check them too.
    return not cluster_live(context, outputs.model_copy(update={"lifecycle": "deployed"}))


def unchanged_projects(context: FleetContext) -> set[str]:
    plans = context.plans().projects
    outputs = context.stack_outputs([context.project_op(p) for p in plans])
    recorded = {p.stack: ProjectOutputs.of(outputs[p.stack]) for p in plans}
    return {
        p.stack
        for p in plans
        if (found := recorded[p.stack]) is not None
        and fingerprint_matches(context, p, found)
        and project_live(context, found)
    }


def cluster_unchanged(
    context: FleetContext,
    plan: ClusterPlan,
    mine: ClusterOutputs | None,
    project: ProjectOutputs | None,
    batched: bool = False,
) -> bool:
    """A cluster stack deployed from exactly `plan`, whose identity still matches its project stack's
    outputs and whose live cluster and node groups all run: nothing for `up` to do, no new quota.
    `batched`: the live side from the command's per-project listings (cluster_live)."""
    if mine is None:
        return False
    return _same_plan_and_identity(context, plan, mine, project) and cluster_live(context, mine, batched)


def deployed_clusters(context: FleetContext) -> dict[str, tuple[ClusterOutputs, ProjectOutputs | None]]:
    """The outputs of every selected cluster stack that records a cluster, deployed from any plan by any
    version, with its project stack's outputs (None when that stack records nothing): what preflight's
    live proof starts from (it compares what decides capacity itself, never the fingerprint). Read through
    the context's output cache; no plan is needed."""
    clusters = {
        stack: ClusterOutputs.read(out) for stack, out in context.stack_outputs(context.target_ops()).items()
    }
    deployed = {stack: out for stack, out in clusters.items() if out.cluster_id}
    if not deployed:
        return {}
    targets = [t for t in context.targets if t.cluster_stack in deployed]
    projects = context.stack_outputs(
        list({t.project_stack: _outputs_op(t.project_stack, t.project_key) for t in targets}.values())
    )
    return {
        t.cluster_stack: (deployed[t.cluster_stack], ProjectOutputs.of(projects.get(t.project_stack)))
        for t in targets
    }


def _outputs_op(stack: str, project_key: str) -> StackOp:
    """A program-less op of a project stack: for reading its outputs only."""
    return StackOp(stack, "project", project_key, None, None, {})


def identity_mismatch(target: Target, mine: ClusterOutputs, project: ProjectOutputs | None) -> str:
    """Why a cluster stack's recorded identity no longer matches its project stack and the plan ("" when it
    does): its cluster would be built again elsewhere."""
    if not project:
        return "its project stack records no project"
    recorded, planned = mine.project_id, project.project_id
    if recorded != planned:
        return f"the stack's project {recorded} is not its project stack's {planned}"
    recorded, planned = mine.subnet_id, target.cluster.subnet_id or project.subnet_id
    if recorded != planned:
        return f"the stack's subnet {recorded} is not the plan's {planned}: the cluster would be built again"
    return ""


def _same_plan_and_identity(
    context: FleetContext, plan: ClusterPlan, mine: ClusterOutputs, project: ProjectOutputs | None
) -> bool:
    if not (project and fingerprint_matches(context, plan, mine)):
        return False
    return mine.project_id == project.project_id and mine.subnet_id == (plan.subnet_id or project.subnet_id)


def unchanged_clusters(context: FleetContext) -> set[str]:
    """The selected cluster stacks with nothing for `up` to do (cluster_unchanged), computed once per
    command (the context keeps it until a project stack's update makes it stale)."""
    if context.unchanged_cluster_stacks is None and not any_cluster_deployed(context):
        context.unchanged_cluster_stacks = set()  # nothing to compare: spare planning (a new fleet)
    if context.unchanged_cluster_stacks is None:
        plans = context.plans()
        project_outputs = context.stack_outputs([context.project_op(p) for p in plans.projects])
        outputs = context.stack_outputs([context.cluster_op(c) for c in plans.clusters])
        context.unchanged_cluster_stacks = {
            plan.stack
            for plan in plans.clusters
            if cluster_unchanged(
                context,
                plan,
                ClusterOutputs.of(outputs[plan.stack]),
                ProjectOutputs.of(project_outputs.get(plan.project_stack)),
                batched=True,
            )
        }
    return context.unchanged_cluster_stacks


def any_cluster_deployed(context: FleetContext) -> bool:
    """Whether any selected cluster stack carries a fingerprint (was deployed by npa-pulumi)."""
    recorded = context.stack_outputs(context.target_ops()).values()
    return any(ClusterOutputs.read(out).deployed_by_fleet for out in recorded)
