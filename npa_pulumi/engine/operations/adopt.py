"""`adopt`: take over clusters the original `npa fleet` deployed, without a change in the cloud.

For every selected cluster of the spec the original's install directory (`<from>/<project>/<cluster>`,
npa_pulumi/bridge/original_install.py) is read, never written, and proved, all before anything is changed:

1. its Terraform state names a cluster that exists and runs, in the fleet's tenant and region, in the
   project the spec names, every node group the cloud lists for it RUNNING and every node group the state
   records one of them, on a subnet of that project; the original's own records (owner marker,
   fleet-state.json, the ~/.npa/clusters registration) name this fleet's cluster and the state's id;
2. the tfvars the spec renders equal the saved ones, key by key, for every variable the install's recipe
   declares (secrets and capacity-block ids masked);
3. Terraform's own plan, from a copy of the saved state with the spec's tfvars, the saved identity and the
   recipe that made the state (the install's own copy of `k8s-training/` + `modules/`, read only), has
   nothing to do: an adoption never needs an apply. The default recipe's plan over the same state is shown
   beside it: what the first `preview`/`up` after the adoption moves (the recipe move);
4. no stack of this backend holds the cluster already (a second adopt of the same cluster changes nothing
   and says so: `already-adopted`).

Only when every selected cluster passes does anything run (all or nothing): each project stack without a
deployed network is created binding the subnet the clusters run on (owned when the original created its
network: `.npa-fleet-network.json`) and, when the spec gives the project object storage, the bucket the
original made for it (found by the spec's name, proved against the spec, bound but never owned: no file of
the original proves it created the bucket; the storage identity, which would mint a key, is left to the
next `up`), and each cluster stack is created with the saved state as its bridge's
state and the install's recipe (a copy npa-pulumi keeps) as its recipe: components/terraform_module.py
refuses again if Terraform's plan with it has changes, so nothing is applied. The stack's fingerprint is
marked `+recipe-move-pending` when that recipe is not the spec's, so the next `preview` shows the move to
the default recipe (Terraform's plan of it) and the next `up` applies it as an ordinary reviewed change.
The cluster stack's program is the usual one, so the in-cluster stage and the health gate then run as after
an `up`: the cluster is `deployed` only when the gate passes. A receipt records what was taken over.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import time
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any

from npa_pulumi.bridge.original_install import (
    OriginalInstall,
    freeze_install_recipe,
    install_recipe,
    install_recipe_variables,
    one_sided_tfvars,
    original_gpu_layout,
    project_directory,
    read_install,
    tfvars_mismatches,
)
from npa_pulumi.cloud.errors import CloudError, NotFound
from npa_pulumi.cloud.port import CloudPort, NodeGroup
from npa_pulumi.engine.automation import (
    NO_FAST_PATH,
    PROJECT_NAME,
    StackCommand,
    StackOp,
    checkpoint_outputs,
    stack_names,
)
from npa_pulumi.engine.backends.registry import backend_for, kinds_where
from npa_pulumi.engine.context import FleetContext
from npa_pulumi.engine.graph import Visit, WalkKind
from npa_pulumi.engine.operations.common import apply_lifecycle, write_kubeconfig
from npa_pulumi.engine.plans import FleetPlans
from npa_pulumi.engine.programs import ClusterPlan, ProjectAdoption, ProjectPlan, cluster_module_args
from npa_pulumi.engine.registrations import adopted_recipes
from npa_pulumi.engine.registrations.adopted_recipes import RECIPE_MOVE_PENDING
from npa_pulumi.engine.retries import Operation
from npa_pulumi.errors import UserInputError
from npa_pulumi.output.results import FleetResult, StackResult
from npa_pulumi.output.stack_outputs import ClusterOutputs, ProjectOutputs
from npa_pulumi.plan.naming import derived_bucket_name
from npa_pulumi.runtime.files import write_atomically
from npa_pulumi.runtime.home import cache_dir, npa_home

log = logging.getLogger(__name__)

RECEIPT_VERSION = 1


class Verdict(StrEnum):
    """What `adopt` found for one selected cluster."""

    FOUND = "found"  # proved: it would be (or was) adopted
    NOT_FOUND = "not-found"  # no install directory of the original for it
    MISMATCHED = "mismatched"  # the spec's tfvars (or Terraform's plan) differ from what was deployed
    ALREADY_ADOPTED = "already-adopted"  # its cluster stack holds this cluster already
    REFUSED = "refused"  # the live cloud does not prove it, or another stack holds it


BLOCKING = (Verdict.NOT_FOUND, Verdict.MISMATCHED, Verdict.REFUSED)


@dataclass
class Candidate:
    """One selected cluster and what adopting it would take over."""

    plan: ClusterPlan
    verdict: Verdict
    reasons: list[str] = field(default_factory=list)
    install: OriginalInstall | None = None
    directory: Path | None = None
    network_id: str = ""
    bucket_id: str = ""  # the project's bucket the project stack takes over ("": none to take over)
    # Terraform's plans over the saved state: "install_recipe" (must be empty) and "default_recipe" (the
    # spec's recipe: what the first preview/up after the adoption changes), summarized.
    plans: dict[str, dict[str, Any]] = field(default_factory=dict)
    # The saved GPU node-group layout the adoption keeps (a reserved pool the original applied as one
    # group of N, original_gpu_layout): the cluster stack starts with it, the first `up` reshapes it.
    layout: dict[str, Any] = field(default_factory=dict)

    @property
    def adopted_plan(self) -> ClusterPlan:
        """The cluster's plan as the install applied it: the spec's, with the saved GPU layout."""
        if not self.layout:
            return self.plan
        return dataclasses.replace(self.plan, tfvars={**self.plan.tfvars, **self.layout})

    def summary(self) -> dict[str, Any]:
        """What the result and the receipt say about it: ids, paths and digests, never a secret."""
        found: dict[str, Any] = {"verdict": str(self.verdict), "source": str(self.directory or "")}
        if self.reasons:
            found["reasons"] = list(self.reasons)
        if self.install is not None:
            identity = self.install.identity
            found.update(
                cluster_id=self.install.cluster_id,
                node_group_ids=list(self.install.node_group_ids),
                project_id=identity.project_id,
                subnet_id=identity.subnet_id,
                network_id=self.network_id,
                network_owned=self.install.subnet_owned(self.network_id),
                **({"bucket_id": self.bucket_id, "bucket_owned": False} if self.bucket_id else {}),
                original_status=self.install.status,
                digests=dict(self.install.digests),
            )
        if self.layout:
            found["kept_gpu_layout"] = dict(self.layout)
        if self.plans:
            found["plans"] = {name: _plan_counts(summary) for name, summary in self.plans.items()}
        return found


@dataclass
class AdoptionPlan:
    """What `adopt` found, before anything changes; `run` adopts exactly the `found` ones."""

    source: Path
    candidates: list[Candidate]
    readers: dict[str, StackOp]  # each selected cluster stack's program-less op

    @property
    def blocked(self) -> list[Candidate]:
        return [c for c in self.candidates if c.verdict in BLOCKING]

    @property
    def adoptable(self) -> list[Candidate]:
        return [c for c in self.candidates if c.verdict is Verdict.FOUND]


def default_source(fleet: str) -> Path:
    """Where the original kept a fleet's installs: `~/.npa/fleet/<fleet>` (always under the home)."""
    return Path.home() / ".npa" / "fleet" / fleet


