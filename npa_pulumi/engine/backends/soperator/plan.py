"""A soperator target's plan: the soperator recipe (resolved once per run, prepared once per region), its
tfvars from the target's payload (npa_pulumi/plan/soperator.py), and the Slurm gate's settings with the
GPU health gate's on the GPU workers."""

from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING

from npa_pulumi.bridge import soperator_recipe
from npa_pulumi.bridge.recipe import MaterializedRecipe, PlannedRecipe, RecipeSource, pin_source
from npa_pulumi.engine.backends.base import PlanInputs
from npa_pulumi.engine.programs import ClusterPlan
from npa_pulumi.kube.gpu_health.config import GateConfig
from npa_pulumi.kube.slurm_check import SlurmGateConfig
from npa_pulumi.plan import soperator as shapes
from npa_pulumi.plan.recipe_surface import read_recipe_variables
from npa_pulumi.runtime.home import npa_home
from npa_pulumi.runtime.presets import gpus_per_node
from npa_pulumi.spec.constants import BackendKind

if TYPE_CHECKING:
    from npa_pulumi.engine.backends.base import PlanSettings
    from npa_pulumi.plan import Target
    from npa_pulumi.spec import SoperatorSpec

GATE_STATE = "validating-slurm"
SLURM_NAME = "soperator"  # the recipe's fixed local: the SlurmCluster and its namespace
SLURM_NAMESPACE = "soperator"


def recipe_source(options: PlanSettings, selected: bool) -> RecipeSource | None:
    """The soperator recipe of the run (--soperator-recipe-dir/-ref, the local stand-in), a branch resolved
    to its commit once; None for a selection without soperator targets."""
    if not selected:
        return None
    chosen = options.recipes.of(BackendKind.SOPERATOR)
    return pin_source(
        soperator_recipe.resolve_source(options.cloud, chosen.dir, chosen.ref), npa_home() / "cache"
    )


def _prepare(source: RecipeSource, region: str) -> MaterializedRecipe:
    """The soperator recipe prepared for `region` in a staging dir of its own (PlanInputs.recipe: once per
    region and planning run)."""
    key = hashlib.sha256(f"soperator\0{source.kind}\0{source.location}\0{region}".encode()).hexdigest()
    root = npa_home() / "cache" / "staged" / f"soperator-{key[:16]}"
    return soperator_recipe.materialize(source, root, region, npa_home() / "cache")


def _ssh_keys(payload: SoperatorSpec, fallback: str | None) -> list[str]:
    keys = [payload.root_login_ssh_public_key, *payload.ssh_public_keys]
    found = [k.strip() for k in keys if k and k.strip()]
    return found or ([fallback] if fallback else [])


def slurm_config(target: Target, payload: SoperatorSpec) -> SlurmGateConfig:
    """What the gate waits for."""
    return SlurmGateConfig(
        name=SLURM_NAME,
        namespace=SLURM_NAMESPACE,
        nodesets={worker.name: worker.size for worker in payload.workers},
        timeout_s=float(max(1, payload.gate_timeout_minutes) * 60),
        accounting=payload.accounting,
    )


def gpu_gate_config(target: Target, payload: SoperatorSpec) -> GateConfig:
    """The GPU health gate's settings for the whole cluster: every node of every role Ready, and the GPU
    checks and CUDA smoke on the GPU workers."""
    groups = shapes.node_groups(target.cluster_name, payload)
    gpu_workers = [w for w in payload.workers if w.is_gpu()]
    health = target.cluster.health
    first = gpu_workers[0] if gpu_workers else None
    return GateConfig(
        expected_nodes=sum(g.nodes for g in groups),
        expected_gpu_nodes=sum(w.size for w in gpu_workers),
        gpus_per_node=gpus_per_node(first.preset) if first else 0,
        gpu_platform=first.platform if first else "",
        driver_mode="operator" if first else "",
        nvswitch=first is not None,
        stabilization_s=float(health.stabilization_seconds) if first else 0.0,
        timeout_s=float(max(1, payload.gate_timeout_minutes) * 60),
        cuda_smoke=bool(health.cuda_smoke) and first is not None,
        smoke_image=health.cuda_smoke_image,
        graphics_smoke=False,
        graphics_image=health.graphics_smoke_image,
    )


def soperator_cluster_plan(target: Target, inputs: PlanInputs) -> ClusterPlan:
    """One soperator target's plan: the recipe's tfvars from the payload, its surface checked (a missing
    variable is named in `inputs.problems`, refused before any mutation), the gate's settings."""
    payload = target.cluster.soperator
    assert payload is not None, f"{target.cluster_stack}: a soperator target without its payload"
    source, recipe = inputs.recipe(BackendKind.SOPERATOR, target.region, _prepare)
    declared = read_recipe_variables(recipe.module_dir)
    missing = soperator_recipe.missing_variables(
        declared, payload.accounting, shapes.needed_payload_variables(payload)
    )
    if missing:
        inputs.problems.append(
            f"{target.cluster_stack}: the soperator recipe at {source.location} does not declare "
            f"{', '.join(missing)}, which the soperator payload needs"
        )
    gpu_workers = any(w.is_gpu() for w in payload.workers)
    gated = inputs.in_cluster and inputs.health_gate
    return ClusterPlan(
        fleet=target.fleet,
        project_key=target.project_key,
        project_stack=target.project_stack,
        cluster_name=target.cluster_name,
        stack=target.cluster_stack,
        region=target.region,
        tenant_id=inputs.tenant_id,
        backend=target.backend,
        subnet_id=target.cluster.subnet_id or "",
        tfvars=shapes.render_tfvars(
            target.cluster_name, payload, _ssh_keys(payload, inputs.ssh_key), declared
        ),
        # The recipe requires a backups password; backups stay off, so it protects nothing yet.
        runtime_tfvars={"backups_password": "npa-backups-disabled"},
        recipe=PlannedRecipe(source, recipe.digest),
        gpu_driver_mode="operator" if gpu_workers else "",
        has_gpus=gpu_workers,
        in_cluster=inputs.in_cluster,
        health_gate=gpu_gate_config(target, payload) if gated else None,
        module_kind=soperator_recipe.MODULE_KIND,
        backend_gate=slurm_config(target, payload) if gated else None,
    )
