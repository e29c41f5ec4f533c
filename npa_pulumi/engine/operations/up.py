"""`up`: every changed project stack, and each cluster stack as soon as its project stack is up.

The fleet's two-level graph runs forward on the one scheduler (engine/scheduler.py): a cluster job waits
for its project's job only (no barrier behind every project), is blocked (`skipped`, never attempted) when
that project failed, and decides once its project is up whether anything is left to do (an unchanged,
live cluster is reported `unchanged`). Everything that can be checked offline or read-only happens before
the first mutation; a failure there touches nothing.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from npa_pulumi.engine import lifecycle, liveness
from npa_pulumi.engine import rollout as staged
from npa_pulumi.engine.automation import PROJECT_NAME, StackCommand, StackOp, checkpoint_outputs
from npa_pulumi.engine.context import FleetContext
from npa_pulumi.engine.costs import over_budget
from npa_pulumi.engine.graph import Skip, Visit, WalkKind
from npa_pulumi.engine.health.actions import CHANGE_REASON_PREFIX, ChangeDrain
from npa_pulumi.engine.health.remediation import WorkloadManager
from npa_pulumi.engine.operations import health, preflight
from npa_pulumi.engine.operations.common import (
    apply_lifecycle,
    maintenance_blocks,
    refuse_unused_storage,
    replacement_policy_config,
    terraform_plan,
    write_kubeconfig,
)
from npa_pulumi.engine.plans import FleetPlans, require_recipe_terraform
from npa_pulumi.engine.programs import ClusterPlan
from npa_pulumi.engine.registrations import adopted_recipes
from npa_pulumi.engine.requests import UpRequest, creates_projects
from npa_pulumi.engine.retries import Operation
from npa_pulumi.output.results import FleetResult, StackResult, StackStatus
from npa_pulumi.output.stack_outputs import ClusterOutputs, ProjectOutputs
from npa_pulumi.plan.deferral import Deferral, defer, restricted
from npa_pulumi.plan.windows import policy_from_spec
from npa_pulumi.runtime import tracing
from npa_pulumi.spec.models import MaintenanceSpec, WaitForJobsSpec

if TYPE_CHECKING:
    from npa_pulumi.kube.client import KubeClient

log = logging.getLogger(__name__)


def run(context: FleetContext, request: UpRequest) -> FleetResult:
    result = context.result("up")
    plans = context.plans()
    require_recipe_terraform(plans)  # the recipe's Terraform version, before anything mutates
    result.warnings = list(plans.warnings)
    refuse_unused_storage(context, plans)
    refusal = _refusal(context, plans)
    if refusal:
        result.error = refusal
        return result
    if request.preflight:
        report = preflight.gate(context)
        result.preflight = report
        if not report.get("ok", False):
            result.error = "preflight failed: the fleet does not fit the tenant's quota or reserved capacity"
            return result
    if over_budget(context, result):  # a mandatory fleet-monthly-budget stops up before any change
        return result
    _apply(context, plans, result)
    for stack in result.stacks:
        if stack.failed and stack.retry_command is None:
            context.mark_retry(stack, context.retry(Operation.UP, stack.project_key, stack.cluster_name))
    if context.share.stage != "projects":
        result.stacks[:0] = plans.undeployable()  # failures with no retry: retrying changes nothing
    context.fill_identity(result)
    for stack in result.clusters():
        if stack.status in ("deployed", "unchanged") and stack.cluster_id:
            with tracing.span("kubeconfig", {"npa.stack": stack.stack}, stack=stack.stack):
                write_kubeconfig(context, stack, result.warnings)
            apply_lifecycle(context, stack)
    halted = (result.rollout or {}).get("halted")
    waiting = (result.rollout or {}).get("waiting")
    if halted and not result.failed_count:
        # A rollout that stopped without a failed cluster (held for maintenance, a soak, a policy
        # violation) still did not do what was asked: later waves were not started.
        result.error = f"the rollout halted at wave {halted['wave']}: {halted['reason']}"
    elif waiting and not result.failed_count and "approval" in str(waiting["reason"]):
        # A wave waits for people's approval (rollout.approval): the same `up` goes on once given.
        result.error = (
            f"the rollout waits at wave {waiting['wave']}: {waiting['reason']}; it and later waves were not "
            "started. Run the same `up` once approved"
        )
    elif waiting and not result.failed_count:
        # Every cluster of a wave held: nothing vouched for the change, so later waves were not started.
        result.error = (
            f"the rollout waits at wave {waiting['wave']}: {waiting['reason']}; later waves were not "
            "started. Run `up` again once it is over, or with --ignore-maintenance to take them"
        )
    return result


def _refusal(context: FleetContext, plans: FleetPlans) -> str | None:
    """Why the whole run stops before any stack is touched, or None."""
    missing = [] if creates_projects(context.request) else _missing_projects(context, plans)
    if missing:
        # Every project stack would fail on its own, after others had run; stop before any of them.
        return (
            f"project(s) {', '.join(missing)} do not exist in tenant {context.tenant_id()} and "
            "--no-create-projects is set: nothing was created or changed (create them, give their "
            "project_id in the spec, or drop --no-create-projects)"
        )
    if context.share.stage == "clusters":
        undeployed = undeployed_projects(context, plans)
        if undeployed:
            # Every cluster stack of such a project would fail on its missing network: stop first.
            return (
                f"--stage clusters: project stack(s) {', '.join(undeployed)} not deployed; nothing was "
                "created or changed. Run `npa-pulumi up --stage projects` (once, unsharded) first"
            )
    return None


def _apply(context: FleetContext, plans: FleetPlans, result: FleetResult) -> None:
    """The graph forward: changed project stacks, then each cluster stack after its own project's."""
    graph = context.graph()
    projects, clusters = graph.projects(WalkKind.UP), graph.clusters(WalkKind.UP)
    stack_ops = context.stack_ops  # the run's ops and fingerprints (engine/stack_ops.py)
    ops = {p.stack: stack_ops.project_op(p) for p in projects}
    ops.update({c.stack: stack_ops.cluster_op(c) for c in clusters})  # built here, not in worker threads
    refresh = context.refreshing
    skip = Skip(
        projects=frozenset(liveness.unchanged_projects(context)) if projects and not refresh else frozenset(),
        clusters=frozenset(liveness.unchanged_clusters(context)) if clusters and not refresh else frozenset(),
    )
    absent = _absent_stacks(context, clusters) if len(skip.projects) < len(projects) else set()
    windows = maintenance_blocks(context)
    visit: Visit[StackResult] = Visit(
        project=lambda plan: _project_job(context, ops[plan.stack]),
        cluster=lambda plan, behind: _cluster_job(
            context, ops[plan.stack], plan, rechecks=behind, maintenance=windows.get(plan.stack)
        ),
        blocked=lambda plan, _culprit: _blocked(ops[plan.stack], plan),
        unchanged=lambda plan: context.unchanged_result(ops[plan.stack]),
        before_cluster=lambda plan: _creation(context, ops[plan.stack]) if plan.stack in absent else None,
    )
    walk = graph.forward(WalkKind.UP, visit, skip)
    result.stacks.extend(walk.settled)
    walk.settled = []
    scheduled = [ops[key] for key in walk.nodes]
    if scheduled:
        context.warm_provider_host()
    rollout = _rollout(context, result) if clusters else None
    if rollout is None:
        result.stacks.extend(context.run_walk(scheduled, walk))
    else:
        result.stacks.extend(rollout.run_walk(scheduled, walk))
        result.rollout = rollout.summary()
        if rollout.halted is not None or rollout.waiting is not None:
            result.resume = rollout.resume  # the retry behind the summary's resume_command