def plan(context: FleetContext, source: Path) -> tuple[FleetResult, AdoptionPlan]:
    """Read and prove every selected cluster's install (changes nothing): the `--dry-run` listing."""
    if not source.is_dir():
        raise UserInputError(
            f"--from {source}: no such directory (the original keeps a fleet's installs in "
            f"~/.npa/fleet/<fleet name>; pass the fleet's directory with --from)"
        )
    plans = context.plans()
    readers = {op.stack: op for op in context.target_ops()}  # program-less: for outputs and results
    outputs = context.stack_outputs(list(readers.values()))
    project_outputs = context.stack_outputs([context.project_op(p) for p in plans.projects])
    holders = _holders(context, {p.stack for p in plans.clusters})
    candidates = [
        _examine(context, plans, cluster, source, outputs.get(cluster.stack), holders)
        for cluster in plans.clusters
    ]
    _check_projects(context, plans, candidates, project_outputs)
    result = context.result("adopt")
    result.dry_run = True
    result.stacks = [_listed(readers[c.plan.stack], c) for c in candidates]
    return result, AdoptionPlan(source, candidates, readers)


def run(context: FleetContext, adoption: AdoptionPlan) -> FleetResult:
    """Adopt the planned clusters (all or nothing) and write the receipt."""
    result = context.result("adopt")
    if adoption.blocked:
        result.stacks = [_listed(adoption.readers[c.plan.stack], c) for c in adoption.candidates]
        result.error = _blocked_message(adoption.blocked)
        return result
    started = time.time()
    result.stacks = [
        _listed(adoption.readers[c.plan.stack], c)
        for c in adoption.candidates
        if c.verdict is Verdict.ALREADY_ADOPTED
    ]
    for stack in result.stacks:
        context.progress.message(f"{stack.stack}: already adopted; nothing to change")
    if adoption.adoptable:
        context.warm_provider_host()
        result.stacks.extend(_adopt(context, adoption.adoptable))
    context.fill_identity(result)
    for stack in result.clusters():
        if stack.status == "deployed" and stack.cluster_id:
            write_kubeconfig(context, stack, result.warnings)
            apply_lifecycle(context, stack)
    summaries = {c.plan.stack: c.summary() for c in adoption.candidates}
    for stack in result.clusters():
        if stack.stack in summaries:
            stack.adoption = summaries[stack.stack]
        if stack.failed and stack.retry_command is None:
            context.mark_retry(stack, context.retry(Operation.ADOPT, stack.project_key, stack.cluster_name))
    result.receipt = str(_write_receipt(context, adoption, result, started))
    return result


