"""`status` and `kubeconfig`: read-only views of the selected cluster stacks."""

from __future__ import annotations

import logging
import time

from npa_pulumi.engine import rollout
from npa_pulumi.engine.context import FleetContext
from npa_pulumi.engine.costs import status_cost
from npa_pulumi.engine.graph import WalkKind
from npa_pulumi.engine.requests import StatusRequest
from npa_pulumi.output.results import FleetResult
from npa_pulumi.output.stack_outputs import ClusterOutputs
from npa_pulumi.plan.naming import kube_context_name

log = logging.getLogger(__name__)


def run(context: FleetContext, request: StatusRequest) -> FleetResult:
    from npa_pulumi.engine.status import cluster_status

    result = context.result("status")
    plans = context.plans()
    result.warnings = list(plans.warnings)
    if not request.live:
        result.live = False
        result.warnings.append(
            "--no-live: each stack as it recorded itself; the live cloud was not read, so clusters "
            "changed or deleted outside the fleet are not shown"
        )
    result.stacks.extend(plans.unsupported)
    graph = context.graph()
    ops = {c.stack: context.reading_op(c) for c in graph.clusters(WalkKind.STATUS)}
    started = time.monotonic()
    walk = graph.each_cluster(WalkKind.STATUS, lambda plan: cluster_status(context, ops[plan.stack]))
    result.stacks.extend(context.run_walk(list(ops.values()), walk))
    result.rollout = rollout.status(context)
    log.debug("status took %.1fs", time.monotonic() - started)
    status_cost(context, result)  # what the deployed fleet costs now (engine/costs.py)
    return result


def kubeconfigs(context: FleetContext) -> list[dict[str, str]]:
    """For every selected cluster: its stack, context and cluster id, plus `kubeconfig` (YAML, fresh
    credentials from the cloud) when its stack is deployed; what `npa-pulumi kubeconfig` prints."""
    from npa_pulumi.engine.registrations import kubeconfigs as registry

    outputs = context.stack_outputs(context.target_ops())
    found = []
    for target in context.targets:
        name = kube_context_name(context.spec.name, target.project_key, target.cluster_name)
        cluster_id = ClusterOutputs.read(outputs.get(target.cluster_stack)).cluster_id or ""
        entry = {"stack": target.cluster_stack, "context": name, "cluster_id": cluster_id}
        if not cluster_id:
            found.append(entry)
            continue
        stale = registry.registration_problems(
            name,
            stack=target.cluster_stack,
            cloud_name=context.where.cloud,
            profile=context.profile,
            outputs=outputs.get(target.cluster_stack),
            cloud=context.cloud,
        )
        if stale:
            entry["error"] = registry.refuse_stale(stale)
        else:
            entry["kubeconfig"] = registry.kubeconfig_text(context.cloud, cluster_id, name)[0]
        found.append(entry)
    return found
