"""What several operations share: refusing a selection before anything is touched, Terraform's own plan
for a cluster (previews show it; `up` hands it to the node-group replacement policy), and what follows a
deployed cluster stack (`up`, `adopt`): its recorded lifecycle and its users' kubeconfig and
registrations."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Mapping
from typing import Any

from npa_pulumi.cloud.errors import CloudError
from npa_pulumi.engine.automation import StackOp
from npa_pulumi.engine.backends.registry import recorded_backend
from npa_pulumi.engine.context import FleetContext
from npa_pulumi.engine.plans import FleetPlans
from npa_pulumi.engine.programs import ClusterPlan, cluster_module_args
from npa_pulumi.engine.retries import Operation
from npa_pulumi.errors import NpaError
from npa_pulumi.output.results import FAILED_LIFECYCLES, StackResult, StackStatus
from npa_pulumi.output.stack_outputs import ClusterOutputs, ProjectOutputs
from npa_pulumi.spec.models import MaintenanceSpec

log = logging.getLogger(__name__)


def refuse_unused_storage(context: FleetContext, plans: FleetPlans) -> None:
    """Object storage on a project whose selected clusters are all of backends that do not use it is
    refused, located in the spec, before anything is touched: the original tool failed closed too."""
    if not plans.unused_storage:
        return
    from npa_pulumi.engine.backends.registry import kinds_where
    from npa_pulumi.spec.errors import SpecError, SpecProblem

    source = context.spec_path or "<spec>"
    index = None
    if context.spec_path:
        from npa_pulumi.spec.yaml_source import load_yaml, read_spec_text

        with contextlib.suppress(NpaError, OSError):
            index = load_yaml(read_spec_text(context.spec_path), source)[1]
    users = " or ".join(kinds_where(lambda backend: backend.uses_object_storage))
    problems = []
    for unused in plans.unused_storage:
        position = unused.project_index
        mark = index.exact(("projects", position, "object_storage")) if index else None
        problems.append(
            SpecProblem(
                path=f"projects[{position}].object_storage",
                line=mark[0] if mark else None,
                column=mark[1] if mark else None,
                message=f"object storage needs at least one selected {users} cluster in its project; this "
                f"project's selected clusters are all {' or '.join(unused.backends)}, which do not use the "
                "fleet's object storage (nothing was created or changed)",
                hint=f"select an {users} cluster of this project, or remove object_storage",
            )
        )
    raise SpecError(problems, source)


def terraform_plan(
    context: FleetContext, op: StackOp, plan: ClusterPlan, project_outputs: dict[str, Any] | None
) -> dict[str, Any]:
    """Terraform's own plan for the cluster, summarized (components/terraform_module.plan_preview);
    read-only. A failure is reported in the summary, never raised: the preview or update stands."""
    project = ProjectOutputs.read(project_outputs)
    subnet_id, project_id = plan.subnet_id or project.subnet_id, project.project_id
    if not (subnet_id and project_id):
        return {"skipped": "the project stack is not deployed yet: no Terraform plan"}
    from npa_pulumi.components.terraform_module import plan_preview

    props = {
        **cluster_module_args(plan, context.where.cloud, context.profile, project_id, subnet_id),
        "module_kind": plan.module_kind,
    }
    try:
        # Read through the cache: `up` has just read these outputs, a preview's cluster op too.
        deployed = bool(ClusterOutputs.read(context.stack_outputs([op])[op.stack]).cluster_id)
        with context.provider_environment():  # authenticates as the command's providers do (`--auth`)
            return plan_preview(props, deployed=deployed, stored_state=lambda: _stored_tf_state(context, op))
    except NpaError as err:
        return {"error": f"terraform plan failed: {err}"}
    except Exception as err:  # the recipe or the cloud refused: reported, the preview itself stands
        log.exception("terraform plan for %s failed", op.stack)
        return {"error": f"terraform plan failed: {type(err).__name__}: {err}"}


def _stored_tf_state(context: FleetContext, op: StackOp) -> str | None:
    """The Terraform state the bridge keeps in the stack (a secret output), for a machine without the
    stack's work dir."""
    from npa_pulumi.policies.catalog import TERRAFORM_MODULE

    state = context.executor.resource_output(op, TERRAFORM_MODULE, "tf_state")
    return state if isinstance(state, str) and state else None