# ---------------------------------------------------------------------------------------- proving


def _examine(
    context: FleetContext,
    plans: FleetPlans,
    cluster: ClusterPlan,
    source: Path,
    outputs: dict[str, Any] | None,
    holders: dict[str, str],
) -> Candidate:
    backend = backend_for(cluster.backend)
    if backend is None or not backend.adoptable:
        adoptable = " and ".join(kinds_where(lambda known: known.adoptable))
        return Candidate(
            cluster, Verdict.REFUSED, [f"a {cluster.backend} cluster: adopt takes over {adoptable} clusters"]
        )
    project = next(p for p in plans.projects if p.stack == cluster.project_stack)
    project_dir = project_directory(source, project.project_key, project.display_name, project.project_id)
    directory = (project_dir or source / project.project_key) / cluster.cluster_name
    if not directory.is_dir():
        return Candidate(
            cluster, Verdict.NOT_FOUND, [f"no install directory {directory}"], directory=directory
        )
    install = read_install(directory, project.fleet)  # an unreadable or corrupt install is bad input: exit 2
    candidate = Candidate(cluster, Verdict.FOUND, install=install, directory=directory)
    records = install.record_problems(project.fleet, project.project_key, cluster.cluster_name)
    if records:
        return _refuse(candidate, *records)
    held = ClusterOutputs.read(outputs).cluster_id or ""
    if held == install.cluster_id:
        candidate.verdict = Verdict.ALREADY_ADOPTED
        return candidate
    if held:
        return _refuse(candidate, f"its stack {cluster.stack} already holds cluster {held}")
    if install.cluster_id in holders:
        return _refuse(
            candidate, f"cluster {install.cluster_id} is held by stack {holders[install.cluster_id]}"
        )
    problems = _live_problems(context, project, cluster, install)
    if problems:
        return _refuse(candidate, *problems)
    try:
        subnet = context.cloud.get_subnet(install.identity.subnet_id)
        candidate.network_id = subnet.network_id
    except CloudError as err:
        return _refuse(candidate, f"subnet {install.identity.subnet_id} cannot be read: {err}")
    wanted = {**cluster.tfvars, **cluster.runtime_tfvars}
    declared = install_recipe_variables(install)  # the recipe that made the state reads only these
    # A reserved pool the original applied as one group of N is the spec's pool, rendered differently:
    # the adoption keeps the saved layout and leaves the reshaping to the first up (a reviewed change).
    candidate.layout = original_gpu_layout(install.tfvars, wanted)
    wanted.update(candidate.layout)
    mismatches = tfvars_mismatches(install.tfvars, wanted, declared)
    if mismatches:
        candidate.verdict = Verdict.MISMATCHED
        candidate.reasons = [f"tfvars {m}" for m in mismatches]
        return candidate
    recipe = install_recipe(install)
    candidate.plans["install_recipe"] = _terraform_plan(
        context, candidate.adopted_plan, install, {**recipe.to_dict()}
    )
    changes = _changes(candidate.plans["install_recipe"])
    if changes:
        candidate.verdict = (
            Verdict.MISMATCHED if changes[0].startswith("terraform would") else Verdict.REFUSED
        )
        one_sided = one_sided_tfvars(install.tfvars, wanted, declared)
        candidate.reasons = changes + (
            [f"variables set on one side only (the recipe's default on the other): {', '.join(one_sided)}"]
            if one_sided and candidate.verdict is Verdict.MISMATCHED
            else []
        )
        return candidate
    candidate.plans["default_recipe"] = _terraform_plan(context, cluster, install, None)
    context.progress.message(
        f"{cluster.stack}: Terraform plans no change with the install's recipe; the first preview/up after "
        f"adopt moves it to the spec's recipe: {_move_line(candidate.plans['default_recipe'])}"
    )
    if candidate.layout:
        context.progress.message(_layout_line(cluster, candidate.layout))
    return candidate


