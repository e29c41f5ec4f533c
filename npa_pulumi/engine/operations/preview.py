"""`preview`: Pulumi's preview of every stack, except those provably unchanged, and Terraform's own plan
for the clusters whose bridge has work."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from npa_pulumi.bridge.plan_summary import stack_disruption
from npa_pulumi.cloud.errors import CloudError
from npa_pulumi.engine import liveness, rollout
from npa_pulumi.engine.automation import StackCommand, StackOp, change_counts
from npa_pulumi.engine.context import FleetContext
from npa_pulumi.engine.costs import preview_cost
from npa_pulumi.engine.graph import Skip, Visit, WalkKind
from npa_pulumi.engine.operations import health, preflight
from npa_pulumi.engine.operations.common import (
    maintenance_blocks,
    refuse_unused_storage,
    replacement_policy_config,
    terraform_plan,
    would_defer,
)
from npa_pulumi.engine.plans import require_recipe_terraform
from npa_pulumi.engine.programs import ClusterPlan, ProjectPlan
from npa_pulumi.engine.requests import PreviewRequest
from npa_pulumi.output.results import FleetResult, StackResult, StackStatus
from npa_pulumi.output.stack_outputs import ClusterOutputs, ProjectOutputs
from npa_pulumi.spec.models import MaintenanceSpec


def run(context: FleetContext, request: PreviewRequest) -> FleetResult:
    """Skipped: stacks deployed from exactly this plan (the fingerprint covers the policy packs too), live
    as they recorded (no drift), and with the policy results of an engine run over that plan on this
    machine (engine/policy_results.py), which the skipped preview reports. `--refresh` previews every
    stack."""
    result = context.result("preview")
    plans = context.plans()
    require_recipe_terraform(plans)  # the recipe's Terraform version, before anything mutates
    result.warnings = list(plans.warnings)
    waves = rollout.plan(context)
    result.rollout = waves.to_json() if waves is not None else None
    refuse_unused_storage(context, plans)
    if request.preflight:
        result.preflight = preflight.gate(context)  # read-only: reported next to the changes, never blocking
    result.stacks.extend(plans.unsupported)
    graph = context.graph()
    projects, clusters = graph.projects(WalkKind.PREVIEW), graph.clusters(WalkKind.PREVIEW)
    refresh = context.refreshing
    # Project stacks first, then each cluster after its project (a never-deployed project's preview
    # creates its empty stack): every skip is decided before, from what the stacks recorded.
    # The walk holds the run's stack ops and outputs cache (engine/stack_ops.py, engine/outputs_cache.py).
    stack_ops, outputs = context.stack_ops, context.outputs
    project_outputs = outputs.read_all([stack_ops.project_op(p) for p in graph.all_projects])
    ops = {p.stack: stack_ops.project_op(p) for p in projects}
    ops.update(
        {
            c.stack: stack_ops.cluster_op(
                c, bool(ProjectOutputs.read(project_outputs.get(c.project_stack)).subnet_id)
            )
            for c in clusters
        }
    )
    plan_of: dict[str, ProjectPlan | ClusterPlan] = {**{p.stack: p for p in projects}}
    plan_of.update({c.stack: c for c in clusters})
    unchanged = set() if refresh or not projects else liveness.unchanged_projects(context)
    unchanged |= set() if refresh or not clusters else liveness.unchanged_clusters(context)
    skipped, _ = skippable(context, [ops[s] for s in plan_of if s in unchanged], unchanged, plan_of)
    settled = {r.stack: r for r in skipped}
    windows = maintenance_blocks(context) if clusters else {}
    visit: Visit[StackResult] = Visit(
        project=lambda plan: _preview_stack(context, ops[plan.stack], plan),
        cluster=lambda plan, _behind: _preview_cluster(
            context, ops[plan.stack], plan, project_outputs.get(plan.project_stack), windows.get(plan.stack)
        ),
        blocked=lambda plan, culprit: ops[plan.stack].result(
            "skipped", error=f"project stack {culprit} failed to preview; cluster not previewed"
        ),
        unchanged=lambda plan: settled[plan.stack],
    )
    skip = Skip(
        projects=frozenset(s for s in settled if s in ops and ops[s].kind == "project"),
        clusters=frozenset(s for s in settled if ops[s].kind == "cluster"),
        recheck_behind_project=False,  # a preview changes no project: its skipped clusters stay skipped
    )
    walk = graph.forward(WalkKind.PREVIEW, visit, skip)
    if walk.nodes:
        context.warm_provider_host()
    ran = context.run_walk([ops[key] for key in walk.nodes], walk)
    # Project stacks first, each kind's skipped before its previewed ones (the document's order).
    result.stacks.extend(r for r in ran if r.kind == "project")
    result.stacks.extend(r for r in ran if r.kind != "project")
    context.fill_identity(result)
    preview_cost(context, result)  # the cost delta and the budget guardrail (engine/costs.py)
    if waves is not None and result.rollout is not None:
        rollout.mark_holds(
            result.rollout,
            waves,
            lambda stacks, fresh: health.clusters(context, stacks, fresh),
            result.stacks,
            request.rollout.ignore_maintenance,
        )
    return result


def skippable(
    context: FleetContext,
    ops: list[StackOp],
    unchanged: set[str],
    plans: Mapping[str, ProjectPlan | ClusterPlan],
) -> tuple[list[StackResult], list[StackOp]]:
    """(results of the unchanged stacks whose policy results are known, the ops that must run)."""
    from npa_pulumi.engine import policy_results

    skipped, run_these = [], []
    for op in ops:
        known = None
        if op.stack in unchanged:
            known = policy_results.load(
                context.settings.backend_url, op.stack, context.stack_ops.fingerprint(plans[op.stack])
            )
        if known is None:
            run_these.append(op)
            continue
        item = context.unchanged_result(op)
        item.status, item.changes, item.policy = StackStatus.NO_CHANGES, change_counts({}), known
        skipped.append(item)
    return skipped, run_these


def _preview_stack(context: FleetContext, op: StackOp, plan: ProjectPlan) -> StackResult:
    previewed = context.executor.run(op, StackCommand.PREVIEW)
    if previewed.status == "no-changes":
        context.remember_policy(plan, previewed)
    if not previewed.failed:
        previewed.disruption = stack_disruption(previewed.diff, None)
    return previewed


def _preview_drift(context: FleetContext, outputs: dict[str, Any] | None) -> list[dict[str, str]]:
    """What of a deployed cluster changed outside the fleet ([] when nothing, or when it cannot be
    read): a preview reports it, and Terraform's plan shows how `up` repairs it."""
    recorded = ClusterOutputs.read(outputs)
    if not recorded.cluster_id:
        return []
    try:
        return liveness.cluster_drift(context, recorded)
    except CloudError:
        return []


