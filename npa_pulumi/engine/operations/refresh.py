"""`refresh`: Pulumi's refresh of the selected stacks, and for a cluster stack what drifted in the cloud
(what `up` repairs)."""

from __future__ import annotations

from npa_pulumi.cloud.errors import CloudError
from npa_pulumi.engine import liveness
from npa_pulumi.engine.automation import StackCommand, StackOp
from npa_pulumi.engine.context import FleetContext
from npa_pulumi.output.results import FleetResult, StackResult


def run(context: FleetContext) -> FleetResult:
    result = context.result("refresh")
    plans = context.plans()
    result.warnings = list(plans.warnings)
    ops: list[StackOp] = []
    if context.options.shard and context.options.stage is None:
        # Shards share project stacks; two refreshing one would collide on its lock. They are
        # refreshed once, by an unsharded run (or `refresh --stage projects`).
        result.warnings.append(
            f"shard {context.options.shard}: only cluster stacks are refreshed; refresh the project stacks "
            "once with `npa-pulumi refresh --stage projects`"
        )
    elif context.options.stage != "clusters":
        ops += [context.project_op(p) for p in plans.projects]
    if context.options.stage != "projects":
        ops += [context.cluster_op(c) for c in plans.clusters]
    result.stacks.extend(context.pool(ops, lambda op: _refresh_stack(context, op)))
    return result


def _refresh_stack(context: FleetContext, op: StackOp) -> StackResult:
    refreshed = context.executor.run(op, StackCommand.REFRESH)
    if op.kind != "cluster" or refreshed.failed:
        return refreshed
    outputs = context.executor.outputs(op) or {}
    if not outputs.get("cluster_id"):
        return refreshed
    try:
        drift = liveness.cluster_drift(context, outputs)
    except CloudError as err:
        refreshed.error = f"could not check the live cluster for drift: {err}"
        return refreshed
    if drift:
        refreshed.status, refreshed.drift = "drifted", drift
        refreshed.error = liveness.describe_drift(drift) + "; run up to bring it back to the spec"
    return refreshed