def _layout_line(cluster: ClusterPlan, layout: dict[str, Any]) -> str:
    nodes = layout["gpu_nodes_fixed_count_per_group"]
    return (
        f"{cluster.stack}: the original applied the reserved GPU pool of {nodes} nodes as one node group of "
        f"{nodes}; npa-pulumi lays it out as {nodes} groups of one. The adoption keeps the one group; the "
        "first up after it reshapes the pool, which drains and re-provisions its nodes (previewed as a "
        "node-group replacement, with the gpu-node-group-replacement policy's warning)"
    )


def _refuse(candidate: Candidate, *reasons: str) -> Candidate:
    candidate.verdict = Verdict.REFUSED
    candidate.reasons = list(reasons)
    return candidate


def _live_problems(
    context: FleetContext, project: ProjectPlan, cluster: ClusterPlan, install: OriginalInstall
) -> list[str]:
    """Why the live cloud does not prove the install (empty: it does). Reads only."""
    identity, tenant = install.identity, context.tenant_id()
    if identity.tenant_id and identity.tenant_id != tenant:
        return [f"the state is of tenant {identity.tenant_id}, this fleet's is {tenant}"]
    if identity.region and identity.region != cluster.region:
        return [f"the state is in region {identity.region}, the spec's is {cluster.region}"]
    if project.project_id and identity.project_id != project.project_id:
        return [f"the state is of project {identity.project_id}, the spec names {project.project_id}"]
    cloud = context.cloud
    try:
        live_project = cloud.get_project(identity.project_id)
        live_cluster = cloud.get_cluster(install.cluster_id)
        groups = {g.id: g for g in cloud.list_node_groups(install.cluster_id)}
    except NotFound as err:
        return [f"the cluster the state names is gone ({err}): nothing to adopt"]
    except CloudError as err:
        return [f"the live inventory cannot be read: {err}"]
    found = []
    if (
        live_project.tenant_id != tenant
        or live_project.state != "ACTIVE"
        or live_project.suspension_state != "NONE"
    ):
        found.append(
            f"project {live_project.id}: tenant {live_project.tenant_id}, state {live_project.state}, "
            f"suspension {live_project.suspension_state} ({tenant}, ACTIVE, NONE expected)"
        )
    if not identity.region and live_project.region != cluster.region:
        found.append(
            f"project {live_project.id} is in region {live_project.region}, the spec's {cluster.region}"
        )
    if not project.project_id and live_project.name != project.display_name:
        found.append(
            f"project {live_project.id} is named {live_project.name!r}, the spec {project.display_name!r}"
        )
    if live_cluster.project_id != identity.project_id or live_cluster.state != "RUNNING":
        found.append(
            f"cluster {live_cluster.id}: project {live_cluster.project_id}, state {live_cluster.state} "
            f"({identity.project_id}, RUNNING expected)"
        )
    return found + _node_group_problems(cloud, install, groups)


def _node_group_problems(
    cloud: CloudPort, install: OriginalInstall, groups: dict[str, NodeGroup]
) -> list[str]:
    """The cluster's node groups come from the cloud (NodeGroupService.List of the cluster), never from a
    recipe output: every one is RUNNING, and every node group the state records is one of them."""
    found = [
        f"node group {group.name} ({group.id}): state {group.state}, RUNNING expected"
        for group in groups.values()
        if group.state != "RUNNING"
    ]
    if not groups:
        found.append(f"cluster {install.cluster_id} has no node groups in the cloud")
    for group_id in install.node_group_ids:
        if group_id in groups:
            continue
        try:
            elsewhere = cloud.get_node_group(group_id)
        except NotFound:
            found.append(f"node group {group_id} the state records is gone")
            continue
        except CloudError as err:
            found.append(f"node group {group_id} the state records cannot be read: {err}")
            continue
        found.append(
            f"node group {group_id} the state records belongs to cluster {elsewhere.cluster_id}, "
            f"not {install.cluster_id}"
        )
    return found


