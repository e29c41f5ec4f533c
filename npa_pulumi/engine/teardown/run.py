"""A destroy's phases for one selection: planned read-only (`Teardown.plan`), then run in order
(`Teardown.run`); the phases and outcomes are described in the package's docstring."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from npa_pulumi.cloud.errors import CloudError, NotFound
from npa_pulumi.engine.automation import StackCommand, StackOp, stack_names
from npa_pulumi.engine.graph import Visit, WalkKind, parallel
from npa_pulumi.engine.requests import fails_fast
from npa_pulumi.engine.retries import Operation, Retry
from npa_pulumi.engine.scheduler import Scheduler
from npa_pulumi.engine.teardown.drain import ClusterDrainer, DrainSettings
from npa_pulumi.engine.teardown.model import ProjectEvidence, TeardownOptions
from npa_pulumi.engine.teardown.phases import GuardedPhases, phase_factory
from npa_pulumi.engine.teardown.receipts import unrestored_relaxation
from npa_pulumi.engine.teardown.records import read_record, settle_record, write_record
from npa_pulumi.engine.teardown.unrecorded import plan_without_stack
from npa_pulumi.errors import UserInputError
from npa_pulumi.output.results import PdbSnapshot, PhaseOutcome, StackStatus, TeardownPhase
from npa_pulumi.output.stack_outputs import ClusterOutputs

if TYPE_CHECKING:
    from npa_pulumi.cloud.port import CloudPort
    from npa_pulumi.engine.context import FleetContext
    from npa_pulumi.engine.programs import ProjectPlan
    from npa_pulumi.output.results import FleetResult, StackResult

log = logging.getLogger(__name__)

_GUARDED = "guarded-phases"  # the scheduler group of the projects' phases: one at a time, as always
_FAIL_FAST = "not started: an earlier target failed (--fail-fast)"


class Teardown:
    """Plans (read-only) and runs the phases of one `destroy` of a fleet's selection."""

    def __init__(self, fleet: FleetContext, options: TeardownOptions) -> None:
        self.fleet = fleet
        self.options = options
        self.evidence: dict[str, ProjectEvidence] = {}
        self.stack_exists: dict[str, bool] = {}
        self.shared: set[str] = set()  # project stacks whose other (unselected) cluster stacks remain
        self.planned_phases: list[TeardownPhase] | None = None
        self._lock = threading.Lock()  # cluster destroys finish side by side; their phases settle in turn
        self.cluster_outputs: dict[str, dict[str, Any]] = {}  # cluster stack -> its outputs, as planned
        self.drain_settings = DrainSettings()
        # Makes the phases durable (the receipt, written by operations/teardown.py) while the run goes on:
        # a drain calls it before it removes a PodDisruptionBudget, so the snapshot outlives a killed run.
        self.checkpoint: Callable[[], None] = lambda: None
        self.guarded = GuardedPhases(
            fleet.cloud,
            fleet.spec.name,
            options,
            fleet.progress.message,
            lambda phase, key: fleet.mark_retry(phase, self.retry(key, None)),
        )

    @property
    def cloud(self) -> CloudPort:
        return self.fleet.cloud

    @property
    def name(self) -> str:
        return self.fleet.spec.name

    def retry(self, project_key: str, cluster: str | None) -> Retry:
        """This destroy again for one project (and cluster), with the same deletions asked for."""
        return self.fleet.retry(Operation.DESTROY, project_key, cluster, self.options)

    # ---------------------------------------------------------------------------------- plan

    def plan(self) -> list[TeardownPhase]:
        """Every phase with what it would delete or retain and why. Reads stack outputs and the live
        cloud; changes nothing. Kept as `planned_phases`: what the user confirms is what `run` runs."""
        self.planned_phases = self._plan()
        return self.planned_phases

    def _plan(self) -> list[TeardownPhase]:
        from npa_pulumi.engine.automation import StackOp

        plans = self.fleet.plans()
        if getattr(self.fleet.request, "cluster_proof", None) is not None and len(plans.clusters) != 1:
            raise UserInputError(
                f"--project-id/--cluster-id prove one cluster; the selection has {len(plans.clusters)}: "
                "select it with --only-projects P --only-clusters C"
            )
        phases: list[TeardownPhase] = []
        cluster_ops = [self.fleet.cluster_op(c) for c in plans.clusters]
        cluster_outputs = self.fleet.stack_outputs(cluster_ops)
        stage = self.fleet.share.stage
        for cluster in plans.clusters:
            outputs = ClusterOutputs.of(cluster_outputs.get(cluster.stack))
            phase = phase_factory(cluster.project_key, cluster.stack)("cluster")
            if outputs is None:
                plan_without_stack(self.fleet, cluster, phase)
            elif stage == "projects":
                phase.status, phase.retains = PhaseOutcome.RETAINED, {"cluster_stack": cluster.stack}
                phase.reason = "--stage projects destroys no cluster stack (that is `--stage clusters`)"
            else:
                phase.deletes = {
                    "cluster_stack": cluster.stack,
                    "cluster_id": outputs.cluster_id or "",
                    "node_group_ids": list(outputs.node_group_ids),
                    "kube_context": outputs.kube_context or "",
                }
                if outputs.kuberay_objects:  # deleted by the stack's destroy, before the cluster
                    phase.deletes["kuberay_objects"] = list(outputs.kuberay_objects)
                    phase.retains = {"ray_application_outputs": "the user's own buckets and filesystems"}
            phases.append(phase)
            recorded = cluster_outputs.get(cluster.stack)
            if recorded is not None:
                self.cluster_outputs[cluster.stack] = recorded
        self._preview_drains([p for p in phases if p.status == "planned"])
        # The clusters this run deletes are not "something else in the project".
        self.guarded.doomed_clusters = {
            str(p.deletes.get("cluster_id"))
            for p in phases
            if p.status == "planned" and p.deletes.get("cluster_id")
        }
        # In the projects stage every remaining cluster stack keeps its project, selected or not.
        selected = {c.stack for c in plans.clusters} if stage != "projects" else set()
        existing = set(stack_names(self.fleet.settings.backend_url, engine=self.fleet.settings))
        project_ops = [StackOp(p.stack, "project", p.project_key, None, None, {}) for p in plans.projects]
        project_outputs = self.fleet.stack_outputs(project_ops)
        for project in plans.projects:
            others = sorted(n for n in existing if n.startswith(f"{project.stack}.") and n not in selected)
            phases.extend(self._plan_project(project, project_outputs.get(project.stack), others))
        if stage == "clusters":
            for item in phases:
                if item.phase != "cluster" and item.status in ("planned", "refused"):
                    _out_of_scope(
                        item, "--stage clusters keeps the project stacks (`destroy --stage projects` next)"
                    )
        return phases

    def _drainer(self, phase: TeardownPhase, running: bool = False) -> ClusterDrainer:
        outputs = self.cluster_outputs.get(phase.stack)
        drainer = ClusterDrainer(self.fleet, phase, outputs, self.checkpoint, self.drain_settings)
        if running:
            cluster_id = str(phase.deletes.get("cluster_id") or "")
            earlier = unrestored_relaxation(self.name, phase.stack, cluster_id) if cluster_id else None
            if earlier is not None:
                receipt, snapshots = earlier
                drainer.inherited = (receipt, [PdbSnapshot.model_validate(s) for s in snapshots])
        return drainer

    def _preview_drains(self, phases: list[TeardownPhase]) -> None:
        """Each cluster's eviction preview (engine/teardown/drain.py), side by side: reads only."""

        def preview(phase: TeardownPhase) -> None:
            phase.drain = self._drainer(phase).preview()

        if not phases:
            return
        parallel(phases, preview, self.fleet.request.concurrency)

    def _plan_project(
        self, project: ProjectPlan, outputs: dict[str, Any] | None, others: list[str]
    ) -> list[TeardownPhase]:
        record = read_record(self.name, project.stack)
        self.stack_exists[project.stack] = outputs is not None
        phase = phase_factory(project.project_key, project.stack)
        if outputs is not None:
            evidence = ProjectEvidence.from_outputs(project.stack, project.project_key, outputs).merged_with(
                record
            )
        elif record is not None:
            evidence = record
        else:
            return [
                phase(
                    "network",
                    status="absent",
                    reason="no project stack and no teardown record: nothing this fleet owns to delete",
                )
            ]
        # A project the spec names by id is used, never the fleet's to delete (a retention, not a refusal).
        evidence.project_declared = evidence.project_declared or bool(project.project_id)
        self.evidence[project.stack] = evidence

        phases = [self._plan_network(evidence, phase, outputs is not None)]
        phases.extend(self.guarded.plan(evidence, phase, phases))
        if others:
            self.shared.add(project.stack)
            why = f"cluster stack(s) {', '.join(others)} of this project remain (not selected)"
            if self.fleet.share.stage == "projects":
                why = (
                    f"cluster stack(s) {', '.join(others)} of this project remain: destroy them first "
                    "(`npa-pulumi destroy --stage clusters`, sharded or not)"
                )
            for item in phases:
                if item.status in ("planned", "refused"):
                    _out_of_scope(item, why)
                elif item.phase == "network" and item.status == "retained":
                    # A reused subnet is retained anyway; the project stack stays too, and this says why.
                    item.reason = f"{why}; {item.reason}"
        return phases

    def _plan_network(
        self, ev: ProjectEvidence, phase: Callable[..., TeardownPhase], stack_exists: bool
    ) -> TeardownPhase:
        if not stack_exists:
            return phase("network", status="absent", reason="the project stack is already destroyed")
        if ev.network_owned:
            return phase(
                "network",
                deletes={
                    "project_stack": ev.project_stack,
                    "network_id": ev.network_id,
                    "subnet_id": ev.subnet_id,
                },
            )
        # The project stack still goes (in this phase); the reused subnet and its network stay.
        if ev.project_created:
            why = (
                "the subnet was not created by this fleet but came with the project it created (the "
                "cloud's default network): it goes only with the project phase (--delete-projects)"
            )
        else:
            why = "the subnet was reused, not created by this fleet: it is read, never deleted"
        return phase(
            "network",
            status="retained",
            retains={"subnet_id": ev.subnet_id, "network_id": ev.network_id},
            reason=f"{why} (the project stack itself is destroyed)",
        )

    # ---------------------------------------------------------------------------------- run

    def run(self, result: FleetResult, phases: list[TeardownPhase]) -> None:
        """Run the planned phases, filling `result` (stacks and phases) as they finish: the fleet's graph
        backward on the one scheduler, each cluster stack first and a project's phases as soon as all its
        cluster stacks are done (never behind another project's clusters); the projects' guarded phases
        one at a time."""
        fleet = self.fleet
        graph = fleet.graph()
        by_stack = {p.stack: p for p in phases if p.phase == "cluster"}
        cluster_ops = {c.stack: fleet.cluster_op(c) for c in graph.clusters(WalkKind.DESTROY)}
        if any(p.status == "planned" and p.stack for p in phases):  # some stack will be destroyed
            fleet.warm_provider_host()
        project_results: dict[str, list[StackResult]] = {}
        visit: Visit[StackResult | None] = Visit(
            cluster=lambda plan, _behind: self._destroy_cluster(
                cluster_ops[plan.stack], by_stack[plan.stack]
            ),
            project=lambda plan: self._project_job(plan, phases, project_results),
        )
        walk = graph.backward(visit, project_group=_GUARDED, project_limit=1)
        for op in cluster_ops.values():
            fleet.progress.add(op.stack)
        outcome = walk.outcome(self._scheduler(list(cluster_ops.values())))
        result.stacks.extend(
            r for r in (outcome.results.get(stack) for stack in cluster_ops) if r is not None
        )
        for project in graph.all_projects:
            result.stacks.extend(project_results.get(project.stack, []))
        result.warnings.extend(drain_warnings(phases))
        if fleet.share.keeps_project_stacks:
            self._keep_project_stacks(result, phases)

    def _scheduler(self, cluster_ops: list[StackOp]) -> Scheduler[StackResult | None]:
        by_stack = {op.stack: op for op in cluster_ops}

        def failed(key: str, error: str) -> StackResult | None:
            if key in by_stack:
                return self._after_cluster(by_stack[key], by_stack[key].result("failed", error=error))
            log.error("teardown of %s failed: %s", key, error)
            return None

        def skipped(key: str) -> StackResult | None:
            return by_stack[key].result("skipped", error=_FAIL_FAST) if key in by_stack else None

        return Scheduler(
            concurrency=self.fleet.request.concurrency,
            is_failure=lambda item: item is not None and item.failed,
            failed=failed,
            skipped=skipped,
            fail_fast=fails_fast(self.fleet.request),
        )

    def _destroy_cluster(self, op: StackOp, phase: TeardownPhase) -> StackResult:
        """Drain the cluster (engine/teardown/drain.py), destroy its stack whatever the drain's outcome,
        and put relaxed budgets back when the destroy aborts while the cluster exists."""
        if phase.status == PhaseOutcome.REFUSED:  # a present cluster without a stack: nothing runs
            return op.result(StackStatus.SKIPPED, error=phase.reason)
        if phase.deletes.get("unrecorded"):  # no stack: the exact, proved id is deleted in the cloud
            return self._after_cluster(op, self._delete_unrecorded(op, phase), phase)
        drainer = self._drainer(phase, running=True) if phase.status == PhaseOutcome.PLANNED else None
        if drainer is not None:
            drainer.drain()
        destroyed = False
        try:
            item = self.fleet.executor.run(op, StackCommand.DESTROY)
            destroyed = item.status in ("destroyed", "absent")
        finally:
            if drainer is not None:
                drainer.after_destroy(destroyed)
        return self._after_cluster(op, item, phase)

    def _delete_unrecorded(self, op: StackOp, phase: TeardownPhase) -> StackResult:
        cluster_id = str(phase.deletes["cluster_id"])
        try:
            self.cloud.delete_cluster(cluster_id)
        except NotFound:
            pass  # gone meanwhile: the same outcome
        except CloudError as err:
            return op.result(StackStatus.FAILED, error=f"deleting cluster {cluster_id}: {err}")
        return op.result(StackStatus.DESTROYED, cluster_id=cluster_id)

    def _after_cluster(
        self, op: StackOp, item: StackResult, phase: TeardownPhase | None = None
    ) -> StackResult:
        """A cluster stack's phase from its destroy's result; a failed destroy leaves its lifecycle tag and
        the exact retry command, a finished one removes the cluster's kubeconfig."""
        from npa_pulumi.engine.lifecycle import TAG_RUN, destroy_incomplete_tags
        from npa_pulumi.engine.registrations import adopted_recipes, kubeconfigs
        from npa_pulumi.plan.naming import kube_context_name

        fleet = self.fleet
        phase = phase or next(
            p for p in self.planned_phases or [] if p.phase == "cluster" and p.stack == op.stack
        )
        with self._lock:
            if item.status == "failed":
                item.status = StackStatus.DESTROY_INCOMPLETE
                retry = self.retry(item.project_key, item.cluster_name)
                fleet.mark_retry(item, retry)
                phase.status, phase.reason = PhaseOutcome.FAILED, item.error
                text = fleet.mark_retry(phase, retry)
                # What `status` shows on any machine until a destroy succeeds (engine/lifecycle.py).
                tags = destroy_incomplete_tags(item.error or "the destroy failed", text)
                fleet.executor.write_lifecycle(op, tags, remove=(TAG_RUN,))
            elif item.status in ("destroyed", "absent") and item.cluster_name:
                # Only once the stack is gone: a kubeconfig is how a half-destroyed cluster is inspected.
                context = kube_context_name(fleet.spec.name, item.project_key, item.cluster_name)
                kubeconfigs.remove(
                    context,
                    item.stack,
                    fleet=fleet.spec.name,
                    project_key=item.project_key,
                    cluster_id=str(phase.deletes.get("cluster_id") or item.cluster_id or ""),
                )
                adopted_recipes.remove(item.stack)  # the recipe an adopted stack ran, unused now
                phase.status = PhaseOutcome.DONE if item.status == "destroyed" else PhaseOutcome.ABSENT
        return item

    def _keep_project_stacks(self, result: FleetResult, phases: list[TeardownPhase]) -> None:
        """Another shard may still be destroying clusters of the same projects: deciding here whether a
        project stack is unused would race it. A final unsharded `destroy` removes the project stacks."""
        fleet = self.fleet
        if fleet.share.stage == "clusters":
            why = (
                "--stage clusters: project stacks are kept; once every cluster stage has finished, run "
                "`npa-pulumi destroy --stage projects` to remove the project stacks no cluster uses"
            )
        else:
            why = (
                f"shard {fleet.share.shard}: project stacks are kept; once every shard has finished, "
                "run `npa-pulumi destroy` without --shard to remove the project stacks no cluster uses "
                "any more"
            )
        for phase in phases:
            if phase.phase != "cluster" and phase.status in ("planned", "refused"):
                _out_of_scope(phase, why)
        result.warnings.append(why)

    def _project_job(
        self, project: ProjectPlan, phases: list[TeardownPhase], results: dict[str, list[StackResult]]
    ) -> None:
        """A project's phases once its cluster stacks are done; blocked when any of them failed."""
        mine = [p for p in phases if p.stack == project.stack]
        failed = [
            p.name
            for p in phases
            if p.phase == "cluster" and p.project_key == project.project_key and p.status == "failed"
        ]
        if failed:
            for waiting in mine:
                if waiting.status == "planned":
                    waiting.status, waiting.blocked_by = PhaseOutcome.BLOCKED, failed
                    waiting.reason = "a cluster of this project was not destroyed"
            return
        results[project.stack] = self._run_project(project, mine)

    def _run_project(self, project: ProjectPlan, phases: list[TeardownPhase]) -> list[StackResult]:
        """The project's network (its stack), then its guarded phases; the stack results of what ran."""
        stacks: list[StackResult] = []
        evidence = self.evidence.get(project.stack)
        network = next((p for p in phases if p.phase == "network"), None)
        if evidence is not None:
            write_record(self.name, evidence)  # the proof outlives the project stack
        # Other clusters of the project still use its network: the project stack stays.
        destroy_stack = self.stack_exists.get(project.stack) and project.stack not in self.shared
        if network is not None and destroy_stack and network.status in ("planned", "retained"):
            stack_result = self._destroy_project_stack(project)
            stacks.append(stack_result)
            if stack_result.failed:
                network.status, network.reason = PhaseOutcome.FAILED, stack_result.error
                network.retry_command, network.retry = stack_result.retry_command, stack_result.retry
            elif network.status == "planned":
                network.status = PhaseOutcome.DONE
        if evidence is not None:
            self.guarded.run(evidence, project.project_key, phases)
            settle_record(self.name, evidence, phases)
        return stacks

    def _destroy_project_stack(self, project: ProjectPlan) -> StackResult:
        fleet = self.fleet
        item = fleet.executor.run(fleet.project_op(project), StackCommand.DESTROY)
        if item.status == "failed":
            item.status = StackStatus.DESTROY_INCOMPLETE
            fleet.mark_retry(item, self.retry(project.project_key, None))
        return item