def replacement_policy_config(terraform: dict[str, Any]) -> dict[str, dict[str, Any]] | None:
    """The gpu-node-group-replacement policy's config entry for a plan that replaces node groups."""
    from npa_pulumi.bridge.plan_summary import replaced_node_group_addresses
    from npa_pulumi.policies.catalog import NODE_GROUP_REPLACEMENT_POLICY

    addresses = replaced_node_group_addresses(terraform)
    if not addresses:
        return None
    return {NODE_GROUP_REPLACEMENT_POLICY: {"planned_replacements": addresses}}


def apply_lifecycle(context: FleetContext, stack: StackResult) -> None:
    """The cluster's state as its stack recorded it: `deployed` only when the health gate passed
    (or was skipped on purpose); the gate's evidence goes into the result."""
    outputs = stack.outputs or context.cached_outputs(stack.stack) or {}
    recorded = ClusterOutputs.read(outputs)
    stack.validation = recorded.validation or stack.validation
    evidence = recorded.health_evidence
    if evidence is not None:
        stack.health = evidence
    backend = recorded_backend(outputs)
    native = backend.recorded_status(outputs) if backend is not None else None
    if native is not None:  # what the backend's own gate saw (a KubeRay cluster's Ray readiness, ...)
        for name, value in native.seen().items():
            setattr(stack, name, value)
    lifecycle = recorded.lifecycle
    if lifecycle in FAILED_LIFECYCLES and not stack.failed:
        stack.status = StackStatus(lifecycle)
        reason = (evidence or {}).get("reason", "")
        stack.error = f"the cluster is kept; its health gate did not pass: {reason}"
        context.mark_retry(stack, context.retry(Operation.UP, stack.project_key, stack.cluster_name))


def write_kubeconfig(context: FleetContext, stack: StackResult, warnings: list[str] | None = None) -> None:
    """The cluster's kubeconfig and registrations for its users (see engine/registrations/kubeconfigs.py):
    npa-pulumi's, and the original's under ~/.npa/clusters/ (engine/registrations/npa_records.py). A record
    of another cluster there is left alone, said on the progress stream and in `warnings` (the result's), and
    the cluster stays deployed."""
    from npa_pulumi.engine.registrations import kubeconfigs

    plan = context.plans().cluster(stack.stack)
    target = context.target_of(stack.stack)
    if not plan.in_cluster or not stack.kube_context or not stack.cluster_id or target is None:
        return

    def warn(message: str) -> None:
        log.warning("%s", message)
        context.progress.message(f"warning: {message}")
        if warnings is not None:
            warnings.append(message)

    try:
        registration = kubeconfigs.write(
            context.cloud,
            target,
            context=stack.kube_context,
            project_id=stack.project_id or "",
            cluster_id=stack.cluster_id,
            cloud=context.where.cloud,
            profile=context.profile,
            teardown_hint=context.retry_text(
                context.retry(Operation.DESTROY, plan.project_key, plan.cluster_name)
            ),
            warn=warn,
        )
    except (NpaError, CloudError) as err:
        stack.status = StackStatus.DEPLOYED_CREDENTIALS_FAILED
        stack.error = f"the cluster is deployed, but its kubeconfig could not be written: {err}"
        context.mark_retry(stack, context.retry(Operation.UP, stack.project_key, stack.cluster_name))
        return
    stack.kubeconfig = registration.kubeconfig


def maintenance_blocks(context: FleetContext) -> Mapping[str, MaintenanceSpec]:
    """Each selected cluster stack's `maintenance:` block (the most specific, as the spec resolved it)."""
    blocks: dict[str, MaintenanceSpec] = {}
    by_key = {
        (project.key(), cluster.name): cluster.maintenance or project.maintenance
        for project, cluster in context.spec.cluster_targets()
    }
    for target in context.targets:
        block = by_key.get((target.project_key, target.cluster_name))
        if block is not None:
            blocks[target.cluster_stack] = block
    return blocks


def would_defer(
    context: FleetContext, block: MaintenanceSpec | None, terraform: dict[str, Any] | None
) -> Any:
    """What an `up` now would leave pending of a deployed cluster with this Terraform plan
    (plan/deferral.py `Deferral.to_dict`), or None when it would apply it."""
    from datetime import UTC, datetime

    from npa_pulumi.plan.deferral import defer
    from npa_pulumi.plan.windows import policy_from_spec

    if block is None:
        return None
    deferral = defer(policy_from_spec(block), datetime.now(UTC), terraform)
    return deferral.to_dict() if deferral is not None else None