def _terraform_plan(
    context: FleetContext, cluster: ClusterPlan, install: OriginalInstall, recipe: dict[str, str] | None
) -> dict[str, Any]:
    """Terraform's plan from a copy of the saved state, summarized (bridge/plan_summary.py), with `recipe`
    (a `source`/`location` of the install's own copy), else the spec's: the recipe is materialized into a
    scratch work dir, so the stack's work dir and the original's files are left as they are. A plan that
    fails is an `error` in the summary."""
    from npa_pulumi.components.terraform_module import plan_preview

    identity = install.identity
    props = {
        **cluster_module_args(
            cluster, context.where.cloud, context.profile, identity.project_id, identity.subnet_id
        ),
        "module_kind": cluster.module_kind,
    }
    if recipe is not None:
        props["recipe"] = {**recipe, "digest": ""}  # a scratch plan: no digest to hold it to
    which = "the install's recipe" if recipe is not None else "the spec's recipe"
    context.progress.phase(cluster.stack, f"terraform plan (adoption, {which})")
    try:
        with context.provider_environment():  # authenticates as the command's providers do (`--auth`)
            summary: dict[str, Any] = plan_preview(
                props, deployed=True, stored_state=lambda: install.state_text
            )
    except Exception as err:  # the recipe or the cloud refused: reported, nothing adopted
        log.debug("terraform plan for %s failed", cluster.stack, exc_info=True)
        return {"error": f"{type(err).__name__}: {err}"}
    return summary


def _changes(summary: dict[str, Any]) -> list[str]:
    """What a plan summary would change, or why there is none (empty: nothing to do)."""
    if summary.get("skipped") or summary.get("error"):
        return [f"Terraform could not plan the saved state: {summary.get('skipped') or summary.get('error')}"]
    return [
        f"terraform would {r['action']} {r['address']}"
        + (f" ({', '.join(str(a) for a in r['attributes'])})" if r.get("attributes") else "")
        for r in summary.get("resources") or []
    ]


def _plan_counts(summary: dict[str, Any]) -> dict[str, Any]:
    """A plan summary as the result and the receipt keep it: counts and each resource's address and
    action (no attribute values)."""
    if summary.get("skipped") or summary.get("error"):
        return {"error": str(summary.get("skipped") or summary.get("error"))}
    counts: dict[str, Any] = {k: int(summary.get(k) or 0) for k in ("add", "change", "destroy", "replace")}
    counts["resources"] = [
        {"address": r["address"], "action": r["action"]} for r in summary.get("resources") or []
    ]
    return counts


def _move_line(summary: dict[str, Any]) -> str:
    counts = _plan_counts(summary)
    if "error" in counts:
        return f"its plan failed ({counts['error']})"
    if not counts["resources"]:
        return "no resource changes"
    return ", ".join(f"{r['action']} {r['address']}" for r in counts["resources"])


def _check_projects(
    context: FleetContext,
    plans: FleetPlans,
    candidates: list[Candidate],
    project_outputs: dict[str, dict[str, Any] | None],
) -> None:
    """What a project stack would take over must hold for every cluster of the project: one subnet, the
    one a deployed project stack binds, a project the spec finds (by its id, or by its name) that is the
    state's, and, with object storage in the spec, the bucket the original made for it."""
    by_project: dict[str, list[Candidate]] = {}
    for candidate in candidates:
        if candidate.verdict is Verdict.FOUND and candidate.install is not None:
            by_project.setdefault(candidate.plan.project_stack, []).append(candidate)
    for stack, mine in by_project.items():
        project = next(p for p in plans.projects if p.stack == stack)
        deployed = ProjectOutputs.read(project_outputs.get(stack))
        subnets = {c.install.identity.subnet_id for c in mine if c.install is not None}
        bound = deployed.subnet_id or ""
        problem, verdict = "", Verdict.REFUSED
        if len(subnets) > 1:
            problem = f"the project's clusters run on different subnets ({', '.join(sorted(subnets))})"
        elif bound and bound not in subnets:
            problem = f"project stack {stack} binds subnet {bound}; the cluster runs on {next(iter(subnets))}"
        elif not bound and not project.project_id:
            problem = _named_project_problem(context, project, mine)
        if not problem and not bound and project.object_storage is not None:
            problem, verdict, bucket_id = _bucket_problem(context, project, mine)
            for candidate in mine:
                candidate.bucket_id = bucket_id
        if problem:
            for candidate in mine:
                _refuse(candidate, problem)
                candidate.verdict = verdict