def _rollout(context: FleetContext, result: FleetResult) -> staged.RolloutRun | None:
    """The staged rollout this `up` runs (engine/rollout.py), its unchanged clusters already passed."""
    waves = staged.plan(context)
    if waves is None:
        return None
    run = staged.RolloutRun(
        context, waves, health=lambda stacks, fresh: health.clusters(context, stacks, fresh)
    )
    for stack in result.clusters():
        run.record(stack)  # unchanged: passed at once (a not-deployable target is reported, never gates)
    for line in waves.lines():
        context.progress.message(f"rollout {line}")
    return run


def _blocked(op: StackOp, plan: ClusterPlan) -> StackResult:
    return op.result("skipped", error=f"project stack {plan.project_stack} failed; cluster not attempted")


def _project_job(context: FleetContext, op: StackOp) -> StackResult:
    result = _up_project(context, op)
    # Its cluster stacks read these outputs: re-read what the update just wrote.
    context.stack_outputs([op], refresh=True)
    return result


def _cluster_job(
    context: FleetContext,
    op: StackOp,
    plan: ClusterPlan,
    rechecks: bool,
    maintenance: MaintenanceSpec | None = None,
) -> StackResult:
    if rechecks and not context.refreshing:
        # Its project stack was just updated: only now can the cluster be compared with it.
        mine = ClusterOutputs.of(context.cached_outputs(op.stack))
        project = ProjectOutputs.of(context.cached_outputs(plan.project_stack))
        if liveness.cluster_unchanged(context, plan, mine, project):
            return context.unchanged_result(op)
    return _up_cluster(context, op, maintenance)