def _preview_cluster(
    context: FleetContext,
    op: StackOp,
    plan: ClusterPlan,
    project_outputs: dict[str, Any] | None,
    maintenance: MaintenanceSpec | None = None,
) -> StackResult:
    """`_planned_cluster`, its changes classed disruptive or in-place (bridge/plan_summary.py), and what an
    `up` now would leave pending for its maintenance windows (plan/deferral.py)."""
    previewed = _planned_cluster(context, op, plan, project_outputs)
    if not previewed.failed:
        previewed.disruption = stack_disruption(previewed.diff, previewed.terraform)
        deployed = bool(ClusterOutputs.read(context.outputs.cached(op.stack)).cluster_id)
        if previewed.terraform is not None and deployed:
            previewed.pending = would_defer(context, maintenance, previewed.terraform)
    return previewed


def _planned_cluster(
    context: FleetContext, op: StackOp, plan: ClusterPlan, project_outputs: dict[str, Any] | None
) -> StackResult:
    """Pulumi's preview, then Terraform's own plan where the bridge has work (its inputs changed, or
    every cluster with --refresh); what of a deployed cluster drifted. An unchanged cluster runs no
    terraform at all."""
    drift = _preview_drift(context, context.outputs.cached(op.stack))
    previewed = context.executor.run(op, StackCommand.PREVIEW)
    bridge_changed = previewed.status == "changes" and (
        not previewed.diff or any(d.get("urn", "").endswith("-terraform") for d in previewed.diff)
    )
    if previewed.status == "no-changes" and not drift:
        context.remember_policy(plan, previewed)
    if drift and not previewed.failed:
        # The engine's preview compares inputs only: a cluster changed behind the fleet's back is
        # reported from the live check, as `refresh` and `status` report it (`up` refreshes and repairs).
        previewed.drift, previewed.status = drift, StackStatus.CHANGES
        previewed.error = liveness.describe_drift(drift) + "; up brings it back to the spec"
    if previewed.failed or not (bridge_changed or context.refreshing):
        return previewed
    context.progress.phase(op.stack, "terraform plan")
    terraform = terraform_plan(context, op, plan, project_outputs)
    replacements = replacement_policy_config(terraform)
    if replacements is not None:
        # The policies ran before Terraform's plan was known: preview again with the planned node-group
        # replacements in the gpu-node-group-replacement policy's config (only in this, rare, case).
        again = context.executor.run(
            dataclasses.replace(op, policy_config=replacements), StackCommand.PREVIEW
        )
        if drift and not again.failed:
            again.drift, again.status, again.error = previewed.drift, previewed.status, previewed.error
        previewed = again
    previewed.terraform = terraform
    context.progress.phase(op.stack, "done", previewed.status)
    return previewed
