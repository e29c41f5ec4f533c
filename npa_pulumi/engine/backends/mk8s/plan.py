"""An mk8s target's plan: the k8s-training recipe (resolved once per run, prepared once per region), its
tfvars and filesystem facts, and the settings of the cluster's gates (npa_pulumi/plan/gates.py)."""

from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING, Any

from npa_pulumi.bridge.recipe import (
    MaterializedRecipe,
    PlannedRecipe,
    RecipeSource,
    compatibility_problems,
    materialize,
    pin_source,
    resolve_source,
)
from npa_pulumi.engine.backends.base import PlanInputs
from npa_pulumi.engine.programs import ClusterPlan
from npa_pulumi.plan.cost import cluster_basis
from npa_pulumi.plan.gates import (
    fabric_check_config,
    health_gate_config,
    kuberay_template,
    rtx_values_revision,
)
from npa_pulumi.runtime.home import npa_home
from npa_pulumi.spec.constants import RTX_RENDERING_PROFILE, BackendKind

if TYPE_CHECKING:
    from npa_pulumi.engine.backends.base import PlanSettings
    from npa_pulumi.plan import Target


def recipe_source(options: PlanSettings, selected: bool) -> RecipeSource | None:
    """The k8s-training recipe of the run (--recipe-dir, --recipe-ref, else the default recipe), a
    branch resolved to its commit now, once: every stack of this run applies that commit. A selection
    without mk8s targets needs none (a fleet of other backends on Nebius), unless it names one."""
    chosen = options.recipes.of(BackendKind.MK8S)
    if not (selected or chosen.dir or chosen.ref or options.cloud == "local"):
        return None
    return pin_source(resolve_source(options.cloud, chosen.dir, chosen.ref), npa_home() / "cache")


def _prepare(source: RecipeSource, region: str) -> MaterializedRecipe:
    """The recipe prepared for `region`, in a staging dir of its own (PlanInputs.recipe: once per region
    and planning run).

    Planning needs only the prepared recipe's digest, variables and filesystem facts, which are the same
    for every cluster of a region; the Terraform bridge materializes into each stack's work dir itself when
    it applies (and checks the digest against this one). So planning a 1,000-cluster fleet prepares the
    recipe once instead of copying it into 1,000 work dirs, and never touches a work dir another run's
    terraform may be using."""
    key = hashlib.sha256(f"{source.kind}\0{source.location}\0{region}".encode()).hexdigest()[:16]
    root = npa_home() / "cache" / "staged" / key
    return materialize(source, root, region, npa_home() / "cache")


def resolve_facts(facts: dict[str, Any], tfvars: dict[str, Any]) -> dict[str, Any]:
    """Replace `${var.NAME}` references the recipe left in its filesystem facts with the applied values."""

    def resolve(value: Any) -> Any:
        if isinstance(value, dict):
            return {k: resolve(v) for k, v in value.items()}
        if isinstance(value, list):
            return [resolve(v) for v in value]
        if isinstance(value, str) and value.startswith("${var.") and value.endswith("}"):
            name = value[len("${var.") : -1]
            return tfvars.get(name, value)
        return value

    resolved: dict[str, Any] = resolve(facts)
    return resolved


def mk8s_cluster_plan(target: Target, inputs: PlanInputs) -> ClusterPlan:
    """One mk8s target's plan: the k8s-training recipe's tfvars, its facts and the gate's settings; the
    recipe's incompatibilities go to `inputs.problems`."""
    from npa_pulumi.plan import render_tfvars

    cluster = target.cluster
    source, recipe = inputs.recipe(BackendKind.MK8S, target.region, _prepare)
    mig = cluster.mig is not None
    found = compatibility_problems(
        recipe.variables,
        mig=mig,
        rtx_profile=cluster.gpu_workload_profile == "rtx-rendering",
        managed_image=cluster.gpu_count() > 0 and cluster.gpu_driver_mode == "managed-image",
    )
    inputs.problems.extend(f"{target.cluster_stack}: {p}" for p in found)
    rendered = render_tfvars(target, recipe.variables, inputs.ssh_key)
    health_gate = inputs.in_cluster and inputs.health_gate
    return ClusterPlan(
        fleet=target.fleet,
        project_key=target.project_key,
        project_stack=target.project_stack,
        cluster_name=target.cluster_name,
        stack=target.cluster_stack,
        region=target.region,
        tenant_id=inputs.tenant_id,
        backend=target.backend,
        subnet_id=cluster.subnet_id or "",
        tfvars=rendered.file_vars,
        runtime_tfvars=rendered.runtime_vars,
        recipe=PlannedRecipe(source, recipe.digest),
        recipe_facts=resolve_facts(recipe.facts, rendered.file_vars),
        capacity_block_group=cluster.capacity_block_group_value(),
        gpu_driver_mode=cluster.gpu_driver_mode,
        allow_unsafe_nvswitch_operator=cluster.allow_unsafe_nvswitch_operator,
        nvswitch_topology=cluster.nvswitch_topology,
        mig_enabled=mig,
        has_gpus=cluster.gpu_count() > 0,
        in_cluster=inputs.in_cluster,
        health_gate=health_gate_config(cluster) if health_gate else None,
        fabric_check=fabric_check_config(cluster) if health_gate and cluster.gpu_count() > 0 else None,
        kuberay=kuberay_template(cluster),
        rtx_driver_repositories=(
            dict(cluster.gpu_driver_package_repositories)
            if cluster.gpu_workload_profile == RTX_RENDERING_PROFILE and cluster.gpu_count() > 0
            else None
        ),
        rtx_values_revision=rtx_values_revision(cluster),
        cost_basis=cluster_basis(target).to_output(),
    )