def undeployed_projects(context: FleetContext, plans: FleetPlans) -> list[str]:
    """Project stacks of the selection with no deployed network (missing, or never completed): what the
    clusters stage refuses to build on. A project stack deployed from another spec only warns: its
    outputs (project, subnet) are what the cluster stacks read, and they exist."""
    outputs = context.stack_outputs([context.project_op(p) for p in plans.projects])
    missing = []
    for plan in plans.projects:
        found = ProjectOutputs.read(outputs.get(plan.stack))
        if not (found.project_id and found.subnet_id):
            missing.append(plan.stack)
        elif found.npa_fingerprint != context.fingerprint(plan):
            context.progress.message(
                f"{plan.stack}: deployed from another spec than this one; the clusters stage does not "
                "update it (run `npa-pulumi up --stage projects` for that)"
            )
    return missing


def _missing_projects(context: FleetContext, plans: FleetPlans) -> list[str]:
    """Named projects of the selection that the tenant does not have (one listing of the tenant)."""
    named = [p for p in plans.projects if not p.project_id]
    if not named:
        return []
    existing = {project.name for project in context.cloud.list_projects(context.tenant_id())}
    return [f"{p.display_name!r}" for p in named if p.display_name not in existing]


def _absent_stacks(context: FleetContext, clusters: Sequence[ClusterPlan]) -> set[str]:
    """The cluster stacks that do not exist yet: each is created (a `stack init`, an engine start, ~0.3 s)
    beside the project stacks' updates instead of in its own run's path (engine/graph.py runs the creation
    before the cluster's job, with what concurrency the project stacks leave). A cluster stack whose
    project then fails stays empty, as a preview's does."""
    url = context.settings.backend_url
    return {c.stack for c in clusters if checkpoint_outputs(url, c.stack, PROJECT_NAME) is None}


def _creation(context: FleetContext, op: StackOp) -> Callable[[], None]:
    def create() -> None:
        context.executor.select(op, create=True)  # the stack's own run creates it, and reports a failure

    return create


def _up_project(context: FleetContext, op: StackOp) -> StackResult:
    """A project stack. A deployed one whose network or bucket is gone refreshes first, so its update
    creates them again (an unchanged spec alone makes no diff). Single-flight across shards: a shard
    that finds it locked by another run waits for that run to finish it (polling its lock), then runs it
    itself, which finds nothing to change when the other shard deployed the same plan. Unsharded, a
    locked stack fails at once."""
    outputs = context.cached_outputs(op.stack)
    recorded = ProjectOutputs.read(outputs)
    drifted = bool(recorded.project_id) and not liveness.project_live(context, recorded)
    refresh = context.refreshing or drifted

    def once() -> StackResult:
        return (
            context.executor.run(op, StackCommand.UP, refresh=True)
            if refresh
            else context.executor.run(op, StackCommand.UP)
        )

    result = once()
    if not result.failed:
        context.remember_policy(context.project_plan(op.stack), result)
    if not context.share.shard:
        return result
    if result.failed and not result.locked and outputs is None:
        # Shards creating the same new project stack at the same instant can trip over each other's
        # `stack init` and first write (a DIY backend has no atomic create); a second attempt finds the
        # stack and its lock, and waits for the other shard as below. A real failure fails again.
        context.progress.message(f"{op.stack}: failed while new ({result.error}); retrying once")
        time.sleep(2.0)
        result = once()
    wait_s = context.request.shard_wait_s if isinstance(context.request, UpRequest) else 1800.0
    deadline = time.monotonic() + wait_s
    while result.locked and time.monotonic() < deadline:
        context.progress.message(f"{op.stack}: held by another run (another shard?); waiting for it")
        time.sleep(min(5.0, max(0.0, deadline - time.monotonic())))
        result = once()
    return result