def _bucket_problem(
    context: FleetContext, project: ProjectPlan, mine: list[Candidate]
) -> tuple[str, Verdict, str]:
    """The bucket the spec's object storage names (its `bucket_name`, else the name both tools derive from
    tenant, project and fleet) must exist in the project and match the spec exactly: (problem, verdict, bucket
    id). Reads only."""
    install = mine[0].install
    storage = project.object_storage
    assert install is not None and storage is not None
    project_id = install.identity.project_id
    name = storage.bucket_name or derived_bucket_name(context.tenant_id(), project_id, project.fleet)
    try:
        bucket = context.cloud.find_bucket(project_id, name)
    except CloudError as err:
        return f"the project's buckets cannot be read: {err}", Verdict.REFUSED, ""
    if bucket is None:
        return (
            f"the spec gives the project object storage, but bucket {name!r} does not exist in project "
            f"{project_id}: adopt would have to create it (adopt without object_storage, then add it and "
            "`up`)",
            Verdict.REFUSED,
            "",
        )
    wrong = bucket.mismatches(
        project_id=project_id,
        name=name,
        region=project.region,
        storage_class=storage.storage_class,
        max_size_bytes=storage.size_gibibytes * 2**30,
    )
    if wrong:
        return f"bucket {name!r} does not match the spec: {'; '.join(wrong)}", Verdict.MISMATCHED, ""
    return "", Verdict.FOUND, bucket.id


def _named_project_problem(context: FleetContext, project: ProjectPlan, mine: list[Candidate]) -> str:
    """A project the spec names (no id): the project stack finds it by name; it must be the state's."""
    wanted = {c.install.identity.project_id for c in mine if c.install is not None}
    named = [p.id for p in context.cloud.list_projects(context.tenant_id()) if p.name == project.display_name]
    if len(named) != 1 or named[0] not in wanted:
        return (
            f"the spec's project {project.display_name!r} resolves to {', '.join(named) or 'no project'}, "
            f"the state's is {', '.join(sorted(wanted))}: give the project's project_id in the spec"
        )
    return ""


def _holders(context: FleetContext, mine: set[str]) -> dict[str, str]:
    """cluster id -> the stack of this backend that holds it, for every stack but the selection's own
    (on a backend whose stacks can be listed without the engine; elsewhere the selection's stacks)."""
    url = context.settings.backend_url
    names = stack_names(url, PROJECT_NAME)
    held: dict[str, str] = {}
    for name in names or []:
        if name in mine:
            continue
        outputs = checkpoint_outputs(url, name, PROJECT_NAME)
        if isinstance(outputs, dict) and outputs is not NO_FAST_PATH:
            cluster_id = ClusterOutputs.read(outputs).cluster_id
            if cluster_id:
                held[cluster_id] = name
    return held


# ---------------------------------------------------------------------------------------- adopting


def _adopt(context: FleetContext, candidates: list[Candidate]) -> list[StackResult]:
    """The project stacks that bind no network yet, then each cluster stack after its project's."""
    project_outputs = context.stack_outputs(
        [context.project_op(context.project_plan(c.plan.project_stack)) for c in candidates]
    )
    project_ops: dict[str, StackOp] = {}
    for candidate in candidates:
        stack = candidate.plan.project_stack
        if stack in project_ops or ProjectOutputs.read(project_outputs.get(stack)).subnet_id:
            continue
        install = candidate.install
        assert install is not None
        adoption = ProjectAdoption(
            install.identity.subnet_id,
            install.subnet_owned(candidate.network_id),
            bucket_id=candidate.bucket_id,
            bucket_created=False,  # no file of the original proves it made the bucket
        )
        project_ops[stack] = _project_op(context, context.project_plan(stack), adoption)
    cluster_ops = {c.plan.stack: _cluster_op(context, c) for c in candidates}
    ops: dict[str, StackOp] = {**project_ops, **cluster_ops}
    visit: Visit[StackResult] = Visit(
        project=lambda plan: _project_job(context, ops[plan.stack]),
        cluster=lambda plan, _behind: context.executor.run(ops[plan.stack], StackCommand.UP),
        blocked=lambda plan, culprit: ops[plan.stack].result(
            "skipped", error=f"project stack {culprit} failed; not adopted"
        ),
    )
    walk = context.graph().forward(
        WalkKind.ADOPT,
        visit,
        projects=[context.project_plan(stack) for stack in project_ops],
        clusters=[c.plan for c in candidates],
    )
    return context.run_walk([ops[key] for key in walk.nodes], walk)


