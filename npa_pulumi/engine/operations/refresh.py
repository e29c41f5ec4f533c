"""`refresh`: Pulumi's refresh of the selected stacks, and for a cluster stack what drifted in the cloud
(what `up` repairs)."""

from __future__ import annotations

from npa_pulumi.cloud.errors import CloudError
from npa_pulumi.engine import liveness
from npa_pulumi.engine.automation import StackCommand, StackOp
from npa_pulumi.engine.context import FleetContext
from npa_pulumi.engine.graph import Visit, WalkKind
from npa_pulumi.output.results import FleetResult, StackResult, StackStatus
from npa_pulumi.output.stack_outputs import ClusterOutputs


def run(context: FleetContext) -> FleetResult:
    result = context.result("refresh")
    plans = context.plans()
    result.warnings = list(plans.warnings)
    graph = context.graph()
    if context.share.shard and context.share.stage is None:
        # Shards share project stacks; two refreshing one would collide on its lock. They are
        # refreshed once, by an unsharded run (or `refresh --stage projects`).
        result.warnings.append(
            f"shard {context.share.shard}: only cluster stacks are refreshed; refresh the project stacks "
            "once with `npa-pulumi refresh --stage projects`"
        )
    ops = {p.stack: context.project_op(p) for p in graph.projects(WalkKind.REFRESH)}
    ops.update({c.stack: context.cluster_op(c) for c in graph.clusters(WalkKind.REFRESH)})
    # Forward: a cluster stack's refresh reads its project stack, never while that stack is refreshed.
    visit: Visit[StackResult] = Visit(
        project=lambda plan: _refresh_stack(context, ops[plan.stack]),
        cluster=lambda plan, _behind: _refresh_stack(context, ops[plan.stack]),
        blocked=lambda plan, culprit: ops[plan.stack].result(
            "skipped", error=f"project stack {culprit} failed to refresh; cluster not refreshed"
        ),
    )
    walk = graph.forward(WalkKind.REFRESH, visit)
    result.stacks.extend(context.run_walk([ops[key] for key in walk.nodes], walk))
    return result


def _refresh_stack(context: FleetContext, op: StackOp) -> StackResult:
    refreshed = context.executor.run(op, StackCommand.REFRESH)
    if op.kind != "cluster" or refreshed.failed:
        return refreshed
    outputs = ClusterOutputs.read(context.executor.outputs(op))
    if not outputs.cluster_id:
        return refreshed
    try:
        drift = liveness.cluster_drift(context, outputs)
    except CloudError as err:
        refreshed.error = f"could not check the live cluster for drift: {err}"
        return refreshed
    if drift:
        refreshed.status, refreshed.drift = StackStatus.DRIFTED, drift
        refreshed.error = liveness.describe_drift(drift) + "; run up to bring it back to the spec"
    return refreshed