def _up_cluster(context: FleetContext, op: StackOp, block: MaintenanceSpec | None = None) -> StackResult:
    if context.refreshing or liveness.needs_refresh(context, op.stack):
        # Drift repair brings the cluster back to the spec; the refresh changes what a plan would say.
        result = context.executor.run(op, StackCommand.UP, refresh=True)
    else:
        # Decided as the cluster's job starts: a window that closes meanwhile starts no later cluster.
        now = datetime.now(UTC)
        maintenance = policy_from_spec(block) if block is not None else None
        held = maintenance is not None and restricted(maintenance, now) and _deployed(context, op)
        waits = block is not None and block.wait_for_jobs is not None and not _forced(context)
        terraform = _plan_before_update(context, op, needed=held or (waits and _deployed(context, op)))
        if maintenance is not None and held:
            deferral = defer(maintenance, now, terraform)
            if deferral is not None:
                return _pending(context, op, deferral, terraform)
        drain: ChangeDrain | None = None
        if block is not None and block.wait_for_jobs is not None and waits and terraform is not None:
            stopped, drain = _wait_for_jobs(context, op, block.wait_for_jobs, terraform)
            if stopped is not None:
                return stopped
        if terraform is not None and context.replacement_policy_enabled:
            op = dataclasses.replace(op, policy_config=replacement_policy_config(terraform))
        try:
            result = context.executor.run(op, StackCommand.UP)
        finally:
            # Its workers were drained for the change only: once it is applied (or failed) they take jobs
            # again. A worker the change replaced took its drain with it.
            if drain is not None and drain.asked:
                context.progress.message(f"{op.stack}: {_lift_after(context, op, drain)} after the change")
        if terraform is not None and terraform.get("resources"):
            result.terraform = terraform
    if not result.failed:
        context.remember_policy(context.plans().cluster(op.stack), result)
    _forget_adopted_recipe(context, op, result)
    return result


def _forget_adopted_recipe(context: FleetContext, op: StackOp, result: StackResult) -> None:
    """An adopted stack whose update recorded the spec's fingerprint runs the spec's recipe now (the
    recipe move is applied): its copy of the install's recipe is no longer used."""
    outputs = result.outputs or context.cached_outputs(op.stack) or {}
    if adopted_recipes.moved(ClusterOutputs.read(outputs).npa_fingerprint) and adopted_recipes.remove(
        op.stack
    ):
        context.progress.message(
            f"{op.stack}: the recipe move is applied; its adopted recipe copy is removed"
        )


def _forced(context: FleetContext) -> bool:
    return isinstance(context.request, UpRequest) and context.request.force


def _disruptive(terraform: Mapping[str, Any]) -> list[str]:
    """The addresses of the plan's disruptive changes (a plan not read: assumed disruptive)."""
    resources = terraform.get("resources")
    if terraform.get("error") or terraform.get("skipped") or resources is None:
        return ["terraform (its plan was not read)"]
    return [
        str(r.get("address")) for r in resources if (r.get("disruption") or {}).get("class") == "disruptive"
    ]


