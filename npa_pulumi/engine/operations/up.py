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
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

from npa_pulumi.engine import liveness
from npa_pulumi.engine import rollout as staged
from npa_pulumi.engine.automation import PROJECT_NAME, StackCommand, StackOp, checkpoint_outputs
from npa_pulumi.engine.context import FleetContext
from npa_pulumi.engine.costs import over_budget
from npa_pulumi.engine.fingerprint import FINGERPRINT_OUTPUT
from npa_pulumi.engine.operations.common import (
    apply_lifecycle,
    refuse_storage_without_mk8s,
    replacement_policy_config,
    terraform_plan,
    write_kubeconfig,
)
from npa_pulumi.engine.plans import FleetPlans, require_recipe_terraform
from npa_pulumi.engine.programs import ClusterPlan
from npa_pulumi.engine.scheduler import Job
from npa_pulumi.output.results import FleetResult, StackResult
from npa_pulumi.runtime import tracing

log = logging.getLogger(__name__)

Preflight = Callable[[FleetPlans], dict[str, Any] | None]


def run(context: FleetContext, preflight: Preflight | None = None) -> FleetResult:
    result = context.result("up")
    plans = context.plans()
    require_recipe_terraform(plans)  # the recipe's Terraform version, before anything mutates
    result.warnings = list(plans.warnings)
    refuse_storage_without_mk8s(context, plans)
    refusal = _refusal(context, plans)
    if refusal:
        result.error = refusal
        return result
    if preflight is not None:
        report = preflight(plans)
        result.preflight = report
        if report is not None and not report.get("ok", False):
            result.error = "preflight failed: the fleet does not fit the tenant's quota or reserved capacity"
            return result
    if over_budget(context, result):  # a mandatory fleet-monthly-budget stops up before any change
        return result
    _apply(context, plans, result)
    for stack in result.stacks:
        if stack.failed and stack.retry_command is None:
            stack.retry_command = context.retry_command("up", stack.project_key, stack.cluster_name)
    if context.options.stage != "projects":
        result.stacks[:0] = plans.undeployable()  # failures with no retry: retrying changes nothing
    context.fill_identity(result)
    for stack in result.clusters():
        if stack.status in ("deployed", "unchanged") and stack.cluster_id:
            with tracing.span("kubeconfig", {"npa.stack": stack.stack}, stack=stack.stack):
                write_kubeconfig(context, stack, result.warnings)
            apply_lifecycle(context, stack)
    return result


def _refusal(context: FleetContext, plans: FleetPlans) -> str | None:
    """Why the whole run stops before any stack is touched, or None."""
    missing = [] if context.options.create_projects else _missing_projects(context, plans)
    if missing:
        # Every project stack would fail on its own, after others had run; stop before any of them.
        return (
            f"project(s) {', '.join(missing)} do not exist in tenant {context.tenant_id()} and "
            "--no-create-projects is set: nothing was created or changed (create them, give their "
            "project_id in the spec, or drop --no-create-projects)"
        )
    if context.options.stage == "clusters":
        undeployed = undeployed_projects(context, plans)
        if undeployed:
            # Every cluster stack of such a project would fail on its missing network: stop first.
            return (
                f"--stage clusters: project stack(s) {', '.join(undeployed)} not deployed; nothing was "
                "created or changed. Run `npa-pulumi up --stage projects` (once, unsharded) first"
            )
    return None