def _project_op(context: FleetContext, project: ProjectPlan, adoption: ProjectAdoption) -> StackOp:
    from npa_pulumi.engine.programs import project_program

    op = context.project_op(project)
    program = project_program(
        project, context.where.cloud, context.profile, context.fingerprint(project), adoption
    )
    return dataclasses.replace(op, program=program)


def _cluster_op(context: FleetContext, candidate: Candidate) -> StackOp:
    """The cluster stack's op: the usual program, over the saved state and with the recipe that made it
    (a copy npa-pulumi keeps, `<npa home>/adopted-recipes/<stack>`), so the bridge's create plans exactly
    what the dry run proved empty. The move to the spec's recipe is left to the next preview/up."""
    assert candidate.install is not None
    cluster = candidate.adopted_plan
    backend = backend_for(cluster.backend)
    assert backend is not None
    recipe = freeze_install_recipe(
        candidate.install, adopted_recipes.path(cluster.stack), cluster.region, cache_dir()
    )
    fingerprint = context.fingerprint(candidate.plan)
    if cluster.recipe is None or recipe.digest != cluster.recipe.digest or candidate.layout:
        fingerprint += RECIPE_MOVE_PENDING
    program = backend.program(
        dataclasses.replace(cluster, recipe=recipe),
        context.where.cloud,
        context.profile,
        True,
        fingerprint,
        adopted_state=candidate.install.state_text,
    )
    return dataclasses.replace(context.cluster_op(candidate.plan), program=program)


def _project_job(context: FleetContext, op: StackOp) -> StackResult:
    result = context.executor.run(op, StackCommand.UP)
    context.stack_outputs([op], refresh=True)  # its cluster stacks read them
    return result


# ---------------------------------------------------------------------------------------- reporting


def _listed(op: StackOp, candidate: Candidate) -> StackResult:
    install = candidate.install
    result = op.result(
        str(candidate.verdict),
        cluster_id=install.cluster_id if install else None,
        project_id=install.identity.project_id if install else None,
        error="; ".join(candidate.reasons) or None,
        adoption=candidate.summary(),
    )
    return result


def _blocked_message(blocked: list[Candidate]) -> str:
    names = ", ".join(f"{c.plan.stack} ({c.verdict})" for c in blocked)
    return (
        f"nothing was adopted: {names} cannot be adopted as the spec stands (adopt takes over every selected "
        "cluster or none; fix what each says, or narrow the selection with --only-projects/--only-clusters)"
    )


def _write_receipt(
    context: FleetContext, adoption: AdoptionPlan, result: FleetResult, started: float
) -> Path:
    """`<npa home>/adoption-receipts/<fleet>/<time>.json` (0600): what was taken over, from where, with the
    digests of the files read. Ids, paths and digests only, never a secret."""
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(started))
    path = (
        npa_home()
        / "adoption-receipts"
        / context.spec.name
        / f"{stamp}-{int(started * 1000) % 1000:03d}.json"
    )
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    document = {
        "version": RECEIPT_VERSION,
        "command": "adopt",
        "fleet": context.spec.name,
        "cloud": context.where.cloud,
        "backend": context.settings.backend_url,
        "source": str(adoption.source),
        "started_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(started)),
        "finished_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "outcome": result.outcome,
        "stacks": [
            {
                "stack": s.stack,
                "kind": s.kind,
                "status": s.status,
                "project_id": s.project_id,
                "cluster_id": s.cluster_id,
                **({"adoption": s.adoption} if s.adoption else {}),
            }
            for s in result.stacks
        ],
    }
    write_atomically(path, json.dumps(document, indent=2) + "\n", mode=0o600)
    return path