def _wait_for_jobs(
    context: FleetContext, op: StackOp, wait: WaitForJobsSpec, terraform: Mapping[str, Any]
) -> tuple[StackResult | None, ChangeDrain | None]:
    """Before a disruptive change: wait (`wait.timeout`) for the cluster's job pods matching `wait.selectors`
    to end and, where the backend's workload manager owns its workers, for every worker to report
    itself drained through it (each drained here first: its running jobs finish, no new one starts).

    (None, the drain to lift once the change is applied) when the change may go (nothing disruptive, or
    every job ended); else the cluster's failed result naming the pods and workers still running jobs,
    its stack untouched (a failure, so its rollout wave halts) and the drains this wait asked for lifted
    again (a worker drained by someone else before stays drained)."""
    from npa_pulumi.cloud.errors import CloudError
    from npa_pulumi.kube import drain as kd
    from npa_pulumi.kube.client import KubeError
    from npa_pulumi.spec.durations import describe, duration_seconds

    changes = _disruptive(terraform)
    if not changes:
        return None, None
    outputs = ClusterOutputs.read(context.stack_outputs([op])[op.stack])
    timeout_s = float(duration_seconds(wait.timeout) or 3600)
    manager = _workload_manager(context, op)
    what = [", ".join(wait.selectors)] if wait.selectors else []
    what += [f"{manager.name} jobs on every worker (drained first)"] if manager is not None else []
    context.progress.phase(op.stack, "waiting for jobs", f"{'; '.join(what)} (up to {describe(timeout_s)})")
    drain: ChangeDrain | None = None
    last: dict[str, list[str]] = {"pods": [], "workers": []}
    try:
        client = _cluster_client(context, op, outputs)
        if manager is not None:
            drain = ChangeDrain(client, manager, _drain_reason(changes))

        def running() -> list[str]:
            last["pods"] = kd.running_jobs(client, wait.selectors)
            last["workers"] = drain.busy() if drain is not None else []
            return last["pods"] + last["workers"]

        waited = kd.wait_for_jobs(running, timeout_s)
    except (CloudError, KubeError) as err:
        return _not_changed(
            op,
            f"its running jobs ({'; '.join(what)}) could not be read before a disruptive change ({err})",
            drain,
        ), None
    if manager is not None and drain is not None and not drain.workers:
        return _not_changed(
            op,
            f"no {manager.name} worker was found (nodes labelled {manager.workers}) to drain before a "
            "disruptive change",
            drain,
        ), None
    if waited.cleared:
        if drain is not None:
            done = f"every job ended, {len(drain.workers)} {drain.manager.name} worker(s) drained"
        else:
            done = f"{len(waited.seen)} job pod(s) ended"
        if waited.seen:
            context.progress.message(f"{op.stack}: {done} after {describe(waited.waited_s)}; applying")
        return None, drain
    named = [_some(last["pods"])] if last["pods"] else []
    if last["workers"] and manager is not None:
        named.append(f"{manager.name} node(s) still running jobs: {_some(last['workers'])}")
    kind = "job pod(s)" if not last["workers"] else "job(s)"
    return _not_changed(
        op,
        f"{kind} still running after waiting {describe(timeout_s)} before a disruptive change "
        f"({', '.join(changes[:5])}): {'; '.join(named)}",
        drain,
    ), None


def _not_changed(op: StackOp, why: str, drain: ChangeDrain | None) -> StackResult:
    """The cluster's failed result: not changed, nothing evicted, the drains this wait asked lifted."""
    lifted = f", {_lift(drain)}" if drain is not None and drain.asked else ""
    kept = (
        f", {len(drain.kept)} worker(s) drained before it stay drained ({_some(sorted(drain.kept))})"
        if drain is not None and drain.kept
        else ""
    )
    return op.result(
        StackStatus.FAILED,
        error=f"{why}; the cluster is not changed, nothing was evicted{lifted}{kept} (`up --force` applies "
        "it without waiting)",
    )


def _lift(drain: ChangeDrain) -> str:
    """Release the drains `drain` asked for; what became of them, in words."""
    from npa_pulumi.kube.client import KubeError

    name = drain.manager.name
    try:
        lifted = drain.lift()
    except KubeError as err:
        return (
            f"the {name} drains of {_some(sorted(drain.asked))} could not be lifted ({err}): release them "
            f"by hand (their reason starts {CHANGE_REASON_PREFIX!r})"
        )
    return f"the {name} drains it asked for are lifted ({len(lifted)} of {len(drain.asked)} node(s))"