def _apply(context: FleetContext, plans: FleetPlans, result: FleetResult) -> None:
    """The graph: changed project stacks, then each cluster stack after its own project's."""
    stage = context.options.stage
    project_ops: list[StackOp] = []
    if stage != "clusters":
        skip = set() if context.options.refresh else liveness.unchanged_projects(context)
        ops = [context.project_op(p) for p in plans.projects]
        result.stacks.extend(context.unchanged_result(op) for op in ops if op.stack in skip)
        project_ops = [op for op in ops if op.stack not in skip]
    cluster_ops: list[StackOp] = []
    if stage != "projects":
        skip_clusters = set() if context.options.refresh else liveness.unchanged_clusters(context)
        updating = {op.project_key for op in project_ops}
        for cluster in plans.clusters:
            op = context.cluster_op(cluster)
            if op.stack in skip_clusters and cluster.project_key not in updating:
                result.stacks.append(context.unchanged_result(op))
            else:
                cluster_ops.append(op)
    rollout = _rollout(context, result) if stage != "projects" else None
    if project_ops or cluster_ops:
        context.warm_provider_host()
    with _creating_cluster_stacks(context, cluster_ops if project_ops else []) as created:
        jobs = [Job(op.stack, _project_job(context, op)) for op in project_ops]
        job_of_project = {op.project_key: op.stack for op in project_ops}
        for op in cluster_ops:
            plan = plans.cluster(op.stack)
            waits = job_of_project.get(plan.project_key)
            jobs.append(
                Job(
                    op.stack,
                    _cluster_job(context, op, plan, created.get(op.stack), rechecks=waits is not None),
                    after=(waits,) if waits else (),
                    blocked=_blocked(op, plan),
                )
            )
        if rollout is None:
            result.stacks.extend(context.run_jobs([*project_ops, *cluster_ops], jobs))
        else:
            result.stacks.extend(rollout.run_jobs([*project_ops, *cluster_ops], jobs))
            result.rollout = rollout.summary()


def _rollout(context: FleetContext, result: FleetResult) -> staged.RolloutRun | None:
    """The staged rollout this `up` runs (engine/rollout.py), its unchanged clusters already passed."""
    waves = staged.plan(context)
    if waves is None:
        return None
    run = staged.RolloutRun(context, waves)
    for stack in result.clusters():
        run.record(stack)  # unchanged: passed at once (a not-deployable target is reported, never gates)
    for line in waves.lines():
        context.progress.message(f"rollout {line}")
    return run


def _blocked(op: StackOp, plan: ClusterPlan) -> Callable[[str], StackResult]:
    def blocked(_project_job: str) -> StackResult:
        return op.result("skipped", error=f"project stack {plan.project_stack} failed; cluster not attempted")

    return blocked


def _project_job(context: FleetContext, op: StackOp) -> Callable[[], StackResult]:
    def job() -> StackResult:
        result = _up_project(context, op)
        # Its cluster stacks read these outputs: re-read what the update just wrote.
        context.stack_outputs([op], refresh=True)
        return result

    return job


def _cluster_job(
    context: FleetContext, op: StackOp, plan: ClusterPlan, created: Future[None] | None, rechecks: bool
) -> Callable[[], StackResult]:
    def job() -> StackResult:
        if created is not None:
            created.result()  # its `stack init` ran beside the project stack's update
        if rechecks and not context.options.refresh:
            # Its project stack was just updated: only now can the cluster be compared with it.
            mine = context.cached_outputs(op.stack)
            project = context.cached_outputs(plan.project_stack)
            if liveness.cluster_unchanged(context, plan, mine, project):
                return context.unchanged_result(op)
        return _up_cluster(context, op)

    return job


def undeployed_projects(context: FleetContext, plans: FleetPlans) -> list[str]:
    """Project stacks of the selection with no deployed network (missing, or never completed): what the
    clusters stage refuses to build on. A project stack deployed from another spec only warns: its
    outputs (project, subnet) are what the cluster stacks read, and they exist."""
    outputs = context.stack_outputs([context.project_op(p) for p in plans.projects])
    missing = []
    for plan in plans.projects:
        found = outputs.get(plan.stack) or {}
        if not (found.get("project_id") and found.get("subnet_id")):
            missing.append(plan.stack)
        elif found.get(FINGERPRINT_OUTPUT) != context.fingerprint(plan):
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


def _creating_cluster_stacks(context: FleetContext, ops: Sequence[StackOp]) -> _CreatingStacks:
    """While the project stacks update, create the cluster stacks that do not exist yet (a `stack init`,
    an engine start each, ~0.3 s) instead of in their own runs' path, with what concurrency the project
    stacks leave. A cluster job waits for its own stack's creation. A cluster stack whose project then
    fails stays empty, as a preview's does."""
    return _CreatingStacks(context, ops)