def drain_warnings(phases: list[TeardownPhase]) -> list[str]:
    """What a destroy's drains left to say: a failure by its kind, pods that stayed, budgets restored or
    not. (A drain that went through, or had nothing to drain, says nothing here.)"""
    found = []
    for phase in phases:
        drain = phase.drain
        if drain is None or drain.status in ("drained", "not-applicable", "previewed"):
            continue
        if drain.failure is not None:
            found.append(f"{phase.name}: drain {drain.status} ({drain.failure}): {drain.message}")
        elif drain.refused:
            found.append(f"{phase.name}: drain incomplete: {'; '.join(drain.refused)}")
        if drain.relaxation == "restore-failed":
            found.append(f"{phase.name}: system PodDisruptionBudgets not restored: {drain.relaxation_reason}")
    return found


def _out_of_scope(item: TeardownPhase, why: str) -> None:
    """A phase this run does not reach (its project stack stays: another shard, stage or cluster still
    needs it) is retained with that reason, not refused: nothing was attempted, and the run that does
    reach it decides again. A refusal's own reason is kept beside it."""
    refusal = item.reason if item.status == "refused" else None
    item.status, item.reason = PhaseOutcome.RETAINED, f"{why}; {refusal}" if refusal else why
    item.retains, item.deletes = {**item.retains, **item.deletes}, {}