def _lift_after(context: FleetContext, op: StackOp, drain: ChangeDrain) -> str:
    """`_lift` once the change ran, with credentials the cloud gives now (an update can outlast the
    ones the wait had)."""
    from npa_pulumi.cloud.errors import CloudError
    from npa_pulumi.kube.client import KubeError

    try:
        drain.client = _cluster_client(
            context, op, ClusterOutputs.read(context.stack_outputs([op])[op.stack])
        )
    except (CloudError, KubeError) as err:
        context.progress.message(f"{op.stack}: the cluster's API with new credentials: {err}")
    return _lift(drain)


def _some(names: Sequence[str], shown: int = 10) -> str:
    more = f" and {len(names) - shown} more" if len(names) > shown else ""
    return ", ".join(names[:shown]) + more


def _drain_reason(changes: Sequence[str]) -> str:
    """The reason a workload manager gives its drain of the workers: which change, in a line it keeps."""
    more = f" and {len(changes) - 2} more" if len(changes) > 2 else ""
    return f"{CHANGE_REASON_PREFIX} {', '.join(changes[:2])}{more}"[:200]


def _workload_manager(context: FleetContext, op: StackOp) -> WorkloadManager | None:
    """The workload manager owning the cluster's workers (its backend's), when it names them."""
    from npa_pulumi.engine.backends.registry import backend_for, recorded_backend

    backend = recorded_backend(context.stack_outputs([op])[op.stack]) or backend_for(
        context.plans().cluster(op.stack).backend
    )
    manager = None if backend is None else backend.workload_manager
    return manager if manager is not None and manager.workers else None


def _cluster_client(context: FleetContext, op: StackOp, outputs: ClusterOutputs) -> KubeClient:
    """The cluster's API, with credentials the cloud gives now (as the gate reaches it)."""
    from npa_pulumi.kube.client import KubeClient
    from npa_pulumi.kube.kubeconfig import dump

    access = context.cloud.cluster_access(str(outputs.cluster_id))
    return KubeClient.from_kubeconfig(dump(access.kubeconfig(str(outputs.kube_context or op.stack))))


def _deployed(context: FleetContext, op: StackOp) -> bool:
    return bool(ClusterOutputs.read(context.stack_outputs([op])[op.stack]).cluster_id)


def _pending(
    context: FleetContext, op: StackOp, deferral: Deferral, terraform: dict[str, Any] | None
) -> StackResult:
    """A deployed cluster whose disruptive changes may not start now: its stack is not updated."""
    result = op.result(StackStatus.PENDING)
    result.pending = deferral.to_dict()
    # Beside the stack, for `status` on any machine (cleared by the stack's next update).
    tags = {
        lifecycle.TAG_PENDING: " ".join(deferral.reason.split())[:250],
        lifecycle.TAG_PENDING_UNTIL: result.pending["next_window"] or "",
    }
    context.executor.write_lifecycle(op, tags)
    if terraform is not None and terraform.get("resources"):
        result.terraform = terraform
    context.progress.phase(op.stack, str(StackStatus.PENDING), deferral.reason)
    return result


def _plan_before_update(context: FleetContext, op: StackOp, *, needed: bool = False) -> dict[str, Any] | None:
    """Terraform's plan for a deployed cluster about to change, so the gpu-node-group-replacement
    policy judges the update (and, made mandatory, stops it before anything is replaced), and so its
    maintenance windows can hold its disruptive changes (`needed`). A new cluster has nothing to replace
    or drain, and a disabled policy outside any hold needs no plan: both skip it."""
    outputs = ClusterOutputs.read(context.stack_outputs([op])[op.stack])
    if not outputs.cluster_id or not (context.replacement_policy_enabled or needed):
        return None
    plan = context.plans().cluster(op.stack)
    project_outputs = context.cached_outputs(plan.project_stack)
    context.progress.phase(op.stack, "terraform plan")
    return terraform_plan(context, op, plan, project_outputs)