class _CreatingStacks:
    def __init__(self, context: FleetContext, ops: Sequence[StackOp]) -> None:
        self.context = context
        self.absent = [
            op
            for op in ops
            if checkpoint_outputs(context.settings.backend_url, op.stack, PROJECT_NAME) is None
        ]
        self.pool: ThreadPoolExecutor | None = None

    def __enter__(self) -> dict[str, Future[None]]:
        if not self.absent:
            return {}
        self.pool = ThreadPoolExecutor(max_workers=max(1, self.context.options.concurrency))
        return {op.stack: self.pool.submit(self._create, op) for op in self.absent}

    def __exit__(self, *_: object) -> None:
        if self.pool is not None:
            self.pool.shutdown(wait=True)

    def _create(self, op: StackOp) -> None:
        try:
            self.context.executor.select(op, create=True)
        except Exception as err:  # the stack's own run creates it, and reports what fails
            log.debug("creating %s ahead of its run failed: %s", op.stack, err)


def _up_project(context: FleetContext, op: StackOp) -> StackResult:
    """A project stack. A deployed one whose network or bucket is gone refreshes first, so its update
    creates them again (an unchanged spec alone makes no diff). Single-flight across shards: a shard
    that finds it locked by another run waits for that run to finish it (polling its lock), then runs it
    itself, which finds nothing to change when the other shard deployed the same plan. Unsharded, a
    locked stack fails at once."""
    outputs = context.cached_outputs(op.stack)
    drifted = bool(outputs and outputs.get("project_id")) and not liveness.project_live(
        context, outputs or {}
    )
    refresh = context.options.refresh or drifted

    def once() -> StackResult:
        return (
            context.executor.run(op, StackCommand.UP, refresh=True)
            if refresh
            else context.executor.run(op, StackCommand.UP)
        )

    result = once()
    if not result.failed:
        context.remember_policy(context.project_plan(op.stack), result)
    if not context.options.shard:
        return result
    if result.failed and not result.locked and outputs is None:
        # Shards creating the same new project stack at the same instant can trip over each other's
        # `stack init` and first write (a DIY backend has no atomic create); a second attempt finds the
        # stack and its lock, and waits for the other shard as below. A real failure fails again.
        context.progress.message(f"{op.stack}: failed while new ({result.error}); retrying once")
        time.sleep(2.0)
        result = once()
    deadline = time.monotonic() + context.options.shard_wait_s
    while result.locked and time.monotonic() < deadline:
        context.progress.message(f"{op.stack}: held by another run (another shard?); waiting for it")
        time.sleep(min(5.0, max(0.0, deadline - time.monotonic())))
        result = once()
    return result


def _up_cluster(context: FleetContext, op: StackOp) -> StackResult:
    if context.options.refresh or liveness.needs_refresh(context, op.stack):
        # Drift repair brings the cluster back to the spec; the refresh changes what a plan would say.
        result = context.executor.run(op, StackCommand.UP, refresh=True)
    else:
        terraform = _plan_before_update(context, op)
        if terraform is not None:
            op = dataclasses.replace(op, policy_config=replacement_policy_config(terraform))
        result = context.executor.run(op, StackCommand.UP)
        if terraform is not None and terraform.get("resources"):
            result.terraform = terraform
    if not result.failed:
        context.remember_policy(context.plans().cluster(op.stack), result)
    return result


def _plan_before_update(context: FleetContext, op: StackOp) -> dict[str, Any] | None:
    """Terraform's plan for a deployed cluster about to change, so the gpu-node-group-replacement
    policy judges the update (and, made mandatory, stops it before anything is replaced). A new
    cluster has nothing to replace, and a disabled policy needs no plan: both skip it."""
    outputs = context.stack_outputs([op])[op.stack]
    if not (outputs and outputs.get("cluster_id")) or not context.replacement_policy_enabled:
        return None
    plan = context.plans().cluster(op.stack)
    project_outputs = context.cached_outputs(plan.project_stack)
    context.progress.phase(op.stack, "terraform plan")
    return terraform_plan(context, op, plan, project_outputs)
